import FarcastSupport
import Foundation
import Hummingbird
import NIOCore
import Synchronization
import Jellyfin

/// The stand-in's test hooks (no auth; the stand-in listens on loopback only): approve a Quick
/// Connect code, revoke a user's tokens, push a session message, set a resume position, and
/// switch malformed answers on and off for a path.
enum TestHooks {
    static func register(on router: Router<BasicRequestContext>, api: StandInAPI, state: StandInState, hub: SocketHub,
                         faults: Locked<[String: String]>) {
        @Sendable func user(_ request: Request) -> StandInState.User? {
            let name = request.uri.queryParameters["user"].map(String.init) ?? "demo"
            return state.users.first { $0.name.caseInsensitiveCompare(name) == .orderedSame || $0.id == name }
        }
        router.post("/StandIn/QuickConnect/Approve") { request, _ -> Response in
            guard let code = request.uri.queryParameters["code"].map(String.init), let user = user(request),
                  state.approveQuickConnect(code: code, userId: user.id) else {
                return Response(status: .notFound, body: ResponseBody(byteBuffer: ByteBuffer(string: "no pending request with that code")))
            }
            return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "approved for \(user.name)")))
        }
        router.post("/StandIn/Revoke") { request, _ -> Response in
            guard let user = user(request) else { return Response(status: .notFound) }
            let revoked = state.revokeAll(userId: user.id)
            for token in revoked { hub.close(token: token) }
            return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "\(revoked.count)")))
        }
        router.post("/StandIn/Send") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            let sent = hub.send(String(buffer: body))
            return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "\(sent)")))
        }
        router.post("/StandIn/Position") { request, _ -> Response in
            guard let user = user(request), let item = request.uri.queryParameters["item"].map(String.init),
                  let ticks = request.uri.queryParameters["ticks"].flatMap({ Int64(String($0)) }),
                  api.setPosition(userId: user.id, itemId: item, ticks: ticks) else { return Response(status: .notFound) }
            return Response(status: .ok)
        }
        router.post("/StandIn/Fault") { request, _ -> Response in
            guard let path = request.uri.queryParameters["path"].map(String.init), let mode = request.uri.queryParameters["mode"].map(String.init) else {
                return Response(status: .badRequest)
            }
            faults.withLock { if mode == "clear" { $0.removeValue(forKey: path) } else { $0[path] = mode } }
            return Response(status: .ok)
        }
        // The playback decision on any profile and source (the StreamBuilder cases run through it).
        router.post("/StandIn/Decide") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 4 << 20)
            guard let asked = try? JSONDecoder().decode(DecideRequest.self, from: Data(buffer: body)) else {
                return Response(status: .badRequest, body: ResponseBody(byteBuffer: ByteBuffer(string: "expected {Profile, Source, …} as JSON")))
            }
            var options = StreamDecision.Options()
            options.maxBitrate = asked.MaxBitrate
            options.audioStreamIndex = asked.AudioStreamIndex
            options.subtitleStreamIndex = asked.SubtitleStreamIndex
            options.enableDirectPlay = asked.EnableDirectPlay ?? true
            options.enableDirectStream = asked.EnableDirectStream ?? true
            options.canExtractSubtitles = asked.CanExtractSubtitles ?? true
            let decision = StreamDecision.decide(asked.Source, asked.Profile, options)
            let answer = DecideAnswer(PlayMethod: decision.method, TranscodeReasons: decision.reasons.list, Container: decision.container,
                                      SubProtocol: decision.subProtocol, AudioStreamIndex: decision.audioStreamIndex,
                                      SubtitleStreamIndex: decision.subtitleStreamIndex, VideoCodecs: decision.videoCodecs,
                                      AudioCodecs: decision.audioCodecs, TranscodingMaxAudioChannels: decision.maxAudioChannels,
                                      AudioChannels: decision.audioChannels, SubtitleDeliveryMethod: decision.subtitleDelivery)
            return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(bytes: try JSONEncoder().encode(answer))))
        }
        router.post("/StandIn/Decide/Subtitle") { request, _ -> Response in
            let body = try await request.body.collect(upTo: 1 << 20)
            guard let asked = try? JSONDecoder().decode(SubtitleRequest.self, from: Data(buffer: body)) else {
                return Response(status: .badRequest, body: ResponseBody(byteBuffer: ByteBuffer(string: "expected {Stream, Profiles, PlayMethod, …} as JSON")))
            }
            let method = StreamDecision.delivery(asked.Stream, asked.Profiles, playMethod: asked.PlayMethod, canExtract: asked.CanExtract,
                                                 container: asked.Container, subProtocol: asked.SubProtocol)
            return Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: method)))
        }
        router.get("/StandIn/SyncPlay") { _, _ -> Response in
            Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(bytes: try JSONEncoder().encode(api.syncPlay.sent))))
        }
        router.get("/StandIn/LiveStreams") { _, _ -> Response in
            Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(bytes: try JSONEncoder().encode(api.liveTV.openStreams))))
        }
        router.get("/StandIn/Sockets") { _, _ -> Response in
            Response(status: .ok, body: ResponseBody(byteBuffer: ByteBuffer(string: "\(hub.count)")))
        }
    }
}

// The Decide hooks' bodies, named as the API names things.
struct DecideRequest: Decodable {
    var Profile: StreamDecision.Profile
    var Source: StreamDecision.Source
    var AudioStreamIndex: Int?
    var SubtitleStreamIndex: Int?
    var MaxBitrate: Int?
    var EnableDirectPlay: Bool?
    var EnableDirectStream: Bool?
    var CanExtractSubtitles: Bool?
}

struct DecideAnswer: Encodable {
    var PlayMethod: String
    var TranscodeReasons: [String]
    var Container: String?
    var SubProtocol: String
    var AudioStreamIndex: Int?
    var SubtitleStreamIndex: Int?
    var VideoCodecs: [String]
    var AudioCodecs: [String]
    var TranscodingMaxAudioChannels: Int?
    var AudioChannels: Int?
    var SubtitleDeliveryMethod: String?
}

struct SubtitleRequest: Decodable {
    var Stream: StreamDecision.Stream
    var Profiles: [Components.Schemas.SubtitleProfile]
    var PlayMethod: String
    var CanExtract: Bool
    var Container: String?
    var SubProtocol: String?
}
