import FarcastSupport

/// ZRLE (16): a U32 length, then zlib data (one stream per connection) holding 64×64 RLE tiles.
enum ZRLEDecoder {
    static func decode(_ reader: inout ByteReader, rect: RFBRect, state: inout DecoderState,
                       framebuffer: inout Framebuffer) throws {
        var r = reader
        let length = Int(try r.readInteger(as: UInt32.self))
        let bpc = state.converter.bytesPerCPixel
        let maximum = RLETileDecoder.maximumEncodedSize(width: rect.width, height: rect.height, bytesPerCPixel: bpc, tileSize: 64)
        guard length <= zlibCompressedBound(maximum) else {
            throw RFBError.malformedRectangle(encoding: "ZRLE", detail: "claims \(length) compressed bytes, more than any \(rect.width)×\(rect.height) rectangle needs")
        }
        let stream = state.zrleStream
        // The scratch buffer grows to what rectangles really inflate to, not to the bound.
        let produced = try r.withUnsafeBytes(count: length) { input in
            try stream.inflate(input, growing: &state.scratch, limit: maximum)
        }
        reader = r
        var tiles = RLETileDecoder(converter: state.converter, encoding: "ZRLE", allowsPaletteReuse: false)
        let stride = framebuffer.width
        try state.scratch.withUnsafeBytes { raw in
            var c = BoundedCursor(UnsafeRawBufferPointer(rebasing: raw[0..<produced]))
            try framebuffer.pixels.withUnsafeMutableBufferPointer { buf in
                var ty = 0
                while ty < rect.height {
                    let th = min(64, rect.height - ty)
                    var tx = 0
                    while tx < rect.width {
                        let tw = min(64, rect.width - tx)
                        let origin = buf.baseAddress! + (rect.y + ty) * stride + rect.x + tx
                        do {
                            try tiles.decodeTile(&c, origin: origin, stride: stride, width: tw, height: th)
                        } catch let t as TruncatedInput {
                            throw RFBError.malformedRectangle(encoding: "ZRLE", detail: "inflated data ends inside the tile at (\(tx),\(ty)) (needed \(t.needed) more byte(s))")
                        }
                        tx += 64
                    }
                    ty += 64
                }
            }
            if c.remaining > 0 {
                throw RFBError.malformedRectangle(encoding: "ZRLE", detail: "\(c.remaining) inflated byte(s) left after the last tile")
            }
        }
    }
}
