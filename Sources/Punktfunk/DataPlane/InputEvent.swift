/// A client → host input event: the fixed 18-byte 0xC8 QUIC datagram
/// `tag, kind u8, code u32, x i32, y i32, flags u32` (little-endian, punktfunk/1 §7).
///
/// `datagram` builds the bytes; `init(datagram:)` reads them back (the stand-in host and tests),
/// refusing a wrong tag, a short buffer or an unknown kind.
public enum InputEvent: Sendable, Equatable, Hashable {
    /// A key as a US-positional Windows virtual-key code (see `KeyMap`).
    case keyDown(virtualKey: UInt32, modifiers: KeyModifiers)
    case keyUp(virtualKey: UInt32, modifiers: KeyModifiers)
    /// Relative motion in host pixels.
    case mouseMove(dx: Int32, dy: Int32)
    /// Absolute position on a surface of `width` × `height` (the host scales to its screen).
    case mouseMoveAbsolute(x: Int32, y: Int32, width: UInt16, height: UInt16)
    case mouseButtonDown(MouseButton)
    case mouseButtonUp(MouseButton)
    /// Vertical wheel motion in WHEEL_DELTA units (120 per notch; +away from the user).
    case scroll(Int32)
    /// One gamepad button edge (`button` is one `GamepadButtons` bit).
    case gamepadButton(pad: UInt8, button: GamepadButtons, pressed: Bool)
    /// One gamepad axis: sticks −32768…32767 with +y up, triggers 0…255.
    case gamepadAxis(pad: UInt8, axis: GamepadAxis, value: Int32)
    case touchDown(id: UInt32, x: Int32, y: Int32, width: UInt16, height: UInt16)
    case touchMove(id: UInt32, x: Int32, y: Int32, width: UInt16, height: UInt16)
    case touchUp(id: UInt32)
    /// A pad's whole state (only toward hosts advertising host_caps 0x01).
    case gamepadState(GamepadState)
    case gamepadRemove(pad: UInt8, sequence: UInt8)
    case gamepadArrival(pad: UInt8, type: UInt32)
    /// Committed text, one Unicode scalar per event.
    case text(Unicode.Scalar)

    /// Datagram tag.
    public static let tag: UInt8 = 0xC8
    /// Datagram length.
    public static let length = 18

    /// (kind, code, x, y, flags) as the wire carries them.
    public var fields: (kind: UInt8, code: UInt32, x: Int32, y: Int32, flags: UInt32) {
        switch self {
        case let .keyDown(vk, modifiers): return (0, vk, 0, 0, modifiers.rawValue)
        case let .keyUp(vk, modifiers): return (1, vk, 0, 0, modifiers.rawValue)
        case let .mouseMove(dx, dy): return (2, 0, dx, dy, 0)
        case let .mouseMoveAbsolute(x, y, w, h): return (3, 0, x, y, UInt32(w) << 16 | UInt32(h))
        case let .mouseButtonDown(button): return (4, UInt32(button.rawValue), 0, 0, 0)
        case let .mouseButtonUp(button): return (5, UInt32(button.rawValue), 0, 0, 0)
        case let .scroll(delta): return (6, 0, delta, 0, 0)
        case let .gamepadButton(pad, button, pressed): return (7, button.rawValue, pressed ? 1 : 0, 0, UInt32(pad))
        case let .gamepadAxis(pad, axis, value): return (8, axis.rawValue, value, 0, UInt32(pad))
        case let .touchDown(id, x, y, w, h): return (9, id, x, y, UInt32(w) << 16 | UInt32(h))
        case let .touchMove(id, x, y, w, h): return (10, id, x, y, UInt32(w) << 16 | UInt32(h))
        case let .touchUp(id): return (11, id, 0, 0, 0)
        case let .gamepadState(s):
            return (12, s.buttons.rawValue,
                    Int32(bitPattern: UInt32(UInt16(bitPattern: s.leftStickX)) << 16 | UInt32(UInt16(bitPattern: s.leftStickY))),
                    Int32(bitPattern: UInt32(UInt16(bitPattern: s.rightStickX)) << 16 | UInt32(UInt16(bitPattern: s.rightStickY))),
                    UInt32(s.sequence) << 24 | UInt32(s.leftTrigger) << 16 | UInt32(s.rightTrigger) << 8 | UInt32(s.pad))
        case let .gamepadRemove(pad, sequence): return (13, 0, 0, 0, UInt32(sequence) << 24 | UInt32(pad))
        case let .gamepadArrival(pad, type): return (14, type, 0, 0, UInt32(pad))
        case let .text(scalar): return (15, scalar.value, 0, 0, 0)
        }
    }

    /// Writes the 18 bytes at the start of `out`.
    public func write(to out: UnsafeMutableRawBufferPointer) {
        precondition(out.count >= Self.length, "an input datagram needs 18 bytes")
        let f = fields
        out[0] = Self.tag
        out[1] = f.kind
        out.storeBytes(of: f.code.littleEndian, toByteOffset: 2, as: UInt32.self)
        out.storeBytes(of: f.x.littleEndian, toByteOffset: 6, as: Int32.self)
        out.storeBytes(of: f.y.littleEndian, toByteOffset: 10, as: Int32.self)
        out.storeBytes(of: f.flags.littleEndian, toByteOffset: 14, as: UInt32.self)
    }

    /// The datagram.
    public var datagram: [UInt8] {
        var out = [UInt8](repeating: 0, count: Self.length)
        out.withUnsafeMutableBytes { write(to: $0) }
        return out
    }

    /// Reads an input datagram; nil for a wrong tag, fewer than 18 bytes, an unknown kind, or
    /// fields the kind cannot hold (a mouse button outside 1…5, an unknown axis, a non-scalar).
    public init?(datagram bytes: [UInt8]) {
        guard bytes.count >= Self.length, bytes[0] == Self.tag else { return nil }
        func u32(_ o: Int) -> UInt32 { UInt32(bytes[o]) | UInt32(bytes[o + 1]) << 8 | UInt32(bytes[o + 2]) << 16 | UInt32(bytes[o + 3]) << 24 }
        let code = u32(2), x = Int32(bitPattern: u32(6)), y = Int32(bitPattern: u32(10)), flags = u32(14)
        let w = UInt16(truncatingIfNeeded: flags >> 16), h = UInt16(truncatingIfNeeded: flags)
        let pad = UInt8(truncatingIfNeeded: flags)
        switch bytes[1] {
        case 0: self = .keyDown(virtualKey: code, modifiers: KeyModifiers(rawValue: flags))
        case 1: self = .keyUp(virtualKey: code, modifiers: KeyModifiers(rawValue: flags))
        case 2: self = .mouseMove(dx: x, dy: y)
        case 3: self = .mouseMoveAbsolute(x: x, y: y, width: w, height: h)
        case 4, 5:
            guard code <= 0xFF, let button = MouseButton(rawValue: UInt8(code)) else { return nil }
            self = bytes[1] == 4 ? .mouseButtonDown(button) : .mouseButtonUp(button)
        case 6: self = .scroll(x)
        case 7: self = .gamepadButton(pad: pad, button: GamepadButtons(rawValue: code), pressed: x != 0)
        case 8:
            guard let axis = GamepadAxis(rawValue: code) else { return nil }
            self = .gamepadAxis(pad: pad, axis: axis, value: x)
        case 9: self = .touchDown(id: code, x: x, y: y, width: w, height: h)
        case 10: self = .touchMove(id: code, x: x, y: y, width: w, height: h)
        case 11: self = .touchUp(id: code)
        case 12:
            let ux = UInt32(bitPattern: x), uy = UInt32(bitPattern: y)
            self = .gamepadState(GamepadState(
                pad: pad, sequence: UInt8(flags >> 24), buttons: GamepadButtons(rawValue: code),
                leftStickX: Int16(bitPattern: UInt16(ux >> 16)), leftStickY: Int16(bitPattern: UInt16(truncatingIfNeeded: ux)),
                rightStickX: Int16(bitPattern: UInt16(uy >> 16)), rightStickY: Int16(bitPattern: UInt16(truncatingIfNeeded: uy)),
                leftTrigger: UInt8(truncatingIfNeeded: flags >> 16), rightTrigger: UInt8(truncatingIfNeeded: flags >> 8)))
        case 13: self = .gamepadRemove(pad: pad, sequence: UInt8(flags >> 24))
        case 14: self = .gamepadArrival(pad: pad, type: code)
        case 15:
            guard let scalar = Unicode.Scalar(code) else { return nil }
            self = .text(scalar)
        default: return nil
        }
    }
}

/// Modifier bits in a key event's `flags` (Moonlight's convention; the host also tracks the
/// left/right modifier keys themselves).
public struct KeyModifiers: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let shift = KeyModifiers(rawValue: 0x01)
    public static let control = KeyModifiers(rawValue: 0x02)
    public static let alt = KeyModifiers(rawValue: 0x04)
    public static let meta = KeyModifiers(rawValue: 0x08)
}

public enum MouseButton: UInt8, Sendable, CaseIterable {
    case left = 1, middle = 2, right = 3, back = 4, forward = 5
}

/// Gamepad buttons as XInput/GameStream bits; the forwarded set is `GamepadButtons.forwarded`.
public struct GamepadButtons: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let dpadUp = GamepadButtons(rawValue: 0x0001)
    public static let dpadDown = GamepadButtons(rawValue: 0x0002)
    public static let dpadLeft = GamepadButtons(rawValue: 0x0004)
    public static let dpadRight = GamepadButtons(rawValue: 0x0008)
    public static let start = GamepadButtons(rawValue: 0x0010)
    public static let back = GamepadButtons(rawValue: 0x0020)
    public static let leftStick = GamepadButtons(rawValue: 0x0040)
    public static let rightStick = GamepadButtons(rawValue: 0x0080)
    public static let leftShoulder = GamepadButtons(rawValue: 0x0100)
    public static let rightShoulder = GamepadButtons(rawValue: 0x0200)
    public static let guide = GamepadButtons(rawValue: 0x0400)
    public static let a = GamepadButtons(rawValue: 0x1000)
    public static let b = GamepadButtons(rawValue: 0x2000)
    public static let x = GamepadButtons(rawValue: 0x4000)
    public static let y = GamepadButtons(rawValue: 0x8000)
    public static let paddle1 = GamepadButtons(rawValue: 0x1_0000)
    public static let paddle2 = GamepadButtons(rawValue: 0x2_0000)
    public static let paddle3 = GamepadButtons(rawValue: 0x4_0000)
    public static let paddle4 = GamepadButtons(rawValue: 0x8_0000)
    public static let touchpad = GamepadButtons(rawValue: 0x10_0000)
    public static let misc = GamepadButtons(rawValue: 0x20_0000)
    /// Every bit the host acts on (0x0030F7FF without the paddles' gap): others are masked off.
    public static let forwarded = GamepadButtons(rawValue: 0x0030_F7FF)
}

public enum GamepadAxis: UInt32, Sendable, CaseIterable {
    case leftStickX = 0, leftStickY = 1, rightStickX = 2, rightStickY = 3, leftTrigger = 4, rightTrigger = 5
}

/// A pad's complete state for one `gamepadState` event. `sequence` wraps; the host keeps the
/// newest (a forward window of 127).
public struct GamepadState: Sendable, Equatable, Hashable {
    public var pad: UInt8
    public var sequence: UInt8
    public var buttons: GamepadButtons
    public var leftStickX: Int16, leftStickY: Int16, rightStickX: Int16, rightStickY: Int16
    public var leftTrigger: UInt8, rightTrigger: UInt8

    public init(pad: UInt8, sequence: UInt8 = 0, buttons: GamepadButtons = [], leftStickX: Int16 = 0, leftStickY: Int16 = 0,
                rightStickX: Int16 = 0, rightStickY: Int16 = 0, leftTrigger: UInt8 = 0, rightTrigger: UInt8 = 0) {
        self.pad = pad
        self.sequence = sequence
        self.buttons = buttons
        self.leftStickX = leftStickX
        self.leftStickY = leftStickY
        self.rightStickX = rightStickX
        self.rightStickY = rightStickY
        self.leftTrigger = leftTrigger
        self.rightTrigger = rightTrigger
    }

    /// Folds one button or axis event into the state (sticks and triggers saturate); false for
    /// other events.
    @discardableResult
    public mutating func apply(_ event: InputEvent) -> Bool {
        switch event {
        case let .gamepadButton(_, button, pressed):
            if pressed { buttons.formUnion(button) } else { buttons.subtract(button) }
        case let .gamepadAxis(_, axis, value):
            let stick = Int16(clamping: value), trigger = UInt8(clamping: max(0, value))
            switch axis {
            case .leftStickX: leftStickX = stick
            case .leftStickY: leftStickY = stick
            case .rightStickX: rightStickX = stick
            case .rightStickY: rightStickY = stick
            case .leftTrigger: leftTrigger = trigger
            case .rightTrigger: rightTrigger = trigger
            }
        default:
            return false
        }
        return true
    }

    /// Whether `sequence` is newer than `last` (wrapping, forward window 127; nil accepts).
    public static func isNewer(_ sequence: UInt8, than last: UInt8?) -> Bool {
        guard let last else { return true }
        return Int8(bitPattern: sequence &- last) > 0
    }
}
