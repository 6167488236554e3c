import FarcastNIO
import FarcastSupport
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket
import Synchronization

/// Dials a `ws://` or `wss://` URL and runs the WebSocket as a `WebSocketConnection`, as
/// `WebSocketListener` does, so one session runner serves both directions.
///
/// Unlike swift-websocket's client it owns the channel from the first byte, so the whole opening
/// (TCP, TLS, HTTP upgrade) is bounded by a deadline and ends at once when `abort` is called or
/// the task is cancelled — a server that accepts and stays silent can no longer hold a player
/// forever — and a refused upgrade reports the HTTP status the server answered with.
public enum WebSocketDialer {
    /// Runs the open WebSocket; it and the tasks it starts run on the connection's `executor`,
    /// the channel's event loop (see `EventLoopExecutor`).
    public typealias Handler = @Sendable (_ connection: WebSocketConnection) async throws -> Void

    /// A parsed WebSocket URL.
    public struct Target: Sendable, Equatable, CustomStringConvertible {
        public var secure: Bool
        public var host: String
        public var port: Int
        /// The path with its query, starting with "/".
        public var path: String

        /// Parses `ws://host[:port][/path]` and `wss://…` (IPv6 hosts in brackets). Other
        /// schemes are refused with a hint (a pasted `http://` URL names the same server).
        public init(parsing url: String) throws(SendspinError) {
            let lower = url.lowercased()
            let rest: Substring
            if lower.hasPrefix("ws://") {
                secure = false
                rest = url.dropFirst(5)
            } else if lower.hasPrefix("wss://") {
                secure = true
                rest = url.dropFirst(6)
            } else if lower.hasPrefix("http://") || lower.hasPrefix("https://") {
                let suggestion = (lower.hasPrefix("https") ? "wss://" : "ws://") + url.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: false)[2]
                throw .badURL("\(url) is an HTTP address; a Sendspin server is dialled over WebSocket: \(Self.withDefaultPath(suggestion))")
            } else if url.contains("://") {
                throw .badURL("\(url) is not a WebSocket URL; use ws://HOST:PORT/sendspin")
            } else {
                throw .badURL("\(url) has no scheme; use ws://\(url.hasSuffix("/") ? String(url.dropLast()) : url)\(url.contains("/") ? "" : "/sendspin")")
            }
            let slash = rest.firstIndex(of: "/")
            let authority = slash.map { rest[..<$0] } ?? rest
            path = slash.map { String(rest[$0...]) } ?? "/"
            guard !authority.isEmpty else { throw .badURL("\(url) names no host") }
            if authority.hasPrefix("[") {
                guard let close = authority.firstIndex(of: "]") else { throw .badURL("\(url): an IPv6 address needs its closing ]") }
                host = String(authority[authority.index(after: authority.startIndex)..<close])
                let after = authority[authority.index(after: close)...]
                if after.isEmpty {
                    port = secure ? 443 : 80
                } else {
                    guard after.first == ":", let p = Int(after.dropFirst()), (1...65535).contains(p) else {
                        throw .badURL("\(url): bad port after the IPv6 address")
                    }
                    port = p
                }
            } else {
                let parts = authority.split(separator: ":", omittingEmptySubsequences: false)
                guard parts.count <= 2 else {
                    throw .badURL("\(url): an IPv6 address goes in brackets, e.g. ws://[::1]:8927/sendspin")
                }
                host = String(parts[0])
                if parts.count == 2 {
                    guard let p = Int(parts[1]), (1...65535).contains(p) else { throw .badURL("\(url): \"\(parts[1])\" is not a port (1–65535)") }
                    port = p
                } else {
                    port = secure ? 443 : 80
                }
            }
            guard !host.isEmpty else { throw .badURL("\(url) names no host") }
        }

        /// `ws://host:port` or `ws://host:port/` → `ws://host:port/sendspin`; other paths stay.
        private static func withDefaultPath(_ url: String) -> String {
            guard let schemeEnd = url.range(of: "://") else { return url }
            let rest = url[schemeEnd.upperBound...]
            let slash = rest.firstIndex(of: "/") ?? rest.endIndex
            let path = rest[slash...]
            return String(url[..<slash]) + (path.isEmpty || path == "/" ? "/sendspin" : path)
        }

        public var description: String {
            let shownHost = host.contains(":") ? "[\(host)]" : host
            return "\(secure ? "wss" : "ws")://\(shownHost):\(port)\(path)"
        }

        var hostIsAddress: Bool { (try? SocketAddress(ipAddress: host, port: 0)) != nil }
    }

    /// Lets a caller end a dial in progress (a stop request while the server is silent).
    public final class Abort: Sendable {
        private let channel = Mutex<(any Channel)?>(nil)
        private let aborted = Mutex(false)

        public init() {}

        /// Closes the connection being opened; the dial fails with `.cancelled`.
        public func abort() {
            aborted.withLock { $0 = true }
            channel.withLock { $0 }?.close(promise: nil)
        }

        var isAborted: Bool { aborted.withLock { $0 } }

        /// The connection is open: from here on a stop is the session's business (a goodbye
        /// first), so `abort` no longer closes it.
        func opened() {
            channel.withLock { $0 = nil }
        }

        func attach(_ channel: any Channel) {
            self.channel.withLock { $0 = channel }
            if isAborted { channel.close(promise: nil) }
        }
    }

    enum Upgrade: Sendable {
        case websocket(WebSocketConnection)
        case refused
    }

    /// Opens the WebSocket within `openTimeout` (TCP connect, TLS, HTTP upgrade), then runs
    /// `handler` until it returns or the connection closes.
    public static func connect(to target: Target, openTimeout: Duration, abort: Abort = Abort(), logger: Logger,
                               handler: @escaping Handler) async throws {
        let deadline = NIODeadline.now() + timeAmount(openTimeout)
        let requestPath = target.path
        let hostHeader = target.host.contains(":") ? "[\(target.host)]:\(target.port)" : "\(target.host):\(target.port)"
        let tlsContext: NIOSSLContext?
        if target.secure {
            var tls = TLSConfiguration.makeClientConfiguration()
            // Certificates for an address cannot be checked against a name; the chain still is.
            if target.hostIsAddress { tls.certificateVerification = .noHostnameVerification }
            tlsContext = try NIOSSLContext(configuration: tls)
        } else {
            tlsContext = nil
        }
        let sniName: String? = target.secure && !target.hostIsAddress ? target.host : nil
        let upgrade: EventLoopFuture<Upgrade>
        let channel: any Channel
        let tap = FirstBytesTap()
        do {
            (channel, upgrade) = try await withTaskCancellationHandler {
                try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .connectTimeout(timeAmount(openTimeout))
                    .channelOption(.socketOption(.tcp_nodelay), value: 1)
                    .connect(host: target.host, port: target.port) { channel in
                        channel.eventLoop.makeCompletedFuture {
                            if let tlsContext {
                                try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: tlsContext, serverHostname: sniName))
                            }
                            try channel.pipeline.syncOperations.addHandler(tap)
                            return (channel, try configureUpgrade(channel, path: requestPath, host: hostHeader, tap: tap))
                        }
                    }
            } onCancel: {
                abort.abort()
            }
        } catch {
            if abort.isAborted || Task.isCancelled { throw SendspinError.cancelled }
            throw SendspinError.connectFailed("\(target): \(describeNetworkError(error))")
        }
        abort.attach(channel)
        let timer = channel.eventLoop.scheduleTask(deadline: deadline) { channel.close(promise: nil) }
        let outcome: Upgrade
        do {
            outcome = try await withTaskCancellationHandler { try await upgrade.get() } onCancel: { abort.abort() }
        } catch {
            timer.cancel()
            channel.close(promise: nil)
            if abort.isAborted || Task.isCancelled { throw SendspinError.cancelled }
            if NIODeadline.now() >= deadline {
                throw SendspinError.connectFailed("\(target): the server accepted the connection but did not answer the WebSocket upgrade within \(seconds(openTimeout)) s (is it a Sendspin server? `sendspin serve` listens on port 8927)")
            }
            if let tls = error as? NIOSSLError, case .handshakeFailed = tls {
                throw SendspinError.connectFailed("\(target): \(describeNetworkError(error))")
            }
            if let answer = describeNonHTTP(tap.bytes, secure: target.secure) {
                throw SendspinError.connectFailed("\(target): \(answer)")
            }
            if tap.bytes.isEmpty {
                throw SendspinError.connectFailed("\(target): the server closed the connection without answering the WebSocket upgrade; is it a Sendspin server, and does it speak \(target.secure ? "TLS (wss://)" : "plain ws:// without TLS")?")
            }
            throw SendspinError.connectFailed("\(target): the WebSocket upgrade failed (\(describeNetworkError(error)))")
        }
        timer.cancel()
        switch outcome {
        case .refused:
            channel.close(promise: nil)
            guard let status = httpStatusLine(tap.bytes) else {
                throw SendspinError.connectFailed("\(target): \(describeNonHTTP(tap.bytes, secure: target.secure) ?? "the server did not accept the WebSocket upgrade")")
            }
            let hint = target.path == "/sendspin" ? "" : "; Sendspin servers answer on the path /sendspin (ws://HOST:PORT/sendspin)"
            throw SendspinError.connectFailed("\(target): the server refused the WebSocket upgrade with HTTP \(status)\(hint)")
        case .websocket(let connection):
            abort.opened()
            defer { channel.close(promise: nil) }
            try await withTaskExecutorPreference(connection.executor) { try await handler(connection) }
        }
    }

    private static func configureUpgrade(_ channel: any Channel, path: String, host: String, tap: FirstBytesTap) throws -> EventLoopFuture<Upgrade> {
        let upgrader = NIOTypedWebSocketClientUpgrader<Upgrade>(
            maxFrameSize: 1 << 17,
            upgradePipelineHandler: { channel, _ in
                channel.eventLoop.makeCompletedFuture {
                    // Upgraded: the tap has nothing more to learn.
                    channel.pipeline.syncOperations.removeHandler(tap, promise: nil)
                    return .websocket(try WebSocketConnection(upgraded: channel, role: .client, maxMessageSize: 1 << 17))
                }
            }
        )
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: host)
        headers.add(name: "Content-Length", value: "0")
        let request = HTTPRequestHead(version: .http1_1, method: .GET, uri: path, headers: headers)
        let configuration = NIOTypedHTTPClientUpgradeConfiguration<Upgrade>(
            upgradeRequestHead: request,
            upgraders: [upgrader],
            notUpgradingCompletionHandler: { channel in
                channel.eventLoop.makeSucceededFuture(.refused)
            }
        )
        var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: configuration)
        pipeline.leftOverBytesStrategy = .forwardBytes
        return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: pipeline)
    }

    private static func timeAmount(_ duration: Duration) -> TimeAmount {
        .nanoseconds(Int64(duration.components.seconds) * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    private static func seconds(_ duration: Duration) -> String {
        let value = duration.inSeconds
        return value == value.rounded() ? "\(Int(value))" : String(format: "%.1f", value)
    }
}

/// "404 Not Found" from the first line of an HTTP response, if the bytes start with one.
func httpStatusLine(_ bytes: [UInt8]) -> String? {
    guard bytes.starts(with: Array("HTTP/".utf8)) else { return nil }
    let line = String(decoding: bytes.prefix { $0 != 0x0D && $0 != 0x0A }, as: UTF8.self)
    let parts = line.split(separator: " ", maxSplits: 1)
    return parts.count == 2 ? String(parts[1]) : nil
}

/// Words for a server that answered a WebSocket upgrade with something other than HTTP.
func describeNonHTTP(_ bytes: [UInt8], secure: Bool) -> String? {
    guard !bytes.isEmpty, !bytes.starts(with: Array("HTTP/".utf8)), let server = ForeignGreeting.describe(bytes) else { return nil }
    if bytes.starts(with: Array("RFB ".utf8)) { return "this is \(server); use `farcast vnc`" }
    if !secure, bytes.count >= 3, bytes[0] == 0x15 || bytes[0] == 0x16, bytes[1] == 0x03 { return "the server answered with TLS; dial it with wss://" }
    return "this is \(server), not a Sendspin (WebSocket) server"
}

/// Keeps the first bytes the server sent (after TLS), to say what kind of server answered when
/// it was not a WebSocket upgrade.
final class FirstBytesTap: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private let kept = Mutex<[UInt8]>([])

    var bytes: [UInt8] { kept.withLock { $0 } }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        kept.withLock { kept in
            if kept.count < 256 { kept += buffer.readableBytesView.prefix(256 - kept.count) }
        }
        context.fireChannelRead(data)
    }
}
