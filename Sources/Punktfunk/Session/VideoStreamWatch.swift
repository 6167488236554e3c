import FarcastSupport

/// What a running video stream's watch tells its owner while it runs.
public enum StreamNotice: Sendable, Equatable {
    /// No video for this long: the host has been asked for a keyframe.
    case stalled(silentNanoseconds: Int64)
    /// Video came back after this long.
    case resumed(silentNanoseconds: Int64)
}

/// Why a video stream's watch ended.
public enum StreamEnd: Sendable {
    /// The owner's `shouldStop` said so (a duration, a closed window, an interrupt).
    case stopped
    /// The connection to the host failed.
    case connection(PunktfunkSessionError)
    /// No video for longer than the stall limit.
    case gaveUp(silentNanoseconds: Int64)
}

extension VideoStreamSession {
    /// Watches the running stream until `shouldStop` returns true, the connection fails, or
    /// video stays away past the stall limit. At each check (every `interval`): the stall watch
    /// (it asks for keyframes while video is missing; its stalls and returns reach `notice`),
    /// and the mid-stream clock batch when `StreamingPolicy`'s interval has passed. `shouldStop`
    /// runs first at every check, on the caller's task: it is where the owner updates its own
    /// displays. The session's monotonic clock times it all.
    public func watch(interval: Duration = .milliseconds(50), notice: (StreamNotice) -> Void = { _ in },
                      shouldStop: () -> Bool) async -> StreamEnd {
        var schedule = StreamingPolicy()
        _ = schedule.clockResyncDue(now: monotonic.now().nanoseconds)
        while true {
            if shouldStop() { return .stopped }
            if let error = client.inbox.failure { return .connection(error) }
            switch watchForStalls(now: monotonic.now().nanoseconds) {
            case .none, .requestKeyframe:
                break
            case .stalled(let silent):
                notice(.stalled(silentNanoseconds: silent))
            case .resumed(let silent):
                notice(.resumed(silentNanoseconds: silent))
            case .giveUp(let silent):
                return .gaveUp(silentNanoseconds: silent)
            }
            if schedule.clockResyncDue(now: monotonic.now().nanoseconds), let batch = try? await client.measureClock() {
                applyClock(batch)
            }
            try? await Task.sleep(for: interval)
        }
    }
}
