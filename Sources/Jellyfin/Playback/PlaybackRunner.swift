internal import Foundation
#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
import NIOHTTP1
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a playback session reports and when it ends by itself.
public struct PlaybackOptions: Sendable {
    /// Progress reports while playing (the real clients' 10 s); pauses, seeks and volume
    /// changes report at once besides.
    public var progressInterval: Duration
    /// Stop after this long, as a person pressing stop would (nil: play to the end).
    public var stopAfter: Duration?
    /// Media segments of these types are skipped as playback reaches them (a seek to their end).
    public var skip: Set<MediaSegmentType>
    /// The media opens paused (a SyncPlay group starts it when every member is ready).
    public var startPaused: Bool

    public init(progressInterval: Duration = .seconds(10), stopAfter: Duration? = nil, skip: Set<MediaSegmentType> = [], startPaused: Bool = false) {
        (self.progressInterval, self.stopAfter, self.skip, self.startPaused) = (progressInterval, stopAfter, skip, startPaused)
    }
}

/// What a playback session did, as it happens.
public enum PlaybackProgress: Sendable, Equatable {
    /// The server's decision: where the media comes from and how.
    case planned(PlaybackPlan)
    /// A report reached the server.
    case reported(PlaybackReport.Kind, positionSeconds: Double, paused: Bool)
    /// A report did not reach the server (playback goes on): the reason.
    case reportFailed(PlaybackReport.Kind, String)
    /// Something the user should know that does not stop playback (a subtitle file that
    /// could not be fetched).
    case note(String)
    /// Playback jumped over a segment (`PlaybackOptions.skip`).
    case skipped(MediaSegment)
}

/// How a playback session ended.
public struct PlaybackOutcome: Sendable, Equatable {
    public var plan: PlaybackPlan
    public var end: EndReason
    public var startSeconds: Double
    public var positionSeconds: Double
    /// Reports that reached the server, by kind.
    public var reports: [PlaybackReport.Kind: Int]
    /// The audio and subtitles the player was playing (as it last said while playing).
    public var tracks: PlayingTracks?
    /// The segments skipped, in order.
    public var skipped: [MediaSegment] = []
}

/// A playback session that could not start.
public enum PlaybackFailure: Error, Sendable, Equatable, CustomStringConvertible {
    case server(JellyfinError)
    case player(PlayerError)

    public var description: String {
        switch self {
        case .server(let error): return error.description
        case .player(let error): return error.description
        }
    }
}

extension JellyfinSession {
    /// Plays `item` on `player` from `request.startSeconds`, telling the server as real clients
    /// do: Playing when the player has started, Progress every `progressInterval` and at every
    /// pause, seek and volume change, Stopped with the last position when it ends (however it
    /// ends: the media's end, `player.stop()`, `options.stopAfter`, this task cancelled), and the
    /// server's encoding stopped after a transcode. A report that fails does not stop playback;
    /// `observe` hears of it.
    public func play(_ item: JellyfinItem, _ request: PlaybackRequest, on player: any MediaPlayer, options: PlaybackOptions = .init(),
                     observe: @escaping @Sendable (PlaybackProgress) -> Void = { _ in }) async throws(PlaybackFailure) -> PlaybackOutcome {
        let plan = try await preparePlayback(item, request, observe: observe)
        observe(.planned(plan))
        return try await play(plan, startSeconds: request.startSeconds, on: player, options: options, observe: observe)
    }

    /// How `item` plays: the server's decision (PlaybackInfo) and, for video, the media
    /// segments, asked side by side. What a queue asks ahead for the item after the current one.
    public func preparePlayback(_ item: JellyfinItem, _ request: PlaybackRequest,
                                observe: @escaping @Sendable (PlaybackProgress) -> Void = { _ in }) async throws(PlaybackFailure) -> PlaybackPlan {
        // Segments (intro, credits…) are offered for video, asked beside PlaybackInfo so they
        // cost no time before playing; a server that cannot say is no failure.
        let segments: Task<Result<[MediaSegment], JellyfinError>, Never>? = item.isAudio ? nil : Task {
            do throws(JellyfinError) { return .success(try await self.mediaSegments(item.id)) } catch { return .failure(error) }
        }
        var planned: PlaybackPlan
        do { planned = try await playbackPlan(for: item, request) } catch {
            segments?.cancel()
            throw .server(error)
        }
        switch await segments?.value {
        case .success(let found): planned.segments = found
        case .failure(let error): observe(.note("the media segments were not read: \(error.description)"))
        case nil: break
        }
        return planned
    }

    /// Plays what `plan` says on `player` from `startSeconds`, reporting as `play(_:_:on:)` does.
    /// A player `playNext` made was handed the plan's URL already: this waits for it to start.
    public func play(_ plan: PlaybackPlan, startSeconds: Double, on player: any MediaPlayer, options: PlaybackOptions = .init(),
                     observe: @escaping @Sendable (PlaybackProgress) -> Void = { _ in }) async throws(PlaybackFailure) -> PlaybackOutcome {
        let (local, folder) = await fetchSubtitles(plan, observe: observe)
        defer { if let folder { Self.removeFolder(folder) } }
        let outcome: PlaybackOutcome
        do {
            outcome = try await PlaybackLoop.run(local, startSeconds: startSeconds, on: player, options: options, observe: observe,
                                                 report: { report in await self.deliver(report) },
                                                 tick: {
                                                     if plan.method == .transcode, let id = plan.playSessionId { _ = try? await self.pingPlayback(playSessionId: id) }
                                                 })
        } catch {
            await closeLive(plan, observe: observe)
            throw .player(error)
        }
        if plan.method == .transcode, let id = plan.playSessionId {
            _ = await Task { try? await self.stopEncoding(playSessionId: id) }.value
        }
        await closeLive(plan, observe: observe)
        return outcome
    }

    /// Closes the plan's live stream, if it has one, so the server frees its tuner (in a task of
    /// its own, so a cancelled playback still closes it); a failure is a note, no more.
    private func closeLive(_ plan: PlaybackPlan, observe: @Sendable (PlaybackProgress) -> Void) async {
        guard let live = plan.liveStreamId else { return }
        let failure = await Task { () async -> String? in
            do throws(JellyfinError) { try await self.closeLiveStream(live); return nil } catch { return error.description }
        }.value
        if let failure { observe(.note("the live stream was not closed: \(failure)")) }
    }

    /// The plan with its subtitle files fetched into a private folder (the player is handed
    /// local files: no token in its command line, and this session's timeouts and TLS apply).
    /// One that cannot be fetched is left out; `observe` hears why.
    private func fetchSubtitles(_ plan: PlaybackPlan, observe: @Sendable (PlaybackProgress) -> Void) async -> (PlaybackPlan, String?) {
        guard !plan.tracks.subtitleFiles.isEmpty else { return (plan, nil) }
        var template = Array((NSTemporaryDirectory() + "/farcast-subtitles-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            observe(.note("subtitle files not fetched: cannot make a folder for them (\(String(cString: strerror(errno))))"))
            return (Self.withoutSubtitleFiles(plan), nil)
        }
        let folder = String(cString: made)
        var local = plan
        for (n, file) in plan.tracks.subtitleFiles.enumerated() {
            let ext = file.url.pathExtension.isEmpty ? "srt" : file.url.pathExtension
            let path = folder + "/\(n + 1).\(ext)"
            do throws(JellyfinError) {
                let bytes = try await fetch(file.url, operation: "fetch subtitles")
                guard FileManager.default.createFile(atPath: path, contents: Data(bytes)) else { throw .malformedResponse(operation: "fetch subtitles", reason: "cannot write \(path)") }
                local.tracks.subtitleFiles[n].url = URL(fileURLWithPath: path)
            } catch {
                observe(.note("subtitles \(file.language ?? file.url.lastPathComponent) not loaded: \(error.description)"))
                local.tracks.subtitleFiles[n].url = URL(fileURLWithPath: "/nonexistent")
            }
        }
        local.tracks.subtitleFiles.removeAll { $0.url.path == "/nonexistent" }
        return (local, folder)
    }

    private static func withoutSubtitleFiles(_ plan: PlaybackPlan) -> PlaybackPlan {
        var plan = plan
        plan.tracks.subtitleFiles = []
        return plan
    }

    static func removeFolder(_ folder: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] { unlink(folder + "/" + name) }
        rmdir(folder)
    }

    /// One GET of a small file from the server, with this session's token.
    func fetch(_ url: URL, operation: String, limit: Int = 16 << 20) async throws(JellyfinError) -> [UInt8] {
        #if canImport(AsyncHTTPClient)
        do {
            var request = HTTPClientRequest(url: url.absoluteString)
            request.headers.add(name: "Authorization", value: AuthorizationHeader.value(identity: server.identity, token: accessToken))
            let timeout = server.transport.timeout.components
            let response = try await server.transport.httpClient.execute(
                request, timeout: .nanoseconds(timeout.seconds * 1_000_000_000 + timeout.attoseconds / 1_000_000_000))
            guard response.status == .ok else { throw server.unexpected(operation, status: Int(response.status.code)) }
            let body = try await response.body.collect(upTo: limit)
            return Array(body.readableBytesView)
        } catch let error as JellyfinError {
            throw error
        } catch {
            throw JellyfinError.from(error, operation: operation, url: server.address.description, timeout: server.transport.timeout)
        }
        #else
        throw .malformedResponse(operation: operation, reason: "not built for this platform yet")
        #endif
    }

    /// Sends a report in a task of its own, so a cancelled session still says it stopped;
    /// returns why it failed, or nil.
    private func deliver(_ report: PlaybackReport) async -> String? {
        let reporting = Task { () async -> String? in
            do throws(JellyfinError) { try await self.report(report); return nil } catch { return error.description }
        }
        return await reporting.value
    }
}

/// What every playback runs, online or offline: opens the media on the player, then turns what
/// the player does into reports (Start, Progress on a timer and at every pause, seek and volume
/// change, Stopped with the last position) handed to `report`, which says why one failed (nil:
/// it arrived). `tick` runs beside each timed Progress (a transcode's keep-alive).
enum PlaybackLoop {
    static func run(_ plan: PlaybackPlan, startSeconds: Double, on player: any MediaPlayer, options: PlaybackOptions,
                    observe: @escaping @Sendable (PlaybackProgress) -> Void,
                    report deliver: @escaping @Sendable (PlaybackReport) async -> String?,
                    tick: @escaping @Sendable () async -> Void = {}) async throws(PlayerError) -> PlaybackOutcome {
        try await player.play(plan.url, startSeconds: startSeconds, tracks: plan.tracks, paused: options.startPaused)

        enum Input: Sendable { case player(PlayerEvent), tick, deadline }
        let (inputs, sink) = AsyncStream.makeStream(of: Input.self, bufferingPolicy: .unbounded)
        let forwarder = Task {
            for await event in player.events { sink.yield(.player(event)) }
            sink.finish()
        }
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: options.progressInterval)
                if !Task.isCancelled { sink.yield(.tick) }
            }
        }
        let deadline = Task {
            guard let stopAfter = options.stopAfter else { return }
            try? await Task.sleep(for: stopAfter)
            if !Task.isCancelled { sink.yield(.deadline) }
        }
        defer { forwarder.cancel(); ticker.cancel(); deadline.cancel() }

        var counts: [PlaybackReport.Kind: Int] = [:]
        func send(_ report: PlaybackReport) async {
            if let failure = await deliver(report) {
                observe(.reportFailed(report.kind, failure))
            } else {
                counts[report.kind, default: 0] += 1
                observe(.reported(report.kind, positionSeconds: report.positionSeconds, paused: report.isPaused))
            }
        }

        var position = startSeconds, paused = options.startPaused, muted = false
        var volume: Int?
        var tracks: PlayingTracks?
        var skipped: [MediaSegment] = []
        /// Jumps over a segment to skip that `at` falls in (each segment once).
        func skipSegment(at: Double) {
            guard !options.skip.isEmpty, let segment = plan.segments.first(where: { segment in
                options.skip.contains(segment.type) && at >= segment.startSeconds - 0.05 && at < segment.endSeconds - 0.1
                    && !skipped.contains(segment)
            }) else { return }
            skipped.append(segment)
            observe(.skipped(segment))
            Task { await player.seek(to: segment.endSeconds) }
        }
        var end = EndReason.stopped
        var stopping = false
        await withTaskCancellationHandler {
            for await input in inputs {
                switch input {
                case .player(.started(let at)):
                    position = at
                    await send(PlaybackReport(.start, plan: plan, positionSeconds: position, isPaused: paused, volume: volume))
                    skipSegment(at: at)
                case .player(.position(let at)):
                    position = at
                    skipSegment(at: at)
                case .player(.tracks(let playing)):
                    tracks = playing
                case .player(.paused(let isPaused, let at)):
                    (paused, position) = (isPaused, at)
                    await send(PlaybackReport(.progress, plan: plan, positionSeconds: position, isPaused: paused, isMuted: muted, volume: volume))
                case .player(.seeked(let at)):
                    position = at
                    await send(PlaybackReport(.progress, plan: plan, positionSeconds: position, isPaused: paused, isMuted: muted, volume: volume))
                case .player(.volume(let level, let isMuted)):
                    let changed = volume != nil && (volume != level || muted != isMuted)
                    (volume, muted) = (level, isMuted)
                    if changed {
                        await send(PlaybackReport(.progress, plan: plan, positionSeconds: position, isPaused: paused, isMuted: muted, volume: volume))
                    }
                case .player(.ended(let reason, let at)):
                    end = reason
                    if at > 0 || position == 0 { position = at }
                    // The media's end: the position is the runtime (mpv's last frame is a little short).
                    if reason == .finished, let runtime = plan.runtimeSeconds { position = max(position, runtime) }
                    sink.finish()
                case .tick:
                    position = player.position
                    await send(PlaybackReport(.progress, plan: plan, positionSeconds: position, isPaused: paused, isMuted: muted, volume: volume))
                    await tick()
                case .deadline:
                    if !stopping { stopping = true; Task { await player.stop() } }
                }
            }
        } onCancel: {
            Task { await player.stop() }
        }
        var failed = false
        if case .failed = end { failed = true }
        await send(PlaybackReport(.stopped, plan: plan, positionSeconds: position, isPaused: paused, failed: failed))
        return PlaybackOutcome(plan: plan, end: end, startSeconds: startSeconds, positionSeconds: position, reports: counts, tracks: tracks,
                               skipped: skipped)
    }
}
