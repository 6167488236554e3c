/// What the HUD shows and `--stats` prints: updates and bytes per second, frames presented, and
/// the latency from an update's arrival to the present that first showed it. Times are seconds
/// on one monotonic clock; the caller supplies them (testable without a clock).
public struct PresentationStats: Sendable {
    public private(set) var updates = 0
    public private(set) var framesPresented = 0
    public private(set) var bytes = 0
    /// Latencies (seconds) of the most recent presents, newest last, at most `window` of them.
    public private(set) var latencies: [Double] = []
    /// The same latencies kept in ascending order, so a quantile is one index (the window asks
    /// for p50 and p95 after every present; sorting 512 values each time was ~1 % of its CPU).
    private var ascending: [Double] = []
    private let window: Int
    /// Recent (time, updates, bytes) samples for the rates.
    private var samples: [(time: Double, updates: Int, bytes: Int)] = []

    public init(window: Int = 512) {
        self.window = window
    }

    /// `count` updates arrived, costing `bytes` on the wire together.
    public mutating func recordUpdates(_ count: Int, bytes: Int) {
        updates += count
        self.bytes += bytes
    }

    /// A frame was presented; `latency` is how long its oldest update waited, if it had one.
    public mutating func recordPresent(latency: Double?) {
        framesPresented += 1
        guard let latency else { return }
        latencies.append(latency)
        ascending.insert(latency, at: Self.insertionIndex(of: latency, in: ascending))
        if latencies.count > window {
            for old in latencies.prefix(latencies.count - window) {
                // The first index not below `old` holds a value equal to it: remove that one.
                ascending.remove(at: Self.insertionIndex(of: old, in: ascending))
            }
            latencies.removeFirst(latencies.count - window)
        }
    }

    /// The first index whose value is not below `value` (binary search).
    private static func insertionIndex(of value: Double, in sorted: [Double]) -> Int {
        var low = 0, high = sorted.count
        while low < high {
            let mid = (low + high) / 2
            if sorted[mid] < value { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// Updates per second and megabits per second over the last `span` seconds before `now`.
    public mutating func rates(now: Double, span: Double = 2) -> (updatesPerSecond: Double, megabitsPerSecond: Double) {
        samples.append((now, updates, bytes))
        while let first = samples.first, now - first.time > span, samples.count > 2 { samples.removeFirst() }
        guard let first = samples.first, now - first.time > 0 else { return (0, 0) }
        let dt = now - first.time
        return (Double(updates - first.updates) / dt, Double(bytes - first.bytes) * 8 / dt / 1e6)
    }

    /// The latency at quantile `q` (0…1) of the recent presents, nil before the first.
    public func latency(quantile q: Double) -> Double? {
        latencies(quantiles: q).first
    }

    /// The latencies at several quantiles (0…1) of the recent presents; empty before the first.
    public func latencies(quantiles: Double...) -> [Double] {
        guard !ascending.isEmpty else { return [] }
        return quantiles.map { q in ascending[min(ascending.count - 1, max(0, Int((q * Double(ascending.count - 1)).rounded())))] }
    }
}
