import FarcastSupport
import Foundation
import Hummingbird
import Jellyfin
import NIOCore
import OpenAPIRuntime

/// Playback in the stand-in: PlaybackInfo decides how a video plays on the client's device
/// profile as a real server's StreamBuilder does (StreamDecision.swift: direct play, direct
/// stream or transcode, with the server's reasons; proven on the server's own test cases),
/// music by container, codec and bitrate; the media's real bytes are served with Range
/// requests, and every playback report is kept (`GET /StandIn/PlaybackReports`) and moves the
/// user's resume point by the real server's rules.
///
/// What cannot play as it is is transcoded (Transcoding.swift: HLS with fMP4 segments or one
/// progressive MP4 for video, AAC or MP3 for audio; other containers a decision may name are
/// answered NoCompatibleStream); music also streams through the universal endpoint
/// (UniversalAudio.swift).
final class PlaybackLog: Sendable {
    struct Report: Codable, Sendable {
        init(kind: String, itemId: String? = nil, mediaSourceId: String? = nil, playSessionId: String? = nil, positionTicks: Int64? = nil,
             isPaused: Bool? = nil, playMethod: String? = nil, failed: Bool? = nil, volume: Int? = nil, reasons: [String]? = nil, deviceId: String?,
             at: Double) {
            (self.kind, self.itemId, self.mediaSourceId, self.playSessionId, self.positionTicks) = (kind, itemId, mediaSourceId, playSessionId, positionTicks)
            (self.isPaused, self.playMethod, self.failed, self.volume, self.reasons) = (isPaused, playMethod, failed, volume, reasons)
            (self.deviceId, self.at) = (deviceId, at)
        }

        var kind: String            // decision, start, progress, stopped, ping, stop-encoding
        var itemId: String?
        var mediaSourceId: String?
        var playSessionId: String?
        var positionTicks: Int64?
        var isPaused: Bool?
        var playMethod: String?
        var failed: Bool?
        var volume: Int?
        /// The streams a Playing or Progress report says are playing.
        var audioStreamIndex: Int?
        var subtitleStreamIndex: Int?
        /// A decision's TranscodeReason names (empty: direct play).
        var reasons: [String]?
        var deviceId: String?
        var at: Double              // seconds since 1970
    }

    private let reports = Locked<[Report]>([])
    /// Items whose media the stand-in serves as if it lived on another host (`POST
    /// /StandIn/Remote?item=`): PlaybackInfo names its URL, the universal endpoint redirects there.
    let remote = Locked<Set<String>>([])
    /// Play sessions PlaybackInfo opened: id → item.
    private let sessions = Locked<[String: String]>([:])

    func append(_ report: Report) { reports.withLock { $0.append(report) } }
    var all: [Report] { reports.withLock { $0 } }
    func open(playSession: String, item: String) { sessions.withLock { $0[playSession] = item } }
}

/// The resume rules of a real server on defaults: under 5 % of the runtime keeps no position,
/// over 90 % marks the item played (when playback stops) and clears the position.
enum ResumeRules {
    static let minPercent = 5.0, maxPercent = 90.0

    static func apply(_ data: inout StandInState.ItemData, positionTicks: Int64, runtimeTicks: Int64?, stopped: Bool) {
        data.lastPlayed = Date()
        guard let runtime = runtimeTicks, runtime > 0 else { data.positionTicks = positionTicks; return }
        let percent = Double(positionTicks) / Double(runtime) * 100
        if percent < minPercent {
            data.positionTicks = 0
        } else if percent > maxPercent {
            data.positionTicks = 0
            if stopped { data.played = true; data.playCount += 1 }
        } else {
            data.positionTicks = positionTicks
        }
    }
}

extension StandInAPI {
    // MARK: PlaybackInfo

    func getPostedPlaybackInfo(_ input: Operations.GetPostedPlaybackInfo.Input) async throws -> Operations.GetPostedPlaybackInfo.Output {
        if let channel = liveTV.channel(input.path.itemId) {
            var dto: Components.Schemas.PlaybackInfoDto?
            if case .json(let body)? = input.body { dto = body.value1 }
            let asked = [dto?.maxStreamingBitrate.map(Int.init), input.query.maxStreamingBitrate.map(Int.init)].compactMap { $0 }.min()
            return livePlaybackInfo(channel, profile: dto?.deviceProfile?.value1, maxBitrate: asked)
        }
        guard let item = library.item(input.path.itemId), let entry = item.entry, entry.path != nil,
              var source = library.mediaSource(item) else {
            return .notFound(.init(body: .json(Self.notFound)))
        }
        var dto: Components.Schemas.PlaybackInfoDto?
        if case .json(let body)? = input.body { dto = body.value1 }
        let profile = dto?.deviceProfile?.value1
        let asked = [dto?.maxStreamingBitrate.map(Int.init), input.query.maxStreamingBitrate.map(Int.init)].compactMap { $0 }.min()
        let isVideo = entry.streams.contains { $0.type == "Video" }
        let playSession = StandInState.randomHex(16)
        playback.open(playSession: playSession, item: item.id)
        if playback.remote.withLock({ $0.contains(item.id) }), var origin = URLComponents(string: publicURL()) {
            // Media on another host: the server names its URL (the universal endpoint redirects there).
            origin.path = "/StandIn/RemoteMedia/\(item.id).\(((entry.path ?? "") as NSString).pathExtension)"
            source.path = origin.string
            source._protocol = .init(value1: "Http")
            source.isRemote = true
        }
        var response = Components.Schemas.PlaybackInfoResponse()
        response.playSessionId = playSession
        let transcodingAllowed = dto?.enableTranscoding != false && input.query.enableTranscoding != false
        var method = "None"
        var reasons: [String]
        if isVideo, let profile {
            // Video: the server's StreamBuilder decision (StreamDecision.swift).
            var options = StreamDecision.Options()
            options.maxBitrate = asked
            options.audioStreamIndex = dto?.audioStreamIndex.map(Int.init) ?? input.query.audioStreamIndex.map(Int.init)
            options.subtitleStreamIndex = dto?.subtitleStreamIndex.map(Int.init) ?? input.query.subtitleStreamIndex.map(Int.init)
            options.enableDirectPlay = dto?.enableDirectPlay != false && input.query.enableDirectPlay != false
            options.enableDirectStream = dto?.enableDirectStream != false && input.query.enableDirectStream != false
            options.allowVideoCopy = dto?.allowVideoStreamCopy != false
            options.allowAudioCopy = dto?.allowAudioStreamCopy != false
            let decision = StreamDecision.decide(source, profile, options)
            reasons = decision.reasons.list
            source.supportsDirectPlay = decision.method == "DirectPlay"
            source.supportsDirectStream = decision.method == "DirectPlay" || decision.method == "DirectStream"
            source.supportsTranscoding = false
            if decision.method != "Transcode" {
                method = decision.method
            } else if transcodingAllowed, let token = Caller.current?.token?.token,
                      let url = Self.transcodingURL(item: item, entry: entry, decision: decision, ceiling: asked ?? profile.maxStreamingBitrate.map(Int.init),
                                                    playSession: playSession, token: token) {
                source.supportsTranscoding = true
                source.transcodingUrl = url
                source.transcodingSubProtocol = .init(value1: decision.subProtocol)
                source.transcodingContainer = decision.container
                // Subtitles inside the file do not reach the transcode (a real server would burn
                // them in); those beside it are still fetched from their DeliveryUrl.
                source.mediaStreams = source.mediaStreams?.map { stream in
                    var stream = stream
                    if stream._type?.value1 == "Subtitle", stream.isExternal != true { stream.deliveryMethod = .init(value1: "Drop") }
                    return stream
                }
                method = "Transcode"
            }
        } else {
            // Audio (and a caller with no profile): container, codec and bitrate against the
            // direct-play profiles; a transcode as the profile's first HTTP audio transcoding says.
            let ceiling = [asked, profile?.maxStaticBitrate.map(Int.init)].compactMap { $0 }.min()
            reasons = Self.directPlayRefusals(entry: entry, profile: profile, maxBitrate: ceiling)
            if dto?.enableDirectPlay == false || input.query.enableDirectPlay == false { reasons.append("DirectPlayError") }
            source.supportsDirectPlay = reasons.isEmpty
            source.supportsDirectStream = reasons.isEmpty
            source.supportsTranscoding = false
            if reasons.isEmpty {
                method = "DirectPlay"
            } else if transcodingAllowed, let token = Caller.current?.token?.token,
                      let url = Self.audioTranscodingURL(item: item, entry: entry, profile: profile, ceiling: ceiling, reasons: reasons,
                                                         playSession: playSession, token: token) {
                source.supportsTranscoding = true
                source.transcodingUrl = url.path
                source.transcodingSubProtocol = .init(value1: "http")
                source.transcodingContainer = url.container
                method = "Transcode"
            }
        }
        if method == "None" { response.errorCode = .init(value1: "NoCompatibleStream") }
        response.mediaSources = [source]
        playback.append(.init(kind: "decision", itemId: item.id, mediaSourceId: source.id, playSessionId: playSession,
                              playMethod: method, reasons: reasons, deviceId: Caller.current?.deviceId,
                              at: Date().timeIntervalSince1970))
        return .ok(.init(body: .json(response)))
    }

    /// The TranscodingUrl of a video decision, as a real server writes it: the bitrate split
    /// between picture and sound under the ceiling, the codecs and audio stream chosen, the
    /// reasons, the play session and the token. nil for what the stand-in cannot make (it makes
    /// HLS with fMP4 segments, or one progressive MP4).
    static func transcodingURL(item: Library.Item, entry: MediaCatalog.Entry, decision: StreamDecision.Decision, ceiling: Int?,
                               playSession: String, token: String) -> String? {
        guard decision.container?.lowercased() == "mp4" else { return nil }
        let hls = decision.subProtocol == "hls"
        let audioCodec = decision.audioCodecs.first ?? "aac"
        let budget = ceiling ?? entry.bitrate ?? 4_000_000
        let audioBitrate = min(128_000, max(32_000, budget / 4))
        var query: [(String, String)] = [("DeviceId", Caller.current?.deviceId ?? ""), ("MediaSourceId", item.id), ("PlaySessionId", playSession),
                                         ("VideoCodec", decision.videoCodecs.joined(separator: ",")), ("AudioCodec", audioCodec),
                                         ("VideoBitrate", "\(max(50_000, budget - audioBitrate))"), ("AudioBitrate", "\(audioBitrate)")]
        if hls { query += [("SegmentContainer", "mp4"), ("MinSegments", "\(decision.transcoding?.minSegments ?? 1)")] }
        if let audio = decision.audioStreamIndex { query.append(("AudioStreamIndex", "\(audio)")) }
        if let channels = decision.maxAudioChannels { query.append(("TranscodingMaxAudioChannels", "\(channels)")) }
        query += [("TranscodeReasons", decision.reasons.list.joined(separator: ",")), ("ApiKey", token)]
        var components = URLComponents()
        components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) }
        let path = hls ? "/videos/\(item.id)/master.m3u8" : "/Videos/\(item.id)/stream.mp4"
        return path + "?" + (components.percentEncodedQuery ?? "")
    }

    /// The TranscodingUrl of a music file under the profile's first HTTP audio transcoding (nil
    /// when it has none): a progressive AAC or MP3 stream.
    static func audioTranscodingURL(item: Library.Item, entry: MediaCatalog.Entry, profile: Components.Schemas.DeviceProfile?, ceiling: Int?,
                                    reasons: [String], playSession: String, token: String) -> (path: String, container: String)? {
        guard let transcoding = profile?.transcodingProfiles?.first(where: { $0._type?.value1 == "Audio" && $0._protocol?.value1 != "hls" }) else { return nil }
        let audioCodec = (transcoding.audioCodec ?? "aac").split(separator: ",").first.map(String.init) ?? "aac"
        let audioBitrate = min(320_000, max(32_000, ceiling ?? entry.bitrate ?? 320_000))
        let query: [(String, String)] = [("DeviceId", Caller.current?.deviceId ?? ""), ("MediaSourceId", item.id), ("PlaySessionId", playSession),
                                         ("AudioCodec", audioCodec), ("AudioBitrate", "\(audioBitrate)"),
                                         ("TranscodeReasons", reasons.joined(separator: ",")), ("ApiKey", token)]
        var components = URLComponents()
        components.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) }
        return ("/audio/\(item.id)/stream.\(audioCodec)?" + (components.percentEncodedQuery ?? ""), audioCodec)
    }

    /// Why `entry` cannot play as it is under `profile` (empty: it can), in the server's
    /// TranscodeReason names.
    static func directPlayRefusals(entry: MediaCatalog.Entry, profile: Components.Schemas.DeviceProfile?, maxBitrate: Int?) -> [String] {
        guard let profile else { return ["ContainerNotSupported"] }
        let isVideo = entry.streams.contains { $0.type == "Video" }
        let video = entry.streams.first { $0.type == "Video" }?.codec
        let audio = entry.streams.first { $0.type == "Audio" }?.codec
        func list(_ text: String?) -> [String] { (text ?? "").lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        let containers = Self.containerNames(entry.container ?? "")
        var best: [String]?
        for candidate in profile.directPlayProfiles ?? [] where (candidate._type?.value1 ?? "") == (isVideo ? "Video" : "Audio") {
            var reasons: [String] = []
            let allowed = list(candidate.container)
            if !allowed.isEmpty, !containers.contains(where: allowed.contains) { reasons.append("ContainerNotSupported") }
            let videoCodecs = list(candidate.videoCodec), audioCodecs = list(candidate.audioCodec)
            if let video, !videoCodecs.isEmpty, !videoCodecs.contains(video.lowercased()) { reasons.append("VideoCodecNotSupported") }
            if let audio, !audioCodecs.isEmpty, !audioCodecs.contains(audio.lowercased()) { reasons.append("AudioCodecNotSupported") }
            if reasons.isEmpty { best = []; break }
            if best == nil || reasons.count < best!.count { best = reasons }
        }
        var reasons = best ?? ["ContainerNotSupported"]
        if let maxBitrate, let bitrate = entry.bitrate, bitrate > maxBitrate { reasons.append("ContainerBitrateExceedsLimit") }
        return reasons
    }

    /// The names a profile may use for a container (`mkv` is also `matroska`; `mp4` also `m4v`, `mov`).
    static func containerNames(_ container: String) -> [String] {
        switch container.lowercased() {
        case "mkv", "matroska", "webm": return ["mkv", "matroska", "webm"]
        case "mp4", "mov", "m4v", "m4a": return ["mp4", "m4v", "mov", "m4a"]
        case "ts", "mpegts": return ["ts", "mpegts"]
        default: return [container.lowercased()]
        }
    }

    // MARK: reports

    // A report without a body says nothing: answered 204 and not kept (the spec lists no 400).

    private func record(_ kind: String, itemId: String?, mediaSourceId: String?, playSessionId: String?, positionTicks: Int64?,
                        isPaused: Bool?, playMethod: String?, failed: Bool? = nil, volume: Int32? = nil, streams: (Int32?, Int32?) = (nil, nil)) {
        var report = PlaybackLog.Report(kind: kind, itemId: itemId, mediaSourceId: mediaSourceId, playSessionId: playSessionId, positionTicks: positionTicks,
                                        isPaused: isPaused, playMethod: playMethod, failed: failed, volume: volume.map(Int.init),
                                        deviceId: Caller.current?.deviceId, at: Date().timeIntervalSince1970)
        (report.audioStreamIndex, report.subtitleStreamIndex) = (streams.0.map(Int.init), streams.1.map(Int.init))
        playback.append(report)
    }

    private func movePosition(_ itemId: String?, ticks: Int64?, stopped: Bool) {
        guard let itemId, let ticks, let item = library.item(itemId), let userId = Caller.current?.token?.userId else { return }
        _ = state.updateItemData(userId: userId, itemId: item.id) {
            ResumeRules.apply(&$0, positionTicks: ticks, runtimeTicks: item.entry?.runTimeTicks, stopped: stopped)
        }
        generation.withLock { $0 += 1 }
    }

    func reportPlaybackStart(_ input: Operations.ReportPlaybackStart.Input) async throws -> Operations.ReportPlaybackStart.Output {
        guard case .json(let body)? = input.body else { return .noContent(.init()) }
        let info = body.value1
        record("start", itemId: info.itemId, mediaSourceId: info.mediaSourceId, playSessionId: info.playSessionId,
               positionTicks: info.positionTicks, isPaused: info.isPaused, playMethod: info.playMethod?.value1, volume: info.volumeLevel,
               streams: (info.audioStreamIndex, info.subtitleStreamIndex))
        return .noContent(.init())
    }

    func reportPlaybackProgress(_ input: Operations.ReportPlaybackProgress.Input) async throws -> Operations.ReportPlaybackProgress.Output {
        guard case .json(let body)? = input.body else { return .noContent(.init()) }
        let info = body.value1
        record("progress", itemId: info.itemId, mediaSourceId: info.mediaSourceId, playSessionId: info.playSessionId,
               positionTicks: info.positionTicks, isPaused: info.isPaused, playMethod: info.playMethod?.value1, volume: info.volumeLevel,
               streams: (info.audioStreamIndex, info.subtitleStreamIndex))
        movePosition(info.itemId, ticks: info.positionTicks, stopped: false)
        return .noContent(.init())
    }

    func reportPlaybackStopped(_ input: Operations.ReportPlaybackStopped.Input) async throws -> Operations.ReportPlaybackStopped.Output {
        guard case .json(let body)? = input.body else { return .noContent(.init()) }
        let info = body.value1
        record("stopped", itemId: info.itemId, mediaSourceId: info.mediaSourceId, playSessionId: info.playSessionId,
               positionTicks: info.positionTicks, isPaused: nil, playMethod: nil, failed: info.failed)
        movePosition(info.itemId, ticks: info.positionTicks, stopped: true)
        return .noContent(.init())
    }

    func pingPlaybackSession(_ input: Operations.PingPlaybackSession.Input) async throws -> Operations.PingPlaybackSession.Output {
        record("ping", itemId: nil, mediaSourceId: nil, playSessionId: input.query.playSessionId, positionTicks: nil, isPaused: nil, playMethod: nil)
        return .noContent(.init())
    }

    func stopEncodingProcess(_ input: Operations.StopEncodingProcess.Input) async throws -> Operations.StopEncodingProcess.Output {
        record("stop-encoding", itemId: nil, mediaSourceId: nil, playSessionId: input.query.playSessionId, positionTicks: nil, isPaused: nil, playMethod: nil)
        transcodes.stop(session: input.query.playSessionId)
        return .noContent(.init())
    }
}

/// The media bytes: `/Videos/{id}/stream[.container]`, `/Audio/{id}/stream[.container]` and
/// `/Items/{id}/Download` (`static=true` serves the file as it is; the stand-in serves nothing
/// else), with single byte ranges (206, Content-Range; 416 past the end), token by header or
/// `ApiKey=`.
enum StreamRoutes {
    static func register(on router: Router<BasicRequestContext>, basePath: String, api: StandInAPI, state: StandInState) {
        let files = FileIO()
        @Sendable func serve(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
            let caller = StandInAuthMiddleware.caller(headers: request.headers, path: request.head.path ?? "", state: state)
            guard caller.token != nil else { return Response(status: .unauthorized) }
            guard var id = context.parameters.get("itemId") else { return Response(status: .notFound) }
            if let dot = id.firstIndex(of: ".") { id = String(id[..<dot]) }
            if let channel = api.liveTV.channel(id) {
                // A channel plays only through a live stream PlaybackInfo opened (and not closed).
                guard let live = request.uri.queryParameters["LiveStreamId"].map(String.init) ?? request.uri.queryParameters["liveStreamId"].map(String.init),
                      api.liveTV.openStreams.contains(live) else { return Response(status: .notFound) }
                return try api.liveTV.stream(channel)
            }
            guard let item = api.library.item(id), let relative = item.entry?.path, let size = item.entry?.size, size > 0 else {
                return Response(status: .notFound)
            }
            return try await file(api.library.mediaDirectory + "/" + relative, size: size, request: request, context: context, files: files)
        }
        for kind in ["Videos", "Audio"] {
            router.get("\(basePath)/\(kind)/:itemId/stream", use: serve)
            router.head("\(basePath)/\(kind)/:itemId/stream", use: serve)
        }
        // The original file as a download (a real server needs the user's download permission).
        router.get("\(basePath)/Items/:itemId/Download", use: serve)
        // An external subtitle stream, as its DeliveryUrl names it (the stand-in converts nothing:
        // it serves the .srt file beside the media, whatever format is asked).
        @Sendable func subtitle(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
            let caller = StandInAuthMiddleware.caller(headers: request.headers, path: request.head.path ?? "", state: state)
            guard caller.token != nil else { return Response(status: .unauthorized) }
            guard let id = context.parameters.get("itemId"), let index = context.parameters.get("index").flatMap(Int.init),
                  let item = api.library.item(id), let file = item.entry?.streams.first(where: { $0.index == index })?.externalFile,
                  let bytes = FileManager.default.contents(atPath: api.library.mediaDirectory + "/" + file) else {
                return Response(status: .notFound)
            }
            var headers = HTTPFields()
            headers[.contentType] = "text/plain; charset=utf-8"
            headers[.contentLength] = "\(bytes.count)"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
        }
        router.get("\(basePath)/Videos/:itemId/:sourceId/Subtitles/:index/:ticks/:file", use: subtitle)
        router.get("\(basePath)/Videos/:itemId/:sourceId/Subtitles/:index/:ticks", use: subtitle)   // …/{index}/Stream.srt
        router.get("/StandIn/PlaybackReports") { _, _ -> Response in
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: try encoder.encode(api.playback.all))))
        }
    }

    /// The file at `path` (`size` bytes) as asked: whole, or the one byte range asked (206; 416
    /// past its end). HEAD answers the headers alone.
    static func file(_ path: String, size: Int, request: Request, context: BasicRequestContext, files: FileIO) async throws -> Response {
        var headers = HTTPFields()
        headers[.contentType] = mimeType(path)
        headers[.acceptRanges] = "bytes"
        let head = request.method == .head
        guard let rangeHeader = request.headers[.range] else {
            headers[.contentLength] = "\(size)"
            return Response(status: .ok, headers: headers, body: head ? ResponseBody() : try await files.loadFile(path: path, context: context))
        }
        guard let range = byteRange(rangeHeader, size: size) else {
            headers[.contentRange] = "bytes */\(size)"
            return Response(status: .rangeNotSatisfiable, headers: headers)
        }
        headers[.contentRange] = "bytes \(range.lowerBound)-\(range.upperBound)/\(size)"
        headers[.contentLength] = "\(range.count)"
        return Response(status: .partialContent, headers: headers,
                        body: head ? ResponseBody() : try await files.loadFile(path: path, range: range, context: context))
    }

    /// One range of `bytes=A-B`, `bytes=A-` or `bytes=-N` within `size` bytes; nil when unsatisfiable.
    static func byteRange(_ header: String, size: Int) -> ClosedRange<Int>? {
        guard header.hasPrefix("bytes="), !header.contains(",") else { return nil }
        let spec = header.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard spec.count == 2 else { return nil }
        if spec[0].isEmpty {
            guard let suffix = Int(spec[1]), suffix > 0 else { return nil }
            return max(0, size - suffix)...(size - 1)
        }
        guard let start = Int(spec[0]), start >= 0, start < size else { return nil }
        if spec[1].isEmpty { return start...(size - 1) }
        guard let end = Int(spec[1]), end >= start else { return nil }
        return start...min(end, size - 1)
    }

    static func mimeType(_ path: String) -> String {
        switch path.split(separator: ".").last?.lowercased() {
        case "mp4", "m4v": return "video/mp4"
        case "mkv": return "video/x-matroska"
        case "flac": return "audio/flac"
        case "mp3": return "audio/mpeg"
        default: return "application/octet-stream"
        }
    }
}
