import FarcastSupport
import Foundation
import HTTPTypes
import Hummingbird
import Jellyfin
import NIOCore

/// `GET|HEAD /Audio/{id}/universal`, the endpoint music players stream through, answered as a
/// real server does: the query becomes a device profile (each `Container` entry `flac|flac` a
/// direct-play profile for that container and those codecs; `TranscodingContainer`,
/// `AudioCodec` and `TranscodingProtocol` the transcoding one) and the source is judged as
/// PlaybackInfo judges it. Then, in the server's order:
/// - remote media (an item `POST /StandIn/Remote?item=` made remote) that plays as it is is
///   redirected to where it lives (302) when `EnableRemoteMedia=true` and `EnableRedirection`
///   is not false;
/// - a file that plays as it is is sent as it is (byte ranges);
/// - anything else is encoded (AAC or MP3, progressive) and sent with no length; the stand-in
///   makes it whole first (its tracks are seconds long) and removes it once sent. HLS audio
///   (`TranscodingProtocol=hls`) is not made: answered 400 with the reason.
/// Each answer is logged as a `universal` report (`GET /StandIn/PlaybackReports`) with the play
/// method (`Redirect` for a redirect) and the reasons. `/StandIn/RemoteMedia/{id}.{ext}` stands
/// for the other host (no token: it is not the server).
enum UniversalAudio {
    static func register(on router: Router<BasicRequestContext>, basePath: String, api: StandInAPI, state: StandInState) {
        let files = FileIO()
        @Sendable func serve(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
            let caller = StandInAuthMiddleware.caller(headers: request.headers, path: request.head.path ?? "", state: state)
            guard caller.token != nil else { return Response(status: .unauthorized) }
            guard let id = context.parameters.get("itemId"), let item = api.library.item(id), let entry = item.entry,
                  let relative = entry.path, let size = entry.size else {
                return Response(status: .notFound)
            }
            // ASP.NET binds query names in any case.
            var query: [String: String] = [:]
            for (key, value) in request.uri.queryParameters { query[String(key).lowercased()] = String(value) }
            func flag(_ name: String) -> Bool? { query[name].map { $0.lowercased() == "true" } }
            let profile = Self.profile(query)
            let ceiling = query["maxstreamingbitrate"].flatMap(Int.init)
            let reasons = StandInAPI.directPlayRefusals(entry: entry, profile: profile, maxBitrate: ceiling)
            func log(_ method: String) {
                api.playback.append(.init(kind: "universal", itemId: item.id, mediaSourceId: query["mediasourceid"], playMethod: method,
                                          reasons: reasons, deviceId: caller.deviceId.isEmpty ? query["deviceid"] : caller.deviceId, at: Date().timeIntervalSince1970))
            }
            let ext = (relative as NSString).pathExtension
            if reasons.isEmpty, api.playback.remote.withLock({ $0.contains(item.id) }), flag("enableremotemedia") == true,
               flag("enableredirection") != false {
                log("Redirect")
                let host = request.head.authority ?? "127.0.0.1"
                var headers = HTTPFields()
                headers[.location] = "http://\(host)/StandIn/RemoteMedia/\(item.id).\(ext)"
                return Response(status: .found, headers: headers)
            }
            let path = api.library.mediaDirectory + "/" + relative
            if reasons.isEmpty {
                log("DirectPlay")
                return try await StreamRoutes.file(path, size: size, request: request, context: context, files: files)
            }
            if query["transcodingprotocol"]?.lowercased() == "hls" {
                return Response(status: .badRequest, body: ResponseBody(byteBuffer: ByteBuffer(
                    string: "the stand-in does not make HLS audio: ask with TranscodingProtocol=http")))
            }
            log("Transcode")
            let codec = (query["audiocodec"] ?? query["transcodingcontainer"] ?? "mp3").lowercased() == "aac" ? "aac" : "mp3"
            var headers = HTTPFields()
            headers[.contentType] = codec == "aac" ? "audio/aac" : "audio/mpeg"
            if request.method == .head { return Response(status: .ok, headers: headers) }
            let bitrate = min(320_000, max(32_000, query["audiobitrate"].flatMap(Int.init) ?? ceiling ?? 192_000))
            let channels = query["transcodingaudiochannels"].flatMap(Int.init) ?? query["maxaudiochannels"].flatMap(Int.init) ?? 2
            let folder = api.transcodes.root + "/universal-" + StandInState.randomHex(8)
            let bytes: Data = try await Task.detached {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                defer { try? FileManager.default.removeItem(atPath: folder) }
                let output = folder + "/out." + codec
                try Tool.run(try Tool.find("ffmpeg"), ["-v", "error", "-y", "-i", path, "-vn", "-c:a", codec == "aac" ? "aac" : "libmp3lame",
                                                       "-b:a", "\(bitrate)", "-ac", "\(max(1, min(8, channels)))", output])
                return try Data(contentsOf: URL(fileURLWithPath: output))
            }.value
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
        router.get("\(basePath)/Audio/:itemId/universal", use: serve)
        router.head("\(basePath)/Audio/:itemId/universal", use: serve)

        @Sendable func remote(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
            guard let name = context.parameters.get("file"), let dot = name.firstIndex(of: ".") else { return Response(status: .notFound) }
            let id = String(name[..<dot])
            guard api.playback.remote.withLock({ $0.contains(id) }), let item = api.library.item(id), let relative = item.entry?.path,
                  let size = item.entry?.size else {
                return Response(status: .notFound)
            }
            api.playback.append(.init(kind: "remote-fetch", itemId: item.id, deviceId: nil, at: Date().timeIntervalSince1970))
            return try await StreamRoutes.file(api.library.mediaDirectory + "/" + relative, size: size, request: request, context: context, files: files)
        }
        router.get("/StandIn/RemoteMedia/:file", use: remote)
        router.head("/StandIn/RemoteMedia/:file", use: remote)
        router.post("/StandIn/Remote") { request, _ -> Response in
            guard let id = request.uri.queryParameters["item"].map(String.init), let item = api.library.item(id), item.entry?.path != nil else {
                return Response(status: .notFound)
            }
            api.playback.remote.withLock { _ = $0.insert(item.id) }
            return Response(status: .ok)
        }
    }

    /// The device profile a universal request stands for, as the real server builds it.
    static func profile(_ query: [String: String]) -> Components.Schemas.DeviceProfile {
        var profile = Components.Schemas.DeviceProfile()
        profile.directPlayProfiles = (query["container"] ?? "").split(separator: ",").compactMap { element in
            let parts = element.split(separator: "|").map(String.init)
            guard let container = parts.first, !container.isEmpty else { return nil }
            var direct = Components.Schemas.DirectPlayProfile()
            direct._type = .init(value1: "Audio")
            direct.container = container
            if parts.count > 1 { direct.audioCodec = parts.dropFirst().joined(separator: ",") }
            return direct
        }
        var transcoding = Components.Schemas.TranscodingProfile()
        transcoding._type = .init(value1: "Audio")
        transcoding.container = query["transcodingcontainer"] ?? "mp3"
        transcoding.audioCodec = query["audiocodec"] ?? "mp3"
        transcoding._protocol = .init(value1: query["transcodingprotocol"] ?? "http")
        profile.transcodingProfiles = [transcoding]
        return profile
    }
}
