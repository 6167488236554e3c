/// One game controller forwarded to the host as its pad `pad`: what the controller reports, in
/// the units a controller API gives them, turned into the datagrams the host takes.
///
/// Buttons and axes go as single events (0xC8 kinds 7 and 8) or, toward a host that accepts them
/// (Welcome host_caps 0x01), as the pad's whole state with a wrapping sequence number (kind 12),
/// so a lost or reordered datagram is repaired by the next one instead of leaving a button held.
/// Touchpad contacts and motion sensors go as rich input (0xCC).
public struct PadForwarder: Sendable {
    /// What the controller reported. Sticks have +y up (as XInput has them), triggers are
    /// 0…255, touchpad positions 0…1 from the top-left, gyro in radians per second and the
    /// accelerometer in metres per second squared (SDL's and GameController's units).
    public enum Report: Sendable, Equatable {
        case arrival(type: UInt32)
        case removal
        case button(GamepadButtons, pressed: Bool)
        case axis(GamepadAxis, Int32)
        case touch(finger: UInt8, active: Bool, x: Double, y: Double)
        case gyro(x: Double, y: Double, z: Double)
        case accelerometer(x: Double, y: Double, z: Double)
    }

    public let pad: UInt8
    /// Whole states instead of single button and axis events.
    public let sendsWholeState: Bool
    private var state: GamepadState
    private var accel: [Int16] = [0, 0, 0]
    private var sawGyro = false

    public init(pad: UInt8 = 0, sendsWholeState: Bool) {
        self.pad = pad
        self.sendsWholeState = sendsWholeState
        state = GamepadState(pad: pad)
    }

    /// Host capability bit: the host takes `gamepadState` events.
    public static let wholeStateCapability: UInt8 = 0x01

    /// The datagrams that carry `report` to the host (none when nothing changed that the host sees).
    public mutating func datagrams(for report: Report) -> [[UInt8]] {
        switch report {
        case .arrival(let type):
            state = GamepadState(pad: pad, sequence: state.sequence)
            return [InputEvent.gamepadArrival(pad: pad, type: type).datagram]
        case .removal:
            state = GamepadState(pad: pad, sequence: state.sequence &+ 1)
            return [InputEvent.gamepadRemove(pad: pad, sequence: state.sequence).datagram]
        case .button(let button, let pressed):
            return change(.gamepadButton(pad: pad, button: button, pressed: pressed))
        case .axis(let axis, let value):
            return change(.gamepadAxis(pad: pad, axis: axis, value: value))
        case .touch(let finger, let active, let x, let y):
            func wire(_ v: Double) -> UInt16 { v.isFinite ? UInt16((min(1, max(0, v)) * 65535).rounded()) : 32768 }
            return [RichInput.touchpad(pad: pad, finger: finger, active: active, x: wire(x), y: wire(y)).datagram]
        case .accelerometer(let x, let y, let z):
            accel = [x, y, z].map { RichInput.accelUnits(g: $0 / Self.standardGravity) }
            // A pad with a gyro sends on the gyro's beat (the newest acceleration rides along).
            return sawGyro ? [] : [RichInput.motion(pad: pad, gyro: [0, 0, 0], accel: accel).datagram]
        case .gyro(let x, let y, let z):
            sawGyro = true
            let gyro = [x, y, z].map { RichInput.gyroUnits(degreesPerSecond: $0 * 180 / .pi) }
            return [RichInput.motion(pad: pad, gyro: gyro, accel: accel).datagram]
        }
    }

    /// m/s² in one g.
    public static let standardGravity = 9.80665

    private mutating func change(_ event: InputEvent) -> [[UInt8]] {
        guard sendsWholeState else { return [event.datagram] }
        var next = state
        next.apply(event)
        guard next != state else { return [] }
        next.sequence = state.sequence &+ 1
        state = next
        return [InputEvent.gamepadState(state).datagram]
    }
}
