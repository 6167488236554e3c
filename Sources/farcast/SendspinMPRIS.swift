import Desktop
import FarcastSupport
import Foundation
import Logging
import Sendspin
import Synchronization

/// `play` and `listen` on the desktop's media controls: an MPRIS player
/// (`org.mpris.MediaPlayer2.farcast_NAME`) showing what the metadata and controller roles say,
/// its requests sent to the server as controller commands. No session bus is a note at -v, not
/// a failure.
final class SendspinMPRIS: Sendable {
    private struct State {
        var nowPlaying = NowPlaying()
        var track = 0
        var trackKey: [String?] = []
        /// The artwork role's current picture of channel 0, as a file URL.
        var artworkFile: String?
    }

    private let state = Mutex(State())
    private let clock = SystemClock(.monotonicRaw)
    private let mpris = Mutex<MPRISPlayer?>(nil)

    /// Joins the session bus as `farcast_<name>`, requests going to `sendspin`; false (with a
    /// note at -v) when there is no bus.
    @discardableResult
    func join(name: String, sendspin: SendspinPlayer, logger: Logger) -> Bool {
        do {
            let connection = try DBusConnection.session()
            let player = try MPRISPlayer(connection: connection, name: "farcast_\(name)", identity: "Farcast (\(name))",
                                         position: { [weak self] in self?.positionUs ?? 0 },
                                         command: { [weak self] request in
                                             guard let command = self?.controllerCommand(for: request) else { return }
                                             sendspin.send(command)
                                         },
                                         ended: { error in if let error { logger.warning("media controls (MPRIS): \(error); they stop here") } })
            mpris.withLock { $0 = player }
            update { _ in }
            logger.info("media controls on the session bus as \(player.busName)")
            return true
        } catch {
            logger.info("media controls (MPRIS) not offered: \(error)")
            return false
        }
    }

    func stop() { mpris.withLock { $0 }?.stop() }

    private var positionUs: Int64 {
        let now = clock.now().microseconds
        return state.withLock { ($0.nowPlaying.positionMs(atClientUs: now) ?? 0) * 1000 }
    }

    /// Takes what the session reported and shows it; `seeked` when the position jumped.
    func update(_ body: (inout NowPlaying) -> Void) {
        let now = clock.now().microseconds
        let (shown, seeked) = state.withLock { s -> (MPRISState, Bool) in
            let before = s.nowPlaying.positionMs(atClientUs: now)
            let hadMetadata = s.nowPlaying.metadata != nil
            body(&s.nowPlaying)
            let after = s.nowPlaying.positionMs(atClientUs: now)
            let m = s.nowPlaying.metadata
            let key = [m?.title, m?.artist, m?.album]
            if key != s.trackKey {
                s.trackKey = key
                s.track += 1
            }
            let jumped = hadMetadata && before != nil && after != nil && abs(after! - before!) > 1_000
            return (Self.mprisState(s), jumped)
        }
        mpris.withLock { $0 }?.update(shown, seeked: seeked)
    }

    /// The artwork role's picture for channel 0 (nil: cleared).
    func artwork(file: String?) {
        state.withLock { $0.artworkFile = file.map { URL(fileURLWithPath: $0).absoluteString } }
        update { _ in }
    }

    private static func mprisState(_ s: State) -> MPRISState {
        let n = s.nowPlaying
        var shown = MPRISState()
        let m = n.metadata
        shown.status = n.groupState == .playing ? .playing : (m?.title != nil ? .paused : .stopped)
        shown.title = m?.title
        shown.artists = m?.artist.map { [$0] } ?? []
        shown.album = m?.album
        shown.albumArtists = m?.albumArtist.map { [$0] } ?? []
        shown.trackNumber = m?.track
        if let duration = m?.progress?.trackDuration, duration > 0 { shown.lengthUs = duration * 1000 }
        shown.artURL = s.artworkFile ?? m?.artworkURL
        if m?.title != nil { shown.trackID = "/org/farcast/sendspin/track\(s.track)" }
        if let c = n.controller {
            let supported = c.supportedCommands ?? []
            shown.canGoNext = supported.contains(.next)
            shown.canGoPrevious = supported.contains(.previous)
            shown.canPlay = supported.contains(.play)
            shown.canPause = supported.contains(.pause)
            shown.canSeek = supported.contains(.seek) || supported.contains(.seekRelative)
            shown.volume = c.volume.map { Double($0) / 100 }
            shown.shuffle = c.shuffle
            shown.loop = switch c.repeat {
            case "off": MPRISState.Loop.none
            case "one": .track
            case "all": .playlist
            default: nil
            }
        }
        return shown
    }

    /// The controller command a desktop request means, if the server offers it.
    func controllerCommand(for request: MPRISCommand) -> ControllerCommand? {
        let (n, positionMs) = state.withLock { s in (s.nowPlaying, s.nowPlaying.positionMs(atClientUs: clock.now().microseconds)) }
        let command: ControllerCommand
        switch request {
        case .play: command = ControllerCommand(command: .play)
        case .pause: command = ControllerCommand(command: .pause)
        case .playPause: command = ControllerCommand(command: n.groupState == .playing ? .pause : .play)
        case .stop: command = ControllerCommand(command: .stop)
        case .next: command = ControllerCommand(command: .next)
        case .previous: command = ControllerCommand(command: .previous)
        case .seek(let offsetUs):
            if n.controller?.supportedCommands?.contains(.seekRelative) == true {
                command = ControllerCommand(command: .seekRelative, offsetMs: offsetUs / 1000)
            } else {
                command = ControllerCommand(command: .seek, positionMs: max(0, (positionMs ?? 0) + offsetUs / 1000))
            }
        case .setPosition(_, let positionUs): command = ControllerCommand(command: .seek, positionMs: max(0, positionUs / 1000))
        case .setVolume(let volume): command = ControllerCommand(command: .volume, volume: Int((volume * 100).rounded()))
        case .setLoop(let loop):
            command = ControllerCommand(command: loop == .none ? .repeatOff : loop == .track ? .repeatOne : .repeatAll)
        case .setShuffle(let on): command = ControllerCommand(command: on ? .shuffle : .unshuffle)
        }
        if let supported = n.controller?.supportedCommands, !supported.contains(command.command) { return nil }
        return command
    }
}
