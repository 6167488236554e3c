/// Painting and copying the small rectangles tile encodings are made of (Hextile's 1×1 to 16×16
/// subrectangles, RLE runs, 16- and 64-pixel tile rows), without a library call or a per-pixel
/// loop for each: rows of four or more pixels are written 16 bytes at a time, the last store
/// overlapping the one before it where the width is not a multiple of four. Also the palette
/// rows (1, 2, 4 and 8-bit indices) and 3-byte pixel rows ZRLE/TRLE and Tight share, four
/// pixels per 16-byte store: these decoders are bound by their stores.
enum PixelFill {
    typealias Quad = SIMD4<UInt32>

    /// Fills `width`×`height` pixels at `origin`, rows `stride` pixels apart, with `colour`.
    @inline(__always)
    static func fill(_ origin: UnsafeMutablePointer<UInt32>, stride: Int, width: Int, height: Int, colour: UInt32) {
        var row = origin
        for _ in 0..<height {
            fillRow(row, count: width, colour: colour)
            row += stride
        }
    }

    /// Writes `count` copies of `colour` from `p`.
    @inline(__always)
    static func fillRow(_ p: UnsafeMutablePointer<UInt32>, count: Int, colour: UInt32) {
        if count < 4 {
            if count > 0 { p[0] = colour }
            if count > 1 { p[1] = colour }
            if count > 2 { p[2] = colour }
            return
        }
        let quad = Quad(repeating: colour)
        let raw = UnsafeMutableRawPointer(p)
        var offset = 0
        let last = (count - 4) * 4
        while offset < last {
            raw.storeBytes(of: quad, toByteOffset: offset, as: Quad.self)
            offset += 16
        }
        raw.storeBytes(of: quad, toByteOffset: last, as: Quad.self)
    }

    /// Copies `count` pixels (at least four) from `source` to `p`; the regions do not overlap.
    @inline(__always)
    static func copyRow(_ p: UnsafeMutablePointer<UInt32>, from source: UnsafeRawPointer, count: Int) {
        guard count >= 4 else {
            for i in 0..<count { p[i] = source.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self) }
            return
        }
        let raw = UnsafeMutableRawPointer(p)
        var offset = 0
        let last = (count - 4) * 4
        while offset < last {
            raw.storeBytes(of: source.loadUnaligned(fromByteOffset: offset, as: Quad.self), toByteOffset: offset, as: Quad.self)
            offset += 16
        }
        raw.storeBytes(of: source.loadUnaligned(fromByteOffset: last, as: Quad.self), toByteOffset: last, as: Quad.self)
    }

    /// The 4-pixel run every nibble of a 1-bit palette row stands for (most significant bit
    /// first), for the colours `colour0` and `colour1`: written once per palette into 16 quads,
    /// after which each index byte costs two loads and two 16-byte stores.
    static func makeOneBitPatterns(_ patterns: UnsafeMutablePointer<Quad>, colour0: UInt32, colour1: UInt32) {
        for n in 0..<16 {
            patterns[n] = Quad(n & 8 != 0 ? colour1 : colour0, n & 4 != 0 ? colour1 : colour0,
                               n & 2 != 0 ? colour1 : colour0, n & 1 != 0 ? colour1 : colour0)
        }
    }

    /// Paints `count` pixels from a row of 1-bit palette indices (most significant bit first)
    /// through the patterns of `makeOneBitPatterns`: whole bytes eight pixels at a time, then the
    /// last partial byte pixel by pixel.
    @inline(__always)
    static func expandOneBitRow(_ p: UnsafeMutablePointer<UInt32>, from line: UnsafePointer<UInt8>, count: Int,
                                patterns: UnsafePointer<Quad>) {
        let raw = UnsafeMutableRawPointer(p)
        var x = 0, byte = 0
        while x + 8 <= count {
            let b = Int(line[byte])
            raw.storeBytes(of: patterns[b &>> 4], toByteOffset: x &* 4, as: Quad.self)
            raw.storeBytes(of: patterns[b & 15], toByteOffset: x &* 4 &+ 16, as: Quad.self)
            x += 8
            byte += 1
        }
        let colour0 = patterns[0][0], colour1 = patterns[15][0]
        while x < count {
            p[x] = (line[x &>> 3] &>> UInt8(truncatingIfNeeded: 7 - (x & 7))) & 1 == 0 ? colour0 : colour1
            x += 1
        }
    }

    /// The two pixels every nibble of a 2-bit palette row stands for (high index first), and
    /// whether that nibble holds an index at or beyond `size`: written once per palette.
    static func makeTwoBitPairs(_ pairs: UnsafeMutablePointer<SIMD2<UInt32>>, invalid: UnsafeMutablePointer<UInt8>,
                                colours: UnsafePointer<UInt32>, size: Int) {
        for n in 0..<16 {
            pairs[n] = SIMD2(colours[n &>> 2], colours[n & 3])
            invalid[n] = n &>> 2 >= size || n & 3 >= size ? 1 : 0
        }
    }

    /// Paints the whole bytes of a 2-bit palette row (four pixels each) through the pairs of
    /// `makeTwoBitPairs`, one 16-byte store per byte; returns how many pixels it painted and
    /// whether any of them had an index beyond the palette (the caller refuses the row then).
    @inline(__always)
    static func expandTwoBitBytes(_ p: UnsafeMutablePointer<UInt32>, from line: UnsafePointer<UInt8>, count: Int,
                                  pairs: UnsafePointer<SIMD2<UInt32>>, invalid: UnsafePointer<UInt8>) -> (painted: Int, bad: Bool) {
        let raw = UnsafeMutableRawPointer(p)
        var x = 0, byte = 0
        var bad: UInt8 = 0
        while x + 4 <= count {
            let b = Int(line[byte])
            let high = b &>> 4, low = b & 15
            bad |= invalid[high] | invalid[low]
            raw.storeBytes(of: Quad(lowHalf: pairs[high], highHalf: pairs[low]), toByteOffset: x &* 4, as: Quad.self)
            x += 4
            byte += 1
        }
        return (x, bad != 0)
    }

    /// Paints the whole byte pairs of a 4-bit palette row (four pixels per two bytes) with one
    /// 16-byte store each; returns how many pixels it painted and the highest index among them.
    @inline(__always)
    static func expandFourBitBytes(_ p: UnsafeMutablePointer<UInt32>, from line: UnsafePointer<UInt8>, count: Int,
                                   colours: UnsafePointer<UInt32>) -> (painted: Int, highest: Int) {
        let raw = UnsafeMutableRawPointer(p)
        var x = 0, byte = 0
        var highest = 0
        while x + 4 <= count {
            let b0 = Int(line[byte]), b1 = Int(line[byte &+ 1])
            highest = max(highest, b0 &>> 4, b0 & 15, b1 &>> 4, b1 & 15)
            raw.storeBytes(of: Quad(colours[b0 &>> 4], colours[b0 & 15], colours[b1 &>> 4], colours[b1 & 15]),
                           toByteOffset: x &* 4, as: Quad.self)
            x += 4
            byte += 2
        }
        return (x, highest)
    }

    /// Paints `count` pixels from a row of 8-bit palette indices, four per 16-byte store. The
    /// caller has checked every index against the palette (`colours` holds at least 256 words).
    @inline(__always)
    static func expandIndexRow(_ p: UnsafeMutablePointer<UInt32>, from line: UnsafePointer<UInt8>, count: Int,
                               colours: UnsafePointer<UInt32>) {
        let raw = UnsafeMutableRawPointer(p)
        var x = 0
        while x + 4 <= count {
            raw.storeBytes(of: Quad(colours[Int(line[x])], colours[Int(line[x &+ 1])], colours[Int(line[x &+ 2])], colours[Int(line[x &+ 3])]),
                           toByteOffset: x &* 4, as: Quad.self)
            x += 4
        }
        while x < count {
            p[x] = colours[Int(line[x])]
            x += 1
        }
    }

    /// Turns a row of 3-byte pixels into words: `bigEndian` false reads B, G, R (ZRLE's CPIXELs
    /// of the native format, top byte 0), true reads R, G, B (Tight's TPIXELs, top byte 0xFF).
    /// Four pixels are read as three words and stored at once; no byte past the row is read.
    @inline(__always)
    static func widenRow(_ p: UnsafeMutablePointer<UInt32>, from line: UnsafeRawPointer, count: Int, bigEndian: Bool) {
        let raw = UnsafeMutableRawPointer(p)
        var x = 0
        while x + 4 <= count {
            // Bytes 0..11 as three little-endian words: pixel i is bytes 3i, 3i+1, 3i+2.
            let a = line.loadUnaligned(fromByteOffset: x &* 3, as: UInt32.self).littleEndian
            let b = line.loadUnaligned(fromByteOffset: x &* 3 &+ 4, as: UInt32.self).littleEndian
            let c = line.loadUnaligned(fromByteOffset: x &* 3 &+ 8, as: UInt32.self).littleEndian
            var quad = Quad(a, a &>> 24 | b &<< 8, b &>> 16 | c &<< 16, c &>> 8) & Quad(repeating: 0x00FF_FFFF)
            if bigEndian {
                // Swap bytes 0 and 2 of each pixel: B, G, R order → R, G, B.
                quad = (quad &<< 16 & Quad(repeating: 0x00FF_0000)) | (quad & Quad(repeating: 0x0000_FF00))
                    | (quad &>> 16 & Quad(repeating: 0x0000_00FF)) | Quad(repeating: 0xFF00_0000)
            }
            raw.storeBytes(of: quad, toByteOffset: x &* 4, as: Quad.self)
            x += 4
        }
        while x < count {
            let q = line.advanced(by: x &* 3).assumingMemoryBound(to: UInt8.self)
            p[x] = bigEndian ? 0xFF00_0000 | UInt32(q[0]) &<< 16 | UInt32(q[1]) &<< 8 | UInt32(q[2])
                : UInt32(q[0]) | UInt32(q[1]) &<< 8 | UInt32(q[2]) &<< 16
            x += 1
        }
    }
}
