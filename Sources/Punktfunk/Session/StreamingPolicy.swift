/// What the client asks of the host while video flows, decided from the data plane's figures
/// and the time: recovery after frames that could not be rebuilt (reference frame invalidation
/// first, a keyframe when that does not bring the picture back), periodic loss reports, a lower
/// bitrate when the link keeps losing frames (and back up once it is clean), and when to re-run
/// the clock batch. Pure: the caller passes the time and sends the messages it returns.
public struct StreamingPolicy: Sendable {
    /// How long a recovery request stays outstanding before another may be sent.
    public var keyframeRetryNs: Int64 = 500_000_000
    /// Interval between LossReports.
    public var lossReportIntervalNs: Int64 = 1_000_000_000
    /// Interval between mid-stream clock batches.
    public var clockResyncIntervalNs: Int64 = 10_000_000_000
    /// Ask for reference frame invalidation (RfiRequest) before a keyframe when the broken run is
    /// short enough (≤ 256 frames): the host answers with a clean P-frame, far smaller than an IDR.
    public var referenceInvalidation = true
    /// The bitrate rule; nil keeps the bitrate the session opened with.
    public var bitrate: BitrateAdaptation?

    /// First frame of the current broken run and the newest frame lost in it (nil: picture intact).
    private var broken: (first: UInt32, last: UInt32)?
    private var requestedAt: Int64?
    /// Recovery requests sent for the current broken run.
    private var attempts = 0
    private var framesLostInInterval = 0
    private var lastLossReport: Int64?
    private var lastClockSync: Int64?
    /// Keyframe requests sent so far.
    public private(set) var keyframeRequests = 0
    /// Reference-frame-invalidation requests sent so far.
    public private(set) var rfiRequests = 0

    public init(bitrate: BitrateAdaptation? = nil) {
        self.bitrate = bitrate
    }

    /// Frames could not be rebuilt: ask for recovery unless a request is already on its way. The
    /// first request for a broken run is an RfiRequest over it when it fits; a later one (the
    /// invalidation did not bring a clean frame within the retry interval) asks for a keyframe.
    public mutating func frameLost(_ loss: FrameLoss, now: Int64) -> ControlMessage? {
        framesLostInInterval += Int(loss.count)
        if let run = broken {
            broken = (run.first, loss.lastFrame)
        } else {
            broken = (loss.firstFrame, loss.lastFrame)
            attempts = 0
            requestedAt = nil
        }
        return requestIfDue(now: now)
    }

    /// A frame arrived. A keyframe, or a frame the host marks as a recovery (a clean RFI/LTR
    /// P-frame, or the end of an intra-refresh wave), ends the wait; any other frame while the
    /// picture is broken (the recovery frame was itself lost) asks again once the retry interval
    /// has passed.
    public mutating func frameDelivered(now: Int64, isKeyframe: Bool, flags: UserFlags = []) -> ControlMessage? {
        if isKeyframe || !flags.isDisjoint(with: [.recoveryAnchor, .recoveryPoint]) {
            broken = nil
            requestedAt = nil
            attempts = 0
            return nil
        }
        return broken != nil ? requestIfDue(now: now) : nil
    }

    private mutating func requestIfDue(now: Int64) -> ControlMessage? {
        guard let run = broken else { return nil }
        if let at = requestedAt, now - at < keyframeRetryNs { return nil }
        requestedAt = now
        attempts += 1
        let span = run.last &- run.first &+ 1
        if attempts == 1, referenceInvalidation, span >= 1, span <= ControlMessage.maxRFIRange {
            rfiRequests += 1
            return .rfiRequest(firstFrame: run.first, lastFrame: run.last)
        }
        keyframeRequests += 1
        return .requestKeyframe
    }

    /// True from a lost frame until a keyframe or recovery frame arrives (frames in between are
    /// not decodable).
    public var awaitingKeyframe: Bool { broken != nil }

    /// True when a LossReport is due (the first interval starts at the first call); the caller
    /// sends the data plane's loss over the interval (`VideoReceiver.takeLossPartsPerMillion`)
    /// and passes it to `intervalEnded(lossPPM:)`.
    public mutating func lossReportDue(now: Int64) -> Bool {
        guard let last = lastLossReport else {
            lastLossReport = now
            return false
        }
        guard now - last >= lossReportIntervalNs else { return false }
        lastLossReport = now
        return true
    }

    /// Closes a loss-report interval: the bitrate rule sees its loss and the frames lost in it and
    /// may return a SetBitrate.
    public mutating func intervalEnded(lossPPM: UInt32) -> ControlMessage? {
        let lost = framesLostInInterval
        framesLostInInterval = 0
        guard var rule = bitrate else { return nil }
        defer { bitrate = rule }
        return rule.interval(lossPPM: lossPPM, framesLost: lost).map { .setBitrate(kbps: $0) }
    }

    /// The host's BitrateChanged: what it really uses from now on.
    public mutating func bitrateConfirmed(kbps: UInt32) {
        bitrate?.confirmed(kbps: kbps)
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

/// A bitrate rule for a link that drops more than the FEC can repair: two loss-report intervals
/// in a row that lost whole frames (or lost at least `congestedLossPPM` of the datagrams) step the
/// bitrate down by a quarter, never below `floorKbps`; `cleanIntervalsToRise` clean intervals in a
/// row step it back up by an eighth of the ceiling, never above the bitrate the session opened
/// with. Multiplicative decrease, additive increase, as congestion control does.
public struct BitrateAdaptation: Sendable, Equatable {
    /// The bitrate the session opened with (the Welcome's resolved value): never exceeded.
    public let ceilingKbps: UInt32
    public var floorKbps: UInt32
    public var congestedLossPPM: UInt32 = 100_000
    public var congestedIntervalsToFall = 2
    public var cleanIntervalsToRise = 10
    /// The bitrate last asked for or confirmed.
    public private(set) var currentKbps: UInt32
    private var congestedRun = 0
    private var cleanRun = 0

    /// nil when the host did not say its bitrate (nothing to adapt from).
    public init?(openedAtKbps: UInt32, floorKbps: UInt32 = 1_000) {
        guard openedAtKbps > 0 else { return nil }
        ceilingKbps = openedAtKbps
        currentKbps = openedAtKbps
        self.floorKbps = min(floorKbps, openedAtKbps)
    }

    mutating func interval(lossPPM: UInt32, framesLost: Int) -> UInt32? {
        if framesLost > 0 || lossPPM >= congestedLossPPM {
            congestedRun += 1
            cleanRun = 0
            guard congestedRun >= congestedIntervalsToFall, currentKbps > floorKbps else { return nil }
            congestedRun = 0
            currentKbps = max(floorKbps, currentKbps - currentKbps / 4)
            return currentKbps
        }
        congestedRun = 0
        cleanRun += 1
        guard cleanRun >= cleanIntervalsToRise, currentKbps < ceilingKbps else { return nil }
        cleanRun = 0
        currentKbps = min(ceilingKbps, currentKbps + max(1, ceilingKbps / 8))
        return currentKbps
    }

    mutating func confirmed(kbps: UInt32) {
        if kbps > 0 { currentKbps = kbps }
    }
}
