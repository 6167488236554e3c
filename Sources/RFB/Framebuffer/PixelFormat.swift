import FarcastSupport

/// An RFB PIXEL_FORMAT: how pixel values travel on the wire.
///
/// Farcast keeps its own framebuffer in one format (32-bit `0xXXRRGGBB` words) whatever the wire
/// uses, and converts at the edge; `PixelConverter` does the conversion.
public struct PixelFormat: Hashable, Sendable, CustomStringConvertible {
    public var bitsPerPixel: UInt8
    public var depth: UInt8
    public var bigEndian: Bool
    public var trueColour: Bool
    public var redMax: UInt16
    public var greenMax: UInt16
    public var blueMax: UInt16
    public var redShift: UInt8
    public var greenShift: UInt8
    public var blueShift: UInt8

    public init(bitsPerPixel: UInt8, depth: UInt8, bigEndian: Bool, trueColour: Bool,
                redMax: UInt16, greenMax: UInt16, blueMax: UInt16,
                redShift: UInt8, greenShift: UInt8, blueShift: UInt8) {
        self.bitsPerPixel = bitsPerPixel
        self.depth = depth
        self.bigEndian = bigEndian
        self.trueColour = trueColour
        self.redMax = redMax
        self.greenMax = greenMax
        self.blueMax = blueMax
        self.redShift = redShift
        self.greenShift = greenShift
        self.blueShift = blueShift
    }

    /// 32 bpp, depth 24, little-endian, R<<16 G<<8 B: the format Farcast asks for by default and
    /// stores internally, so decoding it is a copy.
    public static let rgb888 = PixelFormat(bitsPerPixel: 32, depth: 24, bigEndian: false, trueColour: true,
                                           redMax: 255, greenMax: 255, blueMax: 255,
                                           redShift: 16, greenShift: 8, blueShift: 0)
    /// 16 bpp RGB565, little-endian.
    public static let rgb565 = PixelFormat(bitsPerPixel: 16, depth: 16, bigEndian: false, trueColour: true,
                                           redMax: 31, greenMax: 63, blueMax: 31,
                                           redShift: 11, greenShift: 5, blueShift: 0)
    /// 8 bpp BGR233 true colour (the classic low-bandwidth format).
    public static let bgr233 = PixelFormat(bitsPerPixel: 8, depth: 8, bigEndian: false, trueColour: true,
                                           redMax: 7, greenMax: 7, blueMax: 3,
                                           redShift: 0, greenShift: 3, blueShift: 6)
    /// 8 bpp colour-mapped: the server sends SetColourMapEntries.
    public static let colourMap8 = PixelFormat(bitsPerPixel: 8, depth: 8, bigEndian: false, trueColour: false,
                                               redMax: 0, greenMax: 0, blueMax: 0,
                                               redShift: 0, greenShift: 0, blueShift: 0)

    public var bytesPerPixel: Int { Int(bitsPerPixel) / 8 }

    /// True when the format is 32 bpp true colour with three 8-bit channels (Tight's 3-byte TPIXEL
    /// applies then).
    public var is888: Bool {
        bitsPerPixel == 32 && depth == 24 && trueColour && redMax == 255 && greenMax == 255 && blueMax == 255
    }

    /// Checks the fields a server or user supplies; a bad format would make every pixel wrong.
    public func validate() throws(RFBError) {
        guard [8, 16, 32].contains(bitsPerPixel) else {
            throw .protocolViolation("pixel format has \(bitsPerPixel) bits per pixel; only 8, 16 and 32 exist")
        }
        guard depth > 0, depth <= bitsPerPixel else {
            throw .protocolViolation("pixel format depth \(depth) does not fit \(bitsPerPixel) bits per pixel")
        }
        if trueColour {
            for (name, max, shift) in [("red", redMax, redShift), ("green", greenMax, greenShift), ("blue", blueMax, blueShift)] {
                // A channel max must be 2^n - 1 and fit inside the pixel at its shift.
                guard max > 0, max & (max &+ 1) == 0 else {
                    throw .protocolViolation("pixel format \(name)-max \(max) is not one less than a power of two")
                }
                let bits = UInt16.bitWidth - max.leadingZeroBitCount
                guard Int(shift) + bits <= Int(bitsPerPixel) else {
                    throw .protocolViolation("pixel format \(name) channel (max \(max), shift \(shift)) does not fit \(bitsPerPixel) bits")
                }
            }
        }
    }

    /// The 16-byte wire form.
    public func encode(into writer: inout ByteWriter) {
        writer.writeUInt8(bitsPerPixel)
        writer.writeUInt8(depth)
        writer.writeUInt8(bigEndian ? 1 : 0)
        writer.writeUInt8(trueColour ? 1 : 0)
        writer.writeInteger(redMax)
        writer.writeInteger(greenMax)
        writer.writeInteger(blueMax)
        writer.writeUInt8(redShift)
        writer.writeUInt8(greenShift)
        writer.writeUInt8(blueShift)
        writer.writeZeros(3)
    }

    public static func decode(from reader: inout ByteReader) throws(TruncatedInput) -> PixelFormat {
        let bpp = try reader.readUInt8()
        let depth = try reader.readUInt8()
        let bigEndian = try reader.readUInt8() != 0
        let trueColour = try reader.readUInt8() != 0
        let redMax: UInt16 = try reader.readInteger()
        let greenMax: UInt16 = try reader.readInteger()
        let blueMax: UInt16 = try reader.readInteger()
        let redShift = try reader.readUInt8()
        let greenShift = try reader.readUInt8()
        let blueShift = try reader.readUInt8()
        try reader.skip(3)
        return PixelFormat(bitsPerPixel: bpp, depth: depth, bigEndian: bigEndian, trueColour: trueColour,
                           redMax: redMax, greenMax: greenMax, blueMax: blueMax,
                           redShift: redShift, greenShift: greenShift, blueShift: blueShift)
    }

    public var description: String {
        if trueColour {
            return "\(bitsPerPixel) bpp, depth \(depth), \(bigEndian ? "big" : "little")-endian, true colour, max \(redMax)/\(greenMax)/\(blueMax), shift \(redShift)/\(greenShift)/\(blueShift)"
        }
        return "\(bitsPerPixel) bpp, depth \(depth), \(bigEndian ? "big" : "little")-endian, colour-mapped"
    }

    /// Parses a short name used on the command line: rgb888, rgb565, bgr233, map8.
    public init?(name: String) {
        switch name.lowercased() {
        case "rgb888", "32", "truecolor", "truecolour": self = .rgb888
        case "rgb565", "16": self = .rgb565
        case "bgr233", "8": self = .bgr233
        case "map8", "colourmap", "colormap": self = .colourMap8
        default: return nil
        }
    }
}
