import Logging
import NIOCore
import NIOPosix
import NIOSSH

/// OpenSSH's `-L` inside farcast: listens on an ephemeral 127.0.0.1 port and carries every
/// accepted connection over its own `direct-tcpip` channel to the target, which the SSH server
/// resolves and connects from its side. Protocol clients connect to `localPort` and need no SSH
/// knowledge.
///
/// The first channel is opened before `start` returns, so a refused forward or an unreachable
/// target is reported as a typed error up front instead of as a connection the server closed;
/// that channel is handed to the first accepted connection (its early bytes, such as an RFB
/// banner, are held until then). Listener, accepted sockets and channels all live on the SSH
/// connection's event loop, so the glue between them never hops threads.
public final class SSHLocalForwarder: Sendable {
    public let connection: SSHConnection
    public let targetHost: String
    public let targetPort: Int
    /// The loopback address and port to connect to (127.0.0.1 and a port the system picked,
    /// unless the caller asked for others).
    public let localHost: String
    public let localPort: Int
    let listener: any Channel
    let logger: Logger

    private init(connection: SSHConnection, targetHost: String, targetPort: Int, listener: any Channel, localHost: String, localPort: Int,
                 logger: Logger) {
        self.connection = connection
        self.localHost = localHost
        self.targetHost = targetHost
        self.targetPort = targetPort
        self.listener = listener
        self.localPort = localPort
        self.logger = logger
    }

    /// Opens the first channel to `targetHost:targetPort` (failing with `forwardingRefused` or
    /// `targetUnreachable` when the server says so), then starts listening on `listenHost`
    /// (a loopback address) and `listenPort` (0: the system picks).
    public static func start(over connection: SSHConnection, to targetHost: String, port targetPort: Int,
                             listenHost: String = "127.0.0.1", listenPort: Int = 0,
                             logger: Logger = Logger(label: "farcast.ssh")) async throws -> SSHLocalForwarder {
        let loop = connection.eventLoop
        let spare = NIOLoopBoundBox<TunnelGlue?>.makeEmptyBox(valueType: TunnelGlue.self, eventLoop: loop)
        let first = try await connection.openDirectTCPIP(host: targetHost, port: targetPort) { child in
            try child.pipeline.syncOperations.addHandler(SSHChannelDataBridge())
            let glue = TunnelGlue(name: "ssh")
            try child.pipeline.syncOperations.addHandler(glue)
            spare.value = glue
        }
        let listener: any Channel
        do {
            listener = try await ServerBootstrap(group: loop)
                .serverChannelOption(.backlog, value: 16)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelOption(.allowRemoteHalfClosure, value: true)
                .childChannelInitializer { [logger] local in
                    // Glued once active (writes before then could be lost): the spare channel, if
                    // still unused, goes to this connection; later ones open their own.
                    let localGlue = TunnelGlue(name: "local") { localGlue in
                        if let glue = spare.value {
                            spare.value = nil
                            localGlue.attach(glue)
                        } else {
                            connection.openChannelSynchronously(host: targetHost, port: targetPort, for: localGlue, logger: logger)
                        }
                    }
                    return local.eventLoop.makeCompletedFuture {
                        try local.pipeline.syncOperations.addHandler(localGlue)
                    }
                }
                .bind(host: listenHost, port: listenPort).get()
        } catch {
            first.close(promise: nil)
            throw SSHTunnelError.connectionLost(host: listenHost, reason: "cannot listen for the tunnel on \(listenHost):\(listenPort): \(SSHConnection.describe(error))")
        }
        guard let port = listener.localAddress?.port else {
            listener.close(promise: nil)
            throw SSHTunnelError.connectionLost(host: "127.0.0.1", reason: "the tunnel's listener has no port")
        }
        logger.debug("SSH tunnel listening", metadata: ["local": "\(listenHost):\(port)", "target": "\(targetHost):\(targetPort)",
                                                        "via": "\(connection.route.display)"])
        return SSHLocalForwarder(connection: connection, targetHost: targetHost, targetPort: targetPort, listener: listener,
                                 localHost: listenHost, localPort: port, logger: logger)
    }

    /// Stops listening and ends the SSH connection with every channel on it.
    public func stop() async {
        try? await listener.close().get()
        await connection.close()
    }
}

extension SSHConnection {
    /// On the event loop: opens a channel for an accepted local connection and glues the two;
    /// a refused channel closes the local connection and is logged with its reason.
    func openChannelSynchronously(host: String, port: Int, for local: TunnelGlue, logger: Logger) {
        let loop = eventLoop
        loop.preconditionInEventLoop()
        let promise = loop.makePromise(of: (any Channel).self)
        let localBox = NIOLoopBound(local, eventLoop: loop)
        createDirectTCPIP(host: host, port: port, promise: promise) { child in
            try child.pipeline.syncOperations.addHandler(SSHChannelDataBridge())
            try child.pipeline.syncOperations.addHandler(TunnelGlue(name: "ssh") { glue in localBox.value.attach(glue) })
        }
        let route = self.route.display
        promise.futureResult.whenFailure { error in
            let reason = SSHTunnelError.channelRejection(error, bastion: route, target: "\(host):\(port)")?.description ?? SSHConnection.describe(error)
            logger.warning("SSH tunnel: \(reason)")
            localBox.value.closeAll()
        }
    }
}

/// One side of the tunnel: what arrives on this channel is written to the partner's, with
/// backpressure (a side stops reading while its partner cannot write) and half-close carried
/// across (EOF on one side shuts the other's output). Before a partner is attached, reads are
/// held and what already arrived is kept for it.
final class TunnelGlue: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let name: String
    /// Runs once when the channel becomes active: where the two sides are attached.
    private var onActive: ((TunnelGlue) -> Void)?
    private var context: ChannelHandlerContext?
    private var partner: TunnelGlue?
    private var held: [ByteBuffer] = []
    private var inputClosed = false
    private var closed = false
    private var pendingRead = false

    init(name: String, onActive: ((TunnelGlue) -> Void)? = nil) {
        self.name = name
        self.onActive = onActive
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        let action = onActive
        onActive = nil
        action?(self)
    }

    func attach(_ other: TunnelGlue) {
        partner = other
        other.partner = self
        other.deliverHeld()
        deliverHeld()
        other.resumeReading()
        resumeReading()
    }

    private func deliverHeld() {
        guard let partner else { return }
        if !held.isEmpty {
            for bytes in held { partner.writeFromPartner(bytes) }
            held = []
            partner.flushFromPartner()
        }
        if inputClosed || closed { partner.partnerInputClosed() }
    }

    private func resumeReading() {
        guard pendingRead, let context, let partner, partner.isWritable || partner.isGone else { return }
        pendingRead = false
        context.read()
    }

    var isWritable: Bool { context?.channel.isWritable ?? false }

    /// The channel has closed: what still arrives for it is dropped, and its partner keeps
    /// reading so it notices its own end.
    var isGone: Bool { closed || context == nil }

    func writeFromPartner(_ bytes: ByteBuffer) {
        context?.write(wrapOutboundOut(bytes), promise: nil)
    }

    func flushFromPartner() { context?.flush() }

    func partnerInputClosed() {
        guard let context else { return }
        context.flush()
        context.close(mode: .output, promise: nil)
        resumeReading()
    }

    func closeAll() {
        context?.close(promise: nil)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        partner = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let bytes = unwrapInboundIn(data)
        if let partner { partner.writeFromPartner(bytes) } else { held.append(bytes) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        partner?.flushFromPartner()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            inputClosed = true
            partner?.partnerInputClosed()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        // The partner finishes writing what it has, then shuts its output (NIO escalates to a
        // full close when its input is shut already); closing it outright would drop that data.
        closed = true
        partner?.partnerInputClosed()
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { partner?.resumeReading() }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if let partner, partner.isWritable || partner.isGone {
            context.read()
        } else {
            pendingRead = true
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}

@available(*, unavailable)
extension TunnelGlue: Sendable {}

extension SSHLocalForwarder {
    /// Connects to `route` (ssh_config applied, through its ProxyJump host if any) and starts a
    /// forwarder to `targetHost:targetPort`; the connection is closed again if that fails.
    public static func open(through route: SSHRoute, to targetHost: String, port targetPort: Int,
                            listenHost: String = "127.0.0.1", listenPort: Int = 0,
                            options: SSHTunnelOptions = SSHTunnelOptions(), prompts: SSHPrompts = SSHPrompts(),
                            logger: Logger = Logger(label: "farcast.ssh")) async throws -> SSHLocalForwarder {
        let connection = try await SSHConnection.connect(to: route, options: options, prompts: prompts, logger: logger)
        do {
            return try await start(over: connection, to: targetHost, port: targetPort, listenHost: listenHost, listenPort: listenPort,
                                   logger: logger)
        } catch {
            await connection.close()
            throw error
        }
    }
}
