/// Turns high-resolution wheel motion (fractions of a notch from touchpads and free-spinning
/// wheels) into whole clicks, keeping the remainder for the next motion. A change of direction
/// drops what was left over, so a reversal is felt at once.
public struct WheelAccumulator: Sendable, Equatable {
    private var x = 0.0
    private var y = 0.0

    public init() {}

    /// Clicks to send for a motion: `up`/`down` (positive y is away from the user, i.e. up) and
    /// `left`/`right` (positive x is right).
    public mutating func add(x dx: Double, y dy: Double) -> (up: Int, down: Int, left: Int, right: Int) {
        if dy != 0 {
            if (dy > 0) != (y > 0) && y != 0 { y = 0 }
            y += dy
        }
        if dx != 0 {
            if (dx > 0) != (x > 0) && x != 0 { x = 0 }
            x += dx
        }
        let wholeY = Int(y.rounded(.towardZero)), wholeX = Int(x.rounded(.towardZero))
        y -= Double(wholeY)
        x -= Double(wholeX)
        return (max(0, wholeY), max(0, -wholeY), max(0, -wholeX), max(0, wholeX))
    }
}
