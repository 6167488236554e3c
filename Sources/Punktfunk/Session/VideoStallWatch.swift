/// Notices a video stream that stopped while the connection stays up (a host whose capture
/// ended keeps answering keep-alives): after `warnAfterNs` without a new access unit it reports
/// the stall once and asks for a keyframe, asks again every `warnAfterNs` while the silence
/// lasts, reports when video comes back, and after `giveUpAfterNs` says to end the session.
/// Pure: the caller passes the running count of access units and the monotonic time.
public struct VideoStallWatch: Sendable {
    public enum Action: Equatable, Sendable {
        case none
        /// Nothing for `silentNs` (the first time in this stall): say so and ask for a keyframe.
        case stalled(silentNs: Int64)
        /// Still nothing: ask for a keyframe again.
        case requestKeyframe
        /// Video is back after a stall that lasted `silentNs`.
        case resumed(silentNs: Int64)
        /// Nothing for `silentNs`, the limit: end the session.
        case giveUp(silentNs: Int64)
    }

    public let warnAfterNs: Int64
    public let giveUpAfterNs: Int64
    private var count: UInt64 = 0
    private var lastProgress: Int64
    private var stalled = false
    private var lastRequest: Int64 = 0

    /// - Parameters:
    ///   - startedAt: when the stream was started (the first access unit is awaited from then).
    ///   - warnAfterNs: silence that counts as a stall (2 s: a 60 Hz stream sends 120 frames in it).
    ///   - giveUpAfterNs: silence after which the session ends.
    public init(startedAt: Int64, warnAfterNs: Int64 = 2_000_000_000, giveUpAfterNs: Int64 = 10_000_000_000) {
        lastProgress = startedAt
        self.warnAfterNs = warnAfterNs
        self.giveUpAfterNs = max(giveUpAfterNs, warnAfterNs)
    }

    /// Whether the stream is stalled now.
    public var isStalled: Bool { stalled }

    public mutating func observe(accessUnits: UInt64, now: Int64) -> Action {
        if accessUnits != count {
            count = accessUnits
            let silent = now - lastProgress
            lastProgress = now
            guard stalled else { return .none }
            stalled = false
            return .resumed(silentNs: silent)
        }
        let silent = now - lastProgress
        if silent >= giveUpAfterNs { return .giveUp(silentNs: silent) }
        guard silent >= warnAfterNs else { return .none }
        if !stalled {
            stalled = true
            lastRequest = now
            return .stalled(silentNs: silent)
        }
        if now - lastRequest >= warnAfterNs {
            lastRequest = now
            return .requestKeyframe
        }
        return .none
    }
}
