/// When a video stream's next picture may be shown: at most once per refresh of the display (or
/// of a lower limit the person set), so a stream faster than the display does not present
/// pictures nobody sees. A picture that is not yet due waits in the `PictureSlot`, where a newer
/// one replaces it (dropped, counted, never queued). Pictures arriving at the display's rate or
/// slower are shown at once: the cadence is kept as a grid of ticks, and a picture may come up to
/// half a period before its tick, so jitter around an equal rate neither delays nor drops one.
public struct PresentPacer: Sendable, Equatable {
    /// Seconds between presents at the cadence.
    public let period: Double
    private var last: Double?

    /// `rate` presents per second; nil or not positive: unlimited.
    public init(rate: Double?) {
        period = rate.map { $0 > 0 && $0.isFinite ? 1 / $0 : 0 } ?? 0
    }

    /// The earliest time (seconds, the window's clock) the next picture may be presented.
    public var due: Double { last.map { $0 + period * 0.5 } ?? -.infinity }

    /// A picture was presented at `now`.
    public mutating func presented(at now: Double) {
        // The tick this present belongs to: the next on the grid while presents follow each
        // other closely (an early picture counts for its tick), a new grid after a pause.
        if let last, now - last < period * 1.5 { self.last = min(now + period * 0.5, last + period) } else { self.last = now }
    }
}
