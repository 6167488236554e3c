/// What the client is holding down, so nothing stays pressed on the server: keys and mouse
/// buttons still down are released before the session closes. Also turns relative pointer
/// motion (trackpads) into positions without losing sub-pixel movement.
public struct InputTracker: Sendable, Equatable {
    /// Keysyms currently down, in the order they were pressed.
    public private(set) var pressedKeys: [UInt32] = []
    /// Buttons 1–15 held (bit 0 = button 1); 9–15 need the server's ExtendedMouseButtons.
    public private(set) var buttons: UInt16 = 0
    /// Buttons 1–8 as the classic RFB mask (bit 0 = button 1).
    public var buttonMask: UInt8 { UInt8(truncatingIfNeeded: buttons) }
    /// The pointer position last sent.
    public private(set) var x = 0
    public private(set) var y = 0
    /// The exact position including fractions accumulated by relative moves.
    private var exactX = 0.0, exactY = 0.0
    /// True once an absolute move placed the pointer.
    public private(set) var hasPosition = false

    public init() {}

    /// Records a key event; returns false when it changes nothing (a release of a key not down).
    public mutating func key(_ keysym: UInt32, down: Bool) -> Bool {
        if down {
            if !pressedKeys.contains(keysym) { pressedKeys.append(keysym) }
            return true
        }
        guard let index = pressedKeys.firstIndex(of: keysym) else { return false }
        pressedKeys.remove(at: index)
        return true
    }

    /// Sets or clears a button (1–15) and returns every button now held.
    public mutating func button(_ button: Int, down: Bool) -> UInt16 {
        precondition((1...15).contains(button))
        let bit = UInt16(1) << UInt16(button - 1)
        buttons = down ? buttons | bit : buttons & ~bit
        return buttons
    }

    /// Holds exactly the buttons in `mask` (bit 0 = button 1; 1–15).
    public mutating func setButtons(_ mask: UInt16) {
        buttons = mask & 0x7FFF
    }

    /// Moves to an absolute position, clamped to a `width`×`height` screen.
    public mutating func move(toX newX: Int, y newY: Int, width: Int, height: Int) -> (x: Int, y: Int) {
        x = min(max(newX, 0), max(width - 1, 0))
        y = min(max(newY, 0), max(height - 1, 0))
        exactX = Double(x)
        exactY = Double(y)
        hasPosition = true
        return (x, y)
    }

    /// Moves by a relative amount (fractions carry over to the next move), clamped.
    public mutating func move(byX dx: Double, y dy: Double, width: Int, height: Int) -> (x: Int, y: Int) {
        exactX = min(max(exactX + dx, 0), Double(max(width - 1, 0)))
        exactY = min(max(exactY + dy, 0), Double(max(height - 1, 0)))
        x = Int(exactX.rounded(.down))
        y = Int(exactY.rounded(.down))
        return (x, y)
    }

    /// The events that release everything held: keys in reverse order, then a button-free
    /// pointer event. Clears the state.
    public mutating func releaseAll() -> [ClientMessage] {
        var messages = pressedKeys.reversed().map { ClientMessage.keyEvent(down: false, keysym: $0) }
        if buttons != 0 { messages.append(.pointerEvent(buttonMask: 0, x: x, y: y)) }
        pressedKeys = []
        buttons = 0
        return messages
    }
}
