import FarcastSupport
@testable import RFB
import Testing

/// Hostile and broken servers: every case ends in a typed error and a closed session, never a
/// crash, a hang or an allocation sized by the attacker.
@Suite struct MalformedInputTests {
    private func run(width: Int = 32, height: Int = 16, _ build: (inout ServerScript) -> Void) -> Harness {
        var script = ServerScript.handshake(width: width, height: height)
        build(&script)
        var h = Harness()
        h.feed(script.bytes)
        return h
    }

    /// A ZRLE rectangle's body: the length, then `inflated` deflated (on a new stream unless the
    /// connection's is given).
    private func zrleBody(_ inflated: [UInt8], stream: Deflater = Deflater()) -> [UInt8] {
        let z = stream.compress(inflated)
        var w = ByteWriter()
        w.writeInteger(UInt32(z.count))
        w.writeBytes(z)
        return w.bytes
    }

    private func expectMalformed(_ h: borrowing Harness, _ encoding: String, containing text: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .malformedRectangle(let name, let detail)? = h.closeError else {
            Issue.record("expected malformedRectangle(\(encoding)), got \(String(describing: h.closeError))", sourceLocation: sourceLocation)
            return
        }
        #expect(name == encoding, sourceLocation: sourceLocation)
        #expect(detail.contains(text), "detail: \(detail)", sourceLocation: sourceLocation)
        #expect(h.connection.isClosed == true, sourceLocation: sourceLocation)
    }

    @Test func oversizedFramebufferIsRefusedBeforeAllocating() {
        var s = ServerScript()
        s.banner()
        s.securityNone38()
        s.serverInit(width: 65535, height: 65535)
        var h = Harness()
        h.feed(s.bytes)
        #expect(h.closeError == .framebufferTooLarge(width: 65535, height: 65535))
    }

    @Test func oversizedDesktopSizeIsRefused() {
        let h = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 20000, height: 10), .desktopSize, [])
        }
        #expect(h.closeError == .framebufferTooLarge(width: 20000, height: 10))
    }

    @Test func rectangleOutsideTheFramebuffer() {
        let h = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 30, y: 0, width: 70000 % 65536, height: 4), .tight, [0x80, 1, 2, 3])
        }
        guard case .rectangleOutOfBounds(let encoding, _, _, let w, _, let fw, _)? = h.closeError else {
            Issue.record("expected rectangleOutOfBounds, got \(String(describing: h.closeError))")
            return
        }
        #expect(encoding == "Tight" && w == 4464 && fw == 32)
    }

    @Test func zlibDataInflatingPastItsRectangle() {
        let h = run { s in
            let tooMuch = Deflater().compress([UInt8](repeating: 0x55, count: 4 * 4 * 4 + 100))
            var w = ByteWriter()
            w.writeInteger(UInt32(tooMuch.count))
            w.writeBytes(tooMuch)
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 4), .zlib, w.bytes)
        }
        guard case .compressionError(let encoding, let detail)? = h.closeError else {
            Issue.record("expected compressionError, got \(String(describing: h.closeError))")
            return
        }
        #expect(encoding == "Zlib" && detail.contains("past the end"))
    }

    @Test func zlibDataEndingShortOfItsRectangle() {
        let h = run { s in
            let tooLittle = Deflater().compress([UInt8](repeating: 1, count: 10))
            var w = ByteWriter()
            w.writeInteger(UInt32(tooLittle.count))
            w.writeBytes(tooLittle)
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 4), .zlib, w.bytes)
        }
        guard case .compressionError(_, let detail)? = h.closeError else {
            Issue.record("expected compressionError, got \(String(describing: h.closeError))")
            return
        }
        #expect(detail.contains("needs 64"))
    }

    @Test func corruptZlibStream() {
        let h = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 4), .zrle, [0, 0, 0, 6, 0x78, 0x9C, 0xFF, 0xFF, 0xFF, 0xFF])
        }
        guard case .compressionError(let encoding, _)? = h.closeError else {
            Issue.record("expected compressionError, got \(String(describing: h.closeError))")
            return
        }
        #expect(encoding == "ZRLE")
    }

    @Test func absurdCompressedLengthIsRefusedWithoutWaitingForIt() {
        let h = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 4), .zrle, [0xFF, 0xFF, 0xFF, 0xFF])
        }
        expectMalformed(h, "ZRLE", containing: "4294967295 compressed bytes")
    }

    @Test func zrleRunOverrunningItsTileEvenThroughEndless255s() {
        let h = run { s in
            // One tile, plain RLE: a pixel then a run-length of 255s that never ends.
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 8, height: 8), .zrle, zrleBody([128, 1, 2, 3] + [UInt8](repeating: 255, count: 600)))
        }
        expectMalformed(h, "ZRLE", containing: "overruns its tile")
    }

    @Test func zrleUnknownSubencodingAndPaletteReuse() {
        for sub: UInt8 in [17, 127, 129] {
            let h = run { s in
                s.updateHeader(rects: 1)
                s.rect(RFBRect(x: 0, y: 0, width: 4, height: 4), .zrle, zrleBody([sub] + [UInt8](repeating: 0, count: 64)))
            }
            expectMalformed(h, "ZRLE", containing: "subencoding \(sub)")
        }
    }

    @Test func paletteIndexBeyondThePalette() {
        let h = run { s in
            // TRLE tile, 3-colour packed palette (2 bits per pixel), index 3 used.
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 1), .trle, [3, 1, 1, 1, 2, 2, 2, 3, 3, 3, 0b0001_1011])
        }
        expectMalformed(h, "TRLE", containing: "palette index 3")
    }

    @Test func paletteIndexBeyondThePaletteInWholeBytesOfFourBitIndices() {
        let h = run { s in
            // TRLE tile, 5-colour packed palette (4 bits per pixel), index 7 in the first byte pair.
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 1), .trle, [5] + [UInt8](repeating: 9, count: 15) + [0x01, 0x72])
        }
        expectMalformed(h, "TRLE", containing: "palette index 7")
    }

    @Test func tightPaletteIndexBeyondThePalette() {
        let h = run { s in
            // Basic compression, explicit palette filter, 3 colours, four 8-bit indices (sent raw: under 12 bytes).
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 1), .tight, [0x40, 1, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 0, 1, 5, 2])
        }
        expectMalformed(h, "Tight", containing: "palette index 5 beyond a palette of 3")
    }

    @Test func zrleDataLeftAfterTheLastTile() {
        let h = run { s in
            // One solid 4×4 tile, then 10 bytes no tile needs.
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 4), .zrle, zrleBody([1, 0x11, 0x22, 0x33] + [UInt8](repeating: 0, count: 10)))
        }
        expectMalformed(h, "ZRLE", containing: "10 inflated byte(s) left after the last tile")
    }

    @Test func zrleDataLeftAfterTheLastTileBeyondAWindowIsToldAsSuch() {
        let h = run(width: 1024, height: 1024) { s in
            // 256 solid tiles, then more extra data than one inflate window holds.
            let tiles = (0..<256).flatMap { _ in [UInt8]([1, 0x11, 0x22, 0x33]) }
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 1024, height: 1024), .zrle, zrleBody(tiles + [UInt8](repeating: 0, count: 300_000)))
        }
        expectMalformed(h, "ZRLE", containing: "300000 inflated byte(s) left after the last tile")
    }

    @Test func anEmptyZRLERectangleHasNoTiles() {
        var script = ServerScript.handshake(width: 32, height: 16)
        let stream = Deflater()
        script.updateHeader(rects: 2)
        script.rect(RFBRect(x: 0, y: 0, width: 0, height: 16), .zrle, zrleBody([], stream: stream))
        script.rect(RFBRect(x: 3, y: 2, width: 4, height: 4), .zrle, zrleBody([1, 0x11, 0x22, 0x33], stream: stream))
        var h = Harness()
        h.feed(script.bytes)
        #expect(h.closeError == nil, "closed: \(String(describing: h.closeError))")
        #expect(h.updatesCompleted == 1)
        #expect(h.rgb[2 * 32 + 3] == 0x33_2211 && h.rgb[5 * 32 + 6] == 0x33_2211, "the tile after the empty rectangle is painted")
    }

    @Test func hextileSubrectangleOutsideItsTile() {
        let h = run { s in
            // 8×8 tile: background, one coloured subrect at (6,6) of 4×4.
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 8, height: 8), .hextile, [2 | 8 | 16, 1, 2, 3, 0, 1, 9, 9, 9, 0, 0x66, 0x33])
        }
        expectMalformed(h, "Hextile", containing: "exceeds its 8×8 tile")
    }

    @Test func hextileWithoutAnyBackground() {
        let h = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 8, height: 8), .hextile, [0])
        }
        expectMalformed(h, "Hextile", containing: "never set")
    }

    @Test func rreSubrectangleOutsideItsRectangle() {
        let h = run { s in
            var w = ByteWriter()
            w.writeInteger(UInt32(1)); w.writeBytes([0, 0, 0, 0])
            w.writeBytes([1, 1, 1, 0]); w.writeInteger(UInt16(3)); w.writeInteger(UInt16(0)); w.writeInteger(UInt16(5)); w.writeInteger(UInt16(1))
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 4), .rre, w.bytes)
        }
        expectMalformed(h, "RRE", containing: "exceeds")
    }

    @Test func copyRectFromOutsideTheFramebuffer() {
        let h = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 4), .copyRect, [0, 30, 0, 0])
        }
        expectMalformed(h, "CopyRect", containing: "outside")
    }

    @Test func tightUnknownControlAndFilterAndJPEGSize() {
        let bad = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 4), .tight, [0xB0])
        }
        expectMalformed(bad, "Tight", containing: "compression control 0xb0")
        let filter = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 4), .tight, [0x40, 7])
        }
        expectMalformed(filter, "Tight", containing: "unknown filter 7")
        let jpeg = run { s in
            let data = JPEGTestCodec.compress([UInt32](repeating: 0x808080, count: 64), width: 8, height: 8, quality: 50)
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 4), .tight, [0x90] + TestEncoder.compactLength(data.count) + data)
        }
        #expect(jpeg.closeError == .jpegError("image is 8×8 but its rectangle is 4×4"))
        let garbage = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 4, height: 4), .tight, [0x90, 5, 1, 2, 3, 4, 5])
        }
        guard case .jpegError? = garbage.closeError else {
            Issue.record("expected jpegError, got \(String(describing: garbage.closeError))")
            return
        }
    }

    @Test func cursorLargerThanAnyRealCursor() {
        let h = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 5000, height: 5000), .cursor, [])
        }
        expectMalformed(h, "Cursor", containing: "exceeds 1024")
    }

    @Test func unknownEncodingAndMessageType() {
        let encoding = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 1, height: 1), RFBEncoding(50), [])
        }
        #expect(encoding.closeError == .unsupportedEncoding(50))
        let pseudo = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 1, height: 1), RFBEncoding(-9999), [])
        }
        #expect(pseudo.closeError == .unsupportedEncoding(-9999))
        let message = run { s in s.bytes += [77] }
        #expect(message.closeError == .unknownMessageType(77))
    }

    @Test func hugeClipboardAndNamesAreRefused() {
        let clip = run { s in s.bytes += [3, 0, 0, 0, 0x7F, 0xFF, 0xFF, 0xFF] }
        guard case .protocolViolation(let text)? = clip.closeError else {
            Issue.record("expected protocolViolation, got \(String(describing: clip.closeError))")
            return
        }
        #expect(text.contains("32 MiB"))
        let name = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 0, height: 0), .desktopName, [0xFF, 0xFF, 0xFF, 0xFF])
        }
        #expect(name.closeError == .protocolViolation("desktop name of 4294967295 bytes"))
    }

    @Test func truncatedStreamEndsWithAClearReason() {
        var h = run { s in
            s.updateHeader(rects: 1)
            s.rect(RFBRect(x: 0, y: 0, width: 32, height: 16), .raw, [UInt8](repeating: 0, count: 100))
        }
        #expect(h.closeError == nil, "a partial rectangle waits for more data")
        h.actions += h.connection.connectionClosed()
        #expect(h.closeError == .connectionClosed("in the middle of a framebuffer update"))
    }

    @Test func nothingHappensAfterClose() {
        var h = run { s in s.bytes += [77] }
        let before = h.actions.count
        h.feed([2, 2, 2])
        h.actions += h.connection.connectionClosed()
        #expect(h.actions.count == before)
    }
}
