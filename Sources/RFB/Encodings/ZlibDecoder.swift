import FarcastSupport

/// Zlib (6): a U32 length, then zlib data (one stream per connection) holding a Raw rectangle.
enum ZlibDecoder {
    static func decode(_ reader: inout ByteReader, rect: RFBRect, state: inout DecoderState,
                       framebuffer: inout Framebuffer) throws {
        var r = reader
        let length = Int(try r.readInteger(as: UInt32.self))
        let bpp = state.converter.bytesPerPixel
        let size = rect.area * bpp
        guard length <= zlibCompressedBound(size) else {
            throw RFBError.malformedRectangle(encoding: "Zlib", detail: "claims \(length) compressed bytes for \(size) bytes of pixels")
        }
        state.ensureScratch(size)
        let stream = state.zlibStream
        try r.withUnsafeBytes(count: length) { input in
            try state.scratch.withUnsafeMutableBytes { out in
                try stream.inflate(input, into: UnsafeMutableRawBufferPointer(rebasing: out[0..<size]))
            }
        }
        reader = r
        let converter = state.converter
        let stride = framebuffer.width
        state.scratch.withUnsafeBytes { src in
            framebuffer.pixels.withUnsafeMutableBufferPointer { dst in
                for row in 0..<rect.height {
                    converter.convertRow(from: src.baseAddress! + row * rect.width * bpp, count: rect.width,
                                         to: dst.baseAddress! + (rect.y + row) * stride + rect.x)
                }
            }
        }
    }
}
