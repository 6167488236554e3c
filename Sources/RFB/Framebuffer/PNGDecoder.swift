import CZlib
import FarcastSupport

/// Reads 8-bit RGB and RGBA PNGs (any filter, not interlaced) into a framebuffer — enough for
/// reference screenshots in `farcast vnc do` scripts (`expect-screen`).
public enum PNGDecoder {
    public struct DecodingFailed: Error, CustomStringConvertible {
        public var description: String
    }

    public static func decode(_ data: [UInt8]) throws(DecodingFailed) -> Framebuffer {
        do {
            return try decodeUnchecked(data)
        } catch let error as DecodingFailed {
            throw error
        } catch {
            throw DecodingFailed(description: "not a PNG this decoder reads: \(error)")
        }
    }

    private static func decodeUnchecked(_ data: [UInt8]) throws -> Framebuffer {
        func fail(_ text: String) -> DecodingFailed { DecodingFailed(description: "not a PNG this decoder reads: \(text)") }
        guard data.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else { throw fail("bad signature") }
        var reader = ByteReader(data, offset: 8)
        var width = 0, height = 0, colourType: UInt8 = 0
        var idat: [UInt8] = []
        while !reader.isAtEnd {
            let length = Int(try reader.readInteger(as: UInt32.self))
            let type = try reader.readBytes(4)
            let body = try reader.readBytes(length)
            try reader.skip(4)
            switch String(decoding: type, as: UTF8.self) {
            case "IHDR":
                var h = ByteReader(body)
                width = Int(try h.readInteger(as: UInt32.self))
                height = Int(try h.readInteger(as: UInt32.self))
                let depth = try h.readUInt8()
                colourType = try h.readUInt8()
                try h.skip(2)
                let interlace = try h.readUInt8()
                guard depth == 8, colourType == 2 || colourType == 6, interlace == 0 else {
                    throw fail("\(depth)-bit colour type \(colourType)\(interlace != 0 ? ", interlaced" : "") (need 8-bit RGB or RGBA)")
                }
                guard width > 0, height > 0, width <= Framebuffer.maximumDimension, height <= Framebuffer.maximumDimension else {
                    throw fail("\(width)×\(height)")
                }
            case "IDAT":
                idat += body
            case "IEND":
                break
            default:
                continue
            }
        }
        guard width > 0 else { throw fail("no IHDR") }
        let channels = colourType == 6 ? 4 : 3
        let stride = 1 + width * channels
        let raw: [UInt8]
        do { raw = try ExtendedClipboard.inflateAll(idat, limit: stride * height, name: "PNG") } catch { throw fail("\(error)") }
        guard raw.count == stride * height else { throw fail("image data is \(raw.count) bytes, expected \(stride * height)") }
        var rows = [UInt8](repeating: 0, count: width * channels * height)
        let bpp = channels
        for y in 0..<height {
            let filter = raw[y * stride]
            for i in 0..<(width * channels) {
                let x = Int(raw[y * stride + 1 + i])
                let a = i >= bpp ? Int(rows[y * width * channels + i - bpp]) : 0
                let b = y > 0 ? Int(rows[(y - 1) * width * channels + i]) : 0
                let c = i >= bpp && y > 0 ? Int(rows[(y - 1) * width * channels + i - bpp]) : 0
                let predictor: Int
                switch filter {
                case 0: predictor = 0
                case 1: predictor = a
                case 2: predictor = b
                case 3: predictor = (a + b) / 2
                case 4:
                    let pa = abs(b - c), pb = abs(a - c), pc = abs(a + b - 2 * c)
                    predictor = pa <= pb && pa <= pc ? a : pb <= pc ? b : c
                default: throw fail("filter \(filter)")
                }
                rows[y * width * channels + i] = UInt8(truncatingIfNeeded: x + predictor)
            }
        }
        var framebuffer = Framebuffer(width: width, height: height)
        for i in 0..<(width * height) {
            let o = i * channels
            framebuffer.pixels[i] = 0xFF00_0000 | UInt32(rows[o]) << 16 | UInt32(rows[o + 1]) << 8 | UInt32(rows[o + 2])
        }
        return framebuffer
    }

    /// Mean absolute difference per channel between two same-sized framebuffers (nil when the
    /// sizes differ) — how far a screen is from a reference picture.
    public static func meanDifference(_ a: Framebuffer, _ b: Framebuffer) -> Double? {
        guard a.width == b.width, a.height == b.height, a.width * a.height > 0 else { return nil }
        var total = 0
        for (p, q) in zip(a.pixels, b.pixels) {
            total += abs(Int((p >> 16) & 255) - Int((q >> 16) & 255)) + abs(Int((p >> 8) & 255) - Int((q >> 8) & 255))
                + abs(Int(p & 255) - Int(q & 255))
        }
        return Double(total) / Double(a.width * a.height * 3)
    }
}
