public import Foundation

/// A player a playback session drives: mpv on Linux (`MPVPlayer`); an app plugs in its own.
/// Positions are seconds from the start of the media.
public protocol MediaPlayer: AnyObject, Sendable {
    /// Opens `url` at `startSeconds` with `tracks` (the audio and subtitles to select, subtitle
    /// files to load beside it); returns once the player plays (or throws why it cannot).
    func play(_ url: URL, startSeconds: Double, tracks: PlayerTracks) async throws(PlayerError)
    /// As `play`, but the media stays paused once open (`paused`): a player a group starts
    /// together (SyncPlay) waits for the group's moment.
    func play(_ url: URL, startSeconds: Double, tracks: PlayerTracks, paused: Bool) async throws(PlayerError)
    /// What the player does, in order; finishes after `.ended`.
    var events: AsyncStream<PlayerEvent> { get }
    func setPaused(_ paused: Bool) async
    func seek(to seconds: Double) async
    /// Sets the volume, 0…100.
    func setVolume(_ percent: Int) async
    func setMuted(_ muted: Bool) async
    /// Where playback is now, in seconds (the last position the player told).
    var position: Double { get }
    var isPaused: Bool { get }
    /// Stops playback; the last event is `.ended(.stopped, …)`.
    func stop() async
    /// Queues `url` to play right after this player's media with no gap (the output kept open:
    /// gapless audio) and returns the player that stands for it: its `play` waits until that
    /// media plays, its events begin then. nil when this player cannot (a new player then plays
    /// it, after a gap).
    func playNext(_ url: URL, tracks: PlayerTracks) async -> (any MediaPlayer)?
    /// Whether `playNext` can queue media at all (a queue asks the server ahead only then).
    var playsGapless: Bool { get }
}

extension MediaPlayer {
    public func play(_ url: URL, startSeconds: Double, tracks: PlayerTracks, paused: Bool) async throws(PlayerError) {
        if paused { await setPaused(true) }
        try await play(url, startSeconds: startSeconds, tracks: tracks)
        if paused { await setPaused(true) }
    }

    public func playNext(_ url: URL, tracks: PlayerTracks) async -> (any MediaPlayer)? { nil }
    public var playsGapless: Bool { false }
}

public enum PlayerEvent: Sendable, Equatable {
    /// The media is open and playing from `position`.
    case started(position: Double)
    /// The playing position moved (reported at the player's own pace).
    case position(Double)
    case paused(Bool, position: Double)
    /// A seek finished; playback continues from `position`.
    case seeked(position: Double)
    case volume(Int, muted: Bool)
    /// The audio and subtitles playing: once after `started`, then at every change.
    case tracks(PlayingTracks)
    /// Playback is over at `position`.
    case ended(EndReason, position: Double)
}

public enum EndReason: Sendable, Equatable {
    /// The media played to its end.
    case finished
    /// Stopped on request (`stop()`, the user quitting the player window).
    case stopped
    /// The player could not go on: its reason.
    case failed(String)
}

public enum PlayerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The player program is not installed.
    case notInstalled(program: String, install: String)
    /// The player could not open or play the media.
    case cannotPlay(String)
    /// The player did not answer in time.
    case noAnswer(String)

    public var description: String {
        switch self {
        case .notInstalled(let program, let install): return "\(program) is not installed (\(install))"
        case .cannotPlay(let reason): return "the player cannot play this: \(reason)"
        case .noAnswer(let what): return "the player did not answer: \(what)"
        }
    }
}
