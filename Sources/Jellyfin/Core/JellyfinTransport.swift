internal import Foundation
import HTTPTypes
import Synchronization
package import OpenAPIRuntime

#if canImport(AsyncHTTPClient)
import AsyncHTTPClient
import NIOCore
import OpenAPIAsyncHTTPClient
#if canImport(Glibc)
import Glibc
#endif
#else
import OpenAPIURLSession
#endif

/// How the generated client reaches the network: async-http-client on Linux, URLSession on
/// Apple platforms, both behind the generated code's `ClientTransport`. Also the one place that
/// does plain GETs outside the generated operations (the probe, which must see redirects).
public struct JellyfinTransport: Sendable {
    /// Time allowed for one request, connection included.
    public var timeout: Duration
    /// The largest response body accepted (a hostile server's endless array is refused here).
    public var maxResponseBytes: Int
    /// Connect to this address instead of resolving the URL's host (an SSH tunnel's local end),
    /// same port; the URL's host still names the server in the Host header, TLS SNI and the
    /// certificate check. `[url host: connect address]`. Linux (async-http-client) only.
    public var connectOverride: [String: String] = [:]

    /// Replaces the network for the generated operations (tests feed canned answers here).
    let injected: (any ClientTransport)?

    public init(timeout: Duration = .seconds(30), maxResponseBytes: Int = 64 << 20) {
        self.timeout = timeout
        self.maxResponseBytes = maxResponseBytes
        injected = nil
    }

    package init(clientTransport: any ClientTransport, timeout: Duration = .seconds(30), maxResponseBytes: Int = 64 << 20) {
        self.timeout = timeout
        self.maxResponseBytes = maxResponseBytes
        injected = clientTransport
    }

    var clientTransport: any ClientTransport {
        if let injected { return injected }
        #if canImport(AsyncHTTPClient)
        return AsyncHTTPClientTransport(configuration: .init(client: httpClient, timeout: .nanoseconds(timeout.nanoseconds)))
        #else
        return URLSessionTransport()
        #endif
    }

    /// The result of a plain GET: the status, the URL it ended at after redirects, a header
    /// lookup and the body (bounded).
    struct PlainResponse: Sendable {
        var status: Int
        var finalURL: URL
        var headers: [String: String]
        var body: [UInt8]
    }

    #if canImport(AsyncHTTPClient)
    /// One client for the process, never shut down (like `HTTPClient.shared`), configured to
    /// follow up to five redirects without cycles and to give up connecting after 10 s.
    static let httpClient = makeClient(dnsOverride: [:])

    /// Clients with a connect override, one per override, kept (never shut down) like the shared one.
    private static let overriddenClients = Mutex<[[String: String]: HTTPClient]>([:])

    private static func makeClient(dnsOverride: [String: String]) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .follow(max: 5, allowCycles: false)
        configuration.timeout = .init(connect: .seconds(10), read: .seconds(60))
        // A refused connection or a name that does not resolve is an answer: say so at once
        // instead of trying again until the request's deadline (10 s of silence before).
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.decompression = .enabled(limit: .ratio(50))
        configuration.dnsOverride = dnsOverride
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    var httpClient: HTTPClient {
        guard !connectOverride.isEmpty else { return Self.httpClient }
        return Self.overriddenClients.withLock { clients in
            if let client = clients[connectOverride] { return client }
            let client = Self.makeClient(dnsOverride: connectOverride)
            clients[connectOverride] = client
            return client
        }
    }

    func get(_ url: URL, headers: [String: String]) async throws -> PlainResponse {
        var request = HTTPClientRequest(url: url.absoluteString)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await httpClient.execute(request, timeout: .nanoseconds(timeout.nanoseconds))
        var body = try await response.body.collect(upTo: maxResponseBytes)
        var lookup: [String: String] = [:]
        for header in response.headers { lookup[header.name.lowercased()] = header.value }
        return PlainResponse(status: Int(response.status.code), finalURL: response.url ?? url, headers: lookup,
                             body: body.readBytes(length: body.readableBytes) ?? [])
    }
    /// The first bytes a server at `host:port` sends unasked (an SSH or VNC server greets
    /// first; a web server waits), for naming what answered when the answer was not HTTP. Empty
    /// when it said nothing within `timeout`, could not be reached, or the task was cancelled
    /// (which ends the wait at once: the socket is shut down under the blocked thread).
    func greeting(host: String, port: Int, timeout: Duration = .seconds(2)) async -> [UInt8] {
        let target = connectOverride[host] ?? host
        let socket = GreetingSocket()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                Thread.detachNewThread { continuation.resume(returning: socket.read(host: target, port: port, timeout: timeout)) }
            }
        } onCancel: {
            socket.cancel()
        }
    }
    #else
    func get(_ url: URL, headers: [String: String]) async throws -> PlainResponse {
        var request = URLRequest(url: url)
        request.timeoutInterval = Double(timeout.components.seconds)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await URLSession.shared.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw JellyfinError.notJellyfin(url: url.absoluteString, reason: "not an HTTP answer") }
        guard data.count <= maxResponseBytes else { throw JellyfinError.responseTooLarge(operation: "GET \(url.path)", limit: maxResponseBytes) }
        var lookup: [String: String] = [:]
        for (name, value) in http.allHeaderFields { lookup[String(describing: name).lowercased()] = String(describing: value) }
        return PlainResponse(status: http.statusCode, finalURL: http.url ?? url, headers: lookup, body: Array(data))
    }
    #endif
}

#if canImport(AsyncHTTPClient)
/// One blocking connect-and-read for `JellyfinTransport.greeting`, cancellable from another
/// thread: `cancel` shuts the socket down, which ends a blocked connect or recv.
private final class GreetingSocket: Sendable {
    private let state = Mutex<(fd: Int32, cancelled: Bool)>((-1, false))

    func cancel() {
        state.withLock {
            $0.cancelled = true
            if $0.fd >= 0 { shutdown($0.fd, Int32(SHUT_RDWR)) }
        }
    }

    func read(host: String, port: Int, timeout: Duration) -> [UInt8] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else { return [] }
        defer { freeaddrinfo(list) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { return [] }
        let cancelled = state.withLock { state -> Bool in
            if !state.cancelled { state.fd = fd }
            return state.cancelled
        }
        defer {
            state.withLock { $0.fd = -1 }
            close(fd)
        }
        guard !cancelled else { return [] }
        let micros = max(1, timeout.nanoseconds / 1000)
        var limit = timeval(tv_sec: Int(micros / 1_000_000), tv_usec: Int(micros % 1_000_000))
        // SO_SNDTIMEO bounds connect() as well on Linux.
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else { return [] }
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return n > 0 ? Array(buffer.prefix(n)) : []
    }
}
#endif

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

/// Adds `Authorization: MediaBrowser …` to every request (the generator ignores the spec's
/// security scheme) and turns a 401 on a request that carried a token into
/// `signedOutByServer`: the token is gone, whatever the operation was.
struct AuthorizationMiddleware: ClientMiddleware {
    let identity: ClientIdentity
    let token: String?
    let serverURL: String

    func intercept(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
                   next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[.authorization] = AuthorizationHeader.value(identity: identity, token: token)
        let (response, responseBody) = try await next(request, body, baseURL)
        if response.status.code == 401, token != nil {
            throw JellyfinError.signedOutByServer(url: serverURL)
        }
        return (response, responseBody)
    }
}

/// Refuses response bodies over a bound: by `Content-Length` before reading, and by counting
/// while the generated code reads (for chunked answers that never say how long they are).
struct ResponseLimitMiddleware: ClientMiddleware {
    let maxBytes: Int

    func intercept(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
                   next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)) async throws -> (HTTPResponse, HTTPBody?) {
        let (response, responseBody) = try await next(request, body, baseURL)
        guard let responseBody else { return (response, nil) }
        if case .known(let length) = responseBody.length, length > maxBytes {
            throw JellyfinError.responseTooLarge(operation: operationID, limit: maxBytes)
        }
        let limited = HTTPBody(LimitedBytes(base: responseBody, limit: maxBytes, operation: operationID),
                               length: responseBody.length, iterationBehavior: responseBody.iterationBehavior)
        return (response, limited)
    }
}

/// Passes chunks through and throws once more than `limit` bytes went by.
struct LimitedBytes: AsyncSequence, Sendable {
    typealias Element = HTTPBody.ByteChunk
    let base: HTTPBody
    let limit: Int
    let operation: String

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: HTTPBody.AsyncIterator
        let limit: Int
        let operation: String
        var seen = 0

        mutating func next() async throws -> HTTPBody.ByteChunk? {
            guard let chunk = try await base.next() else { return nil }
            seen += chunk.count
            if seen > limit { throw JellyfinError.responseTooLarge(operation: operation, limit: limit) }
            return chunk
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), limit: limit, operation: operation)
    }
}
