import Testing
@testable import Punktfunk

@Suite struct PadForwarderTests {
    func decoded(_ datagrams: [[UInt8]]) -> [InputEvent] { datagrams.compactMap { InputEvent(datagram: $0) } }

    @Test func singleEventsGoAsTheyAreTowardAHostWithoutWholeStates() {
        var pad = PadForwarder(sendsWholeState: false)
        #expect(decoded(pad.datagrams(for: .arrival(type: 2))) == [.gamepadArrival(pad: 0, type: 2)])
        #expect(decoded(pad.datagrams(for: .button(.b, pressed: true))) == [.gamepadButton(pad: 0, button: .b, pressed: true)])
        #expect(decoded(pad.datagrams(for: .axis(.rightStickY, -5))) == [.gamepadAxis(pad: 0, axis: .rightStickY, value: -5)])
    }

    @Test func wholeStatesCarryEverythingHeldWithASequenceThatWrapsAndSkipNonChanges() {
        var pad = PadForwarder(pad: 1, sendsWholeState: true)
        _ = pad.datagrams(for: .arrival(type: 1))
        #expect(decoded(pad.datagrams(for: .button(.x, pressed: true))) == [.gamepadState(GamepadState(pad: 1, sequence: 1, buttons: .x))])
        // Pressing what is already held changes nothing the host sees: nothing is sent.
        #expect(pad.datagrams(for: .button(.x, pressed: true)).isEmpty)
        var last: InputEvent?
        for i in 0..<300 { last = decoded(pad.datagrams(for: .axis(.leftTrigger, Int32(i % 2 == 0 ? 200 : 100)))).last }
        // 1 + 300 changes: the sequence wrapped (301 mod 256 = 45), the button still held.
        #expect(last == .gamepadState(GamepadState(pad: 1, sequence: 45, buttons: .x, leftTrigger: 100)))
        // Removal moves the sequence on, so a late state from before it loses to what follows.
        #expect(decoded(pad.datagrams(for: .removal)) == [.gamepadRemove(pad: 1, sequence: 46)])
        _ = pad.datagrams(for: .arrival(type: 1))
        #expect(decoded(pad.datagrams(for: .button(.a, pressed: true))) == [.gamepadState(GamepadState(pad: 1, sequence: 47, buttons: .a))])
    }

    @Test func motionGoesOnTheGyrosBeatWithTheNewestAccelerationAndTouchIsScaledAndClamped() {
        var pad = PadForwarder(sendsWholeState: true)
        // Before any gyro reading, acceleration goes by itself (a pad with only an accelerometer).
        #expect(pad.datagrams(for: .accelerometer(x: 0, y: -PadForwarder.standardGravity, z: 0)).compactMap(RichInput.init(datagram:))
                == [.motion(pad: 0, gyro: [0, 0, 0], accel: [0, -10000, 0])])
        #expect(pad.datagrams(for: .gyro(x: .pi, y: 0, z: 0)).compactMap(RichInput.init(datagram:))
                == [.motion(pad: 0, gyro: [3600, 0, 0], accel: [0, -10000, 0])])
        // Once there is a gyro, acceleration waits for its next reading.
        #expect(pad.datagrams(for: .accelerometer(x: 1, y: 1, z: 1)).isEmpty)
        // Beyond the wire's range: saturated, not wrapped.
        #expect(pad.datagrams(for: .gyro(x: 100, y: -100, z: .nan)).compactMap(RichInput.init(datagram:))
                == [.motion(pad: 0, gyro: [.max, .min, 0], accel: [1020, 1020, 1020])])
        #expect(pad.datagrams(for: .touch(finger: 1, active: true, x: -0.5, y: 2)).compactMap(RichInput.init(datagram:))
                == [.touchpad(pad: 0, finger: 1, active: true, x: 0, y: 65535)])
    }
}
