import NIOCore
import NIOEmbedded
import NIOWebSocket
@testable import Sendspin
import FarcastSupport
import Testing

/// `WebSocketConnection`'s frame rules (RFC 6455), frame by frame on a test channel: the peer
/// here is the test writing frames in and reading the ones sent. Real servers over the wire are
/// in the Sendspin integration suites (aiosendspin dials and is dialled through it).
struct WebSocketConnectionTests {
    private func open(_ role: WebSocketConnection.Role, maxMessageSize: Int = 64) async throws -> (NIOAsyncTestingChannel, WebSocketConnection) {
        let channel = NIOAsyncTestingChannel()
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).get()
        let connection = try await channel.eventLoop.submit {
            try WebSocketConnection(upgraded: channel, role: role, maxMessageSize: maxMessageSize)
        }.get()
        return (channel, connection)
    }

    private func frame(_ opcode: WebSocketOpcode, _ text: String, fin: Bool = true, masked: Bool = false, rsv1: Bool = false) -> WebSocketFrame {
        var data = ByteBuffer(string: text)
        let key: WebSocketMaskingKey? = masked ? WebSocketMaskingKey([1, 2, 3, 4]) : nil
        if let key { data.webSocketMask(key) }
        return WebSocketFrame(fin: fin, rsv1: rsv1, opcode: opcode, maskKey: key, data: data)
    }

    /// Collects what `run` hands over until it returns.
    private func receiving(_ connection: WebSocketConnection, stopAfter: Int = .max) -> (Task<WebSocketConnection.Ending, Never>, Locked<[WebSocketConnection.Message]>) {
        let got = Locked<[WebSocketConnection.Message]>([])
        let task = Task {
            await connection.run { message, _ in
                got.withLock { got in
                    got.append(message)
                    return got.count < stopAfter
                }
            }
        }
        return (task, got)
    }

    /// The code of a close frame this end sent. (A frame read back here is as the connection
    /// wrote it: its data still plain, the mask key beside it for the encoder to apply.)
    private func closeCode(_ frame: WebSocketFrame?) -> WebSocketErrorCode? {
        guard let frame, frame.opcode == .connectionClose else { return nil }
        var data = frame.data
        return data.readWebSocketErrorCode()
    }

    @Test func fragmentsAreJoinedAndMessagesBeforeRunAreKept() async throws {
        let (channel, connection) = try await open(.server)
        // Read before anyone listens: kept for `run`. Masked, as from a client.
        try await channel.writeInbound(frame(.text, "hello", masked: true))
        try await channel.writeInbound(frame(.binary, "ab", fin: false, masked: true))
        try await channel.writeInbound(frame(.ping, "are you there", masked: true))
        try await channel.writeInbound(frame(.continuation, "cd", masked: true))
        let (task, got) = receiving(connection, stopAfter: 2)
        #expect(await task.value == .stopped)
        #expect(got.withLock { $0 } == [.text("hello"), .binary(ByteBuffer(string: "abcd"))])
        // The ping in the middle of the fragments was answered with its data, unmasked from a server.
        let pong = try #require(try await channel.readOutbound(as: WebSocketFrame.self))
        #expect(pong.opcode == .pong && pong.maskKey == nil && pong.data == ByteBuffer(string: "are you there"))
    }

    @Test func aClientMasksWhatItSendsAndClosesWithACode() async throws {
        let (channel, connection) = try await open(.client)
        try await connection.write(.text("client/hello")).get()
        let sent = try #require(try await channel.readOutbound(as: WebSocketFrame.self))
        #expect(sent.opcode == .text && sent.fin && sent.maskKey != nil)
        #expect(sent.data == ByteBuffer(string: "client/hello"))
        let closing = Task { await connection.close(code: .normalClosure, timeout: .seconds(5)) }
        let close = try await channel.waitForOutboundWrite(as: WebSocketFrame.self)
        #expect(closeCode(close) == .normalClosure && close.maskKey != nil)
        // The server's answer ends it.
        try await channel.writeInbound(frame(.connectionClose, ""))
        try await channel.closeFuture.get()
        await closing.value
        #expect(try await channel.eventLoop.submit { channel.isActive }.get() == false)
    }

    @Test func thePeersCloseIsAnsweredWithItsCodeAndEndsTheRun() async throws {
        let (channel, connection) = try await open(.client)
        let (task, _) = receiving(connection)
        var goingAway = ByteBuffer()
        goingAway.write(webSocketErrorCode: .goingAway)
        try await channel.writeInbound(WebSocketFrame(fin: true, opcode: .connectionClose, data: goingAway))
        #expect(await task.value == .closed)
        #expect(closeCode(try await channel.readOutbound(as: WebSocketFrame.self)) == .goingAway)
    }

    @Test(arguments: [
        ("a message over the limit", WebSocketErrorCode.messageTooLarge),
        ("fragments over the limit", .messageTooLarge),
        ("a reserved bit", .protocolError),
        ("a continuation with nothing to continue", .protocolError),
        ("a new message inside a fragmented one", .protocolError),
    ])
    func aBrokenRuleClosesWithItsCode(rule: String, code: WebSocketErrorCode) async throws {
        let (channel, connection) = try await open(.client, maxMessageSize: 8)
        let (task, got) = receiving(connection)
        let frames: [WebSocketFrame] = switch rule {
        case "a message over the limit": [frame(.binary, "123456789")]
        case "fragments over the limit": [frame(.binary, "12345", fin: false), frame(.continuation, "6789")]
        case "a reserved bit": [frame(.text, "x", rsv1: true)]
        case "a continuation with nothing to continue": [frame(.continuation, "x")]
        default: [frame(.text, "a", fin: false), frame(.text, "b")]
        }
        for f in frames { try await channel.writeInbound(f) }
        #expect(await task.value == .closed, "\(rule)")
        #expect(closeCode(try await channel.readOutbound(as: WebSocketFrame.self)) == code, "\(rule)")
        #expect(got.withLock { $0 }.isEmpty, "\(rule)")
    }
}
