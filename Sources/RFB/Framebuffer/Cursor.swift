import FarcastSupport

/// The pointer shape the server asked the client to draw locally (Cursor / XCursor
/// / CursorWithAlpha pseudo-encodings): RGBA pixels with straight (not premultiplied) alpha,
/// 0 or 255 except from CursorWithAlpha, and the hotspot.
public struct RFBCursor: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var hotspotX: Int
    public var hotspotY: Int
    /// width × height × 4 bytes: R, G, B, A per pixel, rows top to bottom.
    public var rgba: [UInt8]

    /// An invisible cursor (the server hid the pointer).
    public static let hidden = RFBCursor(width: 0, height: 0, hotspotX: 0, hotspotY: 0, rgba: [])

    /// Largest accepted cursor side; larger is refused as hostile (real cursors are ≤ 256).
    static let maximumSide = 1024
}

enum CursorDecoder {
    private static func validate(_ header: RFBRect, _ name: String) throws(RFBError) {
        guard header.width <= RFBCursor.maximumSide, header.height <= RFBCursor.maximumSide else {
            throw .malformedRectangle(encoding: name, detail: "cursor of \(header.width)×\(header.height) exceeds \(RFBCursor.maximumSide)×\(RFBCursor.maximumSide)")
        }
    }

    /// Cursor (-239): width × height PIXELs, then a 1-bit mask (rows byte-padded).
    static func decodeRich(_ reader: inout ByteReader, header: RFBRect, converter: PixelConverter) throws -> RFBCursor {
        try validate(header, "Cursor")
        let w = header.width, h = header.height
        let maskRow = (w + 7) / 8
        let pixelBytes = w * h * converter.bytesPerPixel
        var rgba = [UInt8](repeating: 0, count: w * h * 4)
        try reader.withUnsafeBytes(count: pixelBytes + maskRow * h) { raw in
            for y in 0..<h {
                for x in 0..<w {
                    let word = converter.pixel(raw.baseAddress! + (y * w + x) * converter.bytesPerPixel)
                    let visible = (raw[pixelBytes + y * maskRow + x / 8] >> (7 - UInt8(x % 8))) & 1 == 1
                    let o = (y * w + x) * 4
                    rgba[o] = UInt8(truncatingIfNeeded: word >> 16)
                    rgba[o + 1] = UInt8(truncatingIfNeeded: word >> 8)
                    rgba[o + 2] = UInt8(truncatingIfNeeded: word)
                    rgba[o + 3] = visible ? 255 : 0
                }
            }
        }
        return RFBCursor(width: w, height: h, hotspotX: header.x, hotspotY: header.y, rgba: rgba)
    }

    /// CursorWithAlpha (-314): an S32 encoding, then width × height pixels in it, RGBA with
    /// premultiplied alpha. Raw is what TigerVNC sends and all this decoder takes: another
    /// encoding would share the session's zlib streams, so it cannot be skipped either.
    static func decodeAlpha(_ reader: inout ByteReader, header: RFBRect) throws -> RFBCursor {
        try validate(header, "CursorWithAlpha")
        let encoding = RFBEncoding(try reader.readInteger(as: Int32.self))
        guard encoding == .raw else {
            throw RFBError.malformedRectangle(encoding: "CursorWithAlpha", detail: "the cursor came in \(encoding), and only Raw is supported for it")
        }
        let w = header.width, h = header.height
        var rgba = [UInt8](repeating: 0, count: w * h * 4)
        try reader.withUnsafeBytes(count: w * h * 4) { raw in
            for i in 0..<(w * h) {
                let o = i * 4
                let alpha = raw[o + 3]
                rgba[o + 3] = alpha
                guard alpha > 0 else { continue }
                for c in 0..<3 {
                    // Undo the premultiplication (rounded), clamping what a hostile server
                    // could send above its alpha.
                    let value = (Int(raw[o + c]) * 255 + Int(alpha) / 2) / Int(alpha)
                    rgba[o + c] = UInt8(min(value, 255))
                }
            }
        }
        return RFBCursor(width: w, height: h, hotspotX: header.x, hotspotY: header.y, rgba: rgba)
    }

    /// XCursor (-240): primary and secondary RGB, then a 1-bit colour bitmap and a 1-bit mask.
    static func decodeX(_ reader: inout ByteReader, header: RFBRect) throws -> RFBCursor {
        try validate(header, "XCursor")
        let w = header.width, h = header.height
        guard w > 0, h > 0 else { return .hidden }
        let maskRow = (w + 7) / 8
        var rgba = [UInt8](repeating: 0, count: w * h * 4)
        try reader.withUnsafeBytes(count: 6 + 2 * maskRow * h) { raw in
            let primary = (raw[0], raw[1], raw[2]), secondary = (raw[3], raw[4], raw[5])
            for y in 0..<h {
                for x in 0..<w {
                    let bit = 7 - UInt8(x % 8)
                    let usesPrimary = (raw[6 + y * maskRow + x / 8] >> bit) & 1 == 1
                    let visible = (raw[6 + maskRow * h + y * maskRow + x / 8] >> bit) & 1 == 1
                    let colour = usesPrimary ? primary : secondary
                    let o = (y * w + x) * 4
                    rgba[o] = colour.0
                    rgba[o + 1] = colour.1
                    rgba[o + 2] = colour.2
                    rgba[o + 3] = visible ? 255 : 0
                }
            }
        }
        return RFBCursor(width: w, height: h, hotspotX: header.x, hotspotY: header.y, rgba: rgba)
    }
}
