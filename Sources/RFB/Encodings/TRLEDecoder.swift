import FarcastSupport

/// TRLE (15): ZRLE's tiles at 16×16 without zlib, plus palette reuse between tiles. Tiles are
/// decoded as they arrive.
enum TRLEDecoder {
    static func decode(_ reader: inout ByteReader, rect: RFBRect, progress: inout RectProgress,
                       framebuffer: inout Framebuffer, converter: PixelConverter) throws {
        var tiles = RLETileDecoder(converter: converter, encoding: "TRLE", allowsPaletteReuse: true)
        var tile = 0
        if case .trle(let t, let palette) = progress {
            tile = t
            for (i, c) in palette.enumerated() { tiles.palette[i] = c }
            tiles.paletteSize = palette.count
        }
        let columns = (rect.width + 15) / 16, total = columns * ((rect.height + 15) / 16)
        let stride = framebuffer.width
        var consumed = 0
        var shortfall: TruncatedInput?
        try reader.withUnsafeRemainingBytes { (input: UnsafeRawBufferPointer) throws -> Void in
            try framebuffer.pixels.withUnsafeMutableBufferPointer { buf in
                var c = BoundedCursor(input)
                while tile < total {
                    let tx = (tile % columns) * 16, ty = (tile / columns) * 16
                    let tw = min(16, rect.width - tx), th = min(16, rect.height - ty)
                    let start = c.position
                    let saved = (tiles.palette, tiles.paletteSize)
                    do {
                        try tiles.decodeTile(&c, origin: buf.baseAddress! + (rect.y + ty) * stride + rect.x + tx,
                                             stride: stride, width: tw, height: th)
                    } catch let t as TruncatedInput {
                        c.position = start
                        (tiles.palette, tiles.paletteSize) = saved
                        shortfall = TruncatedInput(needed: t.offset - start + t.needed, available: c.remaining, offset: start)
                        break
                    }
                    tile += 1
                }
                consumed = c.position
            }
        }
        try reader.skip(consumed)
        progress = .trle(tile: tile, palette: Array(tiles.palette[0..<tiles.paletteSize]))
        if let shortfall {
            throw TruncatedInput(needed: shortfall.needed, available: reader.remaining, offset: reader.offset)
        }
    }
}
