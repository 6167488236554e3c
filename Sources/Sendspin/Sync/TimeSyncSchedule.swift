/// When the player exchanges client/time messages and which exchange feeds the clock filter —
/// the rule alone, with no clock or socket of its own.
///
/// Exchanges come in bursts; of each burst only the exchange with the smallest max error
/// (half the round trip minus the server's holding time) is kept, since the others measured the
/// same offset through a noisier path. Two answered bursts run back to back so the filter
/// converges at once, then one every 500 ms for the next ten seconds, then one every 2 s. A burst
/// nothing answered (a server stalled at start, its exchange timed out) does not count: the two
/// quick ones come once the server answers, not 500 ms apart after it, which left a stream that
/// started right after a stall unplayable until the clock caught up.
public struct TimeSyncSchedule: Sendable {
    /// One client/time exchange (µs): sent, server received, server sent, answer received.
    public struct Exchange: Sendable, Equatable {
        public var t1: Int64
        public var t2: Int64
        public var t3: Int64
        public var t4: Int64

        public init(t1: Int64, t2: Int64, t3: Int64, t4: Int64) {
            self.t1 = t1
            self.t2 = t2
            self.t3 = t3
            self.t4 = t4
        }

        /// The exchange's max error, as the filter computes it.
        public var maxError: Int64 { TimeFilter.measurement(t1: t1, t2: t2, t3: t3, t4: t4).maxError }
    }

    /// Exchanges per burst.
    public let burstSize: Int
    /// Bursts completed so far that got at least one answer.
    public private(set) var burstsDone = 0
    private var best: (exchange: Exchange, maxError: Int64)?
    private var exchangesInBurst = 0

    public init(burstSize: Int = 8) {
        self.burstSize = max(1, burstSize)
    }

    /// True while the current burst wants another exchange.
    public var wantsExchange: Bool { exchangesInBurst < burstSize }

    /// Records an answered exchange of the current burst.
    public mutating func record(_ exchange: Exchange) {
        exchangesInBurst += 1
        let error = exchange.maxError
        if best == nil || error < best!.maxError { best = (exchange, error) }
    }

    /// Ends the current burst (all its exchanges done, or one went unanswered): the exchange to
    /// feed the filter, if any was answered, and how long to wait before the next burst.
    public mutating func endBurst() -> (chosen: Exchange?, pauseMs: Int) {
        let chosen = best?.exchange
        best = nil
        exchangesInBurst = 0
        if chosen != nil { burstsDone += 1 }
        let pause = burstsDone < 2 ? 20 : burstsDone < 22 ? 500 : 2000
        return (chosen, pause)
    }
}
