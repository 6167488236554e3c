import CZlib
import FarcastSupport
@testable import RFB
import Testing

/// Classic and Extended Clipboard, as a server would drive them.
@Suite struct ClipboardTests {
    private func ready() -> Harness {
        var h = Harness()
        h.feed(ServerScript.handshake(width: 4, height: 4).bytes)
        h.actions = []
        return h
    }

    /// ServerCutText with a negative length: the extended form.
    private func extended(_ flags: UInt32, _ payload: [UInt8] = []) -> [UInt8] {
        var w = ByteWriter()
        w.writeUInt8(3)
        w.writeZeros(3)
        w.writeInteger(-Int32(4 + payload.count))
        w.writeInteger(flags)
        w.writeBytes(payload)
        return w.bytes
    }

    private func serverCaps(_ actions: UInt32) -> [UInt8] {
        var sizes = ByteWriter()
        sizes.writeInteger(UInt32(20 << 20))  // text: the only format flagged, one size
        return extended(ExtendedClipboard.caps | actions | ExtendedClipboard.text, sizes.bytes)
    }

    /// The payload of an extended client message, or nil for another message.
    private func clientFlags(_ message: [UInt8]) -> (flags: UInt32, payload: [UInt8])? {
        var r = ByteReader(message)
        guard (try? r.readUInt8()) == 6, (try? r.skip(3)) != nil, let length = try? r.readInteger(as: Int32.self), length < 0,
              let flags = try? r.readInteger(as: UInt32.self), let rest = try? r.readBytes(Int(-length) - 4) else { return nil }
        return (flags, rest)
    }

    private func inflate(_ data: [UInt8]) -> [UInt8] {
        try! ExtendedClipboard.inflateAll(data, limit: 1 << 20)
    }

    @Test func classicClipboardIsLatin1WithQuestionMarksForTheRest() throws {
        var h = ready()
        h.actions = try h.connection.setClipboard("café ☕ ok")
        #expect(h.sent == [ClientMessage.clientCutText([0x63, 0x61, 0x66, 0xE9, 0x20, 0x3F, 0x20, 0x6F, 0x6B]).encoded()])
        h.actions = []
        h.feed([3, 0, 0, 0, 0, 0, 0, 3, 0x41, 0xE9, 0x42])
        #expect(h.events == [.serverClipboard("AéB")])
    }

    @Test func capsAreAnsweredWithOurs() {
        var h = ready()
        h.feed(serverCaps(ExtendedClipboard.request | ExtendedClipboard.notify | ExtendedClipboard.provide))
        #expect(h.connection.clipboard.isActive)
        guard let reply = h.sent.first.flatMap(clientFlags) else { Issue.record("no caps reply"); return }
        #expect(reply.flags & ExtendedClipboard.caps != 0 && reply.flags & ExtendedClipboard.text != 0)
        #expect(reply.flags & ExtendedClipboard.provide != 0 && reply.flags & ExtendedClipboard.notify != 0)
        #expect(reply.payload == [0x02, 0, 0, 0], "one size, for text: 32 MiB")
    }

    @Test func serverTextIsRequestedOnNotifyAndDecodedFromProvide() throws {
        var h = ready()
        h.feed(serverCaps(ExtendedClipboard.request | ExtendedClipboard.notify | ExtendedClipboard.provide))
        h.actions = []
        h.feed(extended(ExtendedClipboard.notify | ExtendedClipboard.text))
        #expect(h.sent.compactMap(clientFlags).map(\.flags) == [ExtendedClipboard.request | ExtendedClipboard.text])
        h.actions = []
        // The server provides "Grüße\r\n日本" (UTF-8, CRLF, NUL-terminated) compressed.
        let utf8 = Array("Grüße\r\n日本".utf8) + [0]
        var raw = ByteWriter()
        raw.writeInteger(UInt32(utf8.count))
        raw.writeBytes(utf8)
        h.feed(extended(ExtendedClipboard.provide | ExtendedClipboard.text, try ExtendedClipboard.deflateAll(raw.bytes)))
        #expect(h.events == [.serverClipboard("Grüße\n日本")])
        #expect(h.closeError == nil)
    }

    @Test func ourTextIsNotifiedThenProvidedWhenRequested() throws {
        var h = ready()
        h.feed(serverCaps(ExtendedClipboard.request | ExtendedClipboard.notify | ExtendedClipboard.provide))
        h.actions = try h.connection.setClipboard("line 1\nΩ")
        #expect(h.sent.compactMap(clientFlags).map(\.flags) == [ExtendedClipboard.notify | ExtendedClipboard.text])
        h.actions = []
        h.feed(extended(ExtendedClipboard.request | ExtendedClipboard.text))
        guard let provide = h.sent.first.flatMap(clientFlags) else { Issue.record("no provide"); return }
        #expect(provide.flags == ExtendedClipboard.provide | ExtendedClipboard.text)
        let data = inflate(provide.payload)
        var r = ByteReader(data)
        let size = try r.readInteger(as: UInt32.self)
        #expect(Array(data.dropFirst(4)) == Array("line 1\r\nΩ".utf8) + [0])
        #expect(Int(size) == data.count - 4)
    }

    @Test func textIsProvidedDirectlyWhenTheServerCannotRequest() throws {
        var h = ready()
        h.feed(serverCaps(ExtendedClipboard.provide))
        h.actions = try h.connection.setClipboard("x")
        let flags = h.sent.compactMap(clientFlags).map(\.flags)
        #expect(flags == [ExtendedClipboard.provide | ExtendedClipboard.text])
    }

    @Test func peekIsAnsweredWithNotify() throws {
        var h = ready()
        h.feed(serverCaps(ExtendedClipboard.request | ExtendedClipboard.notify | ExtendedClipboard.provide | ExtendedClipboard.peek))
        h.actions = []
        h.feed(extended(ExtendedClipboard.peek))
        #expect(h.sent.compactMap(clientFlags).map(\.flags) == [ExtendedClipboard.notify], "nothing offered yet")
    }

    @Test func corruptOrOversizedExtendedDataIsATypedError() throws {
        var h = ready()
        h.feed(serverCaps(ExtendedClipboard.request | ExtendedClipboard.notify | ExtendedClipboard.provide))
        h.feed(extended(ExtendedClipboard.provide | ExtendedClipboard.text, [0x78, 0x9C, 0xFF, 0xFF, 0xFF]))
        #expect(h.closeError != nil)

        // A size field promising more than the data holds.
        var h2 = ready()
        var raw = ByteWriter()
        raw.writeInteger(UInt32(1000))
        raw.writeBytes([1, 2, 3])
        h2.feed(extended(ExtendedClipboard.provide | ExtendedClipboard.text, try ExtendedClipboard.deflateAll(raw.bytes)))
        #expect(h2.closeError != nil)

        // A zlib bomb stops at the limit instead of growing without bound.
        let bomb = try ExtendedClipboard.deflateAll([UInt8](repeating: 0, count: 8 << 20))
        #expect(throws: RFBError.self) { _ = try ExtendedClipboard.inflateAll(bomb, limit: 1 << 20) }

        // Flags alone missing.
        var h3 = ready()
        h3.feed([3, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFE, 1, 2])
        #expect(h3.closeError != nil)
    }

    @Test func mutatedExtendedClipboardMessagesNeverTrap() throws {
        var raw = ByteWriter()
        let utf8 = Array("fuzz ✓\r\nline".utf8) + [0]
        raw.writeInteger(UInt32(utf8.count))
        raw.writeBytes(utf8)
        let messages = [serverCaps(ExtendedClipboard.request | ExtendedClipboard.notify | ExtendedClipboard.provide),
                        extended(ExtendedClipboard.provide | ExtendedClipboard.text, try ExtendedClipboard.deflateAll(raw.bytes)),
                        extended(ExtendedClipboard.notify | ExtendedClipboard.text), extended(ExtendedClipboard.peek)]
        var rng = SplitMix(seed: 11)
        for _ in 0..<3000 {
            var bytes = messages[rng.below(messages.count)]
            for _ in 0..<(1 + rng.below(4)) { bytes[4 + rng.below(bytes.count - 4)] = UInt8(rng.below(256)) }
            var h = ready()
            h.feed(messages[0])
            h.feed(bytes, chunk: 1 + rng.below(8))
            // Either handled or a typed close; never a trap, never an unbounded wait on a huge length.
            if let error = h.closeError { #expect(!error.description.isEmpty) }
        }
    }
}
