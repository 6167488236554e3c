/// A game controller at the window (SDL's game-controller layout: a standard pad whatever the
/// make), as the window reports it in `ViewerInput.gamepad`.
public enum ViewerGamepadEvent: Sendable, Equatable {
    /// A controller was connected (or was there when the window opened). `id` stays the same for
    /// it until it is removed.
    case arrived(id: Int32, name: String, kind: ViewerGamepadKind)
    case removed(id: Int32)
    case button(id: Int32, ViewerGamepadButton, down: Bool)
    /// Sticks −32768…32767 (x right, y down, as SDL reports them); triggers 0…32767.
    case axis(id: Int32, ViewerGamepadAxis, value: Int16)
    /// A finger on the pad's touchpad: `x`, `y` 0…1 from the top-left; `down` false lifts it.
    case touch(id: Int32, finger: Int, down: Bool, x: Float, y: Float)
    /// A motion sensor's reading: the gyro in radians per second (pitch, yaw, roll), the
    /// accelerometer in metres per second squared (SDL's axes: x right, y up, z toward the player).
    case sensor(id: Int32, ViewerGamepadSensor, x: Float, y: Float, z: Float)
}

public enum ViewerGamepadSensor: Sendable, Equatable {
    case gyro, accelerometer
}

/// Feedback the protocol sends to a pad (`ViewerWindow.send(_:toPad:)`).
public enum ViewerPadFeedback: Sendable, Equatable {
    /// Amplitudes 0…65535 for the low- and high-frequency motors, for `milliseconds` (0/0 stops).
    case rumble(low: UInt16, high: UInt16, milliseconds: UInt32)
    /// The motors in the triggers (Xbox One impulse triggers), 0…65535.
    case triggerRumble(left: UInt16, right: UInt16, milliseconds: UInt32)
    /// The light bar's colour (a DualSense's or DualShock 4's).
    case light(red: UInt8, green: UInt8, blue: UInt8)
    /// The player indicator, five LEDs from left to right as bits 0…4 (a DualSense shows them
    /// exactly; other pads show the player number, one per lit LED).
    case playerLights(UInt8)
    /// A DualSense adaptive-trigger block for L2 (`right` false) or R2: the mode byte and its
    /// ten parameters, as the controller takes them.
    case triggerEffect(right: Bool, block: [UInt8])
}

/// What kind of pad it is (its face buttons' names, its feedback).
public enum ViewerGamepadKind: String, Sendable, Equatable {
    case xbox360, xboxOne, dualShock4, dualSense, nintendo, other
}

/// SDL's standard buttons, in its numbering.
public enum ViewerGamepadButton: Int, Sendable, Equatable, CaseIterable {
    case a, b, x, y, back, guide, start, leftStick, rightStick, leftShoulder, rightShoulder
    case dpadUp, dpadDown, dpadLeft, dpadRight, misc, paddle1, paddle2, paddle3, paddle4, touchpad
}

/// SDL's standard axes, in its numbering.
public enum ViewerGamepadAxis: Int, Sendable, Equatable, CaseIterable {
    case leftX, leftY, rightX, rightY, leftTrigger, rightTrigger
}
