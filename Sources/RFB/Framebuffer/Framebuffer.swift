import FarcastSupport
/// A rectangle in framebuffer coordinates.
public typealias RFBRect = PixelRect

/// The client's copy of the remote screen: row-major 32-bit words `0xXXRRGGBB` in host byte
/// order (bytes B, G, R, X in memory on little-endian machines), stride equal to the width. The
/// top byte is unspecified; read colours through `rgb(x:y:)` or `rgbBytes()`.
public struct Framebuffer: Sendable, Equatable {
    /// Largest accepted dimension; a server announcing more is refused before anything is allocated.
    public static let maximumDimension = 16384

    public private(set) var width: Int
    public private(set) var height: Int
    /// The pixel words. Decoders write here directly; the count is always width × height.
    public internal(set) var pixels: [UInt32]

    public init(width: Int, height: Int) {
        precondition(width >= 0 && height >= 0 && width <= Self.maximumDimension && height <= Self.maximumDimension)
        self.width = width
        self.height = height
        pixels = [UInt32](repeating: 0, count: width * height)
    }

    /// Resizes, keeping the overlapping top-left content (as TigerVNC does) and clearing the rest.
    public mutating func resize(width newWidth: Int, height newHeight: Int) {
        guard newWidth != width || newHeight != height else { return }
        var next = [UInt32](repeating: 0, count: newWidth * newHeight)
        let w = min(width, newWidth), h = min(height, newHeight)
        for row in 0..<h {
            next.withUnsafeMutableBufferPointer { dst in
                pixels.withUnsafeBufferPointer { src in
                    (dst.baseAddress! + row * newWidth).update(from: src.baseAddress! + row * width, count: w)
                }
            }
        }
        pixels = next
        width = newWidth
        height = newHeight
    }

    /// True when `rect` lies entirely inside the framebuffer.
    public func contains(_ rect: RFBRect) -> Bool {
        rect.x >= 0 && rect.y >= 0 && rect.width >= 0 && rect.height >= 0
            && rect.x + rect.width <= width && rect.y + rect.height <= height
    }

    /// The colour at a point as (red, green, blue).
    public func rgb(x: Int, y: Int) -> (red: UInt8, green: UInt8, blue: UInt8) {
        let w = pixels[y * width + x]
        return (UInt8(truncatingIfNeeded: w >> 16), UInt8(truncatingIfNeeded: w >> 8), UInt8(truncatingIfNeeded: w))
    }

    /// R, G, B bytes for every pixel, rows top to bottom (alpha excluded): the form hashed by
    /// `farcast vnc replay` and compared against other clients.
    public func rgbBytes() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: width * height * 3)
        out.withUnsafeMutableBufferPointer { dst in
            pixels.withUnsafeBufferPointer { src in Self.convertToRGB(src, into: dst.baseAddress!) }
        }
        return out
    }

    /// The same bytes as `rgbBytes()`, handed to `body` one row at a time through a single
    /// row-sized buffer (to hash or write the picture without a second copy of it).
    public func withRGBRows(_ body: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        guard width > 0 else { return }
        var row = [UInt8](repeating: 0, count: width * 3)
        try pixels.withUnsafeBufferPointer { src in
            try row.withUnsafeMutableBufferPointer { dst in
                for y in 0..<height {
                    Self.convertToRGB(UnsafeBufferPointer(rebasing: src[(y * width)..<((y + 1) * width)]), into: dst.baseAddress!)
                    try body(UnsafeRawBufferPointer(dst))
                }
            }
        }
    }

    private static func convertToRGB(_ src: UnsafeBufferPointer<UInt32>, into dst: UnsafeMutablePointer<UInt8>) {
        var o = 0
        for w in src {
            dst[o] = UInt8(truncatingIfNeeded: w >> 16)
            dst[o + 1] = UInt8(truncatingIfNeeded: w >> 8)
            dst[o + 2] = UInt8(truncatingIfNeeded: w)
            o += 3
        }
    }

    /// A copy of one region (a monitor, say), clipped to the framebuffer.
    public func cropped(to region: RFBRect) -> Framebuffer {
        let area = region.intersection(RFBRect(x: 0, y: 0, width: width, height: height))
        var out = Framebuffer(width: area.width, height: area.height)
        for row in 0..<area.height {
            let start = (area.y + row) * width + area.x
            out.pixels.replaceSubrange(row * area.width..<(row + 1) * area.width, with: pixels[start..<start + area.width])
        }
        return out
    }

    /// Fills a rectangle (already validated to lie inside) with one word.
    @inline(__always)
    mutating func fill(_ rect: RFBRect, with word: UInt32) {
        let stride = width
        pixels.withUnsafeMutableBufferPointer { buf in
            var p = buf.baseAddress! + rect.y * stride + rect.x
            for _ in 0..<rect.height {
                p.update(repeating: word, count: rect.width)
                p += stride
            }
        }
    }

    /// Copies a rectangle within the framebuffer; overlapping source and destination are safe.
    mutating func copy(from source: RFBRect, toX dx: Int, toY dy: Int) {
        let stride = width
        pixels.withUnsafeMutableBufferPointer { buf in
            let base = buf.baseAddress!
            // Walk rows in the direction that never overwrites a source row before reading it.
            let downwards = dy > source.y
            for i in 0..<source.height {
                let r = downwards ? source.height - 1 - i : i
                let src = base + (source.y + r) * stride + source.x
                let dst = base + (dy + r) * stride + dx
                // copyMemory is memmove: a horizontal overlap within one row is safe too.
                UnsafeMutableRawPointer(dst).copyMemory(from: src, byteCount: source.width * 4)
            }
        }
    }
}
