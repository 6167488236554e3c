import FarcastSupport
/// An integer rectangle in pixels (remote framebuffer or window coordinates).
public typealias ViewerRect = PixelRect

/// How the remote picture fills the window.
public enum ScaleMode: String, Sendable, CaseIterable {
    /// The whole picture, as large as fits, aspect kept, bars around it (the default).
    case fit
    /// One remote pixel per window pixel; a window smaller than the picture pans.
    case oneToOne = "1:1"
    /// The whole window, aspect not kept.
    case fill
}

/// Where the shown part of the remote framebuffer lands in the window, and the way back from a
/// window point to a remote pixel. Pure arithmetic: the window code and the tests share it.
public struct ViewTransform: Sendable, Equatable {
    /// The part of the remote framebuffer shown (all of it, or one monitor).
    public var source: ViewerRect
    /// Where that part is drawn in the window (may extend past the window when panning at 1:1).
    public var destination: ViewerRect

    public init(source: ViewerRect, destination: ViewerRect) {
        self.source = source
        self.destination = destination
    }

    /// The transform for a window of `windowWidth`×`windowHeight` showing `source` in `mode`;
    /// `pan` is how far (in remote pixels) a 1:1 view has scrolled right and down.
    public static func make(source: ViewerRect, windowWidth: Int, windowHeight: Int, mode: ScaleMode,
                            pan: (x: Int, y: Int) = (0, 0)) -> ViewTransform {
        let ww = max(1, windowWidth), wh = max(1, windowHeight)
        guard !source.isEmpty else {
            return ViewTransform(source: source, destination: ViewerRect(x: 0, y: 0, width: ww, height: wh))
        }
        switch mode {
        case .fill:
            return ViewTransform(source: source, destination: ViewerRect(x: 0, y: 0, width: ww, height: wh))
        case .fit:
            // Compare the aspect ratios exactly in integers: the wider side decides.
            let w: Int, h: Int
            if ww * source.height <= wh * source.width {
                w = ww
                h = max(1, (ww * source.height + source.width / 2) / source.width)
            } else {
                h = wh
                w = max(1, (wh * source.width + source.height / 2) / source.height)
            }
            return ViewTransform(source: source, destination: ViewerRect(x: (ww - w) / 2, y: (wh - h) / 2, width: w, height: h))
        case .oneToOne:
            let clamped = clampPan(pan, source: source, windowWidth: ww, windowHeight: wh)
            // Centred when the window is larger than the picture, scrolled when smaller.
            let x = source.width <= ww ? (ww - source.width) / 2 : -clamped.x
            let y = source.height <= wh ? (wh - source.height) / 2 : -clamped.y
            return ViewTransform(source: source, destination: ViewerRect(x: x, y: y, width: source.width, height: source.height))
        }
    }

    /// A pan kept within the picture: never scrolled past its right or bottom edge.
    public static func clampPan(_ pan: (x: Int, y: Int), source: ViewerRect, windowWidth: Int, windowHeight: Int) -> (x: Int, y: Int) {
        (min(max(0, pan.x), max(0, source.width - windowWidth)), min(max(0, pan.y), max(0, source.height - windowHeight)))
    }

    /// Window pixels per remote pixel, across and down.
    public var scale: (x: Double, y: Double) {
        guard !source.isEmpty else { return (1, 1) }
        return (Double(destination.width) / Double(source.width), Double(destination.height) / Double(source.height))
    }

    /// True when one remote pixel is drawn as exactly one window pixel.
    public var isUnscaled: Bool { destination.width == source.width && destination.height == source.height }

    /// The remote pixel under a window point, clamped into the shown part (a pointer over the
    /// letterbox bars points at the nearest edge pixel, as other viewers do).
    public func remotePoint(windowX: Double, windowY: Double) -> (x: Int, y: Int) {
        guard !source.isEmpty, !destination.isEmpty else { return (source.x, source.y) }
        let fx = (windowX - Double(destination.x)) * Double(source.width) / Double(destination.width)
        let fy = (windowY - Double(destination.y)) * Double(source.height) / Double(destination.height)
        let x = min(max(0, Int(fx.rounded(.down))), source.width - 1)
        let y = min(max(0, Int(fy.rounded(.down))), source.height - 1)
        return (source.x + x, source.y + y)
    }

    /// The window rectangle covering a remote rectangle (rounded outwards).
    public func windowRect(for remote: ViewerRect) -> ViewerRect {
        let r = remote.intersection(source)
        guard !r.isEmpty else { return ViewerRect(x: 0, y: 0, width: 0, height: 0) }
        let sx = Double(destination.width) / Double(source.width), sy = Double(destination.height) / Double(source.height)
        let x0 = Double(destination.x) + Double(r.x - source.x) * sx
        let y0 = Double(destination.y) + Double(r.y - source.y) * sy
        let x1 = Double(destination.x) + Double(r.x + r.width - source.x) * sx
        let y1 = Double(destination.y) + Double(r.y + r.height - source.y) * sy
        let ix0 = Int(x0.rounded(.down)), iy0 = Int(y0.rounded(.down))
        return ViewerRect(x: ix0, y: iy0, width: Int(x1.rounded(.up)) - ix0, height: Int(y1.rounded(.up)) - iy0)
    }

    /// For an unscaled view, the copy that brings a changed remote rectangle onto a window of
    /// `windowWidth`×`windowHeight`: the remote part that is visible and where it goes, both
    /// clipped (to the shown part, and to the window when panning). nil when nothing of it is
    /// visible, or when the view is scaled — a scaled copy of a part is not exactly that part of
    /// the scaled whole (filtering reaches across its edges), so scaled views are redrawn whole.
    public func partialCopy(of remote: ViewerRect, windowWidth: Int, windowHeight: Int) -> (source: ViewerRect, window: ViewerRect)? {
        guard isUnscaled else { return nil }
        let dx = destination.x - source.x, dy = destination.y - source.y
        let visible = ViewerRect(x: -dx, y: -dy, width: windowWidth, height: windowHeight)
        let r = remote.intersection(source).intersection(visible)
        guard !r.isEmpty else { return nil }
        return (r, ViewerRect(x: r.x + dx, y: r.y + dy, width: r.width, height: r.height))
    }
}
