import Foundation
@testable import Punktfunk
import Testing

/// Client → host input: the 18-byte 0xC8 layout of every kind, gamepad state packing and
/// folding, 0xCC rich input with its scaling, fractional pointer and WHEEL_DELTA accumulation,
/// and the key maps against vectors built from the system's key headers.
@Suite struct InputTests {
    @Test func everyKindHasTheWireLayout() {
        let cases: [(InputEvent, [UInt8])] = [
            (.keyDown(virtualKey: 0x41, modifiers: [.shift, .control]), [0xC8, 0, 0x41, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x03, 0, 0, 0]),
            (.keyUp(virtualKey: 0xA5, modifiers: []), [0xC8, 1, 0xA5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            (.mouseMove(dx: -2, dy: 300), [0xC8, 2, 0, 0, 0, 0, 0xFE, 0xFF, 0xFF, 0xFF, 0x2C, 0x01, 0, 0, 0, 0, 0, 0]),
            (.mouseMoveAbsolute(x: 640, y: 360, width: 1280, height: 720),
             [0xC8, 3, 0, 0, 0, 0, 0x80, 0x02, 0, 0, 0x68, 0x01, 0, 0, 0xD0, 0x02, 0x00, 0x05]),
            (.mouseButtonDown(.right), [0xC8, 4, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            (.mouseButtonUp(.forward), [0xC8, 5, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            (.scroll(-240), [0xC8, 6, 0, 0, 0, 0, 0x10, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0]),
            (.gamepadButton(pad: 2, button: .a, pressed: true), [0xC8, 7, 0, 0x10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0]),
            (.gamepadAxis(pad: 1, axis: .leftStickY, value: -32768), [0xC8, 8, 1, 0, 0, 0, 0, 0x80, 0xFF, 0xFF, 0, 0, 0, 0, 1, 0, 0, 0]),
            (.touchUp(id: 7), [0xC8, 11, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            (.gamepadRemove(pad: 3, sequence: 200), [0xC8, 13, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 200]),
            (.gamepadArrival(pad: 0, type: 2), [0xC8, 14, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            (.text("語"), [0xC8, 15, 0x9E, 0x8A, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
        ]
        for (event, bytes) in cases {
            #expect(event.datagram == bytes, "\(event)")
            #expect(InputEvent(datagram: bytes) == event, "\(event)")
        }
        for event in [InputEvent.touchDown(id: 2, x: 640, y: 360, width: 1280, height: 720),
                      .touchMove(id: 2, x: 1, y: 2, width: 3, height: 4), .text("😀")] {
            #expect(InputEvent(datagram: event.datagram) == event)
        }
    }

    @Test func gamepadStatePacksAndFolds() {
        let s = GamepadState(pad: 3, sequence: 200, buttons: [.a, .paddle4, .misc], leftStickX: -32768, leftStickY: 32767,
                             rightStickX: -1, rightStickY: 12345, leftTrigger: 255, rightTrigger: 1)
        let bytes = InputEvent.gamepadState(s).datagram
        #expect(bytes[1] == 12)
        #expect(Array(bytes[14..<18]) == [3, 1, 255, 200])          // pad | rt << 8 | lt << 16 | seq << 24
        #expect(InputEvent(datagram: bytes) == .gamepadState(s))

        var folded = GamepadState(pad: 0)
        do { let ok = folded.apply(.gamepadButton(pad: 0, button: .a, pressed: true)); #expect(ok) }
        do { let ok = folded.apply(.gamepadButton(pad: 0, button: .rightShoulder, pressed: true)); #expect(ok) }
        do { let ok = folded.apply(.gamepadButton(pad: 0, button: .a, pressed: false)); #expect(ok) }
        #expect(folded.buttons == .rightShoulder)
        do { let ok = folded.apply(.gamepadAxis(pad: 0, axis: .leftTrigger, value: 300)); #expect(ok) }
        do { let ok = folded.apply(.gamepadAxis(pad: 0, axis: .leftStickY, value: -40000)); #expect(ok) }
        #expect(folded.leftTrigger == 255 && folded.leftStickY == .min)
        do { let ok = folded.apply(.keyDown(virtualKey: 0x41, modifiers: [])); #expect(!ok) }
        #expect(GamepadState.isNewer(6, than: 5) && !GamepadState.isNewer(5, than: 5) && GamepadState.isNewer(2, than: 250))
        #expect(!GamepadState.isNewer(133, than: 5) && GamepadState.isNewer(0, than: nil))
        #expect(GamepadButtons.forwarded.rawValue == 0x0030_F7FF)
    }

    @Test func malformedInputDatagramsAreRefused() {
        #expect(InputEvent(datagram: []) == nil)
        #expect(InputEvent(datagram: [UInt8](repeating: 0, count: 18)) == nil)                          // wrong tag
        #expect(InputEvent(datagram: Array(InputEvent.scroll(1).datagram.prefix(17))) == nil)           // short
        var unknown = InputEvent.scroll(1).datagram; unknown[1] = 16
        #expect(InputEvent(datagram: unknown) == nil)
        var badButton = InputEvent.mouseButtonDown(.left).datagram; badButton[2] = 9
        #expect(InputEvent(datagram: badButton) == nil)
        var surrogate = InputEvent.text("a").datagram; surrogate[2] = 0x00; surrogate[3] = 0xD8
        #expect(InputEvent(datagram: surrogate) == nil)
        var badAxis = InputEvent.gamepadAxis(pad: 0, axis: .rightTrigger, value: 1).datagram; badAxis[2] = 6
        #expect(InputEvent(datagram: badAxis) == nil)
    }

    @Test func richInputLayoutsAndScaling() {
        let touch = RichInput.touchpad(pad: 1, finger: 0, active: true, x: 40000, y: 12345)
        #expect(touch.datagram == [0xCC, 1, 1, 0, 1, 0x40, 0x9C, 0x39, 0x30])
        let motion = RichInput.motion(pad: 0, gyro: [-100, 200, -300], accel: [16384, -8192, 1])
        #expect(motion.datagram.count == 15)
        let ex = RichInput.touchpadEx(pad: 2, surface: 1, finger: 1, touch: true, click: false, x: -12345, y: 30000, pressure: 4000)
        #expect(ex.datagram.count == 12 && ex.datagram[5] == 1)
        for e in [touch, motion, ex] { #expect(RichInput(datagram: e.datagram) == e) }
        #expect(RichInput(datagram: [0xCC, 0x7F]) == nil)
        #expect(RichInput(datagram: [0xCC, 1, 0]) == nil)
        #expect(RichInput(datagram: [0xC8] + Array(repeating: 0, count: 17)) == nil)

        #expect(RichInput.touchpadCoordinates(x: -1, y: 1) == (0, 0))          // top-left
        #expect(RichInput.touchpadCoordinates(x: 1, y: -1) == (65535, 65535))  // bottom-right
        #expect(RichInput.touchpadCoordinates(x: 0, y: 0) == (32768, 32768))
        #expect(RichInput.touchpadCoordinates(x: 7, y: -.infinity) == (65535, 32768))
        #expect(RichInput.gyroUnits(degreesPerSecond: 100) == 2000)
        #expect(RichInput.gyroUnits(degreesPerSecond: 5000) == .max && RichInput.gyroUnits(degreesPerSecond: -5000) == .min)
        #expect(RichInput.accelUnits(g: 1) == 10000 && RichInput.accelUnits(g: -4) == .min && RichInput.accelUnits(g: .nan) == 0)
    }

    @Test func fractionalMotionAndScrollAccumulate() {
        var acc = PointerAccumulator()
        var total = (x: 0, y: 0)
        for _ in 0..<1000 {
            if case let .mouseMove(dx, dy)? = acc.move(dx: 0.3, dy: -0.7) { total.x += Int(dx); total.y += Int(dy) }
        }
        #expect(abs(total.x - 300) <= 1 && abs(total.y + 700) <= 1)
                var scroll = PointerAccumulator()
        do { let got = scroll.scroll(notches: 1); #expect(got == .scroll(120)) }
        do { let got = scroll.scroll(notches: 0.004); #expect(got == nil) }                 // 0.48 units: held back
        var units = 0
        for _ in 0..<100 { if case let .scroll(s)? = scroll.scroll(notches: 0.25) { units += Int(s) } }
        #expect(units == 3000)
        do { let got = scroll.scroll(notches: -3); #expect(got == .scroll(-359)) }   // the 0.48 units held back above are carried
        do { let got = scroll.scroll(notches: 1e12); #expect(got == .scroll(.max)) }       // saturates, forgets the rest
        do { let got = scroll.scroll(notches: 0); #expect(got == nil) }
        do { let got = scroll.scroll(notches: .nan); #expect(got == nil) }
    }

    struct KeyVectors: Decodable {
        struct Row: Decodable { let evdev: Int?, usage: Int?, keysym: UInt32?, name: String?, vk: UInt8? }
        let evdev: [Row], usb: [Row], keysym: [Row]
    }

    @Test func keyMapsAgreeWithTheVectorsBuiltFromTheSystemHeaders() throws {
        let v = try JSONDecoder().decode(KeyVectors.self, from: Data(try Fixtures.data("keymap-vectors.json")).dropFirstCommentKey())
        #expect(v.evdev.count == 256 && v.usb.count == 256 && v.keysym.count > 2000)
        for r in v.evdev where KeyMap.virtualKey(evdev: UInt16(r.evdev ?? 0)) != r.vk {
            Issue.record("evdev \(r.evdev ?? -1) \(r.name ?? "-"): vectors \(String(describing: r.vk)), KeyMap \(String(describing: KeyMap.virtualKey(evdev: UInt16(r.evdev ?? 0))))")
        }
        for r in v.usb where KeyMap.virtualKey(usbUsage: UInt16(r.usage ?? 0)) != r.vk {
            Issue.record("usage 0x\(String(r.usage ?? 0, radix: 16)) \(r.name ?? "-"): vectors \(String(describing: r.vk)), KeyMap \(String(describing: KeyMap.virtualKey(usbUsage: UInt16(r.usage ?? 0))))")
        }
        for r in v.keysym where KeyMap.virtualKey(keysym: r.keysym ?? 0) != r.vk {
            Issue.record("keysym 0x\(String(r.keysym ?? 0, radix: 16)) \(r.name ?? "-"): vectors \(String(describing: r.vk)), KeyMap \(String(describing: KeyMap.virtualKey(keysym: r.keysym ?? 0)))")
        }
    }
}
