import FarcastSupport

/// Tight (7): a control byte (zlib stream resets + method), then a solid fill, a JPEG image, or
/// "basic" pixel data — copied, palette-indexed or gradient-predicted, zlib-compressed on one of
/// four persistent streams unless shorter than 12 bytes.
enum TightDecoder {
    static func decode(_ reader: inout ByteReader, rect: RFBRect, state: inout DecoderState,
                       framebuffer: inout Framebuffer) throws {
        var r = reader
        let control = try r.readUInt8()
        // Reset bits apply whatever the method, even for fill and JPEG.
        for stream in 0..<4 where control & (1 << stream) != 0 {
            state.tightStreams[stream].reset()
        }
        let converter = state.converter
        let method = control >> 4
        switch method {
        case 0x08:
            let colour = try r.withUnsafeBytes(count: converter.bytesPerTPixel) { converter.tpixel($0.baseAddress!) }
            reader = r
            framebuffer.fill(rect, with: colour)
        case 0x09:
            guard let jpeg = state.jpeg else {
                throw RFBError.malformedRectangle(encoding: "Tight", detail: "JPEG rectangle, but this client has no JPEG decoder and never asked for JPEG")
            }
            let length = try compactLength(&r)
            let stride = framebuffer.width
            try r.withUnsafeBytes(count: length) { data in
                try framebuffer.pixels.withUnsafeMutableBufferPointer { buf in
                    try jpeg.decode(data, into: buf.baseAddress! + rect.y * stride + rect.x, stride: stride,
                                    width: rect.width, height: rect.height)
                }
            }
            reader = r
            state.jpegRectangles += 1
        case 0...7:
            try decodeBasic(&r, control: control, rect: rect, state: &state, framebuffer: &framebuffer)
            reader = r
        default:
            throw RFBError.malformedRectangle(encoding: "Tight", detail: "unknown compression control 0x\(String(control, radix: 16))")
        }
    }

    /// The 1–3 byte length (7 bits per byte, continuation in the high bit; the third byte is
    /// a full 8 bits).
    static func compactLength(_ r: inout ByteReader) throws(TruncatedInput) -> Int {
        let b0 = Int(try r.readUInt8())
        var length = b0 & 0x7F
        if b0 & 0x80 != 0 {
            let b1 = Int(try r.readUInt8())
            length |= (b1 & 0x7F) << 7
            if b1 & 0x80 != 0 {
                length |= Int(try r.readUInt8()) << 14
            }
        }
        return length
    }

    private enum Filter { case copy, palette, gradient }

    private static func decodeBasic(_ r: inout ByteReader, control: UInt8, rect: RFBRect, state: inout DecoderState,
                                    framebuffer: inout Framebuffer) throws {
        let converter = state.converter
        let streamID = Int((control >> 4) & 0x03)
        var filter = Filter.copy
        if control & 0x40 != 0 {
            switch try r.readUInt8() {
            case 0: filter = .copy
            case 1: filter = .palette
            case 2: filter = .gradient
            case let other:
                throw RFBError.malformedRectangle(encoding: "Tight", detail: "unknown filter \(other)")
            }
        }
        var palette = [UInt32]()
        let tpixel = converter.bytesPerTPixel
        var dataSize: Int
        switch filter {
        case .copy, .gradient:
            if filter == .gradient && !(converter.format.bitsPerPixel == 16 || converter.format.bitsPerPixel == 32) {
                throw RFBError.malformedRectangle(encoding: "Tight", detail: "gradient filter at \(converter.format.bitsPerPixel) bpp")
            }
            dataSize = rect.area * tpixel
        case .palette:
            let count = Int(try r.readUInt8()) + 1
            palette = try r.withUnsafeBytes(count: count * tpixel) { raw in
                (0..<count).map { converter.tpixel(raw.baseAddress! + $0 * tpixel) }
            }
            dataSize = count == 2 ? (rect.width + 7) / 8 * rect.height : rect.area
        }
        guard dataSize > 0 else { return }
        state.ensureScratch(dataSize)
        if dataSize < 12 {
            let bytes = try r.readSlice(dataSize)
            for (i, b) in bytes.enumerated() { state.scratch[i] = b }
        } else {
            let length = try compactLength(&r)
            guard length <= zlibCompressedBound(dataSize) else {
                throw RFBError.malformedRectangle(encoding: "Tight", detail: "claims \(length) compressed bytes for \(dataSize) bytes of data")
            }
            let stream = state.tightStreams[streamID]
            try r.withUnsafeBytes(count: length) { input in
                try state.scratch.withUnsafeMutableBytes { out in
                    try stream.inflate(input, into: UnsafeMutableRawBufferPointer(rebasing: out[0..<dataSize]))
                }
            }
        }
        switch filter {
        case .copy: copy(state.scratch, rect: rect, converter: converter, framebuffer: &framebuffer)
        case .palette: try applyPalette(state.scratch, palette: palette, rect: rect, framebuffer: &framebuffer)
        case .gradient: gradient(state.scratch, rect: rect, state: &state, framebuffer: &framebuffer)
        }
    }

    private static func copy(_ data: [UInt8], rect: RFBRect, converter: PixelConverter, framebuffer: inout Framebuffer) {
        let stride = framebuffer.width, tp = converter.bytesPerTPixel
        data.withUnsafeBytes { src in
            framebuffer.pixels.withUnsafeMutableBufferPointer { dst in
                for y in 0..<rect.height {
                    let row = dst.baseAddress! + (rect.y + y) * stride + rect.x
                    let line = src.baseAddress! + y * rect.width * tp
                    if tp == 3 {
                        PixelFill.widenRow(row, from: line, count: rect.width, bigEndian: true)
                    } else {
                        converter.convertRow(from: line, count: rect.width, to: row)
                    }
                }
            }
        }
    }

    private static func applyPalette(_ data: [UInt8], palette: [UInt32], rect: RFBRect, framebuffer: inout Framebuffer) throws {
        let stride = framebuffer.width, count = palette.count
        // A full 256-entry table: an index byte can never read outside it, and indices beyond
        // the palette are refused a row at a time, before the row is painted.
        try data.withUnsafeBytes { src in
            try withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 256) { table in
                let colours = table.baseAddress!
                colours.initialize(repeating: 0, count: 256)
                for i in 0..<count { colours[i] = palette[i] }
                try framebuffer.pixels.withUnsafeMutableBufferPointer { dst in
                    if count == 2 {
                        let rowBytes = (rect.width + 7) / 8
                        withUnsafeTemporaryAllocation(of: PixelFill.Quad.self, capacity: 16) { patterns in
                            PixelFill.makeOneBitPatterns(patterns.baseAddress!, colour0: colours[0], colour1: colours[1])
                            for y in 0..<rect.height {
                                let row = dst.baseAddress! + (rect.y + y) * stride + rect.x
                                let line = src.baseAddress!.assumingMemoryBound(to: UInt8.self) + y * rowBytes
                                PixelFill.expandOneBitRow(row, from: line, count: rect.width, patterns: patterns.baseAddress!)
                            }
                        }
                    } else {
                        for y in 0..<rect.height {
                            let row = dst.baseAddress! + (rect.y + y) * stride + rect.x
                            let line = src.baseAddress!.assumingMemoryBound(to: UInt8.self) + y * rect.width
                            if count < 256 {
                                var highest: UInt8 = 0
                                for x in 0..<rect.width { highest = max(highest, line[x]) }
                                guard Int(highest) < count else {
                                    throw RFBError.malformedRectangle(encoding: "Tight", detail: "palette index \(highest) beyond a palette of \(count)")
                                }
                            }
                            PixelFill.expandIndexRow(row, from: line, count: rect.width, colours: colours)
                        }
                    }
                }
            }
        }
    }

    /// Undoes the gradient filter: each component is predicted as left + up − up-left, clamped
    /// to the channel's range, and the data holds the difference modulo the range.
    private static func gradient(_ data: [UInt8], rect: RFBRect, state: inout DecoderState, framebuffer: inout Framebuffer) {
        let converter = state.converter
        let format = converter.format
        let stride = framebuffer.width
        let tp = converter.bytesPerTPixel
        let maxes: [Int32], shifts: [UInt32]
        if tp == 3 {
            maxes = [255, 255, 255]
            shifts = [16, 8, 0]
        } else {
            maxes = [Int32(format.redMax), Int32(format.greenMax), Int32(format.blueMax)]
            shifts = [UInt32(format.redShift), UInt32(format.greenShift), UInt32(format.blueShift)]
        }
        // Two rows of components, with a zero column on the left: [previous | current].
        let rowLength = (rect.width + 1) * 3
        if state.gradientRow.count < rowLength * 2 { state.gradientRow = [Int32](repeating: 0, count: rowLength * 2) }
        state.gradientRow.withUnsafeMutableBufferPointer { rows in
            for i in 0..<rowLength * 2 { rows[i] = 0 }
            var previous = rows.baseAddress!, current = rows.baseAddress! + rowLength
            data.withUnsafeBytes { src in
                framebuffer.pixels.withUnsafeMutableBufferPointer { dst in
                    for y in 0..<rect.height {
                        let out = dst.baseAddress! + (rect.y + y) * stride + rect.x
                        let line = src.baseAddress! + y * rect.width * tp
                        for x in 0..<rect.width {
                            var value: UInt32 = 0
                            var diff: (Int32, Int32, Int32)
                            if tp == 3 {
                                let p = line + x * 3
                                diff = (Int32(p.load(as: UInt8.self)), Int32(p.load(fromByteOffset: 1, as: UInt8.self)), Int32(p.load(fromByteOffset: 2, as: UInt8.self)))
                            } else {
                                let v = converter.readValue(line + x * tp)
                                diff = (Int32((v >> shifts[0]) & UInt32(maxes[0])), Int32((v >> shifts[1]) & UInt32(maxes[1])), Int32((v >> shifts[2]) & UInt32(maxes[2])))
                            }
                            for c in 0..<3 {
                                let left = current[x * 3 + c], up = previous[(x + 1) * 3 + c], upLeft = previous[x * 3 + c]
                                let predicted = min(max(left + up - upLeft, 0), maxes[c])
                                let d = c == 0 ? diff.0 : c == 1 ? diff.1 : diff.2
                                let component = (predicted + d) & maxes[c]
                                current[(x + 1) * 3 + c] = component
                                value |= UInt32(component) << shifts[c]
                            }
                            out[x] = tp == 3 ? 0xFF00_0000 | value : converter.word(fromValue: value)
                        }
                        swap(&previous, &current)
                    }
                }
            }
        }
    }
}
