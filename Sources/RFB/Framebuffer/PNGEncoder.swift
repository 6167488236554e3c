import CZlib

/// Writes a framebuffer as an 8-bit RGB PNG (no alpha: the remote screen is opaque).
public enum PNGEncoder {
    public struct EncodingFailed: Error, CustomStringConvertible {
        public var description: String
    }

    /// The PNG file bytes for `framebuffer` (or a crop of it).
    public static func encode(_ framebuffer: Framebuffer, crop: RFBRect? = nil) throws -> [UInt8] {
        let area = crop.map { $0.intersection(RFBRect(x: 0, y: 0, width: framebuffer.width, height: framebuffer.height)) }
            ?? RFBRect(x: 0, y: 0, width: framebuffer.width, height: framebuffer.height)
        guard area.width > 0, area.height > 0 else { throw EncodingFailed(description: "cannot write an empty (\(area.width)×\(area.height)) image") }
        // Scanlines: a filter byte (0 = None) then R, G, B per pixel.
        let lineLength = 1 + area.width * 3
        var raw = [UInt8](repeating: 0, count: lineLength * area.height)
        raw.withUnsafeMutableBufferPointer { out in
            framebuffer.pixels.withUnsafeBufferPointer { src in
                for y in 0..<area.height {
                    var o = y * lineLength + 1
                    let row = (area.y + y) * framebuffer.width + area.x
                    for x in 0..<area.width {
                        let w = src[row + x]
                        out[o] = UInt8(truncatingIfNeeded: w >> 16)
                        out[o + 1] = UInt8(truncatingIfNeeded: w >> 8)
                        out[o + 2] = UInt8(truncatingIfNeeded: w)
                        o += 3
                    }
                }
            }
        }
        var compressedLength = compressBound(uLong(raw.count))
        var compressed = [UInt8](repeating: 0, count: Int(compressedLength))
        let status = compressed.withUnsafeMutableBufferPointer { dst in
            raw.withUnsafeBufferPointer { src in
                compress2(dst.baseAddress, &compressedLength, src.baseAddress, uLong(src.count), 6)
            }
        }
        guard status == Z_OK else { throw EncodingFailed(description: "zlib compress2 failed with status \(status)") }
        compressed.removeSubrange(Int(compressedLength)...)

        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        var header: [UInt8] = []
        append32(&header, UInt32(area.width))
        append32(&header, UInt32(area.height))
        header += [8, 2, 0, 0, 0]   // 8-bit depth, colour type 2 (RGB), deflate, adaptive filters, no interlace
        chunk(&png, "IHDR", header)
        chunk(&png, "IDAT", compressed)
        chunk(&png, "IEND", [])
        return png
    }

    private static func append32(_ out: inout [UInt8], _ v: UInt32) {
        out += [UInt8(v >> 24), UInt8(truncatingIfNeeded: v >> 16), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v)]
    }

    private static func chunk(_ out: inout [UInt8], _ type: String, _ data: [UInt8]) {
        append32(&out, UInt32(data.count))
        let typed = Array(type.utf8) + data
        out += typed
        let crc = typed.withUnsafeBufferPointer { crc32(0, $0.baseAddress, uInt($0.count)) }
        append32(&out, UInt32(crc))
    }
}
