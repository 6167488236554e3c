/// An integer rectangle in pixels: a region of a remote framebuffer (RFB's `RFBRect`), or of a
/// window (the viewer's `ViewerRect`). One type, so a region passes between the protocol and the
/// window as it is.
public struct PixelRect: Hashable, Sendable, CustomStringConvertible {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int

    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    public var isEmpty: Bool { width <= 0 || height <= 0 }
    /// Pixels covered (0 for an empty rectangle).
    public var area: Int { isEmpty ? 0 : width * height }
    /// `WIDTHxHEIGHT+X+Y`, as X11 geometry reads.
    public var description: String { "\(width)x\(height)+\(x)+\(y)" }

    /// The part of this rectangle inside `other` (empty when they do not meet).
    public func intersection(_ other: PixelRect) -> PixelRect {
        let x0 = max(x, other.x), y0 = max(y, other.y)
        let x1 = min(x + width, other.x + other.width), y1 = min(y + height, other.y + other.height)
        return PixelRect(x: x0, y: y0, width: max(0, x1 - x0), height: max(0, y1 - y0))
    }

    /// The smallest rectangle holding both.
    public func union(_ other: PixelRect) -> PixelRect {
        if isEmpty { return other }
        if other.isEmpty { return self }
        let x0 = min(x, other.x), y0 = min(y, other.y)
        let x1 = max(x + width, other.x + other.width), y1 = max(y + height, other.y + other.height)
        return PixelRect(x: x0, y: y0, width: x1 - x0, height: y1 - y0)
    }
}
