import FarcastNIO
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSH
import Synchronization

/// Settings for opening an SSH connection beyond the route itself.
public struct SSHTunnelOptions: Sendable {
    /// Key files to offer first (`--ssh-identity`), before those in ~/.ssh/config and the defaults.
    public var identityFiles: [String] = []
    /// known_hosts to check and add to; nil uses ssh_config's UserKnownHostsFile or ~/.ssh/known_hosts.
    public var knownHostsPath: String?
    /// The ssh_config to read; nil reads ~/.ssh/config.
    public var configPath: String?
    /// Accept and record a host key that known_hosts does not list (`--accept-new`); never a changed one.
    public var acceptNewHostKeys = false
    /// Time allowed for the TCP connection, and again for the SSH handshake (prompts not counted).
    public var connectTimeout: Duration = .seconds(15)

    public init() {}
}

/// A route with ssh_config applied: what to dial, as whom, with which keys, through which jump host.
public struct ResolvedSSHRoute: Sendable, Equatable {
    /// The name the user typed (the ssh_config alias).
    public var alias: String
    public var hostName: String
    public var port: Int
    public var user: String
    public var identityFiles: [String]
    public var explicitIdentityFiles: [String]
    public var knownHostsPath: String
    public var acceptNew: Bool
    public var jump: SSHRoute?

    /// Applies `config` to `route` the way OpenSSH does (first value wins; defaults last).
    public static func resolve(_ route: SSHRoute, options: SSHTunnelOptions, config: SSHConfig) -> ResolvedSSHRoute {
        let settings = config.settings(for: route.host)
        let port = route.port ?? settings.port ?? 22
        let user = route.user ?? settings.user ?? SSHPaths.localUser
        let hostName = settings.hostName.map { SSHConfig.expand($0, host: route.host, port: port, user: user, alias: route.host) } ?? route.host
        let expand = { (path: String) in SSHConfig.expand(path, host: hostName, port: port, user: user, alias: route.host) }
        let configured = settings.identityFiles.map(expand)
        let explicit = options.identityFiles.map(expand) + configured
        // OpenSSH tries its default files only when no IdentityFile is configured.
        var files = explicit
        if configured.isEmpty { files += SSHPaths.defaultIdentities.filter { !files.contains($0) } }
        let knownHosts = options.knownHostsPath ?? settings.userKnownHostsFile.map(expand) ?? SSHPaths.knownHosts
        let strict = settings.strictHostKeyChecking
        return ResolvedSSHRoute(alias: route.host, hostName: hostName, port: port, user: user, identityFiles: files,
                                explicitIdentityFiles: explicit, knownHostsPath: knownHosts,
                                acceptNew: options.acceptNewHostKeys || strict == "accept-new" || strict == "no" || strict == "off",
                                jump: settings.proxyJump.flatMap { try? SSHRoute(parsing: $0) })
    }

    /// `user@host:port`, for messages.
    public var display: String { "\(user)@\(hostName.contains(":") ? "[\(hostName)]" : hostName)\(port == 22 ? "" : ":\(port)")" }
}

/// An authenticated SSH connection (possibly through one ProxyJump host) that opens
/// `direct-tcpip` channels. Lives on one event loop; `close()` ends it and every channel on it.
public final class SSHConnection: Sendable {
    let channel: any Channel
    /// The jump host's connection, when this one runs inside it.
    let jump: SSHConnection?
    public let route: ResolvedSSHRoute
    let logger: Logger

    private init(channel: any Channel, jump: SSHConnection?, route: ResolvedSSHRoute, logger: Logger) {
        self.channel = channel
        self.jump = jump
        self.route = route
        self.logger = logger
    }

    /// The event loop every channel of this connection runs on.
    public var eventLoop: any EventLoop { channel.eventLoop }

    /// Connects and authenticates (through the ProxyJump host when ssh_config names one).
    public static func connect(to route: SSHRoute, options: SSHTunnelOptions = SSHTunnelOptions(), prompts: SSHPrompts = SSHPrompts(),
                               logger: Logger = Logger(label: "farcast.ssh")) async throws -> SSHConnection {
        let config = SSHConfig.load(path: options.configPath)
        let resolved = ResolvedSSHRoute.resolve(route, options: options, config: config)
        guard let jumpRoute = resolved.jump else {
            return try await connectDirect(resolved, options: options, prompts: prompts, logger: logger)
        }
        var jumpOptions = options
        jumpOptions.identityFiles = options.identityFiles
        var jumpResolved = ResolvedSSHRoute.resolve(jumpRoute, options: jumpOptions, config: config)
        jumpResolved.jump = nil  // one hop
        logger.debug("connecting through the jump host", metadata: ["jump": "\(jumpResolved.display)"])
        let jump = try await connectDirect(jumpResolved, options: options, prompts: prompts, logger: logger)
        do {
            return try await connectThrough(jump, resolved, options: options, prompts: prompts, logger: logger)
        } catch {
            await jump.close()
            throw error
        }
    }

    static func sshHandler(for route: ResolvedSSHRoute, options: SSHTunnelOptions, prompts: SSHPrompts, failures: SSHFailureRecord,
                           logger: Logger, allocator: ByteBufferAllocator) -> NIOSSHHandler {
        let verifier = KnownHostsVerifier(host: route.hostName, port: route.port, knownHostsPath: route.knownHostsPath,
                                          acceptNew: route.acceptNew, prompts: prompts, failures: failures, logger: logger)
        let authenticator = TunnelUserAuthenticator(user: route.user, host: route.display, keyFiles: route.identityFiles,
                                                    explicitFiles: Set(route.explicitIdentityFiles), prompts: prompts,
                                                    failures: failures, logger: logger)
        var configuration = SSHClientConfiguration(userAuthDelegate: authenticator, serverAuthDelegate: verifier)
        // Larger channel packets mean fewer, larger SSH packets on bulk transfers.
        configuration.maximumPacketSize = 1 << 18
        #if canImport(COpenSSL)
        // The same ciphers as swift-nio-ssh's, decrypting each packet once (SSHPacketProtection.swift).
        let (schemes, problem) = SSHAESGCMProtection.offeredIfLoadable()
        if let schemes {
            configuration.transportProtectionSchemes = schemes
        } else {
            logger.notice("OpenSSL could not be loaded (\(problem ?? "")): using swift-nio-ssh's own AES-GCM, which is slower; apt install libssl3")
        }
        #endif
        return NIOSSHHandler(role: .client(configuration), allocator: allocator, inboundChildChannelInitializer: nil)
    }

    private static func connectDirect(_ route: ResolvedSSHRoute, options: SSHTunnelOptions, prompts: SSHPrompts,
                                      logger: Logger) async throws -> SSHConnection {
        let failures = SSHFailureRecord()
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .connectTimeout(TimeAmount(options.connectTimeout))
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let handler = sshHandler(for: route, options: options, prompts: prompts, failures: failures, logger: logger,
                                                 allocator: channel.allocator)
                        try channel.pipeline.syncOperations.addHandlers([GreetingRecorder(failures: failures), handler,
                                                                         AuthenticationWatcher(failures: failures)])
                    }
                }
                .connect(host: route.hostName, port: route.port).get()
        } catch {
            throw SSHTunnelError.connectFailed(host: route.display, reason: describeNetworkError(error))
        }
        let connection = SSHConnection(channel: channel, jump: nil, route: route, logger: logger)
        try await connection.waitForAuthentication(failures: failures, timeout: options.connectTimeout)
        return connection
    }

    private static func connectThrough(_ jump: SSHConnection, _ route: ResolvedSSHRoute, options: SSHTunnelOptions, prompts: SSHPrompts,
                                       logger: Logger) async throws -> SSHConnection {
        let failures = SSHFailureRecord()
        let child = try await jump.openDirectTCPIP(host: route.hostName, port: route.port) { child in
            let handler = sshHandler(for: route, options: options, prompts: prompts, failures: failures, logger: logger, allocator: child.allocator)
            try child.pipeline.syncOperations.addHandlers([SSHChannelDataBridge(), GreetingRecorder(failures: failures), handler,
                                                           AuthenticationWatcher(failures: failures)])
        }
        let connection = SSHConnection(channel: child, jump: jump, route: route, logger: logger)
        try await connection.waitForAuthentication(failures: failures, timeout: options.connectTimeout)
        return connection
    }

    /// Waits for user authentication to succeed, or says why it did not.
    private func waitForAuthentication(failures: SSHFailureRecord, timeout: Duration) async throws {
        let watcher: EventLoopFuture<Void>
        do {
            watcher = try await channel.eventLoop.submit { [channel] in
                try channel.pipeline.syncOperations.handler(type: AuthenticationWatcher.self).authenticated.futureResult
            }.get()
        } catch {
            // The connection ended before we looked: the delegates know why.
            throw notSSH(failures) ?? failures.failure ?? SSHTunnelError.connectionLost(host: route.display, reason: Self.describe(error))
        }
        // The handshake timeout does not run while a prompt waits for the person.
        let deadline = MovingDeadline(NIODeadline.now() + TimeAmount(timeout))
        let timer = channel.eventLoop.scheduleRepeatedTask(initialDelay: .milliseconds(200), delay: .milliseconds(200)) { [channel, route] task in
            if failures.isPrompting {
                deadline.value.withLock { $0 = $0 + .milliseconds(200) }
                return
            }
            if NIODeadline.now() > deadline.value.withLock({ $0 }) {
                failures.record(.timedOut(host: route.display, what: "SSH handshake", seconds: Int(timeout.components.seconds)))
                channel.close(promise: nil)
                task.cancel()
            }
        }
        defer { timer.cancel() }
        do {
            // Cancelled (Ctrl-C): closing the connection ends the wait at once.
            try await withTaskCancellationHandler {
                try await watcher.get()
            } onCancel: { [channel] in
                channel.close(promise: nil)
            }
            try Task.checkCancellation()
            logger.debug("SSH authenticated", metadata: ["route": "\(route.display)"])
        } catch {
            channel.close(promise: nil)
            if Task.isCancelled { throw CancellationError() }
            // A server that greeted with something other than SSH explains any failure after it
            // (a timeout while it waited for the RFB client to speak, a close).
            if let failure = notSSH(failures) { throw failure }
            if let failure = failures.failure { throw failure }
            if let failure = error as? SSHTunnelError { throw failure }
            throw SSHTunnelError.connectionLost(host: route.display, reason: Self.describe(error))
        }
    }

    /// The failure to report when what answered was not an SSH server.
    private func notSSH(_ failures: SSHFailureRecord) -> SSHTunnelError? {
        failures.foreignGreeting.map { SSHTunnelError.notSSH(host: "\(route.hostName):\(route.port)", what: $0) }
    }

    /// Opens a direct-tcpip channel to `host:port` as resolved and connected from the server's
    /// side. `initialize` adds handlers to the new channel on its event loop before any data
    /// flows; the channel carries ByteBuffers when `initialize` added `SSHChannelDataBridge`.
    public func openDirectTCPIP(host: String, port: Int,
                                initialize: @escaping @Sendable (any Channel) throws -> Void = { child in
                                    try child.pipeline.syncOperations.addHandler(SSHChannelDataBridge())
                                }) async throws -> any Channel {
        let target = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        let promise = channel.eventLoop.makePromise(of: (any Channel).self)
        channel.eventLoop.execute { [self] in
            createDirectTCPIP(host: host, port: port, promise: promise, initialize: initialize)
        }
        do {
            return try await promise.futureResult.get()
        } catch {
            if let rejection = SSHTunnelError.channelRejection(error, bastion: route.display, target: target) { throw rejection }
            throw SSHTunnelError.connectionLost(host: route.display, reason: Self.describe(error))
        }
    }

    /// On the event loop: asks the server for a direct-tcpip channel to `host:port` (half-closure
    /// allowed, then `initialize` on the new channel before any data flows); `promise` gets the
    /// channel or the refusal.
    func createDirectTCPIP(host: String, port: Int, promise: EventLoopPromise<any Channel>,
                           initialize: @escaping @Sendable (any Channel) throws -> Void) {
        channel.eventLoop.preconditionInEventLoop()
        do {
            let handler = try channel.pipeline.syncOperations.handler(type: NIOSSHHandler.self)
            let origin = try SocketAddress(ipAddress: "127.0.0.1", port: 0)
            handler.createChannel(promise, channelType: .directTCPIP(.init(targetHost: host, targetPort: port, originatorAddress: origin))) { child, _ in
                child.eventLoop.makeCompletedFuture {
                    try child.syncOptions?.setOption(ChannelOptions.allowRemoteHalfClosure, value: true)
                    try initialize(child)
                }
            }
        } catch {
            promise.fail(error)
        }
    }

    /// A `direct-tcpip` channel to `host:port` as a byte stream (what `ssh -W` gives a program),
    /// wrapped before it can receive anything, so a server that speaks first loses nothing. A
    /// protocol client runs on it directly: no local listener, no loopback hop. `prepare` runs on
    /// the channel first, with its byte-stream bridge in place (a client adds its own handlers).
    public func openByteStream(host: String, port: Int,
                               prepare: @escaping @Sendable (any Channel) throws -> Void = { _ in }) async throws
        -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        final class Slot: Sendable { let stream = Mutex<NIOAsyncChannel<ByteBuffer, ByteBuffer>?>(nil) }
        let wrapped = Slot()
        let child = try await openDirectTCPIP(host: host, port: port) { child in
            try child.pipeline.syncOperations.addHandler(SSHChannelDataBridge())
            try prepare(child)
            let stream = try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: child)
            wrapped.stream.withLock { $0 = stream }
        }
        guard let stream = wrapped.stream.withLock({ $0 }) else {
            child.close(promise: nil)
            throw SSHTunnelError.connectionLost(host: route.display, reason: "the channel to \(host):\(port) opened without its stream")
        }
        return stream
    }

    /// Whether the connection is still open.
    public var isActive: Bool { channel.isActive }

    /// Ends the connection (and the jump host's). Returns once the sockets are closed.
    public func close() async {
        try? await channel.close().get()
        if let jump { await jump.close() }
    }

    static func describe(_ error: any Error) -> String {
        if let ssh = error as? NIOSSHError {
            if ssh.type == .tcpShutdown { return "the server closed the connection" }
            if ssh.type == .keyExchangeNegotiationFailure {
                return "no common key exchange, host key or cipher algorithm (farcast offers curve25519-sha256, ecdh-sha2-nistp256/384/521, ssh-ed25519 and ecdsa host keys, aes128/256-gcm@openssh.com)"
            }
            return String(describing: ssh).replacingOccurrences(of: "NIOSSHError.", with: "SSH error: ")
        }
        if error is ChannelError { return "the connection closed" }
        return describeNetworkError(error)
    }
}

/// Passes the server's bytes on unchanged, keeping the first few, so a server that is not SSH
/// (a VNC or web server on the port given) can be named by its greeting.
final class GreetingRecorder: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    let failures: SSHFailureRecord
    private var seen = 0

    init(failures: SSHFailureRecord) { self.failures = failures }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if seen < 64 {
            let buffer = unwrapInboundIn(data)
            let bytes = buffer.getBytes(at: buffer.readerIndex, length: min(buffer.readableBytes, 64 - seen)) ?? []
            seen += bytes.count
            failures.heard(bytes)
        }
        context.fireChannelRead(data)
    }
}

/// Resolves the "authenticated" promise on swift-nio-ssh's success event, fails it when the
/// connection errs or closes first.
final class AuthenticationWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = Never
    let failures: SSHFailureRecord
    var authenticated: EventLoopPromise<Void>!
    private var finished = false

    init(failures: SSHFailureRecord) { self.failures = failures }

    /// Completes the promise once; later outcomes (a close after success) are ignored.
    private func finish(_ result: Result<Void, any Error>) {
        guard !finished else { return }
        finished = true
        authenticated.completeWith(result)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        authenticated = context.eventLoop.makePromise()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is UserAuthSuccessEvent { finish(.success(())) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failure(failures.failure ?? error))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.failure(failures.failure ?? SSHTunnelError.connectionLost(host: "the server", reason: "it closed the connection during the handshake")))
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        finish(.failure(failures.failure ?? ChannelError.ioOnClosedChannel))
    }
}

/// Turns an SSH channel's `SSHChannelData` into plain `ByteBuffer`s and back, so any byte-stream
/// handler (the tunnel glue, a nested NIOSSHHandler for ProxyJump) can sit on a channel.
/// Extended data (stderr) is dropped: direct-tcpip channels carry none.
public final class SSHChannelDataBridge: ChannelDuplexHandler {
    public typealias InboundIn = SSHChannelData
    public typealias InboundOut = ByteBuffer
    public typealias OutboundIn = ByteBuffer
    public typealias OutboundOut = SSHChannelData

    public init() {}

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let message = unwrapInboundIn(data)
        guard case .channel = message.type, case .byteBuffer(let bytes) = message.data else { return }
        context.fireChannelRead(wrapInboundOut(bytes))
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let bytes = unwrapOutboundIn(data)
        context.write(wrapOutboundOut(SSHChannelData(type: .channel, data: .byteBuffer(bytes))), promise: promise)
    }
}

@available(*, unavailable)
extension SSHChannelDataBridge: Sendable {}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

/// A deadline the handshake timer moves on while a prompt waits for the person.
final class MovingDeadline: Sendable {
    let value: Mutex<NIODeadline>
    init(_ deadline: NIODeadline) { value = Mutex(deadline) }
}
