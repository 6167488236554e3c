/// A picture brought to 8-bit 4:2:0 (I420) for a window that shows nothing else (SDL 2's YUV
/// textures are 8-bit 4:2:0 only): 10-bit samples rounded to their top eight bits, 4:4:4 chroma
/// averaged over each 2×2 block. The colour description stays the source's. Owns its samples.
public final class EightBitPicture: DecodedPicture, @unchecked Sendable {
    // @unchecked: the planes are written once in init and only read afterwards.
    public let width: Int
    public let height: Int
    public var layout: PictureLayout { .i420 }
    public let colour: PictureColour
    public let frameIndex: UInt32
    public let ptsNanoseconds: UInt64
    /// What the source was, for the overlay ("10-bit 4:4:4 shown as 8-bit 4:2:0").
    public let source: PictureLayout
    private let luma: UnsafeMutableBufferPointer<UInt8>
    private let cb: UnsafeMutableBufferPointer<UInt8>
    private let cr: UnsafeMutableBufferPointer<UInt8>

    /// `picture` as I420 (a copy even when it already is 8-bit 4:2:0).
    public init(_ picture: DecodedPicture) {
        width = picture.width
        height = picture.height
        colour = picture.colour
        frameIndex = picture.frameIndex
        ptsNanoseconds = picture.ptsNanoseconds
        source = picture.layout
        let cw = (width + 1) / 2, ch = (height + 1) / 2
        luma = .allocate(capacity: width * height)
        cb = .allocate(capacity: cw * ch)
        cr = .allocate(capacity: cw * ch)
        let (w, h, layout) = (width, height, source)
        let (luma, cb, cr) = (luma, cb, cr)
        picture.withPlanes { planes, pitches in
            switch layout {
            case .i420:
                Self.copy8(planes[0], pitches[0], w, h, into: luma)
                Self.copy8(planes[1], pitches[1], cw, ch, into: cb)
                Self.copy8(planes[2], pitches[2], cw, ch, into: cr)
            case .nv12:
                Self.copy8(planes[0], pitches[0], w, h, into: luma)
                Self.split8(planes[1], pitches[1], cw, ch, into: cb, cr)
            case .i420p10:
                Self.narrow(planes[0], pitches[0], w, h, shift: 2, step: 1, into: luma)
                Self.narrow(planes[1], pitches[1], cw, ch, shift: 2, step: 1, into: cb)
                Self.narrow(planes[2], pitches[2], cw, ch, shift: 2, step: 1, into: cr)
            case .p010:
                Self.narrow(planes[0], pitches[0], w, h, shift: 8, step: 1, into: luma)
                Self.narrow(planes[1], pitches[1], cw, ch, shift: 8, step: 2, into: cb)
                Self.narrow(planes[1] + 2, pitches[1], cw, ch, shift: 8, step: 2, into: cr)
            case .i444:
                Self.copy8(planes[0], pitches[0], w, h, into: luma)
                Self.halve(planes[1], pitches[1], w, h, shift: 0, wide: false, into: cb)
                Self.halve(planes[2], pitches[2], w, h, shift: 0, wide: false, into: cr)
            case .i444p10:
                Self.narrow(planes[0], pitches[0], w, h, shift: 2, step: 1, into: luma)
                Self.halve(planes[1], pitches[1], w, h, shift: 2, wide: true, into: cb)
                Self.halve(planes[2], pitches[2], w, h, shift: 2, wide: true, into: cr)
            }
        }
    }

    deinit {
        luma.deallocate()
        cb.deallocate()
        cr.deallocate()
    }

    public func withPlanes<R>(_ body: ([UnsafePointer<UInt8>], [Int]) throws -> R) rethrows -> R {
        let cw = (width + 1) / 2
        return try body([UnsafePointer(luma.baseAddress!), UnsafePointer(cb.baseAddress!), UnsafePointer(cr.baseAddress!)], [width, cw, cw])
    }

    private static func copy8(_ src: UnsafePointer<UInt8>, _ pitch: Int, _ w: Int, _ h: Int, into out: UnsafeMutableBufferPointer<UInt8>) {
        for y in 0..<h { (out.baseAddress! + y * w).update(from: src + y * pitch, count: w) }
    }

    private static func split8(_ src: UnsafePointer<UInt8>, _ pitch: Int, _ cw: Int, _ ch: Int,
                               into u: UnsafeMutableBufferPointer<UInt8>, _ v: UnsafeMutableBufferPointer<UInt8>) {
        for y in 0..<ch {
            let row = src + y * pitch
            for x in 0..<cw {
                u[y * cw + x] = row[2 * x]
                v[y * cw + x] = row[2 * x + 1]
            }
        }
    }

    /// 16-bit little-endian samples to 8 bits: rounded, `shift` low bits dropped, every `step`th sample.
    private static func narrow(_ src: UnsafePointer<UInt8>, _ pitch: Int, _ w: Int, _ h: Int, shift: UInt32, step: Int,
                               into out: UnsafeMutableBufferPointer<UInt8>) {
        let half = UInt32(1) << (shift - 1)
        for y in 0..<h {
            let row = UnsafeRawPointer(src + y * pitch)
            let base = y * w
            for x in 0..<w {
                let v = UInt32(UInt16(littleEndian: row.loadUnaligned(fromByteOffset: 2 * x * step, as: UInt16.self)))
                out[base + x] = UInt8(min(255, (v + half) >> shift))
            }
        }
    }

    /// A full-size chroma plane to half size in both directions: the rounded mean of each 2×2
    /// block (the last column and row repeat at odd sizes), 8-bit or 16-bit samples.
    private static func halve(_ src: UnsafePointer<UInt8>, _ pitch: Int, _ w: Int, _ h: Int, shift: UInt32, wide: Bool,
                              into out: UnsafeMutableBufferPointer<UInt8>) {
        let cw = (w + 1) / 2, ch = (h + 1) / 2
        let raw = UnsafeRawPointer(src)
        func sample(_ x: Int, _ y: Int) -> UInt32 {
            let (cx, cy) = (min(x, w - 1), min(y, h - 1))
            if wide { return UInt32(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: cy * pitch + 2 * cx, as: UInt16.self))) }
            return UInt32(src[cy * pitch + cx])
        }
        // Four samples summed: two more bits, then the source's extra bits, dropped with rounding.
        let drop = 2 + shift, half = UInt32(1) << (drop - 1)
        for y in 0..<ch {
            for x in 0..<cw {
                let sum = sample(2 * x, 2 * y) + sample(2 * x + 1, 2 * y) + sample(2 * x, 2 * y + 1) + sample(2 * x + 1, 2 * y + 1)
                out[y * cw + x] = UInt8(min(255, (sum + half) >> drop))
            }
        }
    }
}
