import CZlib
import FarcastSupport
@testable import RFB

/// An RGB test image (words 0x00RRGGBB) and independent, spec-following RFB encoders for it.
///
/// These encoders exist only to produce wire data for the decoder tests; they are written from
/// the RFB specification (rfbproto, RFC 6143), not from the decoders, so a misreading of the
/// spec in one is likely to show up as a mismatch.
struct TestImage {
    let width: Int
    let height: Int
    var pixels: [UInt32]

    /// A deterministic picture with every kind of content the encoders care about: smooth
    /// gradients, noise, few-colour "text", and solid blocks.
    static func sample(width: Int, height: Int, seed: UInt64 = 1) -> TestImage {
        var rng = SplitMix(seed: seed)
        var px = [UInt32](repeating: 0, count: width * height)
        for y in 0..<height {
            for x in 0..<width {
                let v: UInt32
                switch (x * 4 / max(width, 1), y * 2 / max(height, 1)) {
                case (0, _):
                    v = UInt32((x * 7) & 255) << 16 | UInt32((y * 5) & 255) << 8 | 0x40
                case (1, 0):
                    v = UInt32(truncatingIfNeeded: rng.next()) & 0xFFFFFF
                case (1, _):
                    v = 0x2060A0
                case (2, _):
                    v = ((x / 3 + y / 5) % 4 == 0) ? 0x000000 : (((x + y) % 7 == 0) ? 0xC03020 : 0xFFFFFF)
                default:
                    v = ((x / 8) % 2 == 0) ? 0x4682B4 : 0x808080 | UInt32((y / 9) % 3) * 0x101010
                }
                px[y * width + x] = v
            }
        }
        return TestImage(width: width, height: height, pixels: px)
    }

    func pixel(_ x: Int, _ y: Int) -> UInt32 { pixels[y * width + x] }

    func region(_ r: RFBRect) -> [UInt32] {
        var out: [UInt32] = []
        out.reserveCapacity(r.area)
        for y in r.y..<(r.y + r.height) { for x in r.x..<(r.x + r.width) { out.append(pixel(x, y)) } }
        return out
    }
}

struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}

/// Encodes colours as PIXEL / CPIXEL / TPIXEL for a pixel format, the way a server would.
struct WirePixels {
    let format: PixelFormat
    /// Computed once: a converter per pixel made large test images take minutes in debug builds.
    let cpixelSize: Int

    init(format: PixelFormat) {
        self.format = format
        cpixelSize = PixelConverter(format: format).bytesPerCPixel
    }

    func value(_ rgb: UInt32) -> UInt32 {
        func channel(_ v: UInt32, _ max: UInt16) -> UInt32 { (v * UInt32(max) + 127) / 255 }
        let r = (rgb >> 16) & 255, g = (rgb >> 8) & 255, b = rgb & 255
        return channel(r, format.redMax) << format.redShift | channel(g, format.greenMax) << format.greenShift
            | channel(b, format.blueMax) << format.blueShift
    }

    /// What a client must show for `rgb` after the format's quantisation.
    func displayed(_ rgb: UInt32) -> UInt32 {
        let v = value(rgb)
        func expand(_ c: UInt32, _ max: UInt16) -> UInt32 { (c * 255 + UInt32(max) / 2) / UInt32(max) }
        return expand((v >> format.redShift) & UInt32(format.redMax), format.redMax) << 16
            | expand((v >> format.greenShift) & UInt32(format.greenMax), format.greenMax) << 8
            | expand((v >> format.blueShift) & UInt32(format.blueMax), format.blueMax)
    }

    func pixel(_ rgb: UInt32) -> [UInt8] { bytes(value(rgb), count: format.bytesPerPixel) }

    func bytes(_ v: UInt32, count: Int) -> [UInt8] {
        var w = ByteWriter()
        w.writeUnsigned(UInt64(v), byteCount: count, endianness: format.bigEndian ? .big : .little)
        return w.bytes
    }

    func cpixel(_ rgb: UInt32) -> [UInt8] {
        let full = pixel(rgb)
        guard cpixelSize == 3 else { return full }
        let used = UInt32(format.redMax) << format.redShift | UInt32(format.greenMax) << format.greenShift
            | UInt32(format.blueMax) << format.blueShift
        let high = used & 0xFF != 0 ? false : used & 0xFF00_0000 != 0
        // Keep the three bytes that hold the value: least significant unless they are unused.
        if format.bigEndian { return high ? Array(full[0..<3]) : Array(full[1..<4]) }
        return high ? Array(full[1..<4]) : Array(full[0..<3])
    }

    var tpixelSize: Int { format.is888 ? 3 : format.bytesPerPixel }

    func tpixel(_ rgb: UInt32) -> [UInt8] {
        format.is888 ? [UInt8(rgb >> 16 & 255), UInt8(rgb >> 8 & 255), UInt8(rgb & 255)] : pixel(rgb)
    }
}

/// A zlib deflate stream kept for a whole connection, flushed with Z_SYNC_FLUSH like servers do.
final class Deflater {
    private var stream = z_stream()

    init(level: Int32 = 6) {
        _ = czlib_deflate_init(&stream, level)
    }

    deinit { deflateEnd(&stream) }

    func reset() { deflateReset(&stream) }

    func compress(_ input: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: input.count + input.count / 100 + 64)
        var produced = 0
        var data = input
        data.withUnsafeMutableBufferPointer { inBuf in
            stream.next_in = inBuf.baseAddress
            stream.avail_in = uInt(inBuf.count)
            repeat {
                if produced == output.count { output += [UInt8](repeating: 0, count: 4096) }
                output.withUnsafeMutableBufferPointer { outBuf in
                    stream.next_out = outBuf.baseAddress! + produced
                    stream.avail_out = uInt(outBuf.count - produced)
                    _ = deflate(&stream, Z_SYNC_FLUSH)
                    produced = outBuf.count - Int(stream.avail_out)
                }
            } while stream.avail_out == 0
        }
        return Array(output[0..<produced])
    }
}

/// Spec-following encoders producing rectangle bodies (without the 12-byte header).
struct TestEncoder {
    let format: PixelFormat
    let wire: WirePixels
    let zlibStream = Deflater()
    let zrleStream = Deflater()
    let tightStreams = [Deflater(), Deflater(), Deflater(), Deflater()]

    init(format: PixelFormat = .rgb888) {
        self.format = format
        wire = WirePixels(format: format)
    }

    func raw(_ image: TestImage, _ r: RFBRect) -> [UInt8] {
        image.region(r).flatMap(wire.pixel)
    }

    /// RRE / CoRRE: the most common colour as background, each horizontal run of another
    /// colour as a one-row subrectangle.
    func rre(_ image: TestImage, _ r: RFBRect, compact: Bool) -> [UInt8] {
        let px = image.region(r)
        var counts: [UInt32: Int] = [:]
        for p in px { counts[p, default: 0] += 1 }
        let background = counts.max { $0.value < $1.value || ($0.value == $1.value && $0.key > $1.key) }!.key
        var subrects: [[UInt8]] = []
        for y in 0..<r.height {
            var x = 0
            while x < r.width {
                let c = px[y * r.width + x]
                var run = 1
                while x + run < r.width && px[y * r.width + x + run] == c { run += 1 }
                if c != background {
                    var w = ByteWriter()
                    w.writeBytes(wire.pixel(c))
                    if compact {
                        w.writeBytes([UInt8(x), UInt8(y), UInt8(run), 1])
                    } else {
                        w.writeInteger(UInt16(x)); w.writeInteger(UInt16(y)); w.writeInteger(UInt16(run)); w.writeInteger(UInt16(1))
                    }
                    subrects.append(w.bytes)
                }
                x += run
            }
        }
        var w = ByteWriter()
        w.writeInteger(UInt32(subrects.count))
        w.writeBytes(wire.pixel(background))
        for s in subrects { w.writeBytes(s) }
        return w.bytes
    }

    /// Hextile with every tile kind: solid (background carried over when unchanged), two
    /// colours with a foreground, coloured subrectangles, and raw.
    func hextile(_ image: TestImage, _ r: RFBRect) -> [UInt8] {
        var w = ByteWriter()
        var lastBackground: UInt32?
        var lastForeground: UInt32?
        for ty in stride(from: 0, to: r.height, by: 16) {
            for tx in stride(from: 0, to: r.width, by: 16) {
                let tile = RFBRect(x: r.x + tx, y: r.y + ty, width: min(16, r.width - tx), height: min(16, r.height - ty))
                let px = image.region(tile)
                var counts: [UInt32: Int] = [:]
                for p in px { counts[p, default: 0] += 1 }
                let sorted = counts.sorted { $0.value > $1.value || ($0.value == $1.value && $0.key < $1.key) }
                let background = sorted[0].key
                var runs: [(UInt32, Int, Int, Int)] = []   // colour, x, y, width
                for y in 0..<tile.height {
                    var x = 0
                    while x < tile.width {
                        let c = px[y * tile.width + x]
                        var n = 1
                        while x + n < tile.width && px[y * tile.width + x + n] == c { n += 1 }
                        if c != background { runs.append((c, x, y, n)) }
                        x += n
                    }
                }
                if sorted.count > 8 || runs.count > 255 {
                    w.writeUInt8(1)
                    w.writeBytes(px.flatMap(wire.pixel))
                    lastBackground = nil
                    lastForeground = nil
                    continue
                }
                var mask: UInt8 = 0
                var body = ByteWriter()
                if background != lastBackground {
                    mask |= 2
                    body.writeBytes(wire.pixel(background))
                }
                if runs.isEmpty {
                    w.writeUInt8(mask)
                    w.writeBytes(body.bytes)
                    lastBackground = background
                    continue
                }
                mask |= 8
                if sorted.count == 2 {
                    let fg = sorted[1].key
                    if fg != lastForeground {
                        mask |= 4
                        body.writeBytes(wire.pixel(fg))
                    }
                    lastForeground = fg
                    body.writeUInt8(UInt8(runs.count))
                    for (_, x, y, n) in runs { body.writeBytes([UInt8(x << 4 | y), UInt8((n - 1) << 4)]) }
                } else {
                    mask |= 16
                    lastForeground = nil
                    body.writeUInt8(UInt8(runs.count))
                    for (c, x, y, n) in runs {
                        body.writeBytes(wire.pixel(c))
                        body.writeBytes([UInt8(x << 4 | y), UInt8((n - 1) << 4)])
                    }
                }
                w.writeUInt8(mask)
                w.writeBytes(body.bytes)
                lastBackground = background
            }
        }
        return w.bytes
    }

    func zlib(_ image: TestImage, _ r: RFBRect) -> [UInt8] {
        let data = zlibStream.compress(raw(image, r))
        var w = ByteWriter()
        w.writeInteger(UInt32(data.count))
        w.writeBytes(data)
        return w.bytes
    }

    /// One tile in the ZRLE/TRLE format, choosing the subencoding by content and `variant`.
    /// `previousPalette` enables TRLE's palette reuse (127/129).
    func rleTile(_ px: [UInt32], width: Int, height: Int, variant: Int, previousPalette: inout [UInt32]?, allowReuse: Bool) -> [UInt8] {
        var palette: [UInt32] = []
        for p in px where !palette.contains(p) {
            palette.append(p)
            if palette.count > 127 { break }
        }
        var w = ByteWriter()
        func runs() -> [(UInt32, Int)] {
            var out: [(UInt32, Int)] = []
            for p in px {
                if let last = out.last, last.0 == p { out[out.count - 1].1 += 1 } else { out.append((p, 1)) }
            }
            return out
        }
        func writeLength(_ n: Int) {
            var left = n - 1
            while left >= 255 { w.writeUInt8(255); left -= 255 }
            w.writeUInt8(UInt8(left))
        }
        func packed(_ pal: [UInt32]) {
            let bits = pal.count == 2 ? 1 : pal.count <= 4 ? 2 : 4
            for y in 0..<height {
                var byte: UInt8 = 0, used = 0
                for x in 0..<width {
                    byte |= UInt8(pal.firstIndex(of: px[y * width + x])!) << UInt8(8 - used - bits)
                    used += bits
                    if used == 8 { w.writeUInt8(byte); byte = 0; used = 0 }
                }
                if used > 0 { w.writeUInt8(byte) }
            }
        }
        let reusable = allowReuse && previousPalette != nil && Set(previousPalette!) == Set(palette) && palette.count <= 16
        if palette.count == 1 {
            w.writeUInt8(1)
            w.writeBytes(wire.cpixel(palette[0]))
            previousPalette = palette
        } else if reusable && palette.count >= 2 && variant % 2 == 0 {
            w.writeUInt8(127)
            packed(previousPalette!)
        } else if reusable && variant % 2 == 1 {
            w.writeUInt8(129)
            for (c, n) in runs() {
                let index = UInt8(previousPalette!.firstIndex(of: c)!)
                if n == 1 { w.writeUInt8(index) } else { w.writeUInt8(index | 0x80); writeLength(n) }
            }
        } else if palette.count <= 16 && variant % 3 != 2 {
            w.writeUInt8(UInt8(palette.count))
            for c in palette { w.writeBytes(wire.cpixel(c)) }
            packed(palette)
            previousPalette = palette
        } else if palette.count <= 127 && variant % 3 == 2 {
            w.writeUInt8(UInt8(128 + palette.count))
            for c in palette { w.writeBytes(wire.cpixel(c)) }
            for (c, n) in runs() {
                let index = UInt8(palette.firstIndex(of: c)!)
                if n == 1 { w.writeUInt8(index) } else { w.writeUInt8(index | 0x80); writeLength(n) }
            }
            previousPalette = palette
        } else if variant % 2 == 0 {
            w.writeUInt8(128)
            for (c, n) in runs() { w.writeBytes(wire.cpixel(c)); writeLength(n) }
        } else {
            w.writeUInt8(0)
            for p in px { w.writeBytes(wire.cpixel(p)) }
        }
        return w.bytes
    }

    func rleTiles(_ image: TestImage, _ r: RFBRect, tileSize: Int, allowReuse: Bool) -> [UInt8] {
        var out: [UInt8] = []
        var previous: [UInt32]?
        var variant = 0
        for ty in stride(from: 0, to: r.height, by: tileSize) {
            for tx in stride(from: 0, to: r.width, by: tileSize) {
                let tile = RFBRect(x: r.x + tx, y: r.y + ty, width: min(tileSize, r.width - tx), height: min(tileSize, r.height - ty))
                out += rleTile(image.region(tile), width: tile.width, height: tile.height, variant: variant,
                               previousPalette: &previous, allowReuse: allowReuse)
                variant += 1
            }
        }
        return out
    }

    func zrle(_ image: TestImage, _ r: RFBRect) -> [UInt8] {
        let data = zrleStream.compress(rleTiles(image, r, tileSize: 64, allowReuse: false))
        var w = ByteWriter()
        w.writeInteger(UInt32(data.count))
        w.writeBytes(data)
        return w.bytes
    }

    func trle(_ image: TestImage, _ r: RFBRect) -> [UInt8] {
        rleTiles(image, r, tileSize: 16, allowReuse: true)
    }

    enum TightMethod { case fill, copy, palette, gradient, jpeg(quality: Int32) }

    static func compactLength(_ n: Int) -> [UInt8] {
        if n < 128 { return [UInt8(n)] }
        if n < 16384 { return [UInt8(n & 0x7F) | 0x80, UInt8(n >> 7)] }
        return [UInt8(n & 0x7F) | 0x80, UInt8((n >> 7) & 0x7F) | 0x80, UInt8(n >> 14)]
    }

    /// Tight with an explicit method, zlib stream and reset bits.
    func tight(_ image: TestImage, _ r: RFBRect, method: TightMethod, stream: Int = 0, resets: UInt8 = 0) -> [UInt8] {
        for s in 0..<4 where resets & (1 << s) != 0 { tightStreams[s].reset() }
        let px = image.region(r)
        var w = ByteWriter()
        func basic(filter: UInt8, header: [UInt8], data: [UInt8]) {
            w.writeUInt8(resets | UInt8(stream) << 4 | 0x40)
            w.writeUInt8(filter)
            w.writeBytes(header)
            if data.count < 12 {
                w.writeBytes(data)
            } else {
                let z = tightStreams[stream].compress(data)
                w.writeBytes(Self.compactLength(z.count))
                w.writeBytes(z)
            }
        }
        switch method {
        case .fill:
            w.writeUInt8(resets | 0x80)
            w.writeBytes(wire.tpixel(px[0]))
        case .copy:
            basic(filter: 0, header: [], data: px.flatMap(wire.tpixel))
        case .palette:
            var palette: [UInt32] = []
            for p in px where !palette.contains(p) { palette.append(p) }
            precondition(palette.count >= 2 && palette.count <= 256)
            var data: [UInt8] = []
            if palette.count == 2 {
                for y in 0..<r.height {
                    var byte: UInt8 = 0
                    for x in 0..<r.width {
                        if px[y * r.width + x] == palette[1] { byte |= 0x80 >> UInt8(x % 8) }
                        if x % 8 == 7 { data.append(byte); byte = 0 }
                    }
                    if r.width % 8 != 0 { data.append(byte) }
                }
            } else {
                data = px.map { UInt8(palette.firstIndex(of: $0)!) }
            }
            basic(filter: 1, header: [UInt8(palette.count - 1)] + palette.flatMap(wire.tpixel), data: data)
        case .gradient:
            let maxes: [Int]
            let components: (UInt32) -> [Int]
            if format.is888 {
                maxes = [255, 255, 255]
                components = { [Int($0 >> 16 & 255), Int($0 >> 8 & 255), Int($0 & 255)] }
            } else {
                maxes = [Int(format.redMax), Int(format.greenMax), Int(format.blueMax)]
                components = { rgb in
                    let v = wire.value(rgb)
                    return [Int(v >> format.redShift) & Int(format.redMax), Int(v >> format.greenShift) & Int(format.greenMax),
                            Int(v >> format.blueShift) & Int(format.blueMax)]
                }
            }
            var data: [UInt8] = []
            for y in 0..<r.height {
                for x in 0..<r.width {
                    let v = components(px[y * r.width + x])
                    let left = x > 0 ? components(px[y * r.width + x - 1]) : [0, 0, 0]
                    let up = y > 0 ? components(px[(y - 1) * r.width + x]) : [0, 0, 0]
                    let upLeft = x > 0 && y > 0 ? components(px[(y - 1) * r.width + x - 1]) : [0, 0, 0]
                    var diff: [Int] = []
                    for c in 0..<3 {
                        let p = min(max(left[c] + up[c] - upLeft[c], 0), maxes[c])
                        diff.append((v[c] - p) & maxes[c])
                    }
                    if format.is888 {
                        data += diff.map { UInt8($0) }
                    } else {
                        let value = UInt32(diff[0]) << format.redShift | UInt32(diff[1]) << format.greenShift | UInt32(diff[2]) << format.blueShift
                        data += wire.bytes(value, count: format.bytesPerPixel)
                    }
                }
            }
            basic(filter: 2, header: [], data: data)
        case .jpeg(let quality):
            let jpeg = JPEGTestCodec.compress(px, width: r.width, height: r.height, quality: quality)
            w.writeUInt8(resets | 0x90)
            w.writeBytes(Self.compactLength(jpeg.count))
            w.writeBytes(jpeg)
        }
        return w.bytes
    }
}
