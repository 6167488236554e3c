import FarcastSupport

/// Raw (0): width × height PIXELs, row by row. Decodes as many whole rows as have arrived.
enum RawDecoder {
    static func decode(_ reader: inout ByteReader, rect: RFBRect, rowsDone: inout Int,
                       framebuffer: inout Framebuffer, converter: PixelConverter) throws {
        let rowBytes = rect.width * converter.bytesPerPixel
        guard rowBytes > 0, rect.height > 0 else { return }
        let rows = min(rect.height - rowsDone, reader.remaining / rowBytes)
        if rows > 0 {
            let stride = framebuffer.width
            let firstRow = rowsDone
            try reader.withUnsafeBytes(count: rows * rowBytes) { (src: UnsafeRawBufferPointer) in
                framebuffer.pixels.withUnsafeMutableBufferPointer { dst in
                    for r in 0..<rows {
                        converter.convertRow(from: src.baseAddress! + r * rowBytes, count: rect.width,
                                             to: dst.baseAddress! + (rect.y + firstRow + r) * stride + rect.x)
                    }
                }
            } as Void
            rowsDone += rows
        }
        if rowsDone < rect.height {
            throw TruncatedInput(needed: rowBytes, available: reader.remaining, offset: reader.offset)
        }
    }
}
