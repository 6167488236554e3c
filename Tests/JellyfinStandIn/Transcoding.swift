import FarcastSupport
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The stand-in's transcodes, made by Debian's ffmpeg as a real server's are: a video that
/// cannot play as it is becomes HLS with fMP4 segments (`/videos/{id}/master.m3u8`, its
/// `main.m3u8` and `hls1/main/N.mp4`), an audio file an AAC or MP3 stream
/// (`/audio/{id}/stream.aac`), a download's transcode a fragmented MP4 sent with no length
/// (`/Videos/{id}/stream.mp4?static=false`). Each play session has one job, made whole on its first request
/// (the stand-in's media are seconds long) in `DATA/transcodes/SESSION`, and removed when the
/// client stops the encoding (`DELETE /Videos/ActiveEncodings`) or the stand-in starts again.
/// Segment URIs carry the query of the playlist that names them (the token with it), as a real
/// server writes them.
final class Transcodes: Sendable {
    let root: String
    private let jobs = Locked<[String: Task<Job, any Error>]>([:])

    struct Job: Sendable {
        var folder: String
        var playlist: String?     // ffmpeg's media playlist (HLS)
        var output: String?       // the one file (audio)
        var width: Int?
        var height: Int?
        var bandwidth: Int
    }

    /// What a TranscodingUrl asks for (its query, as the stand-in writes it).
    struct Request: Sendable {
        var itemId: String
        var session: String
        var input: String
        var videoBitrate: Int
        var audioBitrate: Int
        var audioStreamIndex: Int?
        var audioCodec: String
        var audioOnly: Bool
    }

    init(root: String) {
        self.root = root
        try? FileManager.default.removeItem(atPath: root)
        try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    /// The play sessions with a transcode on disk.
    var active: [String] { jobs.withLock { Array($0.keys).sorted() } }

    /// The job of `request.session`, made on first use (later requests wait for the same one).
    func job(_ request: Request) async throws -> Job {
        let task = jobs.withLock { jobs -> Task<Job, any Error> in
            if let running = jobs[request.session] { return running }
            let root = self.root
            let task = Task.detached { try Self.make(request, in: root + "/" + Self.safe(request.session)) }
            jobs[request.session] = task
            return task
        }
        return try await task.value
    }

    /// Stops and removes the session's transcode; false when it had none.
    @discardableResult
    func stop(session: String) -> Bool {
        guard let task = jobs.withLock({ $0.removeValue(forKey: session) }) else { return false }
        task.cancel()
        try? FileManager.default.removeItem(atPath: root + "/" + Self.safe(session))
        return true
    }

    static func safe(_ text: String) -> String { String(text.filter { $0.isLetter || $0.isNumber }.prefix(64)) }

    private static func make(_ request: Request, in folder: String) throws -> Job {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let ffmpeg = try Tool.find("ffmpeg")
        let audioMap = request.audioStreamIndex.map { "0:\($0)" } ?? "0:a:0"
        let audio = ["-map", audioMap, "-c:a", request.audioCodec == "mp3" ? "libmp3lame" : "aac", "-b:a", "\(request.audioBitrate)", "-ac", "2"]
        if request.audioOnly {
            let output = folder + "/stream." + (request.audioCodec == "mp3" ? "mp3" : "aac")
            try Tool.run(ffmpeg, ["-v", "error", "-y", "-i", request.input, "-vn"] + audio + [output])
            return Job(folder: folder, output: output, bandwidth: request.audioBitrate)
        }
        // A small picture for a small bitrate, as a real server scales to fit.
        let height = request.videoBitrate < 300_000 ? 144 : 240
        let playlist = folder + "/ffmpeg.m3u8"
        try Tool.run(ffmpeg, ["-v", "error", "-y", "-i", request.input, "-map", "0:v:0"] + audio + [
            "-vf", "scale=-2:\(height)", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
            "-b:v", "\(request.videoBitrate)", "-maxrate", "\(request.videoBitrate)", "-bufsize", "\(2 * request.videoBitrate)",
            "-g", "25", "-keyint_min", "25", "-sc_threshold", "0",
            "-f", "hls", "-hls_time", "1", "-hls_playlist_type", "vod", "-hls_segment_type", "fmp4",
            "-hls_fmp4_init_filename", "init.mp4", "-hls_segment_filename", folder + "/%d.mp4", playlist,
        ])
        return Job(folder: folder, playlist: playlist, width: height * 4 / 3, height: height, bandwidth: request.videoBitrate + request.audioBitrate)
    }

    /// The request a TranscodingUrl's query stands for.
    static func request(itemId: String, query: [String: String], api: StandInAPI, audioOnly: Bool) -> Request? {
        guard let session = query["PlaySessionId"], !session.isEmpty, let item = api.library.item(itemId),
              let path = item.entry?.path else { return nil }
        return Request(itemId: item.id, session: session, input: api.library.mediaDirectory + "/" + path,
                       videoBitrate: max(50_000, Int(query["VideoBitrate"] ?? "") ?? 1_000_000),
                       audioBitrate: max(32_000, Int(query["AudioBitrate"] ?? "") ?? 128_000),
                       audioStreamIndex: query["AudioStreamIndex"].flatMap(Int.init), audioCodec: query["AudioCodec"]?.split(separator: ",").first.map(String.init) ?? "aac",
                       audioOnly: audioOnly)
    }

    static func register(on router: Router<BasicRequestContext>, basePath: String, api: StandInAPI, state: StandInState) {
        @Sendable func query(_ request: Request_) -> [String: String] {
            var values: [String: String] = [:]
            for (key, value) in request.uri.queryParameters { values[String(key)] = String(value) }
            return values
        }
        @Sendable func authorized(_ request: Request_) -> Bool {
            StandInAuthMiddleware.caller(headers: request.headers, path: request.head.path ?? "", state: state).token != nil
        }
        @Sendable func text(_ body: String, type: String) -> Response {
            var headers = HTTPFields()
            headers[.contentType] = type
            headers[.contentLength] = "\(body.utf8.count)"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
        }
        @Sendable func file(_ path: String, type: String) -> Response {
            guard let bytes = FileManager.default.contents(atPath: path) else { return Response(status: .notFound) }
            var headers = HTTPFields()
            headers[.contentType] = type
            headers[.contentLength] = "\(bytes.count)"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
        }
        @Sendable func job(_ request: Request_, _ context: BasicRequestContext, audioOnly: Bool) async throws -> (Job, String)? {
            guard let id = context.parameters.get("itemId"),
                  let wanted = Self.request(itemId: id, query: query(request), api: api, audioOnly: audioOnly) else { return nil }
            return (try await api.transcodes.job(wanted), request.uri.query ?? "")
        }
        router.get("\(basePath)/videos/:itemId/master.m3u8") { request, context -> Response in
            guard authorized(request) else { return Response(status: .unauthorized) }
            guard let (job, query) = try await job(request, context, audioOnly: false) else { return Response(status: .notFound) }
            return text("""
                #EXTM3U
                #EXT-X-STREAM-INF:BANDWIDTH=\(job.bandwidth),AVERAGE-BANDWIDTH=\(job.bandwidth),CODECS="avc1.42c01e,mp4a.40.2",RESOLUTION=\(job.width ?? 0)x\(job.height ?? 0)
                main.m3u8?\(query)

                """, type: "application/vnd.apple.mpegurl")
        }
        router.get("\(basePath)/videos/:itemId/main.m3u8") { request, context -> Response in
            guard authorized(request) else { return Response(status: .unauthorized) }
            guard let (job, query) = try await job(request, context, audioOnly: false), let playlist = job.playlist,
                  let written = try? String(contentsOfFile: playlist, encoding: .utf8) else { return Response(status: .notFound) }
            // ffmpeg names the files; the client asks for them under hls1/main/ with the query.
            let lines = written.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
                if line.hasPrefix("#EXT-X-MAP:URI=\"") {
                    let name = line.dropFirst(16).prefix { $0 != "\"" }
                    return "#EXT-X-MAP:URI=\"hls1/main/\(name)?\(query)\""
                }
                if !line.hasPrefix("#"), !line.isEmpty { return "hls1/main/\(line)?\(query)" }
                return String(line)
            }
            return text(lines.joined(separator: "\n"), type: "application/vnd.apple.mpegurl")
        }
        router.get("\(basePath)/videos/:itemId/hls1/:playlist/:segment") { request, context -> Response in
            guard authorized(request) else { return Response(status: .unauthorized) }
            guard let segment = context.parameters.get("segment"), segment.hasSuffix(".mp4"), !segment.contains("/"), !segment.hasPrefix("."),
                  let (job, _) = try await job(request, context, audioOnly: false) else { return Response(status: .notFound) }
            return file(job.folder + "/" + segment, type: "video/mp4")
        }
        for ext in ["aac", "mp3"] {
            router.get("\(basePath)/audio/:itemId/stream.\(ext)") { request, context -> Response in
                guard authorized(request) else { return Response(status: .unauthorized) }
                guard let (job, _) = try await job(request, context, audioOnly: true), let output = job.output else { return Response(status: .notFound) }
                return file(output, type: ext == "aac" ? "audio/aac" : "audio/mpeg")
            }
        }
        // A progressive transcode (what a transcoded download asks for): made whole, then sent
        // with no length, chunked, as a real server streams a transcode it is still making.
        router.get("\(basePath)/Videos/:itemId/stream.mp4") { request, context -> Response in
            guard authorized(request) else { return Response(status: .unauthorized) }
            let values = query(request)
            guard values["static"]?.lowercased() != "true", let id = context.parameters.get("itemId"), let item = api.library.item(id),
                  let path = item.entry?.path, item.entry?.streams.contains(where: { $0.type == "Video" }) == true else {
                return Response(status: .notFound)
            }
            let folder = api.transcodes.root + "/progressive-" + StandInState.randomHex(8)
            let maxHeight = max(144, Int(values["MaxHeight"] ?? "") ?? 720)
            let videoBitrate = max(50_000, Int(values["VideoBitrate"] ?? "") ?? 2_000_000)
            let audioBitrate = max(32_000, Int(values["AudioBitrate"] ?? "") ?? 128_000)
            let input = api.library.mediaDirectory + "/" + path
            let bytes: Data = try await Task.detached {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(atPath: folder) }
                try Tool.run(try Tool.find("ffmpeg"), ["-v", "error", "-y", "-i", input, "-map", "0:v:0", "-map", "0:a:0",
                                                       "-vf", "scale=-2:'min(ih,\(maxHeight))'", "-c:v", "libx264", "-preset", "ultrafast",
                                                       "-pix_fmt", "yuv420p", "-b:v", "\(videoBitrate)", "-c:a", "aac", "-b:a", "\(audioBitrate)", "-ac", "2",
                                                       "-movflags", "frag_keyframe+empty_moov", "-f", "mp4", folder + "/out.mp4"])
                return try Data(contentsOf: URL(fileURLWithPath: folder + "/out.mp4"))
            }.value
            var headers = HTTPFields()
            headers[.contentType] = "video/mp4"
            return Response(status: .ok, headers: headers, body: ResponseBody { writer in
                var offset = 0
                while offset < bytes.count {
                    let end = min(bytes.count, offset + 16384)
                    try await writer.write(ByteBuffer(bytes: bytes[offset..<end]))
                    offset = end
                }
                try await writer.finish(nil)
            })
        }
        router.get("/StandIn/Transcodes") { _, _ -> Response in
            text((try? String(decoding: JSONEncoder().encode(api.transcodes.active), as: UTF8.self)) ?? "[]", type: "application/json")
        }
    }

    typealias Request_ = Hummingbird.Request
}
