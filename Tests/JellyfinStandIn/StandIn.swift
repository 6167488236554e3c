import ArgumentParser
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Jellyfin
import Logging
import NIOCore
import OpenAPIHummingbird
import OpenAPIRuntime
import FarcastSupport

/// `jellyfin-standin`: a Jellyfin server stand-in for tests, the demo and the benchmark (no
/// Jellyfin server can run on these machines). Generated server stubs for the operations the
/// client uses, on Hummingbird, over an in-memory library of real media made with ffmpeg; the
/// auth rules of a 12.0 server on defaults; Quick Connect; the `/socket` live session with
/// ForceKeepAlive; optional UDP 7359 discovery. Listens on 127.0.0.1 only.
@main
struct StandIn: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jellyfin-standin",
        abstract: "A Jellyfin server stand-in on 127.0.0.1 (for tests and benchmarks).",
        discussion: """
            The first run makes the media (ffmpeg) and a user `demo` whose password is written to DIR/password. Test hooks live under /StandIn/ (POST): QuickConnect/Approve?code=, Revoke?user=, Send (a session message as the body), Position?item=&ticks=, Fault?path=&mode=truncated|wrong-types|huge|huge-declared|unknown-enums|not-json|status-500 (and for /Items/ID/Download: cut-half|lie-size) or clear; and (GET) Sockets, PlaybackReports (every playback report received, as JSON). Remote?item= (POST) makes an item's media remote (served from /StandIn/RemoteMedia/, which the universal endpoint redirects to); Decide (POST {Profile, Source, AudioStreamIndex, SubtitleStreamIndex, MaxBitrate, EnableDirectPlay, EnableDirectStream, CanExtractSubtitles}) and Decide/Subtitle (POST {Stream, Profiles, PlayMethod, CanExtract, Container, SubProtocol}) answer the playback decision for any profile and source; and (GET) Transcodes lists the transcodes on disk. Media plays from /Videos/ID/stream and /Audio/ID/stream and downloads from /Items/ID/Download, with byte ranges; music also streams from /Audio/ID/universal. PlaybackInfo decides as a real server's StreamBuilder does (direct play, direct stream or transcode, with its reasons); what cannot play as it is is transcoded with ffmpeg (HLS fMP4 for video, AAC or MP3 for audio).

            Example:
              scripts/jellyfin-standin --port 8096 --data /tmp/jf
            """
    )

    @Option(help: "TCP port (0: any free one; the port is printed).")
    var port: Int = 8096

    @Option(help: "The data folder (media, state, password).")
    var data: String

    @Option(help: "Address to listen on (loopback only unless you mean it).")
    var host: String = "127.0.0.1"

    @Option(help: "The ForceKeepAlive period announced on the socket, in seconds.")
    var keepAlive: Int = 60

    @Option(help: "Synthetic movies added to the library (the benchmark uses 20000).")
    var items: Int = 0

    @Option(help: "Serve under this base path (e.g. /jellyfin); requests outside it are redirected into it.")
    var basePath: String = ""

    @Option(help: "Answer 503 (starting up) for this many seconds after start.")
    var startingSeconds: Double = 0

    @Option(help: "Also answer LAN discovery on this UDP port (binds 0.0.0.0: use only in a private network namespace).")
    var discoveryPort: Int?

    @Option(help: "The server name.")
    var name: String = "Farcast Stand-in"

    @Flag(help: "Cache /Items listings until the library or user data changes (the benchmark uses it so the server is not what is measured).")
    var cacheListings = false

    @Option(help: "The length of Live TV programmes in the guide, in seconds (tests use a few).")
    var programmeSeconds: Int = 1800

    @Option(help: "Add a film \"Large File\" of at least this many MB (made once with ffmpeg; the download benchmark uses 2000).")
    var largeFileMb: Int?

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0…65535") }
        guard keepAlive >= 0 else { throw ValidationError("--keep-alive must be ≥ 0") }
        if let largeFileMb { guard (1...100_000).contains(largeFileMb) else { throw ValidationError("--large-file-mb must be 1…100000") } }
        guard basePath.isEmpty || (basePath.hasPrefix("/") && !basePath.hasSuffix("/")) else { throw ValidationError("--base-path must start with / and not end with one") }
        guard programmeSeconds >= 2 else { throw ValidationError("--programme-seconds must be at least 2") }
    }

    func run() async throws {
        var logger = Logger(label: "jellyfin-standin")
        logger.logLevel = .warning
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        var catalog = try MediaCatalog.loadOrMake(dataDirectory: data) { FileHandle.standardError.write(Data(($0 + "\n").utf8)) }
        if let largeFileMb {
            catalog.entries.append(try MediaCatalog.large(megabytes: largeFileMb, dataDirectory: data) { FileHandle.standardError.write(Data(($0 + "\n").utf8)) })
        }
        let state = try StandInState(dataDirectory: data)
        let liveTV = LiveTV(mediaDirectory: data + "/media", slotSeconds: programmeSeconds)
        let library = Library(catalog: catalog, mediaDirectory: data + "/media", serverId: state.serverId, syntheticMovies: items,
                              extraItems: { liveTV.item($0) })
        let hub = SocketHub()
        let boundPort = Locked(port)
        let host = host, basePath = basePath
        let api = StandInAPI(library: library, state: state, hub: hub, serverName: name,
                             publicURL: { "http://\(host):\(boundPort.withLock { $0 })\(basePath)" }, generation: Locked(0),
                             transcodes: Transcodes(root: data + "/transcodes"), liveTV: liveTV, syncPlay: SyncPlayGroups(hub: hub))
        let recorder = Task { await liveTV.runRecorder() }
        defer { recorder.cancel() }
        let faults = Locked<[String: String]>([:])
        let started = Date()

        let router = Router()
        try api.registerHandlers(on: router, serverURL: URL(string: basePath.isEmpty ? "/" : basePath) ?? URL(fileURLWithPath: "/"),
                                 // Compact JSON, as the real server writes it (the runtime's default is pretty-printed).
                                 configuration: Configuration(dateTranscoder: JellyfinDateTranscoder(), jsonEncodingOptions: []),
                                 middlewares: [StandInAuthMiddleware(state: state)])
        LegacyRoutes.register(on: router, basePath: basePath, api: api, state: state)
        StreamRoutes.register(on: router, basePath: basePath, api: api, state: state)
        Transcodes.register(on: router, basePath: basePath, api: api, state: state)
        UniversalAudio.register(on: router, basePath: basePath, api: api, state: state)
        TestHooks.register(on: router, api: api, state: state, hub: hub, faults: faults)

        let routerResponder = router.buildResponder()
        let cache = ListingCache(enabled: cacheListings)
        let startingSeconds = startingSeconds
        let front = CallbackResponder<BasicRequestContext> { request, context in
            try await FrontDoor.respond(to: request, context: context, inner: routerResponder, basePath: basePath, started: started,
                                        startingSeconds: startingSeconds, faults: faults, cache: cache, api: api, state: state)
        }

        let keepAlive = keepAlive
        let app = Application(
            responder: front,
            server: .http1WebSocketUpgrade { head, _, _ in
                try await SocketEndpoint.upgrade(head, basePath: basePath, state: state, hub: hub, api: api, keepAlive: keepAlive)
            },
            configuration: .init(address: .hostname(host, port: port), serverName: "Kestrel"),
            onServerRunning: { channel in
                let actual = channel.localAddress?.port ?? 0
                boundPort.withLock { $0 = actual }
                FileHandle.standardOutput.write(Data("jellyfin-standin listening on http://\(host):\(actual)\(basePath) (data \(data))\n".utf8))
            },
            logger: logger
        )
        var responder: DiscoveryResponder?
        if let discoveryPort {
            let serverId = state.serverId, name = name
            responder = try DiscoveryResponder(port: UInt16(discoveryPort)) {
                let address = "http://\(host == "0.0.0.0" ? "127.0.0.1" : host):\(boundPort.withLock { $0 })\(basePath)"
                return Array(#"{"Address":"\#(address)","Id":"\#(serverId)","Name":"\#(name)","EndpointAddress":null}"#.utf8)
            }
        }
        _ = responder
        try await app.runService()
        hub.closeAll()
    }
}

/// Auth for the generated operations, as a 12.0 server on defaults does it: the token comes
/// from `Authorization: MediaBrowser …, Token="…"` or the `ApiKey` query parameter (any case);
/// `api_key`, `X-Emby-Token`, `X-Emby-Authorization` and the `Emby` scheme are ignored.
struct StandInAuthMiddleware: ServerMiddleware {
    let state: StandInState
    static let publicOperations: Set<String> = ["GetPublicSystemInfo", "GetPingSystem", "GetPublicUsers", "AuthenticateUserByName",
                                                "GetQuickConnectEnabled", "InitiateQuickConnect", "GetQuickConnectState",
                                                "AuthenticateWithQuickConnect", "GetItemImage"]

    static func caller(headers: HTTPFields, path: String, state: StandInState) -> Caller {
        var fields: [String: String] = [:]
        if let header = headers[.authorization], let parsed = AuthorizationHeader.parse(header) { fields = parsed }
        var token = fields["Token"]
        if token == nil, let query = path.split(separator: "?", maxSplits: 1).dropFirst().first {
            for pair in query.split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].lowercased() == "apikey" { token = AuthorizationHeader.percentDecode(String(parts[1])) }
            }
        }
        let known = token.flatMap { state.token($0) }
        return Caller(client: fields["Client"] ?? known?.client ?? "", device: fields["Device"] ?? known?.device ?? "",
                      deviceId: fields["DeviceId"] ?? known?.deviceId ?? "", version: fields["Version"] ?? known?.version ?? "", token: known)
    }

    func intercept(_ request: HTTPRequest, body: HTTPBody?, metadata: ServerRequestMetadata, operationID: String,
                   next: @Sendable (HTTPRequest, HTTPBody?, ServerRequestMetadata) async throws -> (HTTPResponse, HTTPBody?)) async throws -> (HTTPResponse, HTTPBody?) {
        let caller = Self.caller(headers: request.headerFields, path: request.path ?? "", state: state)
        if caller.token == nil && !Self.publicOperations.contains(operationID) {
            return (HTTPResponse(status: .unauthorized), nil)
        }
        // An empty body is no body: the generated code would try to decode it as JSON and fail
        // with a 500, where an operation whose body is optional must go on without one.
        // (Hummingbird streams bodies of unknown length: read it, the stand-in's are small.)
        var given = body
        if let body {
            let bytes = try await [UInt8](collecting: body, upTo: 16 << 20)
            given = bytes.isEmpty ? nil : HTTPBody(bytes)
        }
        do {
            return try await Caller.$current.withValue(caller) { try await next(request, given, metadata) }
        } catch let error as ServerError where error.underlyingError is DecodingError {
            // A body that does not bind (a number too large for its type, a string for a
            // number) is the caller's mistake: a real server's model binding answers 400.
            return (HTTPResponse(status: .badRequest), nil)
        }
    }
}
