import FarcastSupport

/// Hextile (5): 16×16 tiles, each raw or a background plus subrectangles. Tiles are decoded as
/// they arrive; the background and foreground carry over from tile to tile.
enum HextileDecoder {
    private static let raw: UInt8 = 1, backgroundSpecified: UInt8 = 2, foregroundSpecified: UInt8 = 4
    private static let anySubrects: UInt8 = 8, subrectsColoured: UInt8 = 16

    static func decode(_ reader: inout ByteReader, rect: RFBRect, progress: inout RectProgress,
                       framebuffer: inout Framebuffer, converter: PixelConverter) throws {
        var tile = 0, background: UInt32 = 0, foreground: UInt32 = 0, hasBackground = false, hasForeground = false
        if case .hextile(let t, let bg, let fg, let hb, let hf) = progress {
            (tile, background, foreground, hasBackground, hasForeground) = (t, bg, fg, hb, hf)
        }
        let bpp = converter.bytesPerPixel
        defer {
            progress = .hextile(tile: tile, background: background, foreground: foreground,
                                hasBackground: hasBackground, hasForeground: hasForeground)
        }
        try TileWalker.decode(&reader, rect: rect, tileSize: 16, tile: &tile, framebuffer: &framebuffer) { c, origin, stride, tw, th in
            let mask = try c.u8()
            if mask & raw != 0 {
                try c.require(tw * th * bpp)
                if converter.isNative {
                    for r in 0..<th { PixelFill.copyRow(origin + r * stride, from: c.pointer + r * tw * 4, count: tw) }
                } else {
                    for r in 0..<th {
                        converter.convertRow(from: c.pointer + r * tw * bpp, count: tw, to: origin + r * stride)
                    }
                }
                c.position += tw * th * bpp
                // The spec forbids carrying colours over a raw tile; servers do not, and
                // tolerating it (as libvncclient does) costs nothing.
                return
            }
            // Colours are committed only once the whole tile is known to be present.
            var bg = background, fg = foreground, hf = hasForeground
            if mask & backgroundSpecified != 0 {
                try c.require(bpp)
                bg = converter.pixel(c.pointer)
                c.position += bpp
            } else if !hasBackground {
                throw RFBError.malformedRectangle(encoding: "Hextile", detail: "a tile reuses a background that was never set")
            }
            if mask & foregroundSpecified != 0 {
                try c.require(bpp)
                fg = converter.pixel(c.pointer)
                c.position += bpp
                hf = true
            }
            var subrects = 0
            if mask & anySubrects != 0 { subrects = Int(try c.u8()) }
            let coloured = mask & subrectsColoured != 0
            try c.require(subrects * (coloured ? bpp + 2 : 2))
            if subrects > 0 && !coloured && !hf {
                throw RFBError.malformedRectangle(encoding: "Hextile", detail: "a tile has subrectangles but no foreground colour")
            }
            PixelFill.fill(origin, stride: stride, width: tw, height: th, colour: bg)
            for _ in 0..<subrects {
                var colour = fg
                if coloured {
                    colour = converter.pixel(c.pointer)
                    c.position += bpp
                }
                let xy = c.pointer.load(as: UInt8.self), wh = c.pointer.load(fromByteOffset: 1, as: UInt8.self)
                c.position += 2
                let sx = Int(xy >> 4), sy = Int(xy & 15), sw = Int(wh >> 4) + 1, sh = Int(wh & 15) + 1
                guard sx + sw <= tw, sy + sh <= th else {
                    throw RFBError.malformedRectangle(encoding: "Hextile", detail: "subrectangle \(sw)×\(sh) at (\(sx),\(sy)) exceeds its \(tw)×\(th) tile")
                }
                let q = origin + sy * stride + sx
                if sw == 1 && sh == 1 {
                    q.pointee = colour
                } else {
                    PixelFill.fill(q, stride: stride, width: sw, height: sh, colour: colour)
                }
            }
            background = bg
            hasBackground = true
            foreground = fg
            hasForeground = hf
        }
    }
}
