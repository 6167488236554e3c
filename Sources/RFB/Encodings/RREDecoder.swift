import FarcastSupport

/// RRE (2) and CoRRE (4): a background colour, then solid subrectangles (U16 or U8 geometry).
enum RREDecoder {
    static func decode(_ reader: inout ByteReader, rect: RFBRect, compact: Bool, progress: inout RectProgress,
                       framebuffer: inout Framebuffer, converter: PixelConverter) throws {
        let name = compact ? "CoRRE" : "RRE"
        let bpp = converter.bytesPerPixel
        var remaining: Int
        if case .rre(let left) = progress {
            remaining = left
        } else {
            var r = reader
            let count = Int(try r.readInteger(as: UInt32.self))
            let background = try r.withUnsafeBytes(count: bpp) { converter.pixel($0.baseAddress!) }
            reader = r
            framebuffer.fill(rect, with: background)
            remaining = count
            progress = .rre(remaining: count)
        }
        let subrectBytes = bpp + (compact ? 4 : 8)
        let available = min(remaining, reader.remaining / subrectBytes)
        if available > 0 {
            let rectCopy = rect
            let fbWidth = framebuffer.width
            try reader.withUnsafeBytes(count: available * subrectBytes) { (src: UnsafeRawBufferPointer) throws -> Void in
                try framebuffer.pixels.withUnsafeMutableBufferPointer { buf in
                    var c = BoundedCursor(src)
                    for _ in 0..<available {
                        let colour = converter.pixel(c.pointer)
                        try c.skip(bpp)
                        let x, y, w, h: Int
                        if compact {
                            x = Int(try c.u8()); y = Int(try c.u8()); w = Int(try c.u8()); h = Int(try c.u8())
                        } else {
                            x = Int(try c.u16()); y = Int(try c.u16()); w = Int(try c.u16()); h = Int(try c.u16())
                        }
                        guard x + w <= rectCopy.width, y + h <= rectCopy.height else {
                            throw RFBError.malformedRectangle(encoding: name, detail: "subrectangle \(w)×\(h) at (\(x),\(y)) exceeds its \(rectCopy.width)×\(rectCopy.height) rectangle")
                        }
                        var p = buf.baseAddress! + (rectCopy.y + y) * fbWidth + rectCopy.x + x
                        for _ in 0..<h {
                            p.update(repeating: colour, count: w)
                            p += fbWidth
                        }
                    }
                }
            }
            remaining -= available
            progress = .rre(remaining: remaining)
        }
        if remaining > 0 {
            throw TruncatedInput(needed: subrectBytes, available: reader.remaining, offset: reader.offset)
        }
    }
}
