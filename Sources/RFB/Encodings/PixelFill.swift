/// Painting and copying the small rectangles tile encodings are made of (Hextile's 1×1 to 16×16
/// subrectangles, RLE runs, 16- and 64-pixel tile rows), without a library call or a per-pixel
/// loop for each: rows of four or more pixels are written 16 bytes at a time, the last store
/// overlapping the one before it where the width is not a multiple of four. Also the 1-bit
/// palette rows ZRLE/TRLE and Tight share.
enum PixelFill {
    private typealias Quad = SIMD4<UInt32>

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

    /// Paints `count` pixels from a row of 1-bit palette indices (most significant bit first):
    /// whole bytes eight pixels at a time with fixed shifts, then the last partial byte.
    @inline(__always)
    static func expandOneBitRow(_ p: UnsafeMutablePointer<UInt32>, from line: UnsafePointer<UInt8>, count: Int,
                                colours: UnsafePointer<UInt32>) {
        var x = 0, byte = 0
        while x + 8 <= count {
            let b = Int(line[byte])
            for k in 0..<8 { p[x + k] = colours[(b &>> (7 - k)) & 1] }
            x += 8
            byte += 1
        }
        while x < count {
            p[x] = colours[Int((line[x &>> 3] &>> UInt8(truncatingIfNeeded: 7 - (x & 7))) & 1)]
            x += 1
        }
    }
}
