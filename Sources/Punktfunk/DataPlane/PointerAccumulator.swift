/// Turns fractional pointer motion and scrolling into the wire's integers without losing or
/// inventing motion: the fraction left over after each event is carried into the next, so a
/// thousand 0.3-pixel moves travel 300 pixels and a trackpad's small scroll steps add up to
/// whole WHEEL_DELTA units. Values saturate at the 32-bit wire range.
public struct PointerAccumulator: Sendable, Equatable {
    private var residueX = 0.0, residueY = 0.0, residueScroll = 0.0

    /// One notch of a wheel, in wire units.
    public static let wheelDelta = 120

    public init() {}

    /// The relative move to send for a motion of (dx, dy) pixels, or nil when it rounds to nothing yet.
    public mutating func move(dx: Double, dy: Double) -> InputEvent? {
        guard dx.isFinite, dy.isFinite else { return nil }
        residueX += dx
        residueY += dy
        let sx = Self.whole(residueX), sy = Self.whole(residueY)
        // A move beyond the wire's range sends the most it can and forgets the rest, so one
        // absurd delta cannot keep the pointer running for the events after it.
        residueX = sx == .max || sx == .min ? 0 : residueX - Double(sx)
        residueY = sy == .max || sy == .min ? 0 : residueY - Double(sy)
        guard sx != 0 || sy != 0 else { return nil }
        return .mouseMove(dx: sx, dy: sy)
    }

    /// The scroll to send for a wheel motion of `notches` (fractions allowed; +away from the
    /// user), or nil while less than one WHEEL_DELTA unit has built up.
    public mutating func scroll(notches: Double) -> InputEvent? {
        guard notches.isFinite else { return nil }
        residueScroll += notches * Double(Self.wheelDelta)
        let s = Self.whole(residueScroll)
        residueScroll = s == .max || s == .min ? 0 : residueScroll - Double(s)
        return s == 0 ? nil : .scroll(s)
    }

    /// Forgets carried fractions (after focus loss, or when the pointer is re-captured).
    public mutating func reset() { self = PointerAccumulator() }

    /// The whole part toward zero, saturated to Int32.
    private static func whole(_ v: Double) -> Int32 {
        let t = v.rounded(.towardZero)
        if t >= Double(Int32.max) { return .max }
        if t <= Double(Int32.min) { return .min }
        return Int32(t)
    }
}
