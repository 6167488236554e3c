#if canImport(CSDL2)
import CSDL2

/// The input part of a window: what it holds down on the remote side and the pointer motion
/// not yet sent, turned into `ViewerInput` in order. It decides nothing about overlays or
/// view-only — `WindowLoop` routes an event here only when it is the remote side's — and it
/// keeps every key and button it sent down, so each release names what its press named and
/// `releaseEverything` leaves nothing stuck. Lives on the window thread.
final class WindowInput {
    private let sink: (ViewerInput) -> Void
    /// Keys sent down, by SDL scancode, so each release names the key its press named.
    private var heldKeys: [Int32: (key: ViewerKey, usage: UInt16?)] = [:]
    private var buttons: UInt16 = 0
    private var wheel = WheelAccumulator()
    private var lastPointer: (x: Int, y: Int)?
    private var pendingMotion: (x: Int, y: Int)?
    /// Relative motion not yet sent, in remote pixels.
    private var pendingDelta = (x: 0.0, y: 0.0)
    /// A character key whose text has not arrived: (scancode, keycode, usage, shift held).
    private var pendingCharacter: (scancode: Int32, keycode: Int32, usage: UInt16, shift: Bool)?
    /// SDL's relative mouse mode is on: the pointer's motion is sent as deltas.
    private(set) var relative = false

    init(sink: @escaping (ViewerInput) -> Void) { self.sink = sink }

    // MARK: - Keyboard

    /// A key pressed for the remote side.
    func keyDown(_ e: SDL_KeyboardEvent) {
        let keycode = e.keysym.sym
        let scancode = Int32(e.keysym.scancode.rawValue)
        let mods = UInt32(e.keysym.mod)
        let usage = UInt16(truncatingIfNeeded: scancode)
        if e.repeat != 0, let held = heldKeys[scancode] {
            // Auto-repeat: the same key down again, as a physical keyboard does.
            Self.dropText()
            send(.key(held.key, down: true, usbUsage: held.usage))
            return
        }
        let key: ViewerKey?
        if let named = KeyMapping.namedKey(keycode: keycode, scancode: scancode, numLock: mods & KMOD_NUM.rawValue != 0) {
            Self.dropText()
            key = .keysym(named)
        } else if mods & (KMOD_CTRL.rawValue | KMOD_LALT.rawValue | KMOD_GUI.rawValue) != 0 {
            // Shortcuts type no text: the keycode names the layout's character for the key.
            Self.dropText()
            key = KeyMapping.character(keycode: keycode).map { .character($0) }
        } else {
            // A character key: its text usually sits right behind it in SDL's queue; when it
            // is not there yet, the key waits for it (a dead key's text never comes: its
            // composed character arrives with the next key).
            let typed = Self.takeText()
            if typed.isEmpty {
                pendingCharacter = (scancode, keycode, usage, mods & KMOD_SHIFT.rawValue != 0)
                return
            }
            key = pressText(typed, scancode: scancode, usage: usage)
        }
        guard let key else { return }
        heldKeys[scancode] = (key, usage)
        send(.key(key, down: true, usbUsage: usage))
    }

    /// Text for a key press: one character becomes the key held down; several (an input
    /// method's commit) are typed at once. Returns the held key, if any.
    private func pressText(_ typed: String, scancode: Int32, usage: UInt16) -> ViewerKey? {
        let scalars = Array(typed.unicodeScalars)
        if scalars.count == 1 { return .character(scalars[0]) }
        for scalar in scalars {
            send(.key(.character(scalar), down: true, usbUsage: nil))
            send(.key(.character(scalar), down: false, usbUsage: nil))
        }
        return nil
    }

    /// Text for the remote side that arrived after its key's press (or, from an input method,
    /// with none).
    func textArrived(_ typed: String) {
        if let pending = pendingCharacter {
            pendingCharacter = nil
            if let key = pressText(typed, scancode: pending.scancode, usage: pending.usage) {
                heldKeys[pending.scancode] = (key, pending.usage)
                send(.key(key, down: true, usbUsage: pending.usage))
            }
            return
        }
        for scalar in typed.unicodeScalars {
            send(.key(.character(scalar), down: true, usbUsage: nil))
            send(.key(.character(scalar), down: false, usbUsage: nil))
        }
    }

    /// A key waiting for its text that no longer goes to the remote side (an overlay opened,
    /// view-only).
    func forgetPendingCharacter() { pendingCharacter = nil }

    /// A character key whose text never came before the next key event: the keycode's
    /// character (upper case with Shift) stands in; a dead key (keycode 0) sends nothing.
    func resolvePendingCharacter() {
        guard let pending = pendingCharacter else { return }
        pendingCharacter = nil
        guard var scalar = KeyMapping.character(keycode: pending.keycode) else { return }
        if pending.shift, let upper = String(scalar).uppercased().unicodeScalars.first, String(scalar).uppercased().unicodeScalars.count == 1 { scalar = upper }
        heldKeys[pending.scancode] = (.character(scalar), pending.usage)
        send(.key(.character(scalar), down: true, usbUsage: pending.usage))
    }

    func keyUp(_ e: SDL_KeyboardEvent) {
        let scancode = Int32(e.keysym.scancode.rawValue)
        if let pending = pendingCharacter {
            if pending.scancode == scancode { Self.dropText() }
            resolvePendingCharacter()
        }
        guard let held = heldKeys.removeValue(forKey: scancode) else { return }
        send(.key(held.key, down: false, usbUsage: held.usage))
    }

    /// The text events SDL queued for the key just pressed.
    static func takeText() -> String {
        var result = ""
        var event = SDL_Event()
        while SDL_PeepEvents(&event, 1, SDL_GETEVENT, SDL_TEXTINPUT.rawValue, SDL_TEXTINPUT.rawValue) == 1 {
            result += text(of: event.text)
        }
        return result
    }

    static func dropText() { _ = takeText() }

    static func text(of e: SDL_TextInputEvent) -> String {
        withUnsafeBytes(of: e.text) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Releases every key and button this window holds down on the remote side (focus lost,
    /// menu opened, window closing), so nothing stays stuck there.
    func releaseEverything() {
        flushMotion()
        pendingCharacter = nil
        for (_, held) in heldKeys.sorted(by: { $0.key < $1.key }) {
            send(.key(held.key, down: false, usbUsage: held.usage))
        }
        heldKeys = [:]
        if buttons != 0 {
            buttons = 0
            if relative {
                send(.pointerMotion(dx: 0, dy: 0, buttons: 0))
            } else if let p = lastPointer {
                send(.pointer(x: p.x, y: p.y, buttons: 0))
            }
        }
    }

    // MARK: - Pointer

    /// Relative mode: the pointer moved by this many remote pixels (sent with the next flush).
    func moveBy(dx: Double, dy: Double) {
        pendingDelta.x += dx
        pendingDelta.y += dy
    }

    /// The pointer is over this remote point (sent with the next flush, once per place).
    func moveTo(_ point: (x: Int, y: Int)) { pendingMotion = point }

    func flushMotion() {
        if pendingDelta != (0, 0) {
            let delta = pendingDelta
            pendingDelta = (0, 0)
            sink(.pointerMotion(dx: delta.x, dy: delta.y, buttons: buttons))
        }
        guard let p = pendingMotion else { return }
        pendingMotion = nil
        if let last = lastPointer, last == p { return }
        lastPointer = p
        send(.pointer(x: p.x, y: p.y, buttons: buttons))
    }

    /// SDL buttons (1 left, 2 middle, 3 right, 4/5 the side buttons) → RFB numbering (side
    /// buttons are 8 back and 9 forward).
    static func remoteButton(_ sdl: UInt8) -> Int? {
        switch sdl {
        case 1: 1
        case 2: 2
        case 3: 3
        case 4: 8
        case 5: 9
        default: nil
        }
    }

    /// A remote button (RFB numbering) pressed or released; `point` is where, in remote
    /// coordinates (not needed in relative mode, where the button goes with no motion).
    func press(button: Int, down: Bool, at point: () -> (x: Int, y: Int)) {
        let bit = UInt16(1) << (button - 1)
        if relative {
            flushMotion()
            buttons = down ? buttons | bit : buttons & ~bit
            send(.pointerMotion(dx: 0, dy: 0, buttons: buttons))
            return
        }
        let p = point()
        pendingMotion = nil
        buttons = down ? buttons | bit : buttons & ~bit
        lastPointer = p
        send(.pointer(x: p.x, y: p.y, buttons: buttons))
    }

    /// Wheel motion as clicks of buttons 4–7 (press and release each), where the pointer is.
    func wheel(_ e: SDL_MouseWheelEvent) {
        flushMotion()
        let flip: Float = e.direction == SDL_MOUSEWHEEL_FLIPPED.rawValue ? -1 : 1
        let clicks = wheel.add(x: Double(e.preciseX * flip), y: Double(e.preciseY * flip))
        let p = lastPointer ?? (0, 0)
        for (count, button) in [(clicks.up, 4), (clicks.down, 5), (clicks.left, 6), (clicks.right, 7)] where count > 0 {
            let bit = UInt16(1) << (button - 1)
            for _ in 0..<count {
                if relative {
                    send(.pointerMotion(dx: 0, dy: 0, buttons: buttons | bit))
                    send(.pointerMotion(dx: 0, dy: 0, buttons: buttons))
                } else {
                    send(.pointer(x: p.x, y: p.y, buttons: buttons | bit))
                    send(.pointer(x: p.x, y: p.y, buttons: buttons))
                }
            }
        }
    }

    /// Turns SDL's relative mode on or off (buttons held are released when it goes off).
    func setRelative(_ wanted: Bool) {
        guard wanted != relative else { return }
        flushMotion()
        if !wanted && buttons != 0 { releaseEverything() }
        relative = SDL_SetRelativeMouseMode(wanted ? SDL_TRUE : SDL_FALSE) == 0 ? wanted : false
    }

    /// Anything else for the remote side (clipboard, resize), after the pointer's pending motion.
    func send(_ input: ViewerInput) {
        if case .pointer = input {} else if case .pointerMotion = input {} else { flushMotion() }
        sink(input)
    }
}
#endif
