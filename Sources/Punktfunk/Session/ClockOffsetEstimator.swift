/// One ClockProbe/ClockEcho round: the host-minus-client offset and the round trip it was seen over.
public struct ClockSample: Equatable, Sendable {
    public var offsetNs: Int64
    public var rttNs: Int64

    public init(offsetNs: Int64, rttNs: Int64) {
        self.offsetNs = offsetNs
        self.rttNs = rttNs
    }

    /// `t1`, `t4`: client CLOCK_REALTIME when the probe left and the echo arrived; `t2`, `t3`:
    /// host clock when the probe arrived and the echo left. Offset = host − client.
    public init(t1: UInt64, t2: UInt64, t3: UInt64, t4: UInt64) {
        let a = Int64(bitPattern: t2 &- t1)
        let b = Int64(bitPattern: t3 &- t4)
        offsetNs = a / 2 + b / 2 + (a % 2 + b % 2) / 2
        rttNs = Int64(bitPattern: t4 &- t1) &- Int64(bitPattern: t3 &- t2)
    }
}

/// The session's clock offset to the host, from batches of 8 probe rounds.
///
/// Each batch contributes its smallest-RTT sample. The first batch is taken as it is (none at all
/// means a shared clock, offset 0). A later batch is accepted when its RTT is at most
/// max(2 ms, 1.5 × the session's minimum RTT); after three rejected batches in a row the best of
/// them is applied anyway, so a path that got slower for good still converges.
public struct ClockOffsetEstimator: Sendable {
    public static let roundsPerBatch = 8
    /// How long one round waits for its echo.
    public static let roundTimeoutNs: Int64 = 2_000_000_000

    public private(set) var offsetNs: Int64 = 0
    /// RTT of the sample the offset came from; nil until a batch was applied.
    public private(set) var rttNs: Int64?
    public private(set) var sessionMinimumRTTNs: Int64?
    private var rejected: [ClockSample] = []

    public init() {}

    /// The smallest-RTT sample (negative RTTs, which only a broken clock produces, are ignored).
    public static func best(of samples: [ClockSample]) -> ClockSample? {
        samples.filter { $0.rttNs >= 0 }.min { $0.rttNs < $1.rttNs }
    }

    /// Offers a batch; returns true when it changed the offset.
    @discardableResult
    public mutating func apply(batch: [ClockSample]) -> Bool {
        guard let best = Self.best(of: batch) else { return false }
        defer { sessionMinimumRTTNs = min(sessionMinimumRTTNs ?? best.rttNs, best.rttNs) }
        guard let minimum = sessionMinimumRTTNs else {
            use(best)
            return true
        }
        let limit = max(2_000_000, minimum + minimum / 2)
        if best.rttNs <= limit {
            use(best)
            return true
        }
        rejected.append(best)
        if rejected.count >= 3, let fallback = Self.best(of: rejected) {
            use(fallback)
            return true
        }
        return false
    }

    private mutating func use(_ sample: ClockSample) {
        offsetNs = sample.offsetNs
        rttNs = sample.rttNs
        rejected.removeAll()
    }

    /// Capture→receipt latency of a packet stamped `ptsNs` (host clock) and received at `receivedNs`
    /// (client clock).
    public func latencyNs(ptsNs: UInt64, receivedNs: UInt64) -> Int64 {
        Int64(bitPattern: receivedNs &- ptsNs) &+ offsetNs
    }
}
