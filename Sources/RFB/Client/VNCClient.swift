import Crypto
import FarcastNIO
import FarcastSupport
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Supplies credentials when a server's security method needs them (may prompt the user).
public typealias VNCCredentialProvider = @Sendable (CredentialRequest) async throws -> VNCCredentials

/// A connected VNC session: the async face of `RFBConnection` over a SwiftNIO TCP channel.
///
/// Connect with `VNCClient.connect(to:credentials:options:)`, then read `events`, take
/// `framebuffer` snapshots and send input. The actor serialises everything that touches the
/// protocol state; the socket is only touched by the read loop and `send`.
///
/// The actor's executor is an event loop: over TCP (and TLS) its channel's own, so what the socket
/// delivers is decoded on the thread that read it, with no hop to another thread per chunk; over
/// a caller-opened channel (SSH) another loop of the group, so decryption and decoding use two
/// cores (see `InboundRelay`). Nothing here may block: every wait is an `await`.
public actor VNCClient {
    /// Connection options beyond the protocol configuration.
    public struct Options: Sendable {
        public var configuration = RFBConnection.Configuration()
        /// Time allowed for the TCP connection.
        public var connectTimeout: Duration = .seconds(10)
        /// Time allowed for the handshake after the TCP connection, not counting time spent
        /// waiting for credentials.
        public var handshakeTimeout: Duration = .seconds(10)
        /// Where TLS certificate pins live; nil uses `vnc/pins.json` in the user's state directory.
        public var trustStore: TrustStore?
        /// Accept (and re-pin) a certificate that differs from its pin (the user said `--trust`).
        public var acceptChangedCertificate = false
        /// Events `events` holds for a consumer that has fallen behind; beyond it the oldest are
        /// dropped (a dropped update makes the next one report the whole framebuffer dirty).
        public var eventBuffer = 4096
        /// Presented when the server asks for a client certificate during TLS.
        public var clientIdentity: TLSClientIdentity?
        /// Makes the JPEG decoder for one connection (Tight JPEG); nil declines JPEG. A factory,
        /// not an instance: options are copied between clients, and a decoder (a libturbojpeg
        /// handle) must never serve two connections at once.
        public var makeJPEGDecoder: @Sendable () -> (any JPEGDecoding)? = { makeDefaultJPEGDecoder() }
        /// Sees every byte received from the server after TLS decryption (recording, tests).
        public var inboundTap: (@Sendable ([UInt8]) -> Void)?
        /// Dial this address instead of the endpoint's (the local end of an SSH tunnel); pins,
        /// names and messages still use the endpoint.
        public var dialHost: String?
        public var dialPort: Int?
        /// Carry the session over a byte stream the caller opens (an SSH `direct-tcpip` channel,
        /// one per connection) instead of dialling TCP; pins, names and messages still use the
        /// endpoint. Its errors reach the caller as they are. The opener runs `prepare` on the
        /// new channel before wrapping it (and before it can read): it installs the handler that
        /// hands reads to the client on the channel's event loop.
        public var openChannel: (@Sendable (_ prepare: @escaping @Sendable (any Channel) throws -> Void) async throws
                                 -> NIOAsyncChannel<ByteBuffer, ByteBuffer>)?

        public init() {}
    }

    public nonisolated let events: AsyncStream<RFBEvent>
    public nonisolated let endpoint: VNCEndpoint

    private let eventSink: AsyncStream<RFBEvent>.Continuation
    /// This actor's executor: the channel's event loop, or for a channel opened by the caller
    /// (SSH) another loop of the same group (see `InboundRelay`).
    nonisolated let eventLoop: any EventLoop
    public nonisolated var unownedExecutor: UnownedSerialExecutor { eventLoop.executor.asUnownedSerialExecutor() }
    private let options: Options
    private let logger: Logger
    private var core: RFBConnection
    private var channel: (any Channel)?
    /// The connection's one writer: `perform` queues what the core produced in the same actor
    /// step, so messages leave in the core's order however many tasks send at once.
    private let writer = OrderedWriter<ByteBuffer>()
    /// Input waits while more than this many bytes are queued for the server.
    private static let sendQueueLimit = 1 << 20
    private var readyWaiter: CheckedContinuation<ServerInfo, any Error>?
    private var nextWaiterID = 0
    /// The first complete frame: still awaited (by these waiters), or arrived.
    private enum FirstFrame {
        case awaited([Int: CheckedContinuation<Void, any Error>])
        case arrived
    }
    private var firstFrame = FirstFrame.awaited([:])
    /// Where the session stands.
    private enum Lifecycle {
        case open
        /// `close()` began: what the server sends from then on is read (so the socket closes
        /// cleanly) but not decoded — nobody will look at it, and a server flooding updates would
        /// keep the loop busy answering them. `halfClosed`: our side of the connection is shut and
        /// the server's end is expected (a read failure then is no error).
        case closing(halfClosed: Bool)
        /// Over: nil when it ended as asked, otherwise why.
        case ended(RFBError?)
    }
    private var lifecycle = Lifecycle.open
    private var ended: Bool { if case .ended = lifecycle { true } else { false } }
    private var endReason: RFBError? { if case .ended(let reason) = lifecycle { reason } else { nil } }
    private var halfClosed: Bool { if case .closing(halfClosed: true) = lifecycle { true } else { false } }
    private var closeWaiters: [CheckedContinuation<Void, Never>] = []
    private var handshakeDeadline: ContinuousClock.Instant?
    /// Answers the core's credential requests during the handshake.
    private var credentialProvider: VNCCredentialProvider?
    /// The read path: flowing, or a step running (TLS starting, a credentials prompt) while the
    /// input that arrives meanwhile waits, in order (`bytes` of it).
    private enum ReadStep {
        case flowing
        case waiting(deferred: [ByteBuffer], bytes: Int)
    }
    private var readStep = ReadStep.flowing
    private var awaitingStep: Bool { if case .waiting = readStep { true } else { false } }
    /// Why reading the socket is switched off: a step has more than `deferredInputLimit` waiting
    /// behind it, or the server is not reading what we send. Reading resumes when no reason is left.
    private enum ReadHold: Hashable {
        case step
        case sendQueue
    }
    private var readHolds: Set<ReadHold> = []
    private var drainWaiters: [CheckedContinuation<Void, Never>] = []
    private let tlsOutcome = TLSOutcome()
    private var input = InputTracker()
    /// Someone waiting for an event. Registered before the request that provokes the event is
    /// sent, so an answer arriving while the request is still being written is not missed.
    private struct EventWaiter {
        var predicate: @Sendable (RFBEvent) -> Bool
        var continuation: CheckedContinuation<RFBEvent, any Error>?
        var outcome: Result<RFBEvent, any Error>?
    }
    private var eventWaiters: [Int: EventWaiter] = [:]
    private var nextFenceID: UInt32 = 0
    /// How the link carried recent framebuffer updates (for a viewer's automatic quality).
    public struct UpdateTransfer: Sendable, Equatable {
        public var bytes: Int
        public var seconds: Double
    }
    private var transfers: [UpdateTransfer] = []
    private var transferStart: (time: ContinuousClock.Instant, bytes: Int)?

    /// The transfers recorded since the last call (at most the latest 256).
    public func takeUpdateTransfers() -> [UpdateTransfer] {
        defer { transfers = [] }
        return transfers
    }

    /// The server's clipboard text, as last received.
    public private(set) var serverClipboard: String?
    /// Fetches of the text offered by the last `setClipboard` (lazy servers), counted as they
    /// come so a fetch right after the offer is not missed by a wait that starts later.
    private var fetchesSinceOffer = 0

    /// What the server said during the handshake.
    public private(set) var serverInfo: ServerInfo?

    /// An update's dirty rectangles fell out of the event buffer (its consumer fell behind): the
    /// next update reports the whole framebuffer, so no region stays stale.
    private var lostUpdate = false

    private init(endpoint: VNCEndpoint, eventLoop: any EventLoop, options: Options, logger: Logger) {
        self.endpoint = endpoint
        self.eventLoop = eventLoop
        self.options = options
        self.logger = logger
        core = RFBConnection(configuration: options.configuration, jpegDecoder: options.makeJPEGDecoder())
        (events, eventSink) = AsyncStream.makeStream(of: RFBEvent.self, bufferingPolicy: .bufferingNewest(max(1, options.eventBuffer)))
    }

    /// Connects, authenticates and completes the RFB handshake. Returns once ServerInit has
    /// arrived; the first frame follows (see `waitForFirstFrame`).
    public static func connect(to endpoint: VNCEndpoint, credentials: @escaping VNCCredentialProvider,
                               options: Options = Options(), logger: Logger = Logger(label: "farcast.vnc")) async throws -> VNCClient {
        do {
            return try await connectOnce(to: endpoint, credentials: credentials, options: options, logger: logger)
        } catch RFBError.veNCryptUnusable(let subtypes, let fallback) {
            // VeNCrypt shows its subtypes only after it is chosen; when none of them can be
            // completed but a plain top-level type can, the second attempt skips VeNCrypt.
            logger.info("VeNCrypt offered nothing usable; connecting again without it",
                        metadata: ["subtypes": "\(subtypes)", "fallback": "\(fallback)"])
            var again = options
            again.configuration.avoidVeNCrypt = true
            return try await connectOnce(to: endpoint, credentials: credentials, options: again, logger: logger)
        }
    }

    private static func connectOnce(to endpoint: VNCEndpoint, credentials: @escaping VNCCredentialProvider,
                                    options: Options, logger: Logger) async throws -> VNCClient {
        let asyncChannel: NIOAsyncChannel<ByteBuffer, ByteBuffer>
        let relay = InboundRelay()
        let prepare: @Sendable (any Channel) throws -> Void = { try $0.pipeline.syncOperations.addHandler(relay) }
        if let open = options.openChannel {
            asyncChannel = try await open(prepare)
            logger.debug("stream opened", metadata: ["endpoint": "\(endpoint)"])
        } else {
            do {
                asyncChannel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .connectTimeout(.nanoseconds(Int64(options.connectTimeout.components.seconds) * 1_000_000_000
                        + options.connectTimeout.components.attoseconds / 1_000_000_000))
                    .channelOption(.socketOption(.tcp_nodelay), value: 1)
                    // Reads of up to 256 KiB while the server streams (NIO's default stops at 64 KiB):
                    // a quarter of the system calls on a busy link, for 192 KiB more buffer.
                    .channelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 256 << 10))
                    // A replay server (or a polite real one) half-closes: keep reading what it sent.
                    .channelOption(.allowRemoteHalfClosure, value: true)
                    .connect(host: options.dialHost ?? endpoint.host, port: options.dialPort ?? endpoint.port) { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try prepare(channel)
                            return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                        }
                    }
            } catch {
                var reason = describeNetworkError(error)
                if let hint = endpoint.displayHint { reason += " (\(hint))" }
                throw RFBError.connectFailed("\(endpoint): \(reason)")
            }
            logger.debug("TCP connected", metadata: ["endpoint": "\(endpoint)"])
        }
        // A plain (or TLS) socket is read and decoded on one thread, as other clients do. A
        // channel whose own loop works hard (SSH: decryption, window, packets) hands its bytes
        // to a client on another loop, so the two halves run on two cores.
        let channelLoop = asyncChannel.channel.eventLoop
        let clientLoop = options.openChannel == nil ? channelLoop : otherEventLoop(than: channelLoop)
        let client = VNCClient(endpoint: endpoint, eventLoop: clientLoop, options: options, logger: logger)
        return try await client.start(asyncChannel, relay: relay, credentials: credentials)
    }

    private func start(_ asyncChannel: NIOAsyncChannel<ByteBuffer, ByteBuffer>, relay: InboundRelay,
                       credentials: @escaping VNCCredentialProvider) async throws -> VNCClient {
        channel = asyncChannel.channel
        credentialProvider = credentials
        handshakeDeadline = .now + options.handshakeTimeout
        if endpoint.tlsFirst { try await startTLS() }
        if channel?.eventLoop === eventLoop {
            relay.attach(self)
        } else {
            // Attached before the read loop starts: what the server sent before that (and is
            // now posted to this loop) is decoded before the loop can see the stream's end.
            try await asyncChannel.channel.eventLoop.submit { relay.attach(self) }.get()
        }
        Task { await self.run(asyncChannel) }
        Task { await self.watchHandshake() }
        let info = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                if let serverInfo {
                    continuation.resume(returning: serverInfo)
                } else if let endReason {
                    continuation.resume(throwing: endReason)
                } else {
                    readyWaiter = continuation
                }
            }
        } onCancel: {
            Task { await self.cancelHandshake() }
        }
        logger.debug("session ready", metadata: ["name": "\(info.name)", "size": "\(info.width)x\(info.height)"])
        return self
    }

    private func cancelHandshake() {
        guard serverInfo == nil else { return }
        finish(.cancelled)
    }

    private func watchHandshake() async {
        // A server that says nothing may be waiting for TLS from the first byte: with time left
        // after 3 s (a handshake timeout over 5 s), say so then, not only when the wait ends.
        let notice = options.handshakeTimeout > .seconds(5) && !endpoint.tlsFirst ? ContinuousClock.now + .seconds(3) : nil
        var noticed = false
        while !ended && serverInfo == nil {
            if let deadline = handshakeDeadline, ContinuousClock.now >= deadline {
                finish(handshakeTimedOut())
                return
            }
            if let notice, !noticed, ContinuousClock.now >= notice, core.bytesReceived == 0 {
                noticed = true
                var withTLS = endpoint
                withTLS.tlsFirst = true
                logger.warning("the server has sent nothing for 3 s; if it expects TLS from the first byte (x11vnc -sslonly, stunnel), connect with \(withTLS) or --tls-first")
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
    }

    /// What a stalled handshake means, from how far the server got.
    private func handshakeTimedOut() -> RFBError {
        let seconds = options.handshakeTimeout.components.seconds
        let step = core.handshakeStep ?? "the session"
        if core.bytesReceived == 0 {
            if endpoint.tlsFirst {
                return .timedOut("after \(seconds) s: the TLS connection opened but the server sent no RFB banner")
            }
            return .timedOut("after \(seconds) s: the server accepted the connection but sent nothing — it is not a VNC server (a web server, for one, waits for the client to speak first), or it expects TLS from the first byte (x11vnc -sslonly, stunnel): then connect with vncs://HOST:PORT or --tls-first")
        }
        if core.handshakeStep == "its RFB banner" {
            return .timedOut("after \(seconds) s: the server has sent only \(core.bytesReceived) of the 12 bytes of its RFB banner (a very slow or stuck server)")
        }
        return .timedOut("after \(seconds) s waiting for \(step) from the server")
    }

    // MARK: - Public API

    /// A snapshot of the remote screen as decoded so far.
    public var framebuffer: Framebuffer { core.framebuffer }
    /// The monitor layout.
    /// Runs `body` with the framebuffer as it is now, inside the client's isolation: a viewer
    /// copies the rectangles an update changed without copying the whole picture.
    public func withFramebuffer<R: Sendable>(_ body: @Sendable (Framebuffer) -> R) -> R { body(core.framebuffer) }

    /// Lends the framebuffer's pixels to a thread outside the client's (a viewer window's):
    /// `body` runs on the calling thread with them (rows `width` words apart) while the client's
    /// event loop waits, so nothing is decoded into them meanwhile, and the loop goes on as soon
    /// as `body` returns — keep `body` to copying what changed. Returns false without calling
    /// `body` when called on the client's own loop or when the loop does not get to it within
    /// `patience` seconds (it is then not held either).
    public nonisolated func lendFramebuffer(patience: Double = 0.5,
                                            _ body: (_ width: Int, _ height: Int, UnsafeBufferPointer<UInt32>) -> Void) -> Bool {
        guard !eventLoop.inEventLoop else { return false }
        let loan = FramebufferLoan()
        eventLoop.execute {
            self.assumeIsolated { client in
                let framebuffer = client.core.framebuffer
                framebuffer.pixels.withUnsafeBufferPointer { loan.lend(width: framebuffer.width, height: framebuffer.height, $0) }
            }
        }
        guard let view = loan.borrow(patience: patience) else { return false }
        body(view.width, view.height, view.pixels)
        loan.giveBack()
        return true
    }

    /// Asks for JPEG at this quality level from now on (nil: lossless only), as a viewer that
    /// adapts to its link does.
    public func setJPEGQuality(_ quality: Int?) async throws {
        try await sendMessage(core.changeJPEGQuality(quality))
    }

    /// The JPEG quality level asked for (nil: lossless).
    public var jpegQuality: Int? { core.configuration.jpegQuality }

    /// Bytes received from the server so far (after TLS decryption).
    public var bytesReceived: Int { core.bytesReceived }

    public var screens: [RFBScreen] { core.screens }
    public var cursor: RFBCursor? { core.cursor }
    public var desktopName: String { core.desktopName }
    /// Counters for progress reports: updates, rectangles and pixels decoded.
    public var statistics: (updates: Int, rectangles: Int, pixels: Int) {
        (core.updatesReceived, core.rectanglesDecoded, core.pixelsDecoded)
    }
    /// Pixel-data rectangles decoded per encoding.
    public var rectanglesByEncoding: [RFBEncoding: Int] { core.rectanglesByEncoding }
    /// Tight rectangles that carried JPEG (lossy) data.
    public var tightJPEGRectangles: Int { core.tightJPEGRectangles }
    public var isConnected: Bool { !ended }
    /// The extensions the server has shown it supports so far (most appear with the first update).
    public var extensions: [String] {
        var list: [String] = []
        if core.serverSupportsExtendedDesktopSize { list.append("remote resize (ExtendedDesktopSize)") }
        if core.clipboard.isActive { list.append("UTF-8 clipboard (Extended Clipboard)") }
        if core.serverSupportsExtendedKeyEvents { list.append("scancodes (QEMU extended key events)") }
        if core.serverSupportsContinuousUpdates { list.append("continuous updates") }
        if core.serverSupportsFence { list.append("fence") }
        return list
    }
    /// Why the session ended, once it has.
    public var disconnectReason: RFBError? { endReason }

    /// Waits until every pixel of the framebuffer has been received once.
    public func waitForFirstFrame(timeout: Duration = .seconds(30)) async throws {
        if case .arrived = firstFrame { return }
        if let endReason { throw endReason }
        let id = nextWaiterID
        nextWaiterID += 1
        let timer = Task {
            try await Task.sleep(for: timeout)
            self.failWaiter(id, .timedOut("waiting for the first complete frame"))
        }
        defer { timer.cancel() }
        try await withCheckedThrowingContinuation { continuation in
            guard case .awaited(var waiters) = firstFrame else { return continuation.resume() }
            waiters[id] = continuation
            firstFrame = .awaited(waiters)
        }
    }

    private func failWaiter(_ id: Int, _ error: RFBError) {
        guard case .awaited(var waiters) = firstFrame, let waiter = waiters.removeValue(forKey: id) else { return }
        firstFrame = .awaited(waiters)
        waiter.resume(throwing: error)
    }

    /// Sends a message (input event, update request, resize request).
    public func send(_ message: ClientMessage) async throws {
        try await sendMessage(message)
    }

    /// Asks for an update of the whole screen.
    public func requestUpdate(incremental: Bool = true) async throws {
        guard !ended else { throw endReason ?? .notConnected }
        try await perform(core.requestUpdate(incremental: incremental), credentials: nil)
    }

    /// Closes the session, first releasing any key or button still held on the server.
    /// The close is graceful: our side is half-closed and the server's end awaited (at most
    /// `closeTimeout`), because closing a socket that still holds unread input sends a TCP reset,
    /// and a server that receives a reset may discard the last messages we sent — the releases.
    public func close(closeTimeout: Duration = .seconds(2)) async {
        guard !ended else { return }
        // (A view-only session has nothing held: the core refused every press.)
        for message in input.releaseAll() { try? await perform(core.send(message), credentials: nil) }
        guard !ended, let channel else { return finish(nil) }
        lifecycle = .closing(halfClosed: false)
        // The whole close takes at most `closeTimeout`: a server that has stopped reading cannot
        // hold it (the flush below would wait for it forever).
        let timer = Task {
            try await Task.sleep(for: closeTimeout)
            self.finish(nil)
        }
        defer { timer.cancel() }
        // The releases above are queued: let them reach the socket before our side closes.
        try? await flushWrites()
        guard !ended else { return }
        lifecycle = .closing(halfClosed: true)
        do {
            try await channel.close(mode: .output).get()
        } catch {
            return finish(nil)  // e.g. TLS channels that cannot half-close: close outright
        }
        if !ended { await withCheckedContinuation { closeWaiters.append($0) } }
    }

    /// Waits for the next event that satisfies `predicate` (events before the call do not count).
    public func waitForEvent(timeout: Duration, _ what: String = "the server",
                             where predicate: @escaping @Sendable (RFBEvent) -> Bool) async throws -> RFBEvent {
        let id = try registerWaiter(predicate)
        return try await awaitWaiter(id, timeout: timeout, what)
    }

    private func registerWaiter(_ predicate: @escaping @Sendable (RFBEvent) -> Bool) throws -> Int {
        if let endReason { throw endReason }
        guard !ended else { throw RFBError.notConnected }
        let id = nextWaiterID
        nextWaiterID += 1
        eventWaiters[id] = EventWaiter(predicate: predicate)
        return id
    }

    private func awaitWaiter(_ id: Int, timeout: Duration, _ what: String) async throws -> RFBEvent {
        if let outcome = eventWaiters[id]?.outcome {
            eventWaiters[id] = nil
            return try outcome.get()
        }
        guard eventWaiters[id] != nil else { throw endReason ?? RFBError.notConnected }
        let timer = Task {
            try await Task.sleep(for: timeout)
            self.eventWaiters.removeValue(forKey: id)?.continuation?.resume(throwing: RFBError.timedOut("waiting for \(what)"))
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { continuation in
            eventWaiters[id]?.continuation = continuation
        }
    }

    /// Sends `message` and waits for the event it provokes.
    private func send(_ message: ClientMessage, thenWaitFor what: String, timeout: Duration,
                      where predicate: @escaping @Sendable (RFBEvent) -> Bool) async throws -> RFBEvent {
        let id = try registerWaiter(predicate)
        do {
            try await sendMessage(message)
        } catch {
            eventWaiters[id] = nil
            throw error
        }
        return try await awaitWaiter(id, timeout: timeout, what)
    }

    private func sendMessage(_ message: ClientMessage) async throws {
        guard !ended else { throw endReason ?? .notConnected }
        try await perform(core.send(message), credentials: nil)
        // Queued already, in order; a sender faster than the server waits here for room.
        if writer.pendingBytes > Self.sendQueueLimit {
            do { try await writer.waitForRoom(limit: Self.sendQueueLimit) } catch { throw endReason ?? RFBError.notConnected }
        }
    }

    /// Returns once everything queued so far has been handed to the socket.
    private func flushWrites() async throws {
        do { try await writer.flush() } catch { throw endReason ?? RFBError.notConnected }
    }

    /// A failed write means the connection is going away: close it and let the read loop end
    /// the session, since it knows why (a server that rejects a password closes before our next
    /// write, and its reason is in what it sent, not in the write error).
    private func writeFailed(_ error: any Error) {
        logger.debug("write failed", metadata: ["error": "\(describeNetworkError(error))"])
        channel?.close(promise: nil)
    }

    /// Returns once the server has read and acted on everything sent before: a Fence round
    /// trip where the server supports fences, else a full update it sends after reading the
    /// request. Use it before reading back the effect of input, or before closing.
    public func sync(timeout: Duration = .seconds(10)) async throws {
        if core.serverSupportsFence {
            nextFenceID &+= 1
            let token = withUnsafeBytes(of: nextFenceID.bigEndian, Array.init)
            // Request + BlockBefore: answered only after everything before it is processed.
            _ = try await send(.clientFence(flags: 0x8000_0000 | 0x1, payload: token), thenWaitFor: "the server to answer a fence", timeout: timeout) {
                if case .fenceResponse(let payload) = $0 { payload == token } else { false }
            }
        } else {
            let width = core.framebuffer.width, height = core.framebuffer.height
            _ = try await send(.framebufferUpdateRequest(incremental: false, RFBRect(x: 0, y: 0, width: width, height: height)),
                               thenWaitFor: "a full update", timeout: timeout) { event in
                guard case .framebufferUpdated(let dirty, _) = event else { return false }
                return dirty.reduce(0) { $0 + $1.area } >= width * height
            }
        }
    }

    // MARK: - Clipboard and screen size

    /// How clipboard text reached the server.
    public enum ClipboardDelivery: Sendable, Equatable {
        /// The server has the text.
        case delivered
        /// The server was told text is available and fetches it when an application pastes
        /// (Extended Clipboard with notify/request, as TigerVNC does): it stays available only
        /// while this session is open. `.clipboardFetched` events report each fetch.
        case offered
    }

    /// Puts text on the server's clipboard (Extended Clipboard UTF-8 when offered, else Latin-1
    /// with "?" for characters outside it).
    @discardableResult
    public func setClipboard(_ text: String) async throws -> ClipboardDelivery {
        guard !ended else { throw endReason ?? .notConnected }
        let lazy = core.clipboard.isActive && core.clipboard.deliversLazily
        fetchesSinceOffer = 0
        try await perform(core.setClipboard(text), credentials: nil)
        return lazy ? .offered : .delivered
    }

    /// Returns once the server has fetched the text the last `setClipboard` offered — at once
    /// if it already has (an application may paste before the caller gets here) — or throws
    /// `RFBError.timedOut` after `timeout`.
    public func waitForClipboardFetch(timeout: Duration) async throws {
        if fetchesSinceOffer > 0 { return }
        _ = try await waitForEvent(timeout: timeout, "a paste on the remote desktop") { $0 == .clipboardFetched }
    }

    /// The server's clipboard text: the last text it announced during this session, else the
    /// next within `timeout` (nil if none comes). Extended Clipboard servers are asked for it,
    /// but most (TigerVNC, x11vnc) only tell a client about text copied while it is connected.
    public func clipboardText(timeout: Duration = .seconds(2)) async throws -> String? {
        if let serverClipboard { return serverClipboard }
        let id = try registerWaiter { if case .serverClipboard = $0 { true } else { false } }
        do {
            try await perform(core.requestClipboard(), credentials: nil)
            if case .serverClipboard(let text) = try await awaitWaiter(id, timeout: timeout, "the server's clipboard") { return text }
        } catch RFBError.timedOut {
            return nil
        } catch {
            eventWaiters[id] = nil
            throw error
        }
        return nil
    }

    /// Asks the server to change the desktop size (ExtendedDesktopSize servers such as Xvnc) and
    /// waits for the outcome. The monitor layout becomes one screen covering the new size.
    public func requestDesktopSize(width: Int, height: Int, timeout: Duration = .seconds(10)) async throws {
        let first = core.screens.first ?? RFBScreen(id: 0, x: 0, y: 0, width: width, height: height)
        try await requestDesktopLayout(width: width, height: height,
                                       screens: [RFBScreen(id: first.id, x: 0, y: 0, width: width, height: height, flags: first.flags)],
                                       timeout: timeout)
    }

    /// Asks for a desktop of `width`×`height` split into `screens` (monitors), and waits for the
    /// server to apply or refuse it. Screens keep their ids where the server knows them.
    public func requestDesktopLayout(width: Int, height: Int, screens: [RFBScreen], timeout: Duration = .seconds(10)) async throws {
        guard core.serverSupportsExtendedDesktopSize else {
            throw RFBError.unsupported("the server does not support remote resizing (no ExtendedDesktopSize)")
        }
        guard (1...Framebuffer.maximumDimension).contains(width), (1...Framebuffer.maximumDimension).contains(height) else {
            throw RFBError.unsupported("a desktop of \(width)×\(height) is outside 1…\(Framebuffer.maximumDimension)")
        }
        guard (1...255).contains(screens.count) else { throw RFBError.unsupported("a layout needs 1–255 screens, not \(screens.count)") }
        for s in screens where s.width < 1 || s.height < 1 || s.x < 0 || s.y < 0 || s.x + s.width > width || s.y + s.height > height {
            throw RFBError.unsupported("screen \(s.width)x\(s.height)+\(s.x)+\(s.y) does not lie inside \(width)x\(height)")
        }
        let started = ContinuousClock.now
        let outcome = try await send(.setDesktopSize(width: width, height: height, screens: screens),
                                     thenWaitFor: "the server to answer the resize", timeout: timeout) { event in
            switch event {
            case .resized(let w, let h, _): return w == width && h == height
            case .resizeRefused: return true
            default: return false
            }
        }
        guard case .resizeRefused(let status) = outcome else { return }
        if status == 4 {
            // "Forwarded": the server passed the request on (to a window manager, a host) and the
            // change may still come. Wait out the rest of the time for it.
            let remaining = timeout - (ContinuousClock.now - started)
            if core.framebuffer.width == width && core.framebuffer.height == height { return }
            do {
                _ = try await waitForEvent(timeout: max(remaining, .milliseconds(1)), "the forwarded resize") { event in
                    if case .resized(let w, let h, _) = event { w == width && h == height } else { false }
                }
                return
            } catch RFBError.timedOut {
                throw RFBError.unsupported("the server forwarded the request for \(width)×\(height) (status 4: it may complete later), but the desktop was still \(core.framebuffer.width)×\(core.framebuffer.height) after \(timeout.components.seconds) s")
            }
        }
        let meaning = [1: "resizing is administratively prohibited", 2: "the server is out of resources", 3: "the screen layout is invalid"][status] ?? "status \(status)"
        throw RFBError.unsupported("the server refused \(width)×\(height) with \(screens.count) screen(s): \(meaning)")
    }

    // MARK: - Input

    /// Presses or releases one key (`RFBConnection.keyMessages`: with QEMU extended key events
    /// and a known scancode the physical key travels too).
    public func key(_ keysym: UInt32, down: Bool, scancode: UInt32? = nil) async throws {
        guard input.key(keysym, down: down) else { return }
        for message in core.keyMessages(keysym, down: down, scancode: scancode) { try await sendMessage(message) }
    }

    /// Presses a combination such as "ctrl+alt+Delete": keys down in order, up in reverse.
    public func press(_ combination: String) async throws {
        try await press(keysyms: try Keysym.combination(combination))
    }

    /// Presses these keysyms in order and releases them in reverse.
    public func press(keysyms keys: [UInt32]) async throws {
        for k in keys { try await key(k, down: true) }
        for k in keys.reversed() { try await key(k, down: false) }
    }

    /// Types text, one key press per character (by keysym, so any layout on the server works).
    public func type(_ text: String) async throws {
        for keysym in Keysym.forText(text) {
            guard input.key(keysym, down: true) else { continue }
            for message in core.keyMessages(keysym, down: true, physicalKey: false) { try await sendMessage(message) }
            // Servers map keysyms their keymap lacks onto a spare keycode on demand (Xvnc), and
            // take it back or reuse it for the next such keysym; an application reads a key press
            // with the keymap as it is when it reads it. Such a key is therefore held the way a
            // typist holds it — the server has taken the press (a fence round trip), then
            // `remapHold` passes — so an application on a busy machine reads it while it is
            // still mapped.
            let mayRemap = RFBConnection.mayNeedKeymapChange(keysym)
            if mayRemap {
                if core.serverSupportsFence { try await sync() }
                try await Task.sleep(for: Self.remapHold)
            }
            _ = input.key(keysym, down: false)
            for message in core.keyMessages(keysym, down: false, physicalKey: false) { try await sendMessage(message) }
            if mayRemap && core.serverSupportsFence { try await sync() }
        }
    }

    /// How long `type` holds a key the server may have mapped for it: a typist's hold, which
    /// applications on a machine busy with three CPU-bound loops on two cores kept up with in
    /// the tests (pressed and released back to back, they read some as nothing).
    static let remapHold: Duration = .milliseconds(60)

    /// Where the pointer is (as last sent) and which buttons are held.
    public var pointer: (x: Int, y: Int, buttons: UInt16) { (input.x, input.y, input.buttons) }
    /// False until this session has moved the pointer or the server has said where it moved it
    /// (VMware cursor position: TigerVNC reports moves it did not get from this client, such as
    /// another client's or an application's); before that `pointer` reads (0, 0).
    public var pointerHasPosition: Bool { input.hasPosition }
    /// Whether the pointer's position is known, after asking the server for an update when it is
    /// not: TigerVNC sends the VMware cursor position with its next update, not on its own, so a
    /// move someone else made arrives only when this client asks. Waits at most `timeout` (a
    /// server with nothing new holds the request back).
    public func learnPointerPosition(timeout: Duration = .seconds(1)) async -> Bool {
        if input.hasPosition { return true }
        guard let id = try? registerWaiter({ if case .framebufferUpdated = $0 { true } else { false } }) else { return false }
        do {
            try await perform(core.requestUpdate(incremental: true), credentials: nil)
            _ = try await awaitWaiter(id, timeout: timeout, "an update")
        } catch {
            eventWaiters[id] = nil
        }
        return input.hasPosition
    }
    /// True once the server confirmed ExtendedMouseButtons: buttons 9–15 can then be sent.
    public var serverSupportsExtendedMouseButtons: Bool { core.serverSupportsExtendedMouseButtons }
    /// True once a QEMU server confirmed audio (asked for with `Configuration.audio`).
    public var serverSupportsAudio: Bool { core.serverSupportsAudio }

    /// Moves the pointer to a framebuffer position (clamped to the screen).
    public func movePointer(toX x: Int, y: Int) async throws {
        let p = input.move(toX: x, y: y, width: core.framebuffer.width, height: core.framebuffer.height)
        try await sendMessage(core.pointerMessage(buttons: input.buttons, x: p.x, y: p.y))
    }

    /// Puts the pointer at a framebuffer position with exactly these buttons held (bit 0 =
    /// button 1): one PointerEvent, as a viewer window sends them.
    public func setPointer(x: Int, y: Int, buttons: UInt16) async throws {
        var next = input
        let p = next.move(toX: x, y: y, width: core.framebuffer.width, height: core.framebuffer.height)
        next.setButtons(buttons)
        // Refused before the state changes when the server cannot carry these buttons.
        let message = try core.pointerMessage(buttons: next.buttons, x: p.x, y: p.y)
        input = next
        try await sendMessage(message)
    }

    /// Moves the pointer by a relative amount; fractions accumulate (trackpad motion, a viewer's
    /// relative mode). With `buttons`, exactly those are held afterwards (bit 0 = button 1).
    public func movePointer(byX dx: Double, y dy: Double, buttons: UInt16? = nil) async throws {
        var next = input
        let before = (next.x, next.y, next.buttons)
        let p = next.move(byX: dx, y: dy, width: core.framebuffer.width, height: core.framebuffer.height)
        if let buttons { next.setButtons(buttons) }
        // Nothing to send yet, but the fraction moved is kept.
        guard (p.x, p.y, next.buttons) != before else { input = next; return }
        // Refused before the state changes when the server cannot carry these buttons.
        let message = try core.pointerMessage(buttons: next.buttons, x: p.x, y: p.y)
        input = next
        try await sendMessage(message)
    }

    /// Presses or releases mouse button 1–15 (4/5 wheel up/down, 6/7 wheel left/right, 8/9 back
    /// and forward; 9–15 only with a server that has ExtendedMouseButtons).
    public func button(_ button: Int, down: Bool) async throws {
        guard (1...15).contains(button) else { throw RFBError.unsupported("mouse buttons are 1–15, not \(button)") }
        var next = input
        let buttons = next.button(button, down: down)
        // Refused before the state changes when the server cannot carry this button.
        let message = try core.pointerMessage(buttons: buttons, x: input.x, y: input.y)
        input = next
        try await sendMessage(message)
    }

    /// Moves to (x, y) and clicks `button` (1 left, 2 middle, 3 right).
    public func click(x: Int, y: Int, button: Int = 1, count: Int = 1) async throws {
        try await movePointer(toX: x, y: y)
        for _ in 0..<max(1, count) {
            try await self.button(button, down: true)
            try await self.button(button, down: false)
        }
    }

    public enum ScrollDirection: Int, Sendable { case up = 4, down = 5, left = 6, right = 7 }

    /// Turns the wheel: each click is a press and release of buttons 4–7.
    public func scroll(_ direction: ScrollDirection, clicks: Int = 1) async throws {
        for _ in 0..<max(1, clicks) {
            try await button(direction.rawValue, down: true)
            try await button(direction.rawValue, down: false)
        }
    }

    // MARK: - The read path

    /// Everything the socket delivers, in order, on the event loop that is this actor's executor
    /// (`InboundRelay` calls it synchronously from the pipeline). What the core answers is done
    /// at once, except the steps that must wait — TLS starting, credentials from a prompt — which
    /// continue in a task while later input waits in `readStep`, so order is kept.
    func received(_ buffer: ByteBuffer) {
        guard !ended else { return }
        if case .waiting(var deferred, let bytes) = readStep {
            // A live server waits while the client starts TLS or asks for a password, but one
            // that sends ahead (a replay writing a whole recorded session at once) must not be
            // held in memory without bound while a prompt stays open, nor fail for a slow
            // typist: past the limit the socket is read no further until the step is done —
            // TCP's own back-pressure. (Set again on every read while over: over SSH the relay
            // switches reading back on when its own backlog drains.)
            deferred.append(buffer)
            readStep = .waiting(deferred: deferred, bytes: bytes + buffer.readableBytes)
            if bytes + buffer.readableBytes > Self.deferredInputLimit { hold(.step) }
            return
        }
        consume(buffer)
    }

    /// How much input may wait while a step waits before reading stops.
    static let deferredInputLimit = 1 << 20

    /// Switches reading off for `reason` (again on every call: over SSH the relay also switches
    /// reading back on when its own backlog drains). True when the reason is new.
    @discardableResult
    private func hold(_ reason: ReadHold) -> Bool {
        channel?.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in }
        return readHolds.insert(reason).inserted
    }

    /// Lifts one reason; reading resumes once none is left.
    private func release(_ reason: ReadHold) {
        guard readHolds.remove(reason) != nil, readHolds.isEmpty, !ended, let channel else { return }
        channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
        channel.read()
    }

    private func consume(_ buffer: ByteBuffer) {
        guard case .open = lifecycle else { return }
        if let tap = options.inboundTap { tap(Array(buffer.readableBytesView)) }
        let arrived = ContinuousClock.now
        let actions = buffer.withUnsafeReadableBytes { core.receive($0) }
        if actions.contains(where: { if case .event(.framebufferUpdated) = $0 { true } else { false } }) {
            // The chunks after an update's first one, over the time they took: the link's pace
            // (idle time before the update and the first chunk, which may have waited in a
            // buffer, are not counted).
            if let start = transferStart {
                let d = arrived - start.time
                transfers.append(UpdateTransfer(bytes: core.bytesReceived - start.bytes, seconds: d.inSeconds))
            }
            transferStart = nil
            if transfers.count > 256 { transfers.removeFirst(transfers.count - 256) }
        } else if transferStart == nil && core.isReady {
            transferStart = (arrived, core.bytesReceived)
        }
        let rest: ArraySlice<RFBConnection.Action>
        do {
            rest = try performNow(actions[...])
        } catch {
            return failRead(error)
        }
        if writer.pendingBytes > Self.sendQueueLimit { pauseReading() }
        guard !rest.isEmpty else { return }
        readStep = .waiting(deferred: [], bytes: 0)
        Task { await self.continueRead(rest) }
    }

    /// The server is not reading what the client answers (every update is answered with a
    /// request): stop reading it until that queue is half drained, instead of queueing without
    /// bound — TCP's own back-pressure, one level up.
    private func pauseReading() {
        guard channel != nil, hold(.sendQueue) else { return }
        let writer = self.writer
        Task {
            try? await writer.waitForRoom(limit: Self.sendQueueLimit / 2)
            self.release(.sendQueue)
        }
    }

    /// Finishes the actions from the one that had to wait, then what arrived meanwhile.
    private func continueRead(_ actions: ArraySlice<RFBConnection.Action>) async {
        do {
            try await perform(Array(actions), credentials: credentialProvider)
        } catch {
            readStep = .flowing
            failRead(error)
            resumeDrainWaiters()
            return
        }
        var pending: [ByteBuffer] = []
        if case .waiting(let deferred, _) = readStep { pending = deferred }
        readStep = .flowing
        while !awaitingStep, !ended, !pending.isEmpty {
            consume(pending.removeFirst())
        }
        if awaitingStep {
            // Another step began (TLS, then a password): what still waits is ahead of anything
            // that arrives from now on, and counts toward its limit.
            let bytes = pending.reduce(0) { $0 + $1.readableBytes }
            readStep = .waiting(deferred: pending, bytes: bytes)
            if bytes > Self.deferredInputLimit { hold(.step) }
            return
        }
        resumeDrainWaiters()
        // Unless the send queue's own back-pressure holds reading off.
        release(.step)
    }

    private func failRead(_ error: any Error) {
        if halfClosed { return finish(nil) }
        finish(error as? RFBError ?? mapTransportError(error))
    }

    /// Returns once no input waits behind a step (the stream's end is handled after its data).
    private func inputDrained() async {
        guard awaitingStep else { return }
        await withCheckedContinuation { drainWaiters.append($0) }
    }

    private func resumeDrainWaiters() {
        for waiter in drainWaiters { waiter.resume() }
        drainWaiters = []
    }

    /// Runs the writer and watches the stream's end; the data itself reaches `received` through
    /// the relay (a channel opened without it delivers here instead, the slow way).
    private func run(_ asyncChannel: NIOAsyncChannel<ByteBuffer, ByteBuffer>) async {
        do {
            try await asyncChannel.executeThenClose { inbound, outbound in
                let writer = self.writer
                let writing = Task {
                    do {
                        try await writer.run { try await outbound.write($0) }
                    } catch {
                        self.writeFailed(error)
                    }
                }
                defer {
                    writer.finish()
                    writing.cancel()
                }
                for try await buffer in inbound {
                    received(buffer)
                    if ended || core.isClosed { break }
                }
                await inputDrained()
                if !ended && !core.isClosed && !halfClosed {
                    try await perform(core.connectionClosed(), credentials: credentialProvider)
                }
            }
        } catch {
            await inputDrained()
            failRead(error)
        }
        finish(nil)
    }

    /// Does the actions that need no waiting, in order, and returns the rest from the first one
    /// that does (TLS starting, credentials); empty when all are done.
    ///
    /// One read can complete thousands of messages (a server flooding empty updates; each update
    /// is answered with an update request), so what the core produced is handed on compactly:
    /// its bytes for the server leave as one write, and back-to-back `framebufferUpdated` events
    /// as one event listing all their rectangles. Bytes go out before any action that is not an
    /// event, and events keep their order among themselves (events go to the application, never
    /// to the wire, so their order against the bytes carries no meaning).
    private func performNow(_ actions: ArraySlice<RFBConnection.Action>) throws -> ArraySlice<RFBConnection.Action> {
        var queue = actions
        var outgoing: ByteBuffer?
        var heldUpdate: (dirty: [RFBRect], first: Bool)?
        func deliverHeldUpdate() {
            guard let update = heldUpdate else { return }
            heldUpdate = nil
            deliver(.framebufferUpdated(dirty: update.dirty, completesFirstFrame: update.first))
        }
        func release() throws {
            deliverHeldUpdate()
            guard let buffer = outgoing else { return }
            outgoing = nil
            logger.trace("send", metadata: ["bytes": "\(buffer.readableBytes)"])
            do {
                try writer.enqueue(buffer, bytes: buffer.readableBytes)
            } catch {
                throw endReason ?? RFBError.notConnected
            }
        }
        while let action = queue.first {
            switch action {
            case .send(let bytes):
                if outgoing == nil { outgoing = ByteBuffer() }
                outgoing!.writeBytes(bytes)
            case .event(.framebufferUpdated(let dirty, let first)):
                if heldUpdate == nil {
                    heldUpdate = (dirty, first)
                } else {
                    heldUpdate!.dirty += dirty      // in place: the held list has one owner
                    heldUpdate!.first = heldUpdate!.first || first
                }
            case .event(let event):
                deliverHeldUpdate()
                deliver(event)
            case .startTLS, .requestCredentials:
                try release()
                return queue
            case .verifyServerKey(let check):
                try release()
                try verifyServerKey(check)
                queue.removeFirst()
                queue += core.serverKeyVerified()
                continue
            case .ready(let info):
                try release()
                serverInfo = info
                handshakeDeadline = nil
                readyWaiter?.resume(returning: info)
                readyWaiter = nil
            case .close(let error):
                try release()
                finish(error)
            }
            queue.removeFirst()
        }
        try release()
        return queue
    }

    /// Hands one event to whoever waits for it and to the event stream.
    private func deliver(_ event: RFBEvent) {
        logger.trace("event", metadata: ["event": "\(event)"])
        if case .serverClipboard(let text) = event { serverClipboard = text }
        if event == .clipboardFetched { fetchesSinceOffer += 1 }
        for (id, waiter) in eventWaiters where waiter.outcome == nil && waiter.predicate(event) {
            if let continuation = waiter.continuation {
                eventWaiters[id] = nil
                continuation.resume(returning: event)
            } else {
                eventWaiters[id]?.outcome = .success(event)
            }
        }
        if case .pointerMoved(let x, let y) = event {
            // The server moved its pointer: a later press "in place" lands where it now is.
            _ = input.move(toX: x, y: y, width: core.framebuffer.width, height: core.framebuffer.height)
        }
        if case .framebufferUpdated(_, let first) = event, first, case .awaited(let waiters) = firstFrame {
            firstFrame = .arrived
            for waiter in waiters.values { waiter.resume() }
        }
        var outgoing = event
        if lostUpdate, case .framebufferUpdated(_, let first) = event {
            lostUpdate = false
            outgoing = .framebufferUpdated(dirty: [RFBRect(x: 0, y: 0, width: core.framebuffer.width, height: core.framebuffer.height)],
                                           completesFirstFrame: first)
        }
        if case .dropped(.framebufferUpdated) = eventSink.yield(outgoing) { lostUpdate = true }
    }

    private func perform(_ initial: [RFBConnection.Action], credentials: VNCCredentialProvider?) async throws {
        var queue = initial[...]
        while true {
            queue = try performNow(queue)
            guard let action = queue.popFirst() else { return }
            switch action {
            case .startTLS:
                // The TLS handler goes in front of the socket: what was queued before travels clear.
                try await flushWrites()
                try await startTLS()
                queue += core.tlsEstablished()
            case .requestCredentials(let request):
                guard let credentials else { throw RFBError.credentialsRequired("credentials") }
                // The user may take a while at a prompt: the handshake clock stops meanwhile.
                handshakeDeadline = nil
                let supplied = try await credentials(request)
                handshakeDeadline = .now + options.handshakeTimeout
                queue += core.provideCredentials(supplied)
            default:
                preconditionFailure("performNow leaves only the steps that wait")
            }
        }
    }

    /// RSA-AES has no certificates: the server's key is pinned on first use, per host and port,
    /// in the same trust store as TLS certificates.
    private func verifyServerKey(_ check: ServerKeyCheck) throws {
        let store = try options.trustStore ?? TrustStore(directory: StateDirectory.resolve(), fileName: "vnc/pins.json")
        let peer = "rsa-aes " + endpoint.pinKey
        switch try store.check(peer: peer, fingerprint: check.fingerprint, acceptChange: options.acceptChangedCertificate) {
        case .matchesPin:
            break
        case .pinnedOnFirstUse:
            logger.notice("pinned the RSA-AES key of \(endpoint.pinKey) on first use",
                          metadata: ["sha256": "\(check.fingerprint)", "tigervnc-fingerprint": "\(check.tigerVNCFingerprint)"])
        case .replacedPin(let previous):
            logger.notice("replaced the RSA-AES key pin of \(endpoint.pinKey) as asked (--trust)", metadata: ["old": "\(previous)", "new": "\(check.fingerprint)"])
        case .mismatch(let pinned):
            throw RFBError.serverKeyChanged(host: endpoint.pinKey, pinned: pinned, presented: check.fingerprint)
        }
    }

    private func startTLS() async throws {
        guard let channel else { throw RFBError.notConnected }
        #if os(Linux)
        if let method = core.chosenMethod, method.isAnonymousTLS {
            logger.info("anonymous TLS (\(method)): the session is encrypted, but without a certificate the server is not authenticated")
            try await channel.eventLoop.submit {
                try channel.pipeline.syncOperations.addHandler(AnonymousTLSHandler(), position: .first)
            }.get()
            return
        }
        #endif
        let store = try options.trustStore ?? TrustStore(directory: StateDirectory.resolve(), fileName: "vnc/pins.json")
        let peer = endpoint.pinKey
        let accept = options.acceptChangedCertificate
        let outcome = tlsOutcome
        let log = logger
        var tls = TLSConfiguration.makeClientConfiguration()
        // Certificates are checked against the trust-on-first-use pin below instead of a CA
        // chain (VNC servers use self-signed certificates); hostname checks need a chain.
        tls.certificateVerification = .noHostnameVerification
        if let identity = options.clientIdentity {
            tls.certificateChain = identity.certificateChain.map { .certificate($0) }
            tls.privateKey = .privateKey(identity.privateKey)
        }
        let context = try NIOSSLContext(configuration: tls)
        try await channel.eventLoop.submit {
            let handler = try NIOSSLClientHandler(context: context, serverHostname: nil) { certificates, promise in
                do {
                    guard let leaf = certificates.first else {
                        outcome.set(.failed("the server presented no certificate"))
                        promise.succeed(.failed)
                        return
                    }
                    let fingerprint = hexString(SHA256.hash(data: try leaf.toDERBytes()))
                    // A new pin is written only once the server speaks through TLS (below): a
                    // server that then refuses us (no client certificate) is not pinned.
                    switch try store.evaluate(peer: peer, fingerprint: fingerprint, acceptChange: accept) {
                    case .matchesPin:
                        outcome.set(.accepted(pin: nil))
                        promise.succeed(.certificateVerified)
                    case .pinnedOnFirstUse:
                        outcome.set(.accepted(pin: (fingerprint, "pinned the TLS certificate of \(peer) on first use")))
                        promise.succeed(.certificateVerified)
                    case .replacedPin(let previous):
                        outcome.set(.accepted(pin: (fingerprint, "replaced the TLS pin of \(peer) as asked (--trust); it was \(previous)")))
                        promise.succeed(.certificateVerified)
                    case .mismatch(let pinned):
                        outcome.set(.mismatch(pinned: pinned, presented: fingerprint))
                        promise.succeed(.failed)
                    }
                } catch {
                    outcome.set(.failed("cannot check the certificate pin: \(error)"))
                    promise.succeed(.failed)
                }
            }
            let completion = TLSSessionProof {
                guard case .accepted(let pin)? = outcome.get() else { return }
                outcome.set(.completed)
                guard let pin else { return }
                do {
                    try store.record(peer: peer, fingerprint: pin.fingerprint)
                    log.notice("\(pin.message)", metadata: ["sha256": "\(pin.fingerprint)"])
                } catch {
                    log.warning("could not save the TLS pin of \(peer): \(error)")
                }
            }
            try channel.pipeline.syncOperations.addHandler(handler, position: .first)
            try channel.pipeline.syncOperations.addHandler(completion, position: .after(handler))
        }.get()
    }

    private func mapTransportError(_ error: any Error) -> RFBError {
        switch tlsOutcome.get() {
        case .mismatch(let pinned, let presented):
            return .certificateChanged(host: endpoint.pinKey, pinned: pinned, presented: presented)
        case .failed(let reason):
            return .tlsFailed(reason)
        case .accepted where options.clientIdentity == nil && (error as? NIOSSLError) == .uncleanShutdown:
            // The server showed its certificate, we showed none, and it hung up without an alert
            // (GnuTLS servers such as QEMU with verify-peer=yes do; OpenSSL ones send an alert).
            return .tlsFailed("the server closed the connection during the TLS handshake, after we presented no client certificate — it probably requires one: give it with --client-cert and --client-key")
        case .accepted, .completed, nil:
            #if os(Linux)
            if let anonymous = error as? AnonymousTLSHandler.Failure { return .tlsFailed(anonymous.description) }
            #endif
            if let failure = TLSFailure(error), options.clientIdentity == nil,
               failure.peerAlerts.contains(where: TLSAlert.clientCertificateMissing.contains) {
                return .tlsFailed("\(describeNetworkError(error)) — the server requires a client certificate: give one with --client-cert and --client-key")
            }
            if error is NIOSSLError || error is BoringSSLError { return .tlsFailed(describeNetworkError(error)) }
            // Say where the session was when the connection broke, and the OS reason.
            if case .close(let reason)? = core.connectionClosed(cause: describeNetworkError(error)).first { return reason }
            return .connectionClosed("with an error: \(describeNetworkError(error))")
        }
    }

    private func finish(_ error: RFBError?) {
        guard !ended else { return }
        lifecycle = .ended(error)
        handshakeDeadline = nil
        let failure = error ?? .connectionClosed("before the handshake finished")
        readyWaiter?.resume(throwing: failure)
        readyWaiter = nil
        if case .awaited(let waiters) = firstFrame {
            firstFrame = .awaited([:])
            for waiter in waiters.values { waiter.resume(throwing: error ?? .connectionClosed("before the first frame was complete")) }
        }
        let waiterFailure = error ?? RFBError.connectionClosed("while waiting for the server")
        for (id, waiter) in eventWaiters {
            if let continuation = waiter.continuation {
                continuation.resume(throwing: waiterFailure)
                eventWaiters[id] = nil
            } else if waiter.outcome == nil {
                eventWaiters[id]?.outcome = .failure(waiterFailure)
            }
        }
        eventSink.yield(.disconnected(error))
        eventSink.finish()
        channel?.close(promise: nil)
        for waiter in closeWaiters { waiter.resume() }
        closeWaiters = []
    }
}

/// Another loop of the shared group than `loop` (the same one when the group has only one).
private func otherEventLoop(than loop: any EventLoop) -> any EventLoop {
    for candidate in MultiThreadedEventLoopGroup.singleton.makeIterator() where !(candidate === loop) {
        return candidate
    }
    return loop
}
