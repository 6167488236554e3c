/// How a viewer window starts; the menu (F8) changes most of it while it runs.
public struct ViewerConfiguration: Sendable {
    /// Window title before the remote side has named itself.
    public var title = "farcast"
    public var scale: ScaleMode = .fit
    public var fullscreen = false
    /// Input is not sent (the menu can turn it off unless `viewOnlyLocked`).
    public var viewOnly = false
    /// `viewOnly` was asked for on the command line: the menu shows it and cannot change it.
    public var viewOnlyLocked = false
    /// Exchange clipboard text with the remote side.
    public var clipboardSync = true
    /// Grab the keyboard so system shortcuts (Alt+Tab, Super) go to the remote side.
    public var grabKeyboard = false
    /// Capture the pointer and send how far it moved (`ViewerInput.pointerMotion`) instead of
    /// where it is: for remote sides that want mouse deltas (games, a VM without an absolute
    /// pointer). The menu key still works, and opening the menu frees the pointer.
    public var relativePointer = false
    /// Capture as a state of its own (a stream, a game): a left click into the picture engages it
    /// (relative pointer, keyboard grabbed; the click is not sent), Ctrl+Alt+Shift+Z or losing
    /// focus releases it (everything held is released on the remote side first). Outside capture
    /// the pointer is absolute and keys still go to the remote side while the window has focus.
    public var captureOnClick = false
    /// Report game controllers (`ViewerInput.gamepad`) while the window has focus, and take
    /// feedback for them (`ViewerWindow.send(_:toPad:)`).
    public var gamepads = false
    /// The window follows the remote desktop's size; with `resizeRemote` the remote desktop
    /// follows the window instead.
    public var resizeRemote = false
    /// Show the statistics overlay from the start.
    public var showHUD = false
    /// A video stream's pictures are shown at most this often (per second) — and never more often
    /// than the display refreshes; nil: the display's rate.
    public var maximumPictureRate: Double?
    /// Where the statistics overlay sits (the menu's Statistics item moves it on).
    public var hudCorner: ViewerCorner = .topLeft
    /// Show only this monitor (index into the screens the remote side reports); nil shows all.
    public var monitor: Int?
    /// A TrueType font for the overlays (HUD, menu, status); nil looks for DejaVu Sans Mono.
    public var fontPath: String?
    /// The key that opens the menu (an SDL keycode; F8 like TigerVNC's viewer).
    public var menuKeycode: Int32 = (1 << 30) | 65
    /// Items the protocol side adds to the menu (labels; choosing one sends
    /// `ViewerCommand.action(label)`), and built-in items that mean nothing for it.
    public var menuActions: [String] = []
    public var hiddenMenuItems: Set<ViewerMenu.Item> = []

    public init() {}
}

/// Something the remote side should do on the user's behalf.
public enum ViewerCommand: Sendable, Equatable {
    /// Press these keysyms in order and release them in reverse (Ctrl+Alt+Del, the menu key).
    case pressKeys([UInt32])
    /// Drop the connection and connect again now.
    case reconnect
    /// A menu item the protocol side added (`ViewerConfiguration.menuActions`), by its label.
    case action(String)
    /// End the session and close the window.
    case disconnect
}

/// What the person at the window did, in remote coordinates, in the order it happened.
public enum ViewerInput: Sendable, Equatable {
    /// A key went down or up; `usbUsage` is the physical key (USB HID usage) when known.
    case key(ViewerKey, down: Bool, usbUsage: UInt16?)
    /// The pointer is at (x, y) of the remote framebuffer with these buttons held (bit 0 =
    /// button 1; 4–7 are wheel clicks, 8/9 back and forward).
    case pointer(x: Int, y: Int, buttons: UInt16)
    /// Relative pointer mode: the pointer moved by (dx, dy) remote pixels (0, 0 when only the
    /// buttons changed).
    case pointerMotion(dx: Double, dy: Double, buttons: UInt16)
    /// The local clipboard now holds this text.
    case clipboard(String)
    /// The window's drawable area changed to this size (sent only with `resizeRemote`).
    case resizeRemote(width: Int, height: Int)
    case command(ViewerCommand)
    /// A game controller (only with `ViewerConfiguration.gamepads`).
    case gamepad(ViewerGamepadEvent)
    /// The window was closed; nothing more follows.
    case closed
}

/// A pointer shape in straight RGBA (R, G, B, A bytes per pixel, rows top to bottom).
public struct ViewerCursor: Sendable, Equatable {
    public var width: Int
    public var height: Int
    public var hotspotX: Int
    public var hotspotY: Int
    public var rgba: [UInt8]

    public init(width: Int, height: Int, hotspotX: Int, hotspotY: Int, rgba: [UInt8]) {
        self.width = width
        self.height = height
        self.hotspotX = hotspotX
        self.hotspotY = hotspotY
        self.rgba = rgba
    }

    /// This cursor drawn `factor` times as large, the hotspot moved with it, so it keeps its
    /// size relative to a scaled picture. Bilinear over premultiplied alpha (edges do not
    /// darken); the factor is kept within 1/8…8 and the result within 256×256 pixels.
    public func scaled(by factor: Double) -> ViewerCursor {
        guard width > 0, height > 0, rgba.count >= width * height * 4 else { return self }
        var f = min(8, max(0.125, factor.isFinite ? factor : 1))
        f = min(f, 256 / Double(max(width, height)))
        let w = max(1, Int((Double(width) * f).rounded())), h = max(1, Int((Double(height) * f).rounded()))
        if w == width && h == height { return self }
        let sx = Double(width) / Double(w), sy = Double(height) / Double(h)
        var out = [UInt8](repeating: 0, count: w * h * 4)
        for y in 0..<h {
            let fy = min(max(0, (Double(y) + 0.5) * sy - 0.5), Double(height - 1))
            let y0 = Int(fy), y1 = min(y0 + 1, height - 1), wy = fy - Double(y0)
            for x in 0..<w {
                let fx = min(max(0, (Double(x) + 0.5) * sx - 0.5), Double(width - 1))
                let x0 = Int(fx), x1 = min(x0 + 1, width - 1), wx = fx - Double(x0)
                var acc = (r: 0.0, g: 0.0, b: 0.0, a: 0.0)
                for (px, py, weight) in [(x0, y0, (1 - wx) * (1 - wy)), (x1, y0, wx * (1 - wy)), (x0, y1, (1 - wx) * wy), (x1, y1, wx * wy)] where weight > 0 {
                    let i = (py * width + px) * 4
                    let a = Double(rgba[i + 3]) * weight
                    acc.r += Double(rgba[i]) * a
                    acc.g += Double(rgba[i + 1]) * a
                    acc.b += Double(rgba[i + 2]) * a
                    acc.a += a
                }
                let o = (y * w + x) * 4
                guard acc.a > 0 else { continue }
                out[o] = UInt8(min(255, (acc.r / acc.a).rounded()))
                out[o + 1] = UInt8(min(255, (acc.g / acc.a).rounded()))
                out[o + 2] = UInt8(min(255, (acc.b / acc.a).rounded()))
                out[o + 3] = UInt8(min(255, acc.a.rounded()))
            }
        }
        let hx = min(w - 1, Int(Double(hotspotX) * Double(w) / Double(width)))
        let hy = min(h - 1, Int(Double(hotspotY) * Double(h) / Double(height)))
        return ViewerCursor(width: w, height: h, hotspotX: hx, hotspotY: hy, rgba: out)
    }

    /// The small dot shown while the remote side draws no cursor of its own: a white centre
    /// with a black ring, visible on any background.
    public static let dot: ViewerCursor = {
        let side = 5
        var rgba = [UInt8](repeating: 0, count: side * side * 4)
        for y in 0..<side {
            for x in 0..<side {
                let dx = x - 2, dy = y - 2, d = dx * dx + dy * dy
                guard d <= 5 else { continue }
                let v: UInt8 = d <= 1 ? 255 : 0
                let i = (y * side + x) * 4
                rgba[i] = v; rgba[i + 1] = v; rgba[i + 2] = v; rgba[i + 3] = 255
            }
        }
        return ViewerCursor(width: side, height: side, hotspotX: 2, hotspotY: 2, rgba: rgba)
    }()
}

/// The connection's state as the window shows it (title, and a banner unless connected).
public enum ViewerStatus: Sendable, Equatable {
    case connecting(String)
    case connected(desktopName: String)
    /// Lost; `retryIn` seconds until the next attempt.
    case reconnecting(reason: String, retryIn: Int)
    /// Over for good; the window stays open showing why until closed.
    case ended(String)
}

/// What the window has shown so far; `ViewerWindow.statistics` returns it at any time.
public struct ViewerStatistics: Sendable, Equatable, Codable {
    public var framesPresented: Int
    /// Of those, frames that sent only the changed rectangles to the display.
    public var partialFrames: Int = 0
    public var updates: Int
    public var latencyP50Milliseconds: Double?
    public var latencyP95Milliseconds: Double?
    public var renderer: String
}

/// A corner of the window, for an overlay.
public enum ViewerCorner: String, Sendable, Equatable, CaseIterable {
    case topLeft = "top-left", topRight = "top-right", bottomRight = "bottom-right", bottomLeft = "bottom-left"

    var isRight: Bool { self == .topRight || self == .bottomRight }
    var isBottom: Bool { self == .bottomLeft || self == .bottomRight }
}
