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
        var tiles = RLETileDecoder(converter: state.converter, encoding: "ZRLE", allowsPaletteReuse: false)
        let stride = framebuffer.width
        var tx = 0, ty = 0, leftOver = 0
        // Tiles are decoded as each window of inflated data arrives, while it is in the cache;
        // a tile cut by the window's end is decoded whole from the next one.
        try framebuffer.pixels.withUnsafeMutableBufferPointer { buf in
            _ = try r.withUnsafeBytes(count: length) { input in
                try stream.inflate(input, through: &state.scratch, windowSize: windowSize, limit: maximum) { data, last in
                    var c = BoundedCursor(data)
                    // (A rectangle 0 pixels wide or high has no tiles.)
                    while rect.width > 0 && ty < rect.height {
                        let th = min(64, rect.height - ty), tw = min(64, rect.width - tx)
                        let start = c.position
                        do {
                            try tiles.decodeTile(&c, origin: buf.baseAddress! + (rect.y + ty) * stride + rect.x + tx,
                                                 stride: stride, width: tw, height: th)
                        } catch let t as TruncatedInput {
                            guard last else { return start }
                            throw RFBError.malformedRectangle(encoding: "ZRLE", detail: "inflated data ends inside the tile at (\(tx),\(ty)) (\(t.needed - t.available) more byte(s) needed)")
                        }
                        tx += 64
                        if tx >= rect.width { tx = 0; ty += 64 }
                    }
                    // Every tile is done: what else comes out is counted (and passed over, so
                    // any amount of it is told as such, not as a full window).
                    leftOver += c.remaining
                    if last && leftOver > 0 {
                        throw RFBError.malformedRectangle(encoding: "ZRLE", detail: "\(leftOver) inflated byte(s) left after the last tile")
                    }
                    return data.count
                }
            }
        }
        reader = r
    }

    /// Inflated ZRLE data is decoded a window at a time: comfortably more than the largest
    /// tile (64×64 raw CPIXELs, 16 KiB) and small enough to stay in a core's L2 cache.
    static let windowSize = 256 * 1024
}
