import FarcastNIO
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
@_spi(WSInternal) import WSCore

/// A plain `ws://` listener for server-initiated Sendspin connections: accepts HTTP upgrades on
/// one path and hands each WebSocket to `handler` with the same inbound stream and outbound
/// writer types the dialling client uses, so one session runner serves both modes.
///
/// swift-websocket's client and hummingbird-websocket's server share WSCore's frame handling;
/// its entry point for an upgraded channel is SPI, used here with the versions pinned in
/// Package.swift.
public final class WebSocketListener: Sendable {
    /// Runs one accepted WebSocket; it and the tasks it starts run on `executor`, the
    /// connection's event loop (see `EventLoopExecutor`).
    public typealias Handler = @Sendable (_ inbound: WebSocketInboundStream, _ outbound: WebSocketOutboundWriter, _ peer: String,
                                          _ executor: EventLoopExecutor) async throws -> Void

    struct Context: WebSocketContext {
        let logger: Logger
    }

    enum Upgrade: Sendable {
        case websocket(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>, peer: String)
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
                                .websocket(try NIOAsyncChannel<WebSocketFrame, WebSocketFrame>(wrappingChannelSynchronously: channel), peer: peer)
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
        let configuration = WebSocketHandler.Configuration(extensions: [], autoPing: .disabled, closeTimeout: .seconds(3),
                                                           validateUTF8: false, maxFrameSize: 1 << 17)
        try await withThrowingDiscardingTaskGroup { group in
            try await serverChannel.executeThenClose { inbound in
                for try await upgrade in inbound {
                    group.addTask {
                        guard case .websocket(let channel, let peer) = try? await upgrade.get() else { return }
                        logger.debug("WebSocket connection", metadata: ["peer": "\(peer)"])
                        do {
                            let executor = EventLoopExecutor(channel.channel.eventLoop)
                            _ = try await withTaskExecutorPreference(executor) {
                                try await WebSocketHandler.handle(type: .server, configuration: configuration, asyncChannel: channel,
                                                                  context: Context(logger: logger)) { inbound, outbound, _ in
                                    try await handler(inbound, outbound, peer, executor)
                                }
                            }
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
