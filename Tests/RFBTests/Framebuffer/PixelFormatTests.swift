import FarcastSupport
@testable import RFB
import Testing

/// Wire pixel formats other than the default: 8/16/32 bpp in either byte order, unusual shifts,
/// and colour maps. Each is decoded through several encodings (PIXEL, CPIXEL and TPIXEL paths).
@Suite struct PixelFormatTests {
    static let formats: [(String, PixelFormat)] = [
        ("rgb565le", .rgb565),
        ("rgb565be", PixelFormat(bitsPerPixel: 16, depth: 16, bigEndian: true, trueColour: true, redMax: 31, greenMax: 63, blueMax: 31, redShift: 11, greenShift: 5, blueShift: 0)),
        ("bgr233", .bgr233),
        ("rgb888be", PixelFormat(bitsPerPixel: 32, depth: 24, bigEndian: true, trueColour: true, redMax: 255, greenMax: 255, blueMax: 255, redShift: 16, greenShift: 8, blueShift: 0)),
        ("rgb888high", PixelFormat(bitsPerPixel: 32, depth: 24, bigEndian: false, trueColour: true, redMax: 255, greenMax: 255, blueMax: 255, redShift: 24, greenShift: 16, blueShift: 8)),
        ("bgr888le", PixelFormat(bitsPerPixel: 32, depth: 24, bigEndian: false, trueColour: true, redMax: 255, greenMax: 255, blueMax: 255, redShift: 0, greenShift: 8, blueShift: 16)),
        ("rgb101010", PixelFormat(bitsPerPixel: 32, depth: 30, bigEndian: false, trueColour: true, redMax: 1023, greenMax: 1023, blueMax: 1023, redShift: 20, greenShift: 10, blueShift: 0)),
    ]

    @Test(arguments: formats.map(\.0), ["raw", "hextile", "zrle", "trle", "tight-copy", "tight-gradient", "tight-palette"])
    func decodesInFormat(name: String, encodingName: String) {
        let format = Self.formats.first { $0.0 == name }!.1
        let width = 70, height = 40
        var image = TestImage.sample(width: width, height: height, seed: 3)
        if encodingName == "tight-palette" {
            for i in image.pixels.indices { image.pixels[i] &= 0xC0C0C0 }
        }
        let wire = WirePixels(format: format)
        let encoder = TestEncoder(format: format)
        let rect = RFBRect(x: 0, y: 0, width: width, height: height)
        let (encoding, body): (RFBEncoding, [UInt8]) = switch encodingName {
        case "raw": (.raw, encoder.raw(image, rect))
        case "hextile": (.hextile, encoder.hextile(image, rect))
        case "zrle": (.zrle, encoder.zrle(image, rect))
        case "trle": (.trle, encoder.trle(image, rect))
        case "tight-copy": (.tight, encoder.tight(image, rect, method: .copy))
        case "tight-palette": (.tight, encoder.tight(image, rect, method: .palette))
        default: (.tight, encoder.tight(image, rect, method: .gradient))
        }
        var configuration = RFBConnection.Configuration()
        configuration.pixelFormat = format
        var h = Harness(configuration: configuration)
        var script = ServerScript.handshake(width: width, height: height)
        script.updateHeader(rects: 1)
        script.rect(rect, encoding, body)
        h.feed(script.bytes)
        if format.bitsPerPixel == 8 && encodingName == "tight-gradient" {
            // The spec allows the gradient filter only at 16 and 32 bpp.
            #expect(h.closeError == .malformedRectangle(encoding: "Tight", detail: "gradient filter at 8 bpp"))
            return
        }
        #expect(h.closeError == nil, "\(String(describing: h.closeError))")
        let expected = image.pixels.map(wire.displayed)
        let wrong = zip(h.rgb, expected).filter { $0.0 != $0.1 }.count
        #expect(wrong == 0, "\(wrong) of \(expected.count) pixels differ in \(name)/\(encodingName)")
    }

    @Test func colourMappedPixelsLookUpTheServersColourMap() {
        let width = 20, height = 10
        let colours: [UInt32] = [0x000000, 0xFF0000, 0x00FF00, 0x0000FF, 0x4682B4]
        var image = TestImage(width: width, height: height, pixels: [])
        var indices: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width {
                let i = (x / 3 + y) % colours.count
                indices.append(UInt8(i + 10))
                image.pixels.append(colours[i])
            }
        }
        var configuration = RFBConnection.Configuration()
        configuration.pixelFormat = .colourMap8
        var h = Harness(configuration: configuration)
        var script = ServerScript.handshake(width: width, height: height)
        script.colourMap(first: 10, colours: colours)
        script.updateHeader(rects: 2)
        script.rect(RFBRect(x: 0, y: 0, width: width, height: 5), .raw, Array(indices[0..<(width * 5)]))
        // The same in ZRLE: a CPIXEL is the 1-byte index.
        let z = Deflater().compress([0] + Array(indices[(width * 5)...]))
        var w = ByteWriter()
        w.writeInteger(UInt32(z.count))
        w.writeBytes(z)
        script.rect(RFBRect(x: 0, y: 5, width: width, height: 5), .zrle, w.bytes)
        h.feed(script.bytes)
        #expect(h.closeError == nil, "\(String(describing: h.closeError))")
        #expect(h.rgb == image.pixels)
    }

    @Test func invalidFormatsAreRejected() {
        var bad = PixelFormat.rgb565
        bad.redMax = 30
        #expect(throws: RFBError.self) { try bad.validate() }
        bad = .rgb888
        bad.bitsPerPixel = 24
        #expect(throws: RFBError.self) { try bad.validate() }
        bad = .rgb888
        bad.redShift = 30
        #expect(throws: RFBError.self) { try bad.validate() }
        for (_, format) in Self.formats { #expect(throws: Never.self) { try format.validate() } }
    }

    @Test func converterRecognisesTheNativeFormatAndCPixelWidths() {
        #expect(PixelConverter(format: .rgb888).isNative)
        #expect(!PixelConverter(format: .rgb565).isNative)
        #expect(PixelConverter(format: .rgb888).bytesPerCPixel == 3)
        #expect(PixelConverter(format: .rgb888).bytesPerTPixel == 3)
        #expect(PixelConverter(format: Self.formats[6].1).bytesPerCPixel == 4)
        #expect(PixelConverter(format: .rgb565).bytesPerCPixel == 2)
    }

    @Test func rgbRowsAreTheRGBBytesOneRowAtATime() {
        var framebuffer = Framebuffer(width: 7, height: 5)
        for i in framebuffer.pixels.indices { framebuffer.pixels[i] = UInt32(truncatingIfNeeded: i &* 0x9E37_79B9) }
        var rows: [[UInt8]] = []
        framebuffer.withRGBRows { rows.append(Array($0)) }
        #expect(rows.count == 5 && rows.allSatisfy { $0.count == 21 })
        #expect(rows.flatMap { $0 } == framebuffer.rgbBytes())
        #expect(rows[1][0..<3] == [UInt8(truncatingIfNeeded: framebuffer.pixels[7] >> 16), UInt8(truncatingIfNeeded: framebuffer.pixels[7] >> 8),
                                   UInt8(truncatingIfNeeded: framebuffer.pixels[7])])
        var none = 0
        Framebuffer(width: 0, height: 0).withRGBRows { _ in none += 1 }
        #expect(none == 0)
    }
}
