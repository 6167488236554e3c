/// Capture-to-receipt latency of video frames: `received + clock offset − pts`, where `pts` is the
/// host's capture time (its CLOCK_REALTIME), `received` the client's CLOCK_REALTIME when the frame
/// completed, and the offset (host − client) from the session's clock probes (punktfunk/1 §9).
///
/// Keeps the last `window` samples for p50/p95/p99. A sample below zero or above
/// `maxPlausibleNanoseconds` cannot be a latency: the clocks disagree (a stale offset, a host
/// clock step). It is flagged as skewed, counted and kept out of the statistics. Time is passed in.
public struct LatencyMeter: Sendable {
    public let window: Int
    public let maxPlausibleNanoseconds: Int64
    /// Host clock minus client clock, in nanoseconds.
    public var clockOffsetNanoseconds: Int64
    public private(set) var accepted = 0
    public private(set) var skewed = 0
    private var samples: [Int64]
    private var next = 0
    private var recentSkewed = 0, recentTotal = 0

    public enum Sample: Sendable, Equatable {
        case latency(nanoseconds: Int64)
        case skewed(nanoseconds: Int64)
    }

    public struct Percentiles: Sendable, Equatable {
        public var p50: Int64, p95: Int64, p99: Int64, count: Int
    }

    public init(window: Int = 240, clockOffsetNanoseconds: Int64 = 0, maxPlausibleNanoseconds: Int64 = 10_000_000_000) {
        self.window = max(1, window)
        self.clockOffsetNanoseconds = clockOffsetNanoseconds
        self.maxPlausibleNanoseconds = maxPlausibleNanoseconds
        samples = []
        samples.reserveCapacity(self.window)
    }

    @discardableResult
    public mutating func record(ptsNanoseconds pts: UInt64, receivedAtNanoseconds received: UInt64) -> Sample {
        // Work in wrapping 64-bit arithmetic, then read the result as signed: realtime clocks are
        // far from the wrap, so the signed difference is the true one.
        let value = Int64(bitPattern: received &+ UInt64(bitPattern: clockOffsetNanoseconds) &- pts)
        recentTotal += 1
        guard value >= 0, value <= maxPlausibleNanoseconds else {
            skewed += 1
            recentSkewed += 1
            trimRecent()
            return .skewed(nanoseconds: value)
        }
        accepted += 1
        trimRecent()
        if samples.count < window { samples.append(value) } else { samples[next] = value }
        next = (next + 1) % window
        return .latency(nanoseconds: value)
    }

    /// Nearest-rank percentiles of the window, nil before the first plausible sample.
    public func percentiles() -> Percentiles? {
        guard !samples.isEmpty else { return nil }
        let sorted = samples.sorted()
        func rank(_ p: Double) -> Int64 { sorted[min(sorted.count - 1, max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1))] }
        return Percentiles(p50: rank(0.50), p95: rank(0.95), p99: rank(0.99), count: sorted.count)
    }

    /// True when most of the recent samples were skewed: re-run the clock sync.
    public var clockLooksWrong: Bool { recentTotal >= 8 && recentSkewed * 2 > recentTotal }

    /// Starts over (a new offset, a reconnect).
    public mutating func reset(clockOffsetNanoseconds: Int64) {
        self = LatencyMeter(window: window, clockOffsetNanoseconds: clockOffsetNanoseconds, maxPlausibleNanoseconds: maxPlausibleNanoseconds)
    }

    private mutating func trimRecent() {
        // A decaying view of the last ~window samples for `clockLooksWrong`.
        if recentTotal > window {
            recentTotal /= 2
            recentSkewed /= 2
        }
    }
}
