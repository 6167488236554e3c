import ArgumentParser
import FarcastSupport
import Foundation
import Jellyfin

struct JellyfinCastTargetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cast-target",
        abstract: "Wait to be played to: other Jellyfin apps cast to this machine and control mpv.",
        discussion: """
            Signs this device on to the server's live session as a remote-controllable player (like jellyfin-mpv-shim). Pick it in another Jellyfin app's "play on" list: what it sends plays here in mpv, with the same reports as `farcast jellyfin play`. Understood: Play (play now, next or last; a list plays in order), Playstate (pause, unpause, play/pause, seek, rewind 10 s, fast-forward 30 s, next, previous, stop), and the SetVolume, Mute, Unmute, ToggleMute and DisplayMessage commands. Runs until Ctrl-C or --duration; what plays then is stopped and reported.

            Examples:
              farcast jellyfin cast-target
              farcast jellyfin cast-target --quality high --mpv-option fullscreen=yes
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @OptionGroup var player: MPVPlayerOptions

    func run() async throws {
        try await reportingFailures {
            let decoders = try await player.decoders()
            let session = try await target.session()
            let queue = player.queue(session: session, request: PlaybackRequest(profile: player.profile(decoders)))
            let json = global.json, quiet = global.quiet
            let results = Locked<[JellyfinPlayCommand.PlayResult]>([])
            let printer = Task {
                for await event in queue.events {
                    switch event {
                    case .started(_, let name, let plan):
                        if !json && !quiet { print("Playing \(name) (\(plan.method.rawValue)\(plan.container.map { ", \($0)" } ?? ""))") }
                    case .ended(let id, let name, let outcome):
                        results.withLock { $0.append(.init(id: id, name: name, outcome)) }
                        if !json && !quiet { print("\(outcome.end == .finished ? "Finished" : "Stopped") \(name) at \(formatTicks(Int64(outcome.positionSeconds * 10_000_000)))") }
                    case .failed(_, let reason):
                        FileHandle.standardError.write(Data("farcast: \(reason)\n".utf8))
                    case .progress(_, .reportFailed(let kind, let reason)):
                        FileHandle.standardError.write(Data("farcast: note: the \(kind.rawValue) report did not reach the server: \(reason)\n".utf8))
                    case .progress, .idle:
                        break
                    }
                }
            }
            var live = LiveSessionCore.Options()
            live.subscribeToSessions = false
            let stream = session.liveEvents(options: live)
            let failure = await JellyfinCLI.untilStopped(after: player.duration) {
                do {
                    for try await event in stream {
                        switch event {
                        case .connected:
                            if !json && !quiet { print("Waiting to be played to, as \(session.userName) on \(session.server.address) (Ctrl-C to stop)") }
                        case .message(let message):
                            if let command = PlayQueue.Command(message) {
                                await queue.handle(command)
                            } else if case .generalCommand(let general) = message, general.name == "DisplayMessage", !json {
                                print("Message: \(general.arguments["Header"].map { "\($0): " } ?? "")\(general.arguments["Text"] ?? "")")
                            }
                        case .problem, .disconnected:
                            break
                        }
                    }
                    return nil
                } catch {
                    return describe(error)
                }
            }
            // What plays is stopped and its Stopped report sent before the command ends.
            await queue.handle(.stop)
            for _ in 0..<200 where await queue.state.playing { try? await Task.sleep(for: .milliseconds(50)) }
            printer.cancel()
            if json { try printJSONList(results.withLock { $0 }) }
            if let failure { throw CommandFailure(message: failure) }
        }
    }
}
