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
        // Save progress whatever happens: the palette carries over to the resumed tiles.
        defer { progress = .trle(tile: tile, palette: Array(tiles.palette[0..<tiles.paletteSize])) }
        try TileWalker.decode(&reader, rect: rect, tileSize: 16, tile: &tile, framebuffer: &framebuffer) { cursor, origin, stride, width, height in
            let saved = (tiles.palette, tiles.paletteSize)
            do {
                try tiles.decodeTile(&cursor, origin: origin, stride: stride, width: width, height: height)
            } catch let truncated as TruncatedInput {
                // An unfinished tile must not leave its palette behind.
                (tiles.palette, tiles.paletteSize) = saved
                throw truncated
            }
        }
    }
}
