import ArgumentParser
import FarcastSupport
import Foundation
import Jellyfin

extension PlaybackQuality: ExpressibleByArgument {}

struct JellyfinPlayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play",
        abstract: "Play an item in mpv, reporting progress to the server so resume works everywhere.",
        discussion: """
            Asks the server how the item plays on this machine's mpv (a device profile made from the decoders mpv really has), opens the stream in mpv and tells the server what happens: Playing when mpv starts, Progress every 10 seconds and at every pause, seek and volume change, Stopped with the position when mpv ends — the media's end, closing the mpv window, Ctrl-C, or --duration. Playback starts where the user left off (the server's resume point) unless --start says otherwise.

            mpv keeps your own mpv configuration; --mpv-option adds options (KEY=VALUE, as mpv's --KEY=VALUE), e.g. vo=null and ao=null to play without a window or sound.

            Examples:
              farcast jellyfin play "Test Pattern"
              farcast jellyfin play "Pilot Tone" --start 0 --quality medium
              farcast jellyfin play 5d9c1e0f3a2b4c6d8e7f901a2b3c4d5e --duration 30 --mpv-option vo=null --mpv-option ao=null --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: ArgumentHelp("The item: name or id.", valueName: "ITEM"))
    var item: String

    @Option(help: ArgumentHelp("Start here, in seconds (default: the server's resume point; 0: from the beginning).", valueName: "seconds"))
    var start: Double?

    @Option(help: ArgumentHelp("Stop after this many seconds of playback, as pressing stop would.", valueName: "seconds"))
    var duration: Double?

    @Option(help: ArgumentHelp("Streaming quality: maximum (no cap of ours), high (20 Mbit/s), medium (8), low (3).", valueName: "quality"))
    var quality: PlaybackQuality = .maximum

    @Option(help: ArgumentHelp("Cap the stream at this many Mbit/s (overrides --quality).", valueName: "mbps"))
    var maxBitrate: Double?

    @Option(help: ArgumentHelp("The audio stream to play, by its index in `farcast jellyfin info` (default: the server's choice).", valueName: "index"))
    var audio: Int?

    @Option(help: ArgumentHelp("The subtitle stream to show, by index (default: the server's choice).", valueName: "index"))
    var subtitle: Int?

    @Option(name: .customLong("mpv-option"), help: ArgumentHelp("An mpv option as KEY=VALUE (or KEY for a flag); repeatable.", valueName: "option"))
    var mpvOptions: [String] = []

    @Option(help: ArgumentHelp("The mpv to run: a name looked up in PATH, or a path.", valueName: "program"))
    var mpv: String = "mpv"

    /// Tests use short intervals; users keep the real clients' 10 s.
    @Option(name: .customLong("test-progress-interval"), help: .hidden)
    var progressInterval: Double = 10

    func validate() throws {
        if let start { guard start >= 0, start.isFinite else { throw ValidationError("--start must be 0 or more seconds") } }
        if let duration { guard duration > 0, duration.isFinite else { throw ValidationError("--duration must be positive") } }
        if let maxBitrate { guard maxBitrate > 0, maxBitrate <= 1000 else { throw ValidationError("--max-bitrate must be between 0 and 1000 Mbit/s") } }
        guard progressInterval > 0 else { throw ValidationError("--test-progress-interval must be positive") }
        for option in mpvOptions {
            guard let key = option.split(separator: "=", maxSplits: 1).first, !key.isEmpty, !key.hasPrefix("-"), !key.contains(" ") else {
                throw ValidationError("--mpv-option takes KEY=VALUE without leading dashes (e.g. --mpv-option vo=null), not '\(option)'")
            }
        }
    }

    func run() async throws {
        try await reportingFailures {
            let player = MPVPlayer(program: mpv, options: mpvOptions)
            let decoders: LocalDecoders
            do { decoders = try await player.decoders() } catch { throw CommandFailure(message: describe(error)) }
            let session = try await target.session()
            let resolved = try await JellyfinCLI.resolveItem(item, in: session)
            guard !resolved.isFolder else {
                throw CommandFailure(message: "\(resolved.name) is a \(resolved.kind.rawValue.lowercased()), not something to play: name an episode, film or track (see `farcast jellyfin ls \"\(resolved.name)\"`)")
            }
            let resume = resolved.userData.map { Double($0.playbackPositionTicks) / 10_000_000 } ?? 0
            let from = start ?? resume
            let profile = DeviceProfile(name: "Farcast (mpv)", decoders: decoders, quality: quality, maxBitrate: maxBitrate.map { Int($0 * 1_000_000) })
            let request = PlaybackRequest(profile: profile, startSeconds: from, audioStreamIndex: audio, subtitleStreamIndex: subtitle)
            let options = PlaybackOptions(progressInterval: JellyfinCLI.duration(progressInterval), stopAfter: duration.map(JellyfinCLI.duration))
            let json = global.json, quiet = global.quiet
            let watcher = SignalWatcher { _ in Task { await player.stop() } }
            defer { watcher.cancel() }
            let outcome: PlaybackOutcome
            do {
                outcome = try await session.play(resolved, request, on: player, options: options) { progress in
                    guard !json else { return }
                    switch progress {
                    case .planned(let plan):
                        if !quiet {
                            print("Playing \(resolved.name) (\(plan.method.rawValue)\(plan.container.map { ", \($0)" } ?? ""))\(from > 0 ? " from \(clock(from))" : "")")
                        }
                    case .reportFailed(let kind, let reason):
                        FileHandle.standardError.write(Data("farcast: note: the \(kind.rawValue) report did not reach the server: \(reason)\n".utf8))
                    case .reported:
                        break
                    }
                }
            } catch {
                throw CommandFailure(message: describe(error))
            }
            let result = PlayResult(resolved, outcome)
            if json {
                try printJSON(result)
            } else if !quiet {
                let runtime = outcome.plan.runtimeSeconds.map { " of \(clock($0))" } ?? ""
                switch outcome.end {
                case .finished: print("Finished at \(clock(outcome.positionSeconds))\(runtime)")
                case .stopped: print("Stopped at \(clock(outcome.positionSeconds))\(runtime)")
                case .failed: print("Stopped at \(clock(outcome.positionSeconds))\(runtime)")
                }
            }
            if case .failed(let reason) = outcome.end { throw CommandFailure(message: reason) }
        }
    }

    private func clock(_ seconds: Double) -> String { formatTicks(Int64(seconds * 10_000_000)) }

    struct PlayResult: Encodable {
        var id: String
        var name: String
        var method: String
        var container: String?
        var playSessionId: String?
        var startSeconds: Double
        var positionSeconds: Double
        var runtimeSeconds: Double?
        /// finished, stopped or failed.
        var end: String
        var failure: String?
        var reports: [String: Int]

        init(_ item: JellyfinItem, _ outcome: PlaybackOutcome) {
            id = item.id
            name = item.name
            method = outcome.plan.method.rawValue
            container = outcome.plan.container
            playSessionId = outcome.plan.playSessionId
            startSeconds = outcome.startSeconds
            positionSeconds = (outcome.positionSeconds * 1000).rounded() / 1000
            runtimeSeconds = outcome.plan.runtimeSeconds
            switch outcome.end {
            case .finished: end = "finished"
            case .stopped: end = "stopped"
            case .failed(let reason): (end, failure) = ("failed", reason)
            }
            reports = Dictionary(uniqueKeysWithValues: outcome.reports.map { ($0.key.rawValue, $0.value) })
        }
    }
}
