import ArgumentParser
import FarcastSupport
import Foundation
import Jellyfin

extension PlaybackQuality: ExpressibleByArgument {}

extension TrackChoice: ExpressibleByArgument {
    public init?(argument: String) { self.init(parsing: argument) }
}

/// How commands that play (`play`, `tv watch`, `syncplay new|join`, `cast-target`) run mpv, for
/// how long, and what they ask the server for.
struct MPVPlayerOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Stop after this many seconds, as pressing stop would (default: no limit).", valueName: "seconds"))
    var duration: Double?

    @Option(help: ArgumentHelp("Streaming quality: maximum (no cap of ours), high (20 Mbit/s), medium (8), low (3).", valueName: "quality"))
    var quality: PlaybackQuality = .maximum

    @Option(help: ArgumentHelp("Cap the stream at this many Mbit/s (overrides --quality).", valueName: "mbps"))
    var maxBitrate: Double?

    @Option(name: .customLong("mpv-option"), help: ArgumentHelp("An mpv option as KEY=VALUE (or KEY for a flag); repeatable.", valueName: "option"))
    var mpvOptions: [String] = []

    @Option(help: ArgumentHelp("The mpv to run: a name looked up in PATH, or a path.", valueName: "program"))
    var mpv: String = "mpv"

    @Option(help: ArgumentHelp("Skip these media segments as playback reaches them: intro, outro (or credits), recap, preview, commercial; a comma list, repeatable.", valueName: "segments"))
    var skip: [String] = []

    @Flag(inversion: .prefixedNo, help: "Play music tracks one into the next with no gap, on one mpv.")
    var gapless = true

    /// Tests use short intervals; users keep the real clients' 10 s.
    @Option(name: .customLong("test-progress-interval"), help: .hidden)
    var progressInterval: Double = 10

    func validate() throws {
        if let duration { guard duration > 0, duration.isFinite else { throw ValidationError("--duration must be positive") } }
        if let maxBitrate { guard maxBitrate > 0, maxBitrate <= 1000 else { throw ValidationError("--max-bitrate must be between 0 and 1000 Mbit/s") } }
        guard progressInterval > 0 else { throw ValidationError("--test-progress-interval must be positive") }
        for name in skip.flatMap({ $0.split(separator: ",") }) where MediaSegmentType(named: String(name).trimmingCharacters(in: .whitespaces)) == nil {
            throw ValidationError("--skip takes intro, outro, credits, recap, preview or commercial, not '\(name)'")
        }
        for option in mpvOptions {
            guard let key = option.split(separator: "=", maxSplits: 1).first, !key.isEmpty, !key.hasPrefix("-"), !key.contains(" ") else {
                throw ValidationError("--mpv-option takes KEY=VALUE without leading dashes (e.g. --mpv-option vo=null), not '\(option)'")
            }
        }
    }

    /// The decoders this mpv has (kept in the cache folder until mpv changes).
    func decoders() async throws -> LocalDecoders {
        do { return try await MPVPlayer(program: mpv).decoders(cacheDirectory: JellyfinCLI.cacheFolder) } catch {
            throw CommandFailure(message: describe(error))
        }
    }

    func profile(_ decoders: LocalDecoders) -> DeviceProfile {
        DeviceProfile(name: "Farcast (mpv)", decoders: decoders, quality: quality, maxBitrate: maxBitrate.map { Int($0 * 1_000_000) })
    }

    var segmentsToSkip: Set<MediaSegmentType> {
        Set(skip.flatMap { $0.split(separator: ",") }.compactMap { MediaSegmentType(named: String($0).trimmingCharacters(in: .whitespaces)) })
    }

    /// A queue that plays on a new mpv per item.
    func queue(session: JellyfinSession, request: PlaybackRequest, stopAfter: Duration? = nil) -> PlayQueue {
        let program = mpv, options = mpvOptions, gapless = gapless
        return PlayQueue(session: session, request: request,
                         options: PlaybackOptions(progressInterval: JellyfinCLI.duration(progressInterval), stopAfter: stopAfter, skip: segmentsToSkip)) {
            MPVPlayer(program: program, options: options, gapless: gapless)
        }
    }
}

struct JellyfinPlayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play",
        abstract: "Play an item (an episode and the ones after it, a season, an album) in mpv, reporting progress to the server.",
        discussion: """
            Asks the server how the item plays on this machine's mpv (a device profile made from the decoders mpv really has), opens the stream in mpv and tells the server what happens: Playing when mpv starts, Progress every 10 seconds and at every pause, seek and volume change, Stopped with the position when mpv ends — the media's end, closing the mpv window, Ctrl-C, or --duration. Playback starts where the user left off (the server's resume point) unless --start says otherwise. After an episode the next ones in the series follow (--no-next: just the one); a season plays its episodes, an album or playlist its tracks, one after another. Music streams through the server's universal audio endpoint and plays gapless: each track is queued on the same mpv while the one before plays (--no-gapless: a new mpv for each).

            --offline plays a download (farcast jellyfin download) with no server: from the later of the server's resume point and where offline playback stopped, then the downloaded episodes after it. Where it stops is kept in the offline index and reaches the server with the next command that connects (see `farcast jellyfin offline`).

            mpv keeps your own mpv configuration; --mpv-option adds options (KEY=VALUE, as mpv's --KEY=VALUE), e.g. vo=null and ao=null to play without a window or sound.

            Examples:
              farcast jellyfin play "Test Pattern"
              farcast jellyfin play "Pilot Tone" --start 0 --quality medium
              farcast jellyfin play 5d9c1e0f3a2b4c6d8e7f901a2b3c4d5e --duration 30 --mpv-option vo=null --mpv-option ao=null --json
              farcast jellyfin play --offline "Pilot Tone"
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: ArgumentHelp("The item: name or id.", valueName: "ITEM"))
    var item: String

    @Option(help: ArgumentHelp("Start here, in seconds (default: the server's resume point; 0: from the beginning).", valueName: "seconds"))
    var start: Double?

    @OptionGroup var player: MPVPlayerOptions
    var duration: Double? { player.duration }

    @Option(help: ArgumentHelp("The audio to play: a stream index from `farcast jellyfin info`, or a language (eng, de, fre…) (default: the server's choice, which follows your language settings).", valueName: "index|language"))
    var audio: TrackChoice?

    @Option(help: ArgumentHelp("The subtitles to show: a stream index, a language, or none (default: the server's choice).", valueName: "index|language|none"))
    var subtitle: TrackChoice?

    @Flag(inversion: .prefixedNo, help: "After an episode, play the ones after it in the series.")
    var next = true

    @Flag(help: "Play the downloaded file (farcast jellyfin download) with no server; where it stops is kept and synced later.")
    var offline = false

    func validate() throws {
        if let start { guard start >= 0, start.isFinite else { throw ValidationError("--start must be 0 or more seconds") } }
        if audio == TrackChoice.none { throw ValidationError("--audio takes a stream index or a language; audio cannot be none (use --mpv-option mute=yes)") }
        if offline {
            if audio != nil || subtitle != nil { throw ValidationError("--audio and --subtitle ask the server; offline, pick tracks in mpv (--mpv-option aid=N)") }
            if player.maxBitrate != nil || player.quality != .maximum { throw ValidationError("--quality and --max-bitrate ask the server; a download plays as it is") }
        }
    }

    func run() async throws {
        if offline { return try await reportingFailures { try await playOffline() } }
        try await reportingFailures {
            do {
                try await playOnline()
            } catch let error as JellyfinError where Self.isUnreachable(error) {
                // The server is away: a downloaded copy plays instead (its position syncs later).
                guard let library = try? JellyfinCLI.existingOfflineLibrary(), (try? library.find(item))?.isEmpty == false else { throw error }
                FileHandle.standardError.write(Data("farcast: note: \(describe(error)); playing the download instead\n".utf8))
                try await playOffline()
            }
        }
    }

    static func isUnreachable(_ error: JellyfinError) -> Bool {
        switch error {
        case .unreachable, .timedOut: return true
        default: return false
        }
    }

    func playOnline() async throws {
        let decoders = try await player.decoders()
        let session = try await target.session()
        let resolved = try await JellyfinCLI.resolveItem(item, in: session)
        let queue = try await Self.queue(for: resolved, in: session, next: next)
        let request = PlaybackRequest(profile: player.profile(decoders), audio: audio, subtitles: subtitle)
        try await Self.play(queue, session: session, request: request, player: player, start: start, duration: duration, global: global)
    }

    /// Plays `queue` in mpv, printing what happens (or, with --json, a list at the end).
    static func play(_ queue: [JellyfinItem], session: JellyfinSession, request: PlaybackRequest, player options: MPVPlayerOptions,
                     start: Double?, duration: Double?, global: GlobalOptions) async throws {
        do {
            let player = options.queue(session: session, request: request, stopAfter: duration.map(JellyfinCLI.duration))
            let watcher = SignalWatcher { _ in Task { await player.handle(.stop) } }
            defer { watcher.cancel() }
            await player.handle(.play(itemIds: queue.map(\.id), startIndex: 0, startSeconds: start, placement: .now))
            var results: [PlayResult] = []
            var failures: [String] = []
            for await event in player.events {
                switch event {
                case .started(_, let name, let plan):
                    if !global.json && !global.quiet {
                        print("Playing \(name) (\(plan.method.rawValue)\(plan.container.map { ", \($0)" } ?? "")\(plan.liveStreamId == nil ? "" : ", live"))")
                        let offered = plan.segments.filter { !options.segmentsToSkip.contains($0.type) }
                        if !offered.isEmpty {
                            print("Segments: " + offered.map { "\($0.type.rawValue.lowercased()) \(clock($0.startSeconds))–\(clock($0.endSeconds))" }
                                .joined(separator: ", ") + " (skip them with --skip)")
                        }
                    }
                case .progress(_, .skipped(let segment)):
                    if !global.json && !global.quiet { print("Skipped the \(segment.type.rawValue.lowercased()) (to \(clock(segment.endSeconds)))") }
                case .progress(_, .reportFailed(let kind, let reason)):
                    FileHandle.standardError.write(Data("farcast: note: the \(kind.rawValue) report did not reach the server: \(reason)\n".utf8))
                case .progress(_, .note(let note)):
                    FileHandle.standardError.write(Data("farcast: note: \(note)\n".utf8))
                case .progress:
                    break
                case .ended(let id, let name, let outcome):
                    results.append(PlayResult(id: id, name: name, outcome))
                    if !global.json && !global.quiet {
                        let runtime = outcome.plan.runtimeSeconds.map { " of \(clock($0))" } ?? ""
                        switch outcome.end {
                        case .finished: print("Finished at \(clock(outcome.positionSeconds))\(runtime)")
                        case .stopped, .failed: print("Stopped at \(clock(outcome.positionSeconds))\(runtime)")
                        }
                    }
                    if case .failed(let reason) = outcome.end { failures.append("\(name): \(reason)") }
                case .failed(_, let reason):
                    failures.append(reason)
                    if queue.count > 1 {
                        FileHandle.standardError.write(Data("farcast: \(reason); going on with the next\n".utf8))
                    }
                case .idle:
                    break
                }
                if event == .idle { break }
            }
            if global.json { try printJSONList(results) }
            if let failure = failures.last {
                throw CommandFailure(message: queue.count == 1 ? failure : "\(failures.count) of \(queue.count) items did not play (the last: \(failure))")
            }
        }
    }

    /// What `play ITEM` plays: the item and, for an episode, the ones after it in the series
    /// (unless --no-next); a season's episodes; an album's or a playlist's tracks.
    static func queue(for item: JellyfinItem, in session: JellyfinSession, next: Bool) async throws -> [JellyfinItem] {
        switch item.kind {
        case .episode:
            guard next, let series = item.seriesId else { return [item] }
            let episodes = try await session.episodes(seriesId: series)
            guard let at = episodes.firstIndex(where: { $0.id == item.id }) else { return [item] }
            return Array(episodes[at...])
        case .season:
            guard let series = item.seriesId ?? item.parentId else { break }
            let episodes = try await session.episodes(seriesId: series, seasonId: item.id)
            guard !episodes.isEmpty else { throw CommandFailure(message: "\(item.name) has no episodes") }
            return episodes
        case .musicAlbum, .playlist:
            var query = ItemQuery(parentId: item.id)
            query.sortBy = [.parentIndexNumber, .indexNumber, .sortName]
            var tracks: [JellyfinItem] = []
            for try await track in session.items(query) where !track.isFolder { tracks.append(track) }
            guard !tracks.isEmpty else { throw CommandFailure(message: "\(item.name) has nothing to play") }
            return tracks
        default:
            if !item.isFolder { return [item] }
        }
        throw CommandFailure(message: "\(item.name) is a \(item.kind.rawValue.lowercased()), not something to play: name an episode, season, film, album or track (see `farcast jellyfin ls \"\(item.name)\"`)")
    }

    /// `play --offline`: the downloads ITEM names (and, for an episode, the downloaded ones after
    /// it), each from its offline resume point, positions kept in the offline index.
    func playOffline() async throws {
        do {
            guard let library = try JellyfinCLI.existingOfflineLibrary() else { throw CommandFailure(message: describe(OfflineError.notDownloaded(item))) }
            var queue: [OfflineEntry]
            do {
                queue = try library.find(item)
                if next, queue.count == 1, queue[0].item.kind == .episode { queue += try library.following(queue[0]) }
            } catch {
                throw CommandFailure(message: describe(error))
            }
            if let ceiling = try target.rating.ceiling {
                let hidden = queue.filter { !ceiling.allows($0.item.officialRating) }
                queue.removeAll { !ceiling.allows($0.item.officialRating) }
                if queue.isEmpty, let first = hidden.first {
                    throw CommandFailure(message: describe(JellyfinError.aboveRatingCeiling(item: first.item.name, rating: first.item.officialRating ?? "", ceiling: ceiling.text)))
                }
            }
            let options = PlaybackOptions(progressInterval: JellyfinCLI.duration(player.progressInterval))
            let current = Locked<MPVPlayer?>(nil)
            let stopRequested = Locked(false)
            let watcher = SignalWatcher { _ in
                stopRequested.withLock { $0 = true }
                if let playing = current.withLock({ $0 }) { Task { await playing.stop() } }
            }
            defer { watcher.cancel() }
            let started = ContinuousClock.now
            var results: [PlayResult] = []
            var failures: [String] = []
            for (n, entry) in queue.enumerated() {
                if stopRequested.withLock({ $0 }) { break }
                guard entry.fileIsPresent else {
                    failures.append("\(entry.item.name): the download is missing or changed (\(entry.filePath)); download it again")
                    continue
                }
                var itemOptions = options
                if let duration {
                    let left = JellyfinCLI.duration(duration) - (ContinuousClock.now - started)
                    guard left > .zero else { break }
                    itemOptions.stopAfter = left
                }
                let mpv = MPVPlayer(program: player.mpv, options: player.mpvOptions)
                current.withLock { $0 = mpv }
                let from = n == 0 ? (start ?? entry.resumeSeconds) : entry.resumeSeconds
                if !global.json && !global.quiet { print("Playing \(entry.item.name) (offline, \(entry.filePath))") }
                do {
                    let outcome = try await library.play(entry, startSeconds: from, on: mpv, options: itemOptions) { progress in
                        if case .reportFailed(_, let reason) = progress {
                            FileHandle.standardError.write(Data("farcast: note: the position was not kept: \(reason)\n".utf8))
                        }
                    }
                    results.append(PlayResult(id: entry.item.id, name: entry.item.name, outcome))
                    if !global.json && !global.quiet {
                        let runtime = outcome.plan.runtimeSeconds.map { " of \(clock($0))" } ?? ""
                        print("\(outcome.end == .finished ? "Finished" : "Stopped") at \(clock(outcome.positionSeconds))\(runtime) (kept offline)")
                    }
                    if case .failed(let reason) = outcome.end { failures.append("\(entry.item.name): \(reason)") }
                    if outcome.end != .finished { break }
                } catch {
                    failures.append("\(entry.item.name): \(describe(error))")
                    if queue.count == 1 { break }
                    FileHandle.standardError.write(Data("farcast: \(entry.item.name): \(describe(error)); going on with the next\n".utf8))
                }
            }
            current.withLock { $0 = nil }
            if global.json { try printJSONList(results) }
            if let failure = failures.last {
                throw CommandFailure(message: queue.count == 1 ? failure : "\(failures.count) of \(queue.count) items did not play (the last: \(failure))")
            }
        }
    }

    private func clock(_ seconds: Double) -> String { Self.clock(seconds) }
    static func clock(_ seconds: Double) -> String { formatTicks(Int64(seconds * 10_000_000)) }

    struct PlayResult: Encodable {
        var id: String
        var name: String
        var method: String
        var container: String?
        var playSessionId: String?
        /// The live stream a channel played from (Live TV).
        var liveStreamId: String?
        var startSeconds: Double
        var positionSeconds: Double
        var runtimeSeconds: Double?
        /// finished, stopped or failed.
        var end: String
        var failure: String?
        var reports: [String: Int]
        /// What the player played, as it said.
        var audio: Track?
        var subtitle: Track?
        /// The item's media segments, and those skipped.
        var segments: [Segment]
        var skipped: [String]

        struct Segment: Encodable {
            var type: String
            var startSeconds: Double
            var endSeconds: Double
        }

        struct Track: Encodable {
            var id: Int
            var language: String?
            var title: String?
            var codec: String?
            var external: Bool

            init(_ track: PlayingTracks.Track) {
                (id, language, title, codec, external) = (track.id, track.language, track.title, track.codec, track.isExternal)
            }
        }

        init(id: String, name: String, _ outcome: PlaybackOutcome) {
            segments = outcome.plan.segments.map { Segment(type: $0.type.rawValue, startSeconds: $0.startSeconds, endSeconds: $0.endSeconds) }
            skipped = outcome.skipped.map(\.type.rawValue)
            audio = outcome.tracks?.audio.map(Track.init)
            subtitle = outcome.tracks?.subtitle.map(Track.init)
            self.id = id
            self.name = name
            method = outcome.plan.method.rawValue
            container = outcome.plan.container
            playSessionId = outcome.plan.playSessionId
            liveStreamId = outcome.plan.liveStreamId
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
