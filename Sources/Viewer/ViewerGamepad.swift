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
