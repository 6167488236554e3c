import FarcastSupport

/// Per-connection decoding state: the pixel converter, the persistent zlib streams, the JPEG
/// decoder and a reusable scratch buffer, so no rectangle allocates.
struct DecoderState: Sendable {
    var converter: PixelConverter
    let zlibStream = Inflater(name: "Zlib")
    let zrleStream = Inflater(name: "ZRLE")
    let tightStreams = (0..<4).map { Inflater(name: "Tight stream \($0)") }
    let jpeg: (any JPEGDecoding)?
    /// Inflated data; grows to the largest rectangle seen and is then reused.
    var scratch: [UInt8] = []
    /// Tight gradient filter: the previous row's components.
    var gradientRow: [Int32] = []
    /// Tight rectangles that arrived as JPEG.
    var jpegRectangles = 0

    init(format: PixelFormat, jpeg: (any JPEGDecoding)?) {
        converter = PixelConverter(format: format)
        self.jpeg = jpeg
    }

    mutating func ensureScratch(_ count: Int) {
        if scratch.count < count { scratch = [UInt8](repeating: 0, count: count) }
    }
}

/// Where a rectangle's decoding stopped when its input ran out, so it resumes instead of
/// re-parsing from the start (large Raw, Hextile, RRE and TRLE rectangles arrive in pieces).
enum RectProgress: Sendable {
    case start
    case raw(rowsDone: Int)
    case rre(remaining: Int)
    case hextile(tile: Int, background: UInt32, foreground: UInt32, hasBackground: Bool, hasForeground: Bool)
    case trle(tile: Int, palette: [UInt32])
}

/// Converts a truncation inside already-complete data (an inflated buffer, a length-prefixed
/// payload) into the rectangle's own error: there is no more data to wait for.
@inline(__always)
func malformed<T>(_ encoding: String, _ body: () throws(TruncatedInput) -> T) throws(RFBError) -> T {
    do { return try body() } catch {
        throw .malformedRectangle(encoding: encoding, detail: "data ends early (needed \(error.needed) more byte(s) at offset \(error.offset), \(error.available) left)")
    }
}
