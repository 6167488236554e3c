import FarcastSupport
import Foundation
import HTTPTypes
import Hummingbird
import Jellyfin
import NIOCore
import Synchronization

/// What happens to a request before the router sees it, as on a real server:
/// - 503 with `Retry-After` while "starting" (`--starting-seconds`);
/// - outside the base path: a redirect into it (a reverse proxy's habit);
/// - routes matched case-insensitively (ASP.NET routing is), JSON body keys too (`username`
///   binds to `Username`), by rewriting them to the spec's spelling;
/// - test faults (malformed answers) for a path;
/// - `image/*` from the generated stubs replaced by the image's real type;
/// - an optional cache of listing answers (the benchmark's, so the server is not measured).
enum FrontDoor {
    /// Route templates, spelled as the spec and the legacy routes spell them.
    static let templates: [[String]] = {
        let spec = ["/System/Info/Public", "/System/Ping", "/Users/Public", "/Users/Me", "/Users/AuthenticateByName",
                    "/Users/AuthenticateWithQuickConnect", "/QuickConnect/Enabled", "/QuickConnect/Initiate", "/QuickConnect/Connect",
                    "/QuickConnect/Authorize", "/Sessions/Logout", "/Sessions/Capabilities/Full", "/Sessions", "/UserViews", "/Items",
                    "/Items/Latest", "/Items/{id}", "/Items/{id}/Images/{type}", "/UserItems/Resume", "/Shows/NextUp",
                    "/Shows/{id}/Seasons", "/Shows/{id}/Episodes", "/Search/Hints", "/UserPlayedItems/{id}", "/UserFavoriteItems/{id}",
                    "/Users/{id}/Views", "/Users/{id}/Items", "/Users/{id}/Items/{id}"]
        return spec.map { $0.split(separator: "/").map(String.init) }
    }()

    static func canonical(_ path: String) -> String {
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        for template in templates where template.count == segments.count {
            var rebuilt: [String] = []
            var matches = true
            for (t, s) in zip(template, segments) {
                if t.hasPrefix("{") { rebuilt.append(s) } else if t.caseInsensitiveCompare(s) == .orderedSame { rebuilt.append(t) } else { matches = false; break }
            }
            // A literal that is also an id slot (/Items/Latest vs /Items/{id}): prefer the literal.
            if matches { return "/" + rebuilt.joined(separator: "/") }
        }
        return path
    }

    static func respond(to request: Request, context: BasicRequestContext, inner: RouterResponder<BasicRequestContext>, basePath: String,
                        started: Date, startingSeconds: Double, faults: Locked<[String: String]>, cache: ListingCache,
                        api: StandInAPI, state: StandInState) async throws -> Response {
        let full = request.head.path ?? "/"
        let pathOnly = String(full.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "/")
        let query = full.dropFirst(pathOnly.count)
        if pathOnly.hasPrefix("/StandIn/") { return try await inner.respond(to: request, context: context) }

        let elapsed = Date().timeIntervalSince(started)
        if elapsed < startingSeconds {
            var headers = HTTPFields()
            headers[.retryAfter] = String(max(1, Int((startingSeconds - elapsed).rounded(.up))))
            headers[HTTPField.Name("Message")!] = "Server is starting up."
            headers[.contentType] = "text/html"
            return Response(status: .serviceUnavailable, headers: headers,
                            body: ResponseBody(byteBuffer: ByteBuffer(string: "<html><body>Jellyfin is starting up.</body></html>")))
        }
        var relative = pathOnly
        if !basePath.isEmpty {
            guard pathOnly.lowercased().hasPrefix(basePath.lowercased() + "/") || pathOnly.lowercased() == basePath.lowercased() else {
                var headers = HTTPFields()
                headers[.location] = basePath + full
                return Response(status: .movedPermanently, headers: headers)
            }
            relative = String(pathOnly.dropFirst(basePath.count))
        }
        let canonicalPath = canonical(relative)
        if let mode = faults.withLock({ $0[canonicalPath] }) {
            return FaultResponses.response(mode: mode, path: canonicalPath, api: api)
        }

        var head = request.head
        head.path = basePath + canonicalPath + query
        var body = request.body
        if request.method == .post, let type = request.headers[.contentType], type.lowercased().hasPrefix("application/json") {
            var collected = request
            let buffer = try await collected.collectBody(upTo: 1 << 20)
            body = RequestBody(buffer: ByteBuffer(bytes: pascalCaseKeys(Array(buffer.readableBytesView))))
        }
        let rewritten = Request(head: head, body: body)

        let isListing = request.method == .get && (canonicalPath == "/Items" || (canonicalPath.hasPrefix("/Users/") && canonicalPath.hasSuffix("/Items")))
        if isListing, cache.enabled {
            let caller = StandInAuthMiddleware.caller(headers: request.headers, path: full, state: state)
            let key = "\(caller.token?.userId ?? "-")|\(api.generation.withLock { $0 })|\(canonicalPath)\(query)"
            if let bytes = cache.get(key) {
                var headers = HTTPFields()
                headers[.contentType] = "application/json; charset=utf-8"
                return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: bytes))
            }
            let response = try await inner.respond(to: rewritten, context: context)
            guard response.status == .ok else { return response }
            let collector = CollectingWriter()
            try await response.body.write(collector)
            let bytes = collector.box.buffer.withLock { $0 }
            cache.put(key, bytes)
            var copy = response
            copy.body = ResponseBody(byteBuffer: bytes)
            return copy
        }

        var response = try await inner.respond(to: rewritten, context: context)
        if response.headers[.contentType] == "image/*" {
            let collector = CollectingWriter()
            try await response.body.write(collector)
            let bytes = collector.box.buffer.withLock { $0 }
            let magic = Array(bytes.readableBytesView.prefix(4))
            response.headers[.contentType] = magic.starts(with: [0xFF, 0xD8]) ? "image/jpeg" : magic.starts(with: [0x89, 0x50, 0x4E, 0x47]) ? "image/png" : "application/octet-stream"
            response.body = ResponseBody(byteBuffer: bytes)
        }
        return response
    }

    /// Capitalises the first letter of every object key (ASP.NET binds JSON case-insensitively;
    /// the generated stubs want the spec's PascalCase). Non-JSON is passed through unchanged.
    static func pascalCaseKeys(_ bytes: [UInt8]) -> [UInt8] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed]) else { return bytes }
        func convert(_ value: Any) -> Any {
            if let dictionary = value as? [String: Any] {
                var result: [String: Any] = [:]
                for (key, inner) in dictionary { result[key.prefix(1).uppercased() + key.dropFirst()] = convert(inner) }
                return result
            }
            if let array = value as? [Any] { return array.map(convert) }
            return value
        }
        guard let data = try? JSONSerialization.data(withJSONObject: convert(object), options: [.fragmentsAllowed]) else { return bytes }
        return Array(data)
    }
}

/// Collects a response body into one buffer.
struct CollectingWriter: ResponseBodyWriter {
    final class Box: Sendable { let buffer = Mutex(ByteBuffer()) }
    let box = Box()

    mutating func write(_ buffer: ByteBuffer) async throws {
        var buffer = buffer
        _ = box.buffer.withLock { $0.writeBuffer(&buffer) }
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

/// Listing answers by (user, generation, URI); bounded, emptied when full.
final class ListingCache: Sendable {
    let enabled: Bool
    private let entries = Mutex<(bytes: Int, map: [String: ByteBuffer])>((0, [:]))
    static let maxBytes = 256 << 20

    init(enabled: Bool) { self.enabled = enabled }

    func get(_ key: String) -> ByteBuffer? { entries.withLock { $0.map[key] } }

    func put(_ key: String, _ value: ByteBuffer) {
        entries.withLock { e in
            if e.bytes + value.readableBytes > Self.maxBytes { e = (0, [:]) }
            e.map[key] = value
            e.bytes += value.readableBytes
        }
    }
}
