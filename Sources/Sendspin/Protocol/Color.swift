/// color@v1: a palette derived from what plays (`server/state.color`), for a display or lights
/// to follow. Each color is `[R, G, B]` (0–255); a palette with no colors clears the display's.
/// The server guarantees the readability pairs (WCAG 4.5:1): white text on `backgroundDark`,
/// black on `backgroundLight`, `onDark` on `backgroundDark`, `onLight` on `backgroundLight`.
public struct ColorPalette: Codable, Sendable, Equatable {
    public typealias RGB = [UInt8]

    /// Server time (µs) from which the palette applies; a future time schedules it.
    public var timestamp: Int64
    public var backgroundDark: RGB?
    public var backgroundLight: RGB?
    /// The dominant color.
    public var primary: RGB?
    /// A secondary or complementary color.
    public var accent: RGB?
    /// A light color for use on dark backgrounds.
    public var onDark: RGB?
    /// A dark color for use on light backgrounds.
    public var onLight: RGB?

    public init(timestamp: Int64, backgroundDark: RGB? = nil, backgroundLight: RGB? = nil, primary: RGB? = nil, accent: RGB? = nil,
                onDark: RGB? = nil, onLight: RGB? = nil) {
        self.timestamp = timestamp
        self.backgroundDark = backgroundDark
        self.backgroundLight = backgroundLight
        self.primary = primary
        self.accent = accent
        self.onDark = onDark
        self.onLight = onLight
    }

    enum CodingKeys: String, CodingKey {
        case timestamp, backgroundDark = "background_dark", backgroundLight = "background_light", primary, accent
        case onDark = "on_dark", onLight = "on_light"
    }

    /// No colors: the display goes back to its own.
    public var isClear: Bool { [backgroundDark, backgroundLight, primary, accent, onDark, onLight].allSatisfy { $0 == nil } }

    /// Why the palette cannot be used as sent: a color that is not three 0–255 components
    /// (`UInt8` already bounds each one), or nil.
    var problem: String? {
        for (name, color) in [("background_dark", backgroundDark), ("background_light", backgroundLight), ("primary", primary), ("accent", accent),
                              ("on_dark", onDark), ("on_light", onLight)] {
            if let color, color.count != 3 { return "color \(name) has \(color.count) components (R, G, B expected)" }
        }
        return nil
    }
}
