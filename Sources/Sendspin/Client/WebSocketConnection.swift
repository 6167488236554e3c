import FarcastNIO
import FarcastSupport
import NIOCore
import NIOWebSocket

/// One open WebSocket (RFC 6455), run on its channel's event loop — what the dialler and the
/// listener hand a session after the upgrade.
///
/// Each whole message goes to the receiver on the loop, inside the read that completed it, with
/// the time of that read (`CLOCK_MONOTONIC_RAW` µs, the player's clock): no task hop and no
/// async sequence per message. A message sent from the loop goes straight into the channel, so
/// it has reached the socket when `write` returns. Both matter to a player: the clock filter's
/// t1 and t4 are taken next to the socket, not after a hop whose length varies, and a message
/// costs one pass down the pipeline. (swift-websocket's handler, which this replaces, writes
/// through an actor on the shared pool and reads through an async sequence: two thread hops per
/// message sent, one task switch per message read.)
///
/// Pings are answered, fragments joined (a message over `maxMessageSize` closes with 1009),
/// reserved bits and stray continuations close with 1002, and a close is answered and ends the
/// connection. Frames are masked when this end is the client.
public final class WebSocketConnection: Sendable {
    public enum Role: Sendable { case client, server }

    /// A whole message, either way.
    public enum Message: Sendable, Equatable {
        case text(String)
        case binary(ByteBuffer)
    }

    /// Why `run` returned.
    public enum Ending: Sendable, Equatable {
        /// The receiver asked to stop.
        case stopped
        /// The peer closed (a close frame or the TCP connection), the connection failed, or the
        /// task was cancelled.
        case closed
    }

    public let channel: any Channel
    public let role: Role
    /// The connection's event loop as a task executor: the session's tasks run there.
    public let executor: EventLoopExecutor
    private let messages: NIOLoopBound<MessageHandler>

    /// Adds the message handling to an upgraded pipeline (on its event loop, after the frame
    /// codec the upgrader installed).
    init(upgraded channel: any Channel, role: Role, maxMessageSize: Int) throws {
        self.channel = channel
        self.role = role
        executor = EventLoopExecutor(channel.eventLoop)
        let handler = MessageHandler(role: role, maxMessageSize: maxMessageSize)
        messages = NIOLoopBound(handler, eventLoop: channel.eventLoop)
        try channel.pipeline.syncOperations.addHandler(ReadStamp(handler), position: .first)
        try channel.pipeline.syncOperations.addHandler(handler)
    }

    /// Hands each message to `receive` (on the loop, with its read's time) until `receive`
    /// returns false, the connection closes, or the task is cancelled (which closes it).
    /// Messages that arrived before the call are handed over first.
    public func run(receive: @escaping @Sendable (Message, _ arrival: Int64) -> Bool) async -> Ending {
        let messages = self.messages
        let channel = self.channel
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (done: CheckedContinuation<Ending, Never>) in
                if channel.eventLoop.inEventLoop {
                    messages.value.start(receive: receive, done: done)
                } else {
                    channel.eventLoop.execute { messages.value.start(receive: receive, done: done) }
                }
            }
        } onCancel: {
            channel.close(promise: nil)
        }
    }

    /// Sends one message; from the loop it has been handed to the socket when this returns (the
    /// future completes once it is written, or fails).
    @discardableResult
    public func write(_ message: Message) -> EventLoopFuture<Void> {
        let frame = switch message {
        case .text(let text): role.frame(.text, channel.allocator.buffer(string: text))
        case .binary(let bytes): role.frame(.binary, bytes)
        }
        return channel.writeAndFlush(frame)
    }

    /// Sends a close frame with `code` and waits for the peer's (at most `timeout`), then closes
    /// the connection. Returns once it is closed.
    public func close(code: WebSocketErrorCode = .normalClosure, timeout: TimeAmount = .seconds(1)) async {
        let messages = self.messages
        let channel = self.channel
        channel.eventLoop.execute { messages.value.sendClose(code: code, timeout: timeout, channel: channel) }
        try? await channel.closeFuture.get()
    }
}

extension WebSocketConnection.Role {
    /// A whole frame as this end sends it: masked from the client (RFC 6455 §5.3).
    fileprivate func frame(_ opcode: WebSocketOpcode, _ data: ByteBuffer) -> WebSocketFrame {
        WebSocketFrame(fin: true, opcode: opcode, maskKey: self == .client ? .random() : nil, data: data)
    }
}

/// First in the pipeline: notes when bytes were read, before TLS and the frame decoder, so
/// every message decoded from that read carries the read's time.
private final class ReadStamp: ChannelInboundHandler {
    typealias InboundIn = NIOAny
    private let messages: MessageHandler

    init(_ messages: MessageHandler) { self.messages = messages }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        messages.readAt = SystemClock(.monotonicRaw).now().microseconds
        context.fireChannelRead(data)
    }
}

/// Last in the pipeline: joins fragments, answers control frames, delivers messages.
private final class MessageHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = WebSocketFrame
    typealias OutboundOut = WebSocketFrame

    private let role: WebSocketConnection.Role
    private let maxMessageSize: Int
    /// When the bytes being decoded were read (set by `ReadStamp`).
    var readAt: Int64 = 0
    private var receive: (@Sendable (WebSocketConnection.Message, Int64) -> Bool)?
    private var done: CheckedContinuation<WebSocketConnection.Ending, Never>?
    private var ended: WebSocketConnection.Ending?
    /// Messages read before `start`.
    private var early: [(WebSocketConnection.Message, Int64)] = []
    /// A fragmented message being joined: its opcode and the data so far.
    private var fragments: (opcode: WebSocketOpcode, data: ByteBuffer)?
    private var sentClose = false
    private var context: ChannelHandlerContext?

    init(role: WebSocketConnection.Role, maxMessageSize: Int) {
        self.role = role
        self.maxMessageSize = maxMessageSize
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func start(receive: @escaping @Sendable (WebSocketConnection.Message, Int64) -> Bool,
               done: CheckedContinuation<WebSocketConnection.Ending, Never>) {
        self.receive = receive
        self.done = done
        // What was read before the session was ready goes first, even if the end came since.
        let early = self.early
        self.early = []
        for (message, arrival) in early where !receive(message, arrival) {
            return finish(.stopped)
        }
        if let ended { finish(ended) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        guard ended == nil else { return }
        guard !frame.rsv1, !frame.rsv2, !frame.rsv3 else { return fail(.protocolError, context: context) }
        switch frame.opcode {
        case .text, .binary:
            guard fragments == nil else { return fail(.protocolError, context: context) }
            guard frame.length <= maxMessageSize else { return fail(.messageTooLarge, context: context) }
            if frame.fin {
                received(frame.opcode, frame.unmaskedData)
            } else {
                fragments = (frame.opcode, frame.unmaskedData)
            }
        case .continuation:
            guard let (opcode, sofar) = fragments else { return fail(.protocolError, context: context) }
            guard sofar.readableBytes + frame.length <= maxMessageSize else { return fail(.messageTooLarge, context: context) }
            fragments = nil
            var data = sofar
            var more = frame.unmaskedData
            data.writeBuffer(&more)
            if frame.fin {
                received(opcode, data)
            } else {
                fragments = (opcode, data)
            }
        case .ping:
            guard frame.fin else { return fail(.protocolError, context: context) }
            context.writeAndFlush(wrapOutboundOut(role.frame(.pong, frame.unmaskedData)), promise: nil)
        case .pong:
            break
        case .connectionClose:
            // Answered with the same code (if not already closing), then the connection ends.
            var data = frame.unmaskedData
            sendCloseFrame(data.readWebSocketErrorCode(), context: context)
            context.close(promise: nil)
            finish(.closed)
        default:
            fail(.protocolError, context: context)
        }
    }

    private func received(_ opcode: WebSocketOpcode, _ data: ByteBuffer) {
        let message: WebSocketConnection.Message = opcode == .text ? .text(String(buffer: data)) : .binary(data)
        guard let receive else { return early.append((message, readAt)) }
        if !receive(message, readAt) { finish(.stopped) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(.closed)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
        finish(.closed)
    }

    /// Our close: the frame, then the connection is closed when the peer answers or `timeout` passes.
    /// The timeout is armed whatever else happens, so the wait in `close` is always bounded.
    func sendClose(code: WebSocketErrorCode, timeout: TimeAmount, channel: any Channel) {
        guard channel.isActive else { return }
        channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        if let context { sendCloseFrame(code, context: context) }
    }

    /// A broken rule: close with `code` and end.
    private func fail(_ code: WebSocketErrorCode, context: ChannelHandlerContext) {
        sendCloseFrame(code, context: context)
        context.close(promise: nil)
        finish(.closed)
    }

    /// The one close frame this end sends (none after it).
    private func sendCloseFrame(_ code: WebSocketErrorCode?, context: ChannelHandlerContext) {
        guard !sentClose else { return }
        sentClose = true
        var reason = context.channel.allocator.buffer(capacity: 2)
        if let code { reason.write(webSocketErrorCode: code) }
        context.writeAndFlush(wrapOutboundOut(role.frame(.connectionClose, reason)), promise: nil)
    }

    /// The first ending counts; `run` learns it now, or from `start` if it has not begun.
    private func finish(_ ending: WebSocketConnection.Ending) {
        if ended == nil { ended = ending }
        fragments = nil
        guard let done, let ended else { return }
        self.done = nil
        receive = nil
        done.resume(returning: ended)
    }
}
