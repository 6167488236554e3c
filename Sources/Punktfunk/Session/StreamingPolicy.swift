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
    private var needsKeyframe = false
    private var lastLossReport: Int64?
    private var lastClockSync: Int64?
    /// Keyframe requests sent so far.
    public private(set) var keyframeRequests = 0

    public init() {}

    /// A frame could not be rebuilt: ask for a keyframe unless one is already on its way.
    public mutating func frameLost(now: Int64) -> ControlMessage? {
        needsKeyframe = true
        return requestIfDue(now: now)
    }

    /// A frame arrived. A keyframe ends the wait; any other frame while the picture is broken
    /// (the requested keyframe was itself lost) asks again once the retry interval has passed.
    public mutating func frameDelivered(now: Int64, isKeyframe: Bool) -> ControlMessage? {
        if isKeyframe {
            needsKeyframe = false
            keyframeRequestedAt = nil
            return nil
        }
        return needsKeyframe ? requestIfDue(now: now) : nil
    }

    private mutating func requestIfDue(now: Int64) -> ControlMessage? {
        if let at = keyframeRequestedAt, now - at < keyframeRetryNs { return nil }
        keyframeRequestedAt = now
        keyframeRequests += 1
        return .requestKeyframe
    }

    /// True from a lost frame until a keyframe arrives (frames in between are not decodable).
    public var awaitingKeyframe: Bool { needsKeyframe }

    /// True when a LossReport is due (the first interval starts at the first call); the caller
    /// sends the data plane's loss over the interval (`VideoReceiver.takeLossPartsPerMillion`).
    public mutating func lossReportDue(now: Int64) -> Bool {
        guard let last = lastLossReport else {
            lastLossReport = now
            return false
        }
        guard now - last >= lossReportIntervalNs else { return false }
        lastLossReport = now
        return true
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
