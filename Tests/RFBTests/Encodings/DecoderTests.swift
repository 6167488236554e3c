import FarcastSupport
@testable import RFB
import Testing

/// Every decoder against spec-following test encoders: the decoded framebuffer must equal the
/// source image exactly (JPEG: equal to an independent decode of the same JPEG).
@Suite struct DecoderTests {
    static let width = 150, height = 90
    let image = TestImage.sample(width: DecoderTests.width, height: DecoderTests.height)

    /// Splits the screen into rectangles of awkward sizes so tiles hit every edge case.
    static let rects: [RFBRect] = [
        RFBRect(x: 0, y: 0, width: 70, height: 45),
        RFBRect(x: 70, y: 0, width: 80, height: 45),
        RFBRect(x: 0, y: 45, width: 37, height: 45),
        RFBRect(x: 37, y: 45, width: 113, height: 45),
    ]

    private func decode(_ encoding: RFBEncoding, format: PixelFormat = .rgb888, chunk: Int = .max,
                        body: (TestEncoder, RFBRect) -> [UInt8]) -> Harness {
        var configuration = RFBConnection.Configuration()
        configuration.pixelFormat = format
        var harness = Harness(configuration: configuration)
        let encoder = TestEncoder(format: format)
        var script = ServerScript.handshake(width: Self.width, height: Self.height)
        script.updateHeader(rects: Self.rects.count)
        for r in Self.rects { script.rect(r, encoding, body(encoder, r)) }
        harness.feed(script.bytes, chunk: chunk)
        return harness
    }

    private func expectExact(_ harness: borrowing Harness, _ expected: [UInt32], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(harness.closeError == nil, "closed: \(String(describing: harness.closeError))", sourceLocation: sourceLocation)
        #expect(harness.updatesCompleted == 1, sourceLocation: sourceLocation)
        let got = harness.rgb
        var differing = 0
        var first = -1
        for i in 0..<min(got.count, expected.count) where got[i] != expected[i] {
            differing += 1
            if first < 0 { first = i }
        }
        let detail = first < 0 ? "" : "first at pixel \(first): got \(String(got[first], radix: 16)), want \(String(expected[first], radix: 16))"
        #expect(differing == 0, "\(differing) pixels differ; \(detail)", sourceLocation: sourceLocation)
    }

    @Test func rawReproducesTheImageExactly() { expectExact(decode(.raw) { $0.raw(image, $1) }, image.pixels) }
    @Test func rreReproducesTheImageExactly() { expectExact(decode(.rre) { $0.rre(image, $1, compact: false) }, image.pixels) }
    @Test func compactRREReproducesTheImageExactly() { expectExact(decode(.coRRE) { $0.rre(image, $1, compact: true) }, image.pixels) }
    @Test func hextileReproducesTheImageExactly() { expectExact(decode(.hextile) { $0.hextile(image, $1) }, image.pixels) }
    @Test func zlibReproducesTheImageExactly() { expectExact(decode(.zlib) { $0.zlib(image, $1) }, image.pixels) }
    @Test func zrleReproducesTheImageExactly() { expectExact(decode(.zrle) { $0.zrle(image, $1) }, image.pixels) }
    /// ZRLE is inflated a window at a time and its tiles decoded from each window; a rectangle
    /// that inflates to several windows has tiles cut by a window's end, decoded whole from the
    /// next one, whether the data arrives at once or in pieces.
    @Test func zrleLargerThanItsInflateWindowReproducesTheImageExactly() {
        let big = TestImage.sample(width: 1200, height: 600, seed: 3)
        let rect = RFBRect(x: 0, y: 0, width: 1200, height: 600)
        let encoder = TestEncoder()
        let tiles = encoder.rleTiles(big, rect, tileSize: 64, allowReuse: false)
        #expect(tiles.count > 2 * ZRLEDecoder.windowSize)
        let compressed = encoder.zrleStream.compress(tiles)
        var script = ServerScript.handshake(width: 1200, height: 600)
        script.updateHeader(rects: 1)
        script.rect(rect, .zrle, [UInt8](withUnsafeBytes(of: UInt32(compressed.count).bigEndian, Array.init)) + compressed)
        for chunk in [Int.max, 4093] {
            var harness = Harness()
            harness.feed(script.bytes, chunk: chunk)
            #expect(harness.closeError == nil, "closed: \(String(describing: harness.closeError))")
            #expect(harness.rgb == big.pixels, "chunk \(chunk)")
        }
    }
    @Test func trleReproducesTheImageExactly() { expectExact(decode(.trle) { $0.trle(image, $1) }, image.pixels) }
    @Test func tightCopyFilterReproducesTheImageOnEachOfTheFourZlibStreams() {
        var stream = 0
        expectExact(decode(.tight) { e, r in stream += 1; return e.tight(image, r, method: .copy, stream: stream % 4) }, image.pixels)
    }
    @Test func tightGradientFilterReproducesTheImageExactly() { expectExact(decode(.tight) { $0.tight(image, $1, method: .gradient, stream: 2) }, image.pixels) }

    @Test func tightPaletteAndFillAndStreamResets() {
        // Quantise to few colours so the palette filter applies everywhere; use 2-colour (1 bpp)
        // and many-colour palettes, fills, and reset bits on the fly.
        var twoTone = image
        for i in twoTone.pixels.indices { twoTone.pixels[i] = twoTone.pixels[i] & 0x800000 != 0 ? 0xFFFFFF : 0x102030 }
        var few = image
        for i in few.pixels.indices { few.pixels[i] = few.pixels[i] & 0xC0C0C0 }
        var solid = image
        var expected = image.pixels
        for (n, r) in Self.rects.enumerated() where n == 3 {
            for y in r.y..<(r.y + r.height) { for x in r.x..<(r.x + r.width) { solid.pixels[y * Self.width + x] = 0x336699 } }
        }
        var index = 0
        let harness = decode(.tight) { encoder, r in
            defer { index += 1 }
            switch index {
            case 0:
                for y in r.y..<(r.y + r.height) { for x in r.x..<(r.x + r.width) { expected[y * Self.width + x] = twoTone.pixel(x, y) } }
                return encoder.tight(twoTone, r, method: .palette, stream: 1)
            case 1:
                for y in r.y..<(r.y + r.height) { for x in r.x..<(r.x + r.width) { expected[y * Self.width + x] = few.pixel(x, y) } }
                return encoder.tight(few, r, method: .palette, stream: 1, resets: 0b0010)
            case 2:
                for y in r.y..<(r.y + r.height) { for x in r.x..<(r.x + r.width) { expected[y * Self.width + x] = few.pixel(x, y) } }
                return encoder.tight(few, r, method: .palette, stream: 1)
            default:
                for y in r.y..<(r.y + r.height) { for x in r.x..<(r.x + r.width) { expected[y * Self.width + x] = 0x336699 } }
                // A fill that also resets every stream: resets apply whatever the method.
                return encoder.tight(solid, r, method: .fill, resets: 0b1111)
            }
        }
        expectExact(harness, expected)
    }

    @Test func tightSmallRectanglesAreSentUncompressed() {
        // 2×1 pixels of copy filter = 6 bytes < 12: raw bytes, no length, stream untouched.
        var script = ServerScript.handshake(width: 4, height: 4)
        let img = TestImage.sample(width: 4, height: 4, seed: 9)
        let encoder = TestEncoder()
        script.updateHeader(rects: 2)
        let small = RFBRect(x: 1, y: 1, width: 2, height: 1)
        script.rect(small, .tight, encoder.tight(img, small, method: .copy))
        let rest = RFBRect(x: 0, y: 2, width: 4, height: 2)
        script.rect(rest, .tight, encoder.tight(img, rest, method: .copy))
        var harness = Harness()
        harness.feed(script.bytes)
        #expect(harness.closeError == nil)
        #expect(harness.rgb[1 * 4 + 1] == img.pixel(1, 1) && harness.rgb[1 * 4 + 2] == img.pixel(2, 1))
        #expect(Array(harness.rgb[8...]) == Array(img.pixels[8...]))
    }

    @Test func tightJPEGDecodesStraightIntoTheFramebuffer() {
        var expected = [UInt32](repeating: 0, count: Self.width * Self.height)
        let harness = decode(.tight) { encoder, r in
            let body = encoder.tight(image, r, method: .jpeg(quality: 80))
            // Independent decode of the same JPEG (RGB output) is the expected result.
            var reader = ByteReader(body, offset: 1)
            let length = try! TightDecoder.compactLength(&reader)
            let jpeg = try! reader.readBytes(length)
            let pixels = JPEGTestCodec.decompress(jpeg, width: r.width, height: r.height)
            for y in 0..<r.height { for x in 0..<r.width { expected[(r.y + y) * Self.width + r.x + x] = pixels[y * r.width + x] } }
            return body
        }
        expectExact(harness, expected)
    }

    @Test func copyRectMovesPixelsWithOverlap() {
        var script = ServerScript.handshake(width: Self.width, height: Self.height)
        let encoder = TestEncoder()
        let all = RFBRect(x: 0, y: 0, width: Self.width, height: Self.height)
        script.updateHeader(rects: 1)
        script.rect(all, .raw, encoder.raw(image, all))
        // Shift a block down-right by (5, 3): source and destination overlap.
        script.updateHeader(rects: 1)
        var w = ByteWriter()
        w.writeInteger(UInt16(10)); w.writeInteger(UInt16(10))
        script.rect(RFBRect(x: 15, y: 13, width: 60, height: 40), .copyRect, w.bytes)
        var harness = Harness()
        harness.feed(script.bytes)
        var expected = image.pixels
        for y in 0..<40 { for x in 0..<60 { expected[(13 + y) * Self.width + 15 + x] = image.pixel(10 + x, 10 + y) } }
        #expect(harness.closeError == nil)
        #expect(harness.rgb == expected)
    }

    /// Every encoding decodes identically whether the stream arrives whole, byte by byte, or in
    /// random pieces: resumable decoders must pick up exactly where they stopped.
    @Test(arguments: ["raw", "rre", "corre", "hextile", "zlib", "zrle", "trle", "tight"])
    func splitDeliveryGivesTheSameFramebuffer(name: String) {
        let encoding = RFBEncoding(name: name)!
        func body(_ e: TestEncoder, _ r: RFBRect) -> [UInt8] {
            switch encoding {
            case .raw: return e.raw(image, r)
            case .rre: return e.rre(image, r, compact: false)
            case .coRRE: return e.rre(image, r, compact: true)
            case .hextile: return e.hextile(image, r)
            case .zlib: return e.zlib(image, r)
            case .zrle: return e.zrle(image, r)
            case .trle: return e.trle(image, r)
            default: return e.tight(image, r, method: .gradient, stream: 1)
            }
        }
        let whole = decode(encoding, body: body)
        let bytewise = decode(encoding, chunk: 1, body: body)
        expectExact(whole, image.pixels)
        expectExact(bytewise, image.pixels)
        var script = ServerScript.handshake(width: Self.width, height: Self.height)
        let encoder = TestEncoder()
        script.updateHeader(rects: Self.rects.count)
        for r in Self.rects { script.rect(r, encoding, body(encoder, r)) }
        for seed in 1...5 as ClosedRange<UInt64> {
            var harness = Harness()
            harness.feedRandomly(script.bytes, seed: seed, maxChunk: 700)
            expectExact(harness, image.pixels)
        }
    }

    @Test func lastRectEndsAnOpenEndedUpdate() {
        var script = ServerScript.handshake(width: 8, height: 8)
        let img = TestImage.sample(width: 8, height: 8)
        let all = RFBRect(x: 0, y: 0, width: 8, height: 8)
        script.updateHeader(rects: 0xFFFF)
        script.rect(all, .raw, TestEncoder().raw(img, all))
        script.rect(RFBRect(x: 0, y: 0, width: 0, height: 0), .lastRect, [])
        // A second update must be parsed as such, not as more rectangles.
        script.updateHeader(rects: 0)
        var harness = Harness()
        harness.feed(script.bytes)
        #expect(harness.closeError == nil)
        #expect(harness.updatesCompleted == 2)
        #expect(harness.rgb == img.pixels)
    }

    @Test func firstFrameCompletesOnlyWhenEveryPixelArrived() {
        var script = ServerScript.handshake(width: 10, height: 10)
        let img = TestImage.sample(width: 10, height: 10)
        let top = RFBRect(x: 0, y: 0, width: 10, height: 5), bottom = RFBRect(x: 0, y: 5, width: 10, height: 5)
        script.updateHeader(rects: 1)
        script.rect(top, .raw, TestEncoder().raw(img, top))
        script.updateHeader(rects: 1)
        script.rect(bottom, .raw, TestEncoder().raw(img, bottom))
        var harness = Harness()
        harness.feed(script.bytes)
        let flags = harness.events.compactMap { if case .framebufferUpdated(_, let first) = $0 { return first } else { return nil } }
        #expect(flags == [false, true])
    }
}
