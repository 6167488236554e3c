import FarcastSupport

/// Walks a rectangle's tiles (left to right, top to bottom) over the buffered input, decoding
/// each whole tile; used by the encodings whose tiles arrive without a length (Hextile, TRLE).
enum TileWalker {
    /// Decodes tiles from `tile` on. When the input ends inside a tile, the reader is left at
    /// that tile's start, `tile` names it, and `TruncatedInput` says how many bytes it needs, so
    /// decoding resumes there once more data has arrived.
    ///
    /// `decodeTile(cursor, origin, stride, width, height)` must have no effect beyond the
    /// framebuffer (re-painting a tile is harmless) when it throws `TruncatedInput`.
    static func decode(_ reader: inout ByteReader, rect: RFBRect, tileSize: Int, tile: inout Int, framebuffer: inout Framebuffer,
                       decodeTile: (inout BoundedCursor, UnsafeMutablePointer<UInt32>, Int, Int, Int) throws -> Void) throws {
        let columns = (rect.width + tileSize - 1) / tileSize
        let total = columns * ((rect.height + tileSize - 1) / tileSize)
        let stride = framebuffer.width
        var consumed = 0
        var shortfall: Int?
        var next = tile
        try reader.withUnsafeRemainingBytes { (input: UnsafeRawBufferPointer) throws -> Void in
            try framebuffer.pixels.withUnsafeMutableBufferPointer { buf in
                var cursor = BoundedCursor(input)
                while next < total {
                    let tx = (next % columns) * tileSize, ty = (next / columns) * tileSize
                    let start = cursor.position
                    do {
                        try decodeTile(&cursor, buf.baseAddress! + (rect.y + ty) * stride + rect.x + tx, stride,
                                       min(tileSize, rect.width - tx), min(tileSize, rect.height - ty))
                    } catch let truncated as TruncatedInput {
                        cursor.position = start
                        shortfall = truncated.offset - start + truncated.needed
                        break
                    }
                    next += 1
                }
                consumed = cursor.position
            }
        }
        try reader.skip(consumed)
        tile = next
        if let shortfall {
            throw TruncatedInput(needed: shortfall, available: reader.remaining, offset: reader.offset)
        }
    }
}
