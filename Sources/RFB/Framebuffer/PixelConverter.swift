/// Turns wire pixel values into Farcast's framebuffer words (`0xFFRRGGBB`, host order).
///
/// Built once per pixel-format or colour-map change; per-channel lookup tables make the general
/// case a few table loads per pixel, and the default format (rgb888) is recognised so decoders
/// can copy rows untouched.
public struct PixelConverter: Sendable {
    public let format: PixelFormat
    /// Bytes of one PIXEL on the wire.
    public let bytesPerPixel: Int
    /// Bytes of one ZRLE/TRLE CPIXEL.
    public let bytesPerCPixel: Int
    /// Bytes of one Tight TPIXEL.
    public let bytesPerTPixel: Int
    /// True when wire pixels are already framebuffer words (32 bpp little-endian R<<16 G<<8 B).
    public let isNative: Bool
    /// For 3-byte CPIXELs: whether they hold the most significant bytes of the pixel value.
    let cpixelUsesHighBytes: Bool
    let redTable: [UInt32]
    let greenTable: [UInt32]
    let blueTable: [UInt32]
    /// Colour map for colour-mapped formats, already in framebuffer words.
    public private(set) var colourMap: [UInt32]

    public init(format: PixelFormat, colourMap: [UInt32] = []) {
        self.format = format
        bytesPerPixel = format.bytesPerPixel
        isNative = format.trueColour && format.bitsPerPixel == 32 && !format.bigEndian
            && format.redMax == 255 && format.greenMax == 255 && format.blueMax == 255
            && format.redShift == 16 && format.greenShift == 8 && format.blueShift == 0
        if format.trueColour && format.bitsPerPixel == 32 && format.depth <= 24 {
            let used = (UInt32(format.redMax) << format.redShift) | (UInt32(format.greenMax) << format.greenShift)
                | (UInt32(format.blueMax) << format.blueShift)
            if used & 0xFF00_0000 == 0 {
                bytesPerCPixel = 3
                cpixelUsesHighBytes = false
            } else if used & 0x0000_00FF == 0 {
                bytesPerCPixel = 3
                cpixelUsesHighBytes = true
            } else {
                bytesPerCPixel = 4
                cpixelUsesHighBytes = false
            }
        } else {
            bytesPerCPixel = format.bytesPerPixel
            cpixelUsesHighBytes = false
        }
        bytesPerTPixel = format.is888 ? 3 : format.bytesPerPixel
        redTable = Self.scaleTable(max: format.redMax, shift: 16)
        greenTable = Self.scaleTable(max: format.greenMax, shift: 8)
        blueTable = Self.scaleTable(max: format.blueMax, shift: 0)
        self.colourMap = colourMap
    }

    /// channel value 0...max → its 8-bit intensity placed at `shift`, rounding to nearest.
    static func scaleTable(max: UInt16, shift: UInt32) -> [UInt32] {
        guard max > 0 else { return [0] }
        return (0...Int(max)).map { v in UInt32((v * 255 + Int(max) / 2) / Int(max)) << shift }
    }

    /// Sets colour-map entries (from SetColourMapEntries), growing the map as needed.
    public mutating func setColours(first: Int, colours: [UInt32]) {
        let end = first + colours.count
        if colourMap.count < end { colourMap += repeatElement(0xFF00_0000, count: end - colourMap.count) }
        for (i, c) in colours.enumerated() { colourMap[first + i] = c }
    }

    /// Converts one wire pixel value to a framebuffer word.
    @inline(__always)
    public func word(fromValue v: UInt32) -> UInt32 {
        if format.trueColour {
            let r = redTable[Int((v >> UInt32(format.redShift)) & UInt32(format.redMax))]
            let g = greenTable[Int((v >> UInt32(format.greenShift)) & UInt32(format.greenMax))]
            let b = blueTable[Int((v >> UInt32(format.blueShift)) & UInt32(format.blueMax))]
            return 0xFF00_0000 | r | g | b
        }
        let index = Int(v)
        return index < colourMap.count ? colourMap[index] : 0xFF00_0000
    }

    /// Reads one PIXEL value (bytesPerPixel bytes in the format's byte order) at `p`.
    @inline(__always)
    public func readValue(_ p: UnsafeRawPointer) -> UInt32 {
        switch bytesPerPixel {
        case 1: return UInt32(p.load(as: UInt8.self))
        case 2:
            let v = UInt32(p.loadUnaligned(as: UInt16.self))
            return format.bigEndian ? UInt32(UInt16(truncatingIfNeeded: v).byteSwapped) : v
        default:
            let v = p.loadUnaligned(as: UInt32.self)
            return format.bigEndian ? v.byteSwapped : v
        }
    }

    /// Reads one PIXEL at `p` and converts it.
    @inline(__always)
    public func pixel(_ p: UnsafeRawPointer) -> UInt32 {
        if isNative { return p.loadUnaligned(as: UInt32.self) }
        return word(fromValue: readValue(p))
    }

    /// Reads one CPIXEL (ZRLE/TRLE) at `p` and converts it.
    @inline(__always)
    public func cpixel(_ p: UnsafeRawPointer) -> UInt32 {
        guard bytesPerCPixel == 3 else { return pixel(p) }
        let b0 = UInt32(p.load(fromByteOffset: 0, as: UInt8.self))
        let b1 = UInt32(p.load(fromByteOffset: 1, as: UInt8.self))
        let b2 = UInt32(p.load(fromByteOffset: 2, as: UInt8.self))
        let value: UInt32
        if format.bigEndian {
            value = cpixelUsesHighBytes ? (b0 << 24 | b1 << 16 | b2 << 8) : (b0 << 16 | b1 << 8 | b2)
        } else {
            value = cpixelUsesHighBytes ? (b0 << 8 | b1 << 16 | b2 << 24) : (b0 | b1 << 8 | b2 << 16)
        }
        if isNative { return value }
        return word(fromValue: value)
    }

    /// Reads one TPIXEL (Tight) at `p` and converts it.
    @inline(__always)
    public func tpixel(_ p: UnsafeRawPointer) -> UInt32 {
        guard bytesPerTPixel == 3 else { return pixel(p) }
        // A 3-byte TPIXEL is R, G, B whatever the shifts: the intensities are already 8-bit.
        let r = UInt32(p.load(fromByteOffset: 0, as: UInt8.self))
        let g = UInt32(p.load(fromByteOffset: 1, as: UInt8.self))
        let b = UInt32(p.load(fromByteOffset: 2, as: UInt8.self))
        return 0xFF00_0000 | r << 16 | g << 8 | b
    }

    /// Converts `count` consecutive PIXELs from `src` into `dst`.
    @inline(__always)
    public func convertRow(from src: UnsafeRawPointer, count: Int, to dst: UnsafeMutablePointer<UInt32>) {
        if isNative {
            UnsafeMutableRawPointer(dst).copyMemory(from: src, byteCount: count * 4)
            return
        }
        let bpp = bytesPerPixel
        for i in 0..<count { dst[i] = word(fromValue: readValue(src + i * bpp)) }
    }
}
