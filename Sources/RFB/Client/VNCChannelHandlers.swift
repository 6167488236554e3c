import NIOCore
import Synchronization

// The channel handlers a `VNCClient` puts in its pipeline: the relay of what arrives to the
// client (with its back-pressure), and the TLS handshake's outcome.

/// Runs `proven` once the server has spoken through the TLS session in front of it: the first
/// bytes it decrypts. Not the handshake's completion — in TLS 1.3 the client completes before the
/// server has judged the client's certificate (or its absence), so a server requiring one hangs
/// up only after that.
final class TLSSessionProof: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    private var proven: (@Sendable () -> Void)?

    init(_ proven: @escaping @Sendable () -> Void) {
        self.proven = proven
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if let proven {
            self.proven = nil
            proven()
        }
        context.fireChannelRead(data)
    }
}

/// What the TLS verification callback decided, read back when the handshake fails.
final class TLSOutcome: Sendable {
    enum Value: Sendable {
        case mismatch(pinned: String, presented: String)
        case failed(String)
        /// The certificate passed; the server has not yet spoken through TLS. `pin` is the
        /// fingerprint to record once it has (nil when the pin already matched), with what to log.
        case accepted(pin: (fingerprint: String, message: String)?)
        case completed
    }

    private let value = Mutex<Value?>(nil)
    func set(_ v: Value) { value.withLock { $0 = v } }
    func get() -> Value? { value.withLock { $0 } }
}

/// The handler that hands every read to its `VNCClient`. When the client's executor is the
/// channel's event loop, synchronously: the read runs inside the client's isolation with no hop or
/// wake-up per chunk. When the client runs on another loop (a channel whose own loop has heavy
/// work, SSH), each read is posted there in order, and the channel stops reading while more than
/// `pauseAbove` bytes wait to be decoded, so a decoder slower than the link holds the stream back
/// instead of buffering it. Reads before the client attaches (a server that speaks first) wait
/// for it. It consumes reads; the end of the stream and errors travel on to the async channel
/// behind it.
final class InboundRelay: ChannelInboundHandler, @unchecked Sendable {
    // @unchecked: `client`, `early`, `batch` and `context` are touched only on the channel's event loop
    // (NIO calls the handler there and `attach` is run there); `backlog` is locked.
    typealias InboundIn = ByteBuffer
    static let pauseAbove = 4 << 20
    private var client: VNCClient?
    private var early: [ByteBuffer] = []
    private var batch: [ByteBuffer] = []
    private var batchBytes = 0
    private var context: ChannelHandlerContext?
    private let backlog = Mutex<(bytes: Int, paused: Bool)>((0, false))

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    /// On the channel's event loop.
    func attach(_ client: VNCClient) {
        self.client = client
        let waiting = early
        early = []
        for buffer in waiting { deliver(buffer, to: client) }
        if let context { postBatch(context) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        guard let client else { return early.append(buffer) }
        deliver(buffer, to: client)
    }

    private func deliver(_ buffer: ByteBuffer, to client: VNCClient) {
        if client.eventLoop.inEventLoop {
            client.assumeIsolated { $0.received(buffer) }
            return
        }
        // Posted once per read burst (at channelReadComplete): one wake-up of the client's loop
        // for many packets.
        batch.append(buffer)
        batchBytes += buffer.readableBytes
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        postBatch(context)
        context.fireChannelReadComplete()
    }

    // The stream's end and errors reach the client after the reads before them.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        postBatch(context)
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        postBatch(context)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        postBatch(context)
        context.fireErrorCaught(error)
    }

    private func postBatch(_ context: ChannelHandlerContext) {
        guard let client, !batch.isEmpty else { return }
        let buffers = batch, count = batchBytes
        batch = []
        batchBytes = 0
        let pause = backlog.withLock { state in
            state.bytes += count
            guard state.bytes > Self.pauseAbove, !state.paused else { return false }
            state.paused = true
            return true
        }
        if pause { context.channel.setOption(ChannelOptions.autoRead, value: false).whenComplete { _ in } }
        let channelLoop = context.eventLoop
        client.eventLoop.execute {
            client.assumeIsolated { client in
                for buffer in buffers { client.received(buffer) }
            }
            self.decoded(count, channelLoop: channelLoop)
        }
    }

    /// On the client's loop, after a posted read was consumed.
    private func decoded(_ count: Int, channelLoop: any EventLoop) {
        let resume = backlog.withLock { state in
            state.bytes -= count
            guard state.paused, state.bytes <= Self.pauseAbove / 2 else { return false }
            state.paused = false
            return true
        }
        guard resume else { return }
        channelLoop.execute {
            guard let context = self.context else { return }
            context.channel.setOption(ChannelOptions.autoRead, value: true).whenComplete { _ in }
            context.read()
        }
    }
}
