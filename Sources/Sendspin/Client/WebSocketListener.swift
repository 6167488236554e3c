import FarcastNIO
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket

/// A plain `ws://` listener for server-initiated Sendspin connections: accepts HTTP upgrades on
/// one path and hands each WebSocket to `handler` as a `WebSocketConnection`, as the dialling
/// client does, so one session runner serves both modes.
public final class WebSocketListener: Sendable {
    /// Runs one accepted WebSocket; it and the tasks it starts run on the connection's
    /// `executor`, its event loop (see `EventLoopExecutor`).
    public typealias Handler = @Sendable (_ connection: WebSocketConnection, _ peer: String) async throws -> Void

    enum Upgrade: Sendable {
        case websocket(WebSocketConnection, peer: String)
        case refused
    }

    let host: String
    let path: String
    private let serverChannel: NIOAsyncChannel<EventLoopFuture<Upgrade>, Never>
    /// The port actually bound (useful with port 0).
    public let port: Int
    /// The listening socket's event loop, for work that belongs to no one connection.
    public var executor: EventLoopExecutor { EventLoopExecutor(serverChannel.channel.eventLoop) }

    private init(host: String, path: String, serverChannel: NIOAsyncChannel<EventLoopFuture<Upgrade>, Never>, port: Int) {
        self.host = host
        self.path = path
        self.serverChannel = serverChannel
        self.port = port
    }

    /// Binds `host:port`; WebSocket upgrades are accepted on `path` only, anything else is
    /// answered with a closed connection.
    public static func bind(host: String, port: Int, path: String) async throws -> WebSocketListener {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .bind(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let peer = channel.remoteAddress.map { "\($0)" } ?? "?"
                    let upgrader = NIOTypedWebSocketServerUpgrader<Upgrade>(
                        maxFrameSize: 1 << 17,
                        shouldUpgrade: { channel, head in
                            let requested = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
                            return channel.eventLoop.makeSucceededFuture(requested == path ? HTTPHeaders() : nil)
                        },
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture {
                                .websocket(try WebSocketConnection(upgraded: channel, role: .server, maxMessageSize: 1 << 17), peer: peer)
                            }
                        }
                    )
                    let configuration = NIOUpgradableHTTPServerPipelineConfiguration(upgradeConfiguration: .init(
                        upgraders: [upgrader],
                        notUpgradingCompletionHandler: { channel in
                            channel.close(promise: nil)
                            return channel.eventLoop.makeSucceededFuture(.refused)
                        }))
                    return try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(configuration: configuration)
                }
            }
        return WebSocketListener(host: host, path: path, serverChannel: channel, port: channel.channel.localAddress?.port ?? port)
    }

    /// Accepts connections until the listener is closed or the task is cancelled; each runs
    /// `handler` concurrently.
    public func run(logger: Logger, handler: @escaping Handler) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            try await serverChannel.executeThenClose { inbound in
                for try await upgrade in inbound {
                    group.addTask {
                        guard case .websocket(let connection, let peer) = try? await upgrade.get() else { return }
                        logger.debug("WebSocket connection", metadata: ["peer": "\(peer)"])
                        defer { connection.channel.close(promise: nil) }
                        do {
                            try await withTaskExecutorPreference(connection.executor) { try await handler(connection, peer) }
                        } catch {
                            logger.debug("WebSocket connection ended", metadata: ["peer": "\(peer)", "error": "\(error)"])
                        }
                    }
                }
            }
        }
    }

    /// Stops accepting; running connections carry on until they end.
    public func close() async {
        try? await serverChannel.channel.close()
    }
}
