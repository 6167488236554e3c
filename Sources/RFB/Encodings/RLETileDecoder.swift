import FarcastSupport

/// The tile format ZRLE (64×64 tiles inside zlib) and TRLE (16×16 tiles, no zlib) share:
/// raw, solid, packed-palette, plain-RLE and palette-RLE tiles of CPIXELs. TRLE adds two
/// subencodings (127, 129) that reuse the previous tile's palette.
struct RLETileDecoder {
    let converter: PixelConverter
    let encoding: String
    let allowsPaletteReuse: Bool
    /// The palette of the last palette tile (TRLE reuse); fixed capacity 128, never reallocated.
    var palette = [UInt32](repeating: 0, count: 128)
    var paletteSize = 0

    init(converter: PixelConverter, encoding: String, allowsPaletteReuse: Bool) {
        self.converter = converter
        self.encoding = encoding
        self.allowsPaletteReuse = allowsPaletteReuse
    }

    /// Largest inflated size of a ZRLE rectangle of `width`×`height`: bounds untrusted lengths.
    static func maximumEncodedSize(width: Int, height: Int, bytesPerCPixel bpc: Int, tileSize: Int) -> Int {
        let tiles = ((width + tileSize - 1) / tileSize) * ((height + tileSize - 1) / tileSize)
        return tiles * (1 + 127 * bpc) + width * height * (bpc + 2)
    }

    /// Decodes one tile at `origin` (rows `stride` words apart). Throws `TruncatedInput` if the
    /// cursor runs out, `RFBError` for malformed data; paints only once the tile is known whole
    /// where a retry could otherwise paint twice (harmless anyway: painting is idempotent).
    mutating func decodeTile(_ c: inout BoundedCursor, origin: UnsafeMutablePointer<UInt32>, stride: Int,
                             width tw: Int, height th: Int) throws {
        let bpc = converter.bytesPerCPixel
        let sub = try c.u8()
        switch sub {
        case 0:
            try c.require(tw * th * bpc)
            if converter.isNative && bpc == 4 {
                for r in 0..<th { PixelFill.copyRow(origin + r * stride, from: c.pointer + r * tw * 4, count: tw) }
            } else if converter.isNative && bpc == 3 {
                // The common case (rgb888, 3-byte CPIXELs): B, G, R bytes to one word.
                for r in 0..<th { PixelFill.widenRow(origin + r * stride, from: c.pointer + r * tw * 3, count: tw, bigEndian: false) }
            } else {
                var p = c.pointer
                for r in 0..<th {
                    let row = origin + r * stride
                    for x in 0..<tw {
                        row[x] = converter.cpixel(p)
                        p += bpc
                    }
                }
            }
            c.position += tw * th * bpc
        case 1:
            try c.require(bpc)
            let colour = converter.cpixel(c.pointer)
            c.position += bpc
            PixelFill.fill(origin, stride: stride, width: tw, height: th, colour: colour)
            palette[0] = colour
            paletteSize = 1
        case 2...16:
            try readPalette(&c, count: Int(sub))
            try decodePacked(&c, origin: origin, stride: stride, width: tw, height: th)
        case 127 where allowsPaletteReuse:
            guard paletteSize >= 2 else {
                throw RFBError.malformedRectangle(encoding: encoding, detail: "tile reuses a palette of \(paletteSize) colours for packed pixels")
            }
            try decodePacked(&c, origin: origin, stride: stride, width: tw, height: th)
        case 128:
            try decodePlainRLE(&c, origin: origin, stride: stride, width: tw, height: th)
        case 129 where allowsPaletteReuse:
            guard paletteSize >= 1 else {
                throw RFBError.malformedRectangle(encoding: encoding, detail: "tile reuses a palette before any was sent")
            }
            try decodePaletteRLE(&c, origin: origin, stride: stride, width: tw, height: th)
        case 130...255:
            try readPalette(&c, count: Int(sub) - 128)
            try decodePaletteRLE(&c, origin: origin, stride: stride, width: tw, height: th)
        default:
            throw RFBError.malformedRectangle(encoding: encoding, detail: "unknown tile subencoding \(sub)")
        }
    }


    private mutating func readPalette(_ c: inout BoundedCursor, count: Int) throws(TruncatedInput) {
        let bpc = converter.bytesPerCPixel
        try c.require(count * bpc)
        for i in 0..<count { palette[i] = converter.cpixel(c.pointer + i * bpc) }
        c.position += count * bpc
        paletteSize = count
    }

    private func decodePacked(_ c: inout BoundedCursor, origin: UnsafeMutablePointer<UInt32>, stride: Int,
                              width tw: Int, height th: Int) throws {
        let size = paletteSize
        let bits = size == 2 ? 1 : size <= 4 ? 2 : 4
        let rowBytes = (tw * bits + 7) / 8
        try c.require(rowBytes * th)
        // Indices can only exceed the palette when it does not fill its bit width.
        let needsCheck = size != 1 << bits
        let source = c.pointer.assumingMemoryBound(to: UInt8.self)
        try palette.withUnsafeBufferPointer { pal in
            let colours = pal.baseAddress!
            switch bits {
            case 1:
                withUnsafeTemporaryAllocation(of: PixelFill.Quad.self, capacity: 16) { patterns in
                    PixelFill.makeOneBitPatterns(patterns.baseAddress!, colour0: colours[0], colour1: colours[1])
                    for r in 0..<th {
                        PixelFill.expandOneBitRow(origin + r * stride, from: source + r * rowBytes, count: tw, patterns: patterns.baseAddress!)
                    }
                }
            case 2:
                try withUnsafeTemporaryAllocation(of: SIMD2<UInt32>.self, capacity: 16) { pairs in
                    try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { invalid in
                        PixelFill.makeTwoBitPairs(pairs.baseAddress!, invalid: invalid.baseAddress!, colours: colours, size: size)
                        for r in 0..<th {
                            let line = source + r * rowBytes, row = origin + r * stride
                            // Whole bytes four pixels at a time, then the last partial byte.
                            let (painted, bad) = PixelFill.expandTwoBitBytes(row, from: line, count: tw, pairs: pairs.baseAddress!, invalid: invalid.baseAddress!)
                            // Only a palette of three has a bad 2-bit index: 3.
                            if bad { throw badIndex(3) }
                            try paintTail(row, from: line, pixels: painted..<tw, bits: 2, colours: colours, checking: needsCheck)
                        }
                    }
                }
            default:
                for r in 0..<th {
                    let line = source + r * rowBytes, row = origin + r * stride
                    // Byte pairs four pixels at a time, then up to three pixels one by one.
                    let (painted, highest) = PixelFill.expandFourBitBytes(row, from: line, count: tw, colours: colours)
                    if needsCheck && highest >= size { throw badIndex(highest) }
                    try paintTail(row, from: line, pixels: painted..<tw, bits: 4, colours: colours, checking: needsCheck)
                }
            }
        }
        c.position += rowBytes * th
    }

    /// Paints the pixels of a packed row the whole-byte kernels left (the last partial byte or
    /// byte pair) one by one, refusing an index beyond the palette when `checking`.
    @inline(__always)
    private func paintTail(_ row: UnsafeMutablePointer<UInt32>, from line: UnsafePointer<UInt8>, pixels: Range<Int>, bits: Int,
                           colours: UnsafePointer<UInt32>, checking: Bool) throws {
        let perByte = 8 / bits, mask = (1 << bits) - 1
        for x in pixels {
            let shift = 8 - bits * (x % perByte + 1)
            let index = Int(line[x / perByte] &>> UInt8(truncatingIfNeeded: shift)) & mask
            if checking && index >= paletteSize { throw badIndex(index) }
            row[x] = colours[index]
        }
    }

    private func badIndex(_ index: Int) -> RFBError {
        .malformedRectangle(encoding: encoding, detail: "palette index \(index) beyond a palette of \(paletteSize)")
    }

    /// Reads an RLE run length (1 + the sum of bytes, 255 continuing), refusing runs that
    /// would overrun the tile so a stream of 255s cannot spin forever.
    @inline(__always)
    private func runLength(_ c: inout BoundedCursor, limit: Int) throws -> Int {
        var length = 1
        while true {
            let b = try c.u8()
            length += Int(b)
            if length > limit {
                throw RFBError.malformedRectangle(encoding: encoding, detail: "run of \(length)+ pixels overruns its tile (\(limit) left)")
            }
            if b != 255 { return length }
        }
    }

    /// Paints runs one after another through a tile, wrapping from row to row, keeping its
    /// place as a column and a row pointer (no division per run).
    private struct RunPainter {
        var row: UnsafeMutablePointer<UInt32>
        var x = 0
        let width: Int, stride: Int

        @inline(__always)
        mutating func paint(count: Int, colour: UInt32) {
            if count == 1 {
                row[x] = colour
                x += 1
                if x == width { x = 0; row += stride }
                return
            }
            var left = count
            while left > 0 {
                let n = min(left, width - x)
                PixelFill.fillRow(row + x, count: n, colour: colour)
                left -= n
                x += n
                if x == width { x = 0; row += stride }
            }
        }
    }

    private func decodePlainRLE(_ c: inout BoundedCursor, origin: UnsafeMutablePointer<UInt32>, stride: Int,
                                width tw: Int, height th: Int) throws {
        let total = tw * th, bpc = converter.bytesPerCPixel
        var painter = RunPainter(row: origin, width: tw, stride: stride)
        var i = 0
        while i < total {
            try c.require(bpc)
            let colour = converter.cpixel(c.pointer)
            c.position += bpc
            let n = try runLength(&c, limit: total - i)
            painter.paint(count: n, colour: colour)
            i += n
        }
    }

    private func decodePaletteRLE(_ c: inout BoundedCursor, origin: UnsafeMutablePointer<UInt32>, stride: Int,
                                  width tw: Int, height th: Int) throws {
        let total = tw * th
        var painter = RunPainter(row: origin, width: tw, stride: stride)
        var i = 0
        while i < total {
            let b = try c.u8()
            let index = Int(b & 0x7F)
            guard index < paletteSize else {
                throw RFBError.malformedRectangle(encoding: encoding, detail: "palette index \(index) beyond a palette of \(paletteSize)")
            }
            let n = b & 0x80 != 0 ? try runLength(&c, limit: total - i) : 1
            painter.paint(count: n, colour: palette[index])
            i += n
        }
    }
}
