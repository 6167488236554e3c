/// Capture→receipt latency samples and their percentiles.
///
/// Samples below zero or above 10 s are dropped as clock skew rather than latency (the offset
/// estimate was wrong or stale), and counted in `skewed`. Memory is bounded: past `capacity`
/// samples the recorder keeps every n-th one (a deterministic decimation, so p50/p95/p99 stay
/// representative of the whole run).
public struct LatencyPercentiles: Sendable {
    public static let maximumNs: Int64 = 10_000_000_000

    public let capacity: Int
    private var samples: [Int64] = []
    private var stride = 1
    private var seen = 0
    public private(set) var skewed = 0

    public init(capacity: Int = 200_000) {
        self.capacity = max(16, capacity)
    }

    public mutating func record(_ latencyNs: Int64) {
        guard latencyNs >= 0, latencyNs <= Self.maximumNs else {
            skewed += 1
            return
        }
        seen += 1
        guard seen % stride == 0 else { return }
        samples.append(latencyNs)
        if samples.count >= capacity {
            // Keep every other sample and halve the rate from now on.
            samples = samples.enumerated().compactMap { $0.offset % 2 == 1 ? $0.element : nil }
            stride *= 2
        }
    }

    /// Samples recorded (before decimation).
    public var count: Int { seen }

    /// The p-th percentile (0…100) in ns by nearest rank, nil without samples.
    public func percentile(_ p: Double) -> Int64? {
        guard !samples.isEmpty else { return nil }
        let sorted = samples.sorted()
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }
}
