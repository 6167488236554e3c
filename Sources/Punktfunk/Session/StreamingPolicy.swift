/// What the client asks of the host while video flows, decided from the data plane's figures
/// and the time: keyframe requests after frames that could not be recovered, periodic loss
/// reports, and when to re-run the clock batch. Pure: the caller passes the time and sends the
/// messages it returns.
public struct StreamingPolicy: Sendable {
    /// How long a keyframe request stays outstanding before another may be sent.
    public var keyframeRetryNs: Int64 = 500_000_000
    /// Interval between LossReports.
    public var lossReportIntervalNs: Int64 = 1_000_000_000
    /// Interval between mid-stream clock batches.
    public var clockResyncIntervalNs: Int64 = 10_000_000_000

    private var keyframeRequestedAt: Int64?
    private var lastLossReport: Int64?
    private var lastClockSync: Int64?
    private var lostAtLastReport: UInt64 = 0
    private var expectedAtLastReport: UInt64 = 0
    /// Keyframe requests sent so far.
    public private(set) var keyframeRequests = 0

    public init() {}

    /// A frame could not be rebuilt: ask for a keyframe unless one is already on its way.
    public mutating func frameLost(now: Int64) -> ControlMessage? {
        if let at = keyframeRequestedAt, now - at < keyframeRetryNs { return nil }
        keyframeRequestedAt = now
        keyframeRequests += 1
        return .requestKeyframe
    }

    /// An IDR (a keyframe with parameter sets) arrived: the stream has recovered.
    public mutating func keyframeReceived() {
        keyframeRequestedAt = nil
    }

    /// True while a keyframe request is outstanding (frames until the IDR are not decodable).
    public func awaitingKeyframe(now: Int64) -> Bool {
        keyframeRequestedAt.map { now - $0 < keyframeRetryNs } ?? false
    }

    /// A LossReport when one is due: loss in parts per million over the interval, from the data
    /// plane's running totals of packets lost and packets expected.
    public mutating func lossReport(now: Int64, totalLost: UInt64, totalExpected: UInt64) -> ControlMessage? {
        guard let last = lastLossReport else {
            lastLossReport = now
            lostAtLastReport = totalLost
            expectedAtLastReport = totalExpected
            return nil
        }
        guard now - last >= lossReportIntervalNs else { return nil }
        let lost = totalLost &- lostAtLastReport
        let expected = totalExpected &- expectedAtLastReport
        lastLossReport = now
        lostAtLastReport = totalLost
        expectedAtLastReport = totalExpected
        let ppm = expected > 0 ? min(1_000_000, lost * 1_000_000 / expected) : 0
        return .lossReport(lossPPM: UInt32(ppm))
    }

    /// True when a mid-stream clock batch is due (the first one ran at `start`).
    public mutating func clockResyncDue(now: Int64) -> Bool {
        guard let last = lastClockSync else {
            lastClockSync = now
            return false
        }
        guard now - last >= clockResyncIntervalNs else { return false }
        lastClockSync = now
        return true
    }
}
