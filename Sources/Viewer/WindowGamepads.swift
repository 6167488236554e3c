#if canImport(CSDL2)
import CSDL2
import Foundation

/// The game-controller part of a window (`ViewerConfiguration.gamepads`): SDL's game-controller
/// subsystem, each pad opened as it arrives and reported as `ViewerInput.gamepad`, force
/// feedback played on the pad it is for. Lives on the window thread.
///
/// `FARCAST_VIRTUAL_GAMEPAD=FILE` attaches an SDL virtual controller that plays FILE's script
/// and appends the feedback it receives to FILE.feedback: the stand-in for a physical pad in the
/// tests — these machines have no input devices and no uinput. See `VirtualPad`.
final class WindowGamepads {
    private let sink: (ViewerInput) -> Void
    /// Open controllers by SDL instance id, with what kind of pad each is.
    private var open: [Int32: (controller: OpaquePointer, kind: ViewerGamepadKind)] = [:]
    private var virtualPad: VirtualPad?
    let available: Bool

    init(sink: @escaping (ViewerInput) -> Void) {
        self.sink = sink
        available = SDL_InitSubSystem(SDL_INIT_GAMECONTROLLER) == 0
        if !available {
            FileHandle.standardError.write(Data("farcast: game controllers are not available: \(String(cString: SDL_GetError()))\n".utf8))
        }
        if available, let script = ProcessInfo.processInfo.environment["FARCAST_VIRTUAL_GAMEPAD"] {
            virtualPad = VirtualPad(scriptPath: script)
        }
    }

    func shutdown() {
        for (_, pad) in open { SDL_GameControllerClose(pad.controller) }
        open = [:]
        virtualPad?.detach()
        if available { SDL_QuitSubSystem(SDL_INIT_GAMECONTROLLER) }
    }

    /// Takes the event if it is a controller's; false otherwise.
    func handle(_ event: SDL_Event) -> Bool {
        switch event.type {
        case SDL_CONTROLLERDEVICEADDED.rawValue:
            guard let controller = SDL_GameControllerOpen(event.cdevice.which) else { return true }
            let id = SDL_JoystickInstanceID(SDL_GameControllerGetJoystick(controller))
            guard open[id] == nil else { SDL_GameControllerClose(controller); return true }
            let kind = Self.kind(SDL_GameControllerGetType(controller))
            open[id] = (controller, kind)
            // Motion sensors report only once switched on.
            for sensor in [SDL_SENSOR_GYRO, SDL_SENSOR_ACCEL] where SDL_GameControllerHasSensor(controller, sensor) == SDL_TRUE {
                SDL_GameControllerSetSensorEnabled(controller, sensor, SDL_TRUE)
            }
            let name = SDL_GameControllerName(controller).map { String(cString: $0) } ?? "controller"
            sink(.gamepad(.arrived(id: id, name: name, kind: kind)))
        case SDL_CONTROLLERDEVICEREMOVED.rawValue:
            let id = event.cdevice.which
            if let pad = open.removeValue(forKey: id) { SDL_GameControllerClose(pad.controller) }
            sink(.gamepad(.removed(id: id)))
        case SDL_CONTROLLERTOUCHPADDOWN.rawValue, SDL_CONTROLLERTOUCHPADMOTION.rawValue, SDL_CONTROLLERTOUCHPADUP.rawValue:
            let t = event.ctouchpad
            // The first touchpad (a DualSense or DualShock 4 has one).
            guard t.touchpad == 0 else { return true }
            sink(.gamepad(.touch(id: t.which, finger: Int(t.finger), down: event.type != SDL_CONTROLLERTOUCHPADUP.rawValue, x: t.x, y: t.y)))
        case SDL_CONTROLLERSENSORUPDATE.rawValue:
            let s = event.csensor
            let sensor: ViewerGamepadSensor
            switch s.sensor {
            case SDL_SENSOR_GYRO.rawValue: sensor = .gyro
            case SDL_SENSOR_ACCEL.rawValue: sensor = .accelerometer
            default: return true
            }
            sink(.gamepad(.sensor(id: s.which, sensor, x: s.data.0, y: s.data.1, z: s.data.2)))
        case SDL_CONTROLLERBUTTONDOWN.rawValue, SDL_CONTROLLERBUTTONUP.rawValue:
            guard let button = ViewerGamepadButton(rawValue: Int(event.cbutton.button)) else { return true }
            sink(.gamepad(.button(id: event.cbutton.which, button, down: event.type == SDL_CONTROLLERBUTTONDOWN.rawValue)))
        case SDL_CONTROLLERAXISMOTION.rawValue:
            guard let axis = ViewerGamepadAxis(rawValue: Int(event.caxis.axis)) else { return true }
            sink(.gamepad(.axis(id: event.caxis.which, axis, value: event.caxis.value)))
        case SDL_JOYDEVICEADDED.rawValue, SDL_JOYDEVICEREMOVED.rawValue, SDL_JOYAXISMOTION.rawValue, SDL_JOYBUTTONDOWN.rawValue,
             SDL_JOYBUTTONUP.rawValue, SDL_JOYHATMOTION.rawValue, SDL_CONTROLLERDEVICEREMAPPED.rawValue:
            // The raw joystick beneath a controller: reported through the controller's events.
            return true
        default:
            return false
        }
        return true
    }

    /// Feedback from the protocol for the pad `id`.
    func apply(_ feedback: ViewerPadFeedback, toPad id: Int32) {
        guard let (controller, kind) = open[id] else { return }
        switch feedback {
        case let .rumble(low, high, ms):
            SDL_GameControllerRumble(controller, low, high, ms)
        case let .triggerRumble(left, right, ms):
            SDL_GameControllerRumbleTriggers(controller, left, right, ms)
        case let .light(red, green, blue):
            SDL_GameControllerSetLED(controller, red, green, blue)
        case .playerLights(let bits):
            if kind == .dualSense {
                var effect = DualSenseEffect()
                effect.playerLights(bits)
                effect.send(to: controller)
            } else {
                // Other pads show a player number; the host's lights count the player.
                SDL_GameControllerSetPlayerIndex(controller, Int32(max(1, (bits & 0x1F).nonzeroBitCount)) - 1)
            }
        case let .triggerEffect(right, block):
            guard kind == .dualSense else { return }
            var effect = DualSenseEffect()
            effect.trigger(right: right, block)
            effect.send(to: controller)
        }
    }

    /// The virtual pad's script, if one runs: the next step's time (window clock), for the loop's wait.
    func advance(now: Double) -> Double? { virtualPad?.advance(now: now) }

    private static func kind(_ type: SDL_GameControllerType) -> ViewerGamepadKind {
        switch type {
        case SDL_CONTROLLER_TYPE_XBOX360: .xbox360
        case SDL_CONTROLLER_TYPE_XBOXONE: .xboxOne
        case SDL_CONTROLLER_TYPE_PS4: .dualShock4
        case SDL_CONTROLLER_TYPE_PS5: .dualSense
        case SDL_CONTROLLER_TYPE_NINTENDO_SWITCH_PRO: .nintendo
        default: .other
        }
    }
}

/// The tests' stand-in for a physical pad (see `WindowGamepads`): an SDL virtual controller
/// with the standard buttons and axes, driven by a script of lines, each MS milliseconds after
/// it attaches:
///
///     type xbox360|dualsense          (first; the USB ids SDL reads the pad's type from)
///     MS button NAME down|up          (ViewerGamepadButton names)
///     MS axis NAME VALUE              (ViewerGamepadAxis names, SDL's range)
///     MS touch FINGER down|move|up X Y  (0…1 from the top-left)
///     MS gyro X Y Z                   (rad/s)   MS accel X Y Z   (m/s²)
///
/// SDL 2's virtual controllers have no touchpad or sensors, so touch and motion lines post the
/// controller events SDL would post for a real pad's (the path from there on is a real pad's).
/// The feedback SDL delivers to the pad is appended to FILE.feedback: `rumble LOW HIGH`,
/// `triggers LEFT RIGHT`, `led R G B`, `player N`, `effect HEX` (a DualSense effect block).
final class VirtualPad {
    private var joystick: OpaquePointer?
    private var steps: [(at: Double, apply: (OpaquePointer) -> Void)] = []
    private var started: Double?
    /// Keeps the feedback file's path alive for the C callbacks (passed as their userdata).
    private let feedbackLog: UnsafeMutablePointer<CChar>

    init?(scriptPath: String) {
        feedbackLog = strdup(scriptPath + ".feedback")
        guard let text = try? String(contentsOfFile: scriptPath, encoding: .utf8) else { return nil }
        var dualSense = false
        for line in text.split(separator: "\n") {
            let f = line.split(separator: " ").map(String.init)
            if f.count == 2, f[0] == "type" { dualSense = f[1] == "dualsense"; continue }
            guard f.count >= 3, let ms = Double(f[0]) else { continue }
            let at = ms / 1000
            switch f[1] {
            case "button" where f.count == 4:
                guard let b = ViewerGamepadButton.allCases.first(where: { "\($0)" == f[2] }) else { continue }
                let down: UInt8 = f[3] == "down" ? 1 : 0
                steps.append((at, { SDL_JoystickSetVirtualButton($0, Int32(b.rawValue), down) }))
            case "axis" where f.count == 4:
                guard let a = ViewerGamepadAxis.allCases.first(where: { "\($0)" == f[2] }), let v = Int16(f[3]) else { continue }
                steps.append((at, { SDL_JoystickSetVirtualAxis($0, Int32(a.rawValue), v) }))
            case "touch" where f.count == 6:
                guard let finger = Int32(f[2]), let x = Float(f[4]), let y = Float(f[5]) else { continue }
                let type = f[3] == "down" ? SDL_CONTROLLERTOUCHPADDOWN : f[3] == "up" ? SDL_CONTROLLERTOUCHPADUP : SDL_CONTROLLERTOUCHPADMOTION
                steps.append((at, { joystick in
                    var event = SDL_Event()
                    event.ctouchpad = SDL_ControllerTouchpadEvent(type: type.rawValue, timestamp: SDL_GetTicks(), which: SDL_JoystickInstanceID(joystick),
                                                                  touchpad: 0, finger: finger, x: x, y: y, pressure: 1)
                    SDL_PushEvent(&event)
                }))
            case "gyro" where f.count == 5, "accel" where f.count == 5:
                guard let x = Float(f[2]), let y = Float(f[3]), let z = Float(f[4]) else { continue }
                let sensor = f[1] == "gyro" ? SDL_SENSOR_GYRO : SDL_SENSOR_ACCEL
                steps.append((at, { joystick in
                    var event = SDL_Event()
                    event.csensor = SDL_ControllerSensorEvent(type: SDL_CONTROLLERSENSORUPDATE.rawValue, timestamp: SDL_GetTicks(),
                                                              which: SDL_JoystickInstanceID(joystick), sensor: sensor.rawValue,
                                                              data: (x, y, z), timestamp_us: 0)
                    SDL_PushEvent(&event)
                }))
            default:
                continue
            }
        }
        var desc = SDL_VirtualJoystickDesc()
        desc.version = UInt16(SDL_VIRTUAL_JOYSTICK_DESC_VERSION)
        desc.type = UInt16(SDL_JOYSTICK_TYPE_GAMECONTROLLER.rawValue)
        desc.naxes = UInt16(ViewerGamepadAxis.allCases.count)
        desc.nbuttons = UInt16(ViewerGamepadButton.allCases.count)
        // Sony's DualSense, or Microsoft's Xbox 360 pad.
        (desc.vendor_id, desc.product_id) = dualSense ? (0x054C, 0x0CE6) : (0x045E, 0x028E)
        desc.userdata = UnsafeMutableRawPointer(feedbackLog)
        desc.Rumble = { userdata, low, high in VirtualPad.log(userdata, "rumble \(low) \(high)") }
        desc.RumbleTriggers = { userdata, left, right in VirtualPad.log(userdata, "triggers \(left) \(right)") }
        desc.SetLED = { userdata, red, green, blue in VirtualPad.log(userdata, "led \(red) \(green) \(blue)") }
        desc.SetPlayerIndex = { userdata, index in _ = VirtualPad.log(userdata, "player \(index)") }
        desc.SendEffect = { userdata, data, size in
            guard let data, size > 0 else { return -1 }
            let bytes = UnsafeRawBufferPointer(start: data, count: Int(size))
            return VirtualPad.log(userdata, "effect " + bytes.map { String(format: "%02x", $0) }.joined())
        }
        let index = "farcast virtual pad".withCString { name -> Int32 in
            desc.name = name
            return SDL_JoystickAttachVirtualEx(&desc)
        }
        guard index >= 0, let opened = SDL_JoystickOpen(index) else {
            FileHandle.standardError.write(Data("farcast: the virtual pad did not attach: \(String(cString: SDL_GetError()))\n".utf8))
            return nil
        }
        joystick = opened
    }

    private static func log(_ userdata: UnsafeMutableRawPointer?, _ line: String) -> Int32 {
        guard let path = userdata?.assumingMemoryBound(to: CChar.self), let file = fopen(path, "a") else { return -1 }
        fputs(line + "\n", file)
        fclose(file)
        return 0
    }

    func advance(now: Double) -> Double? {
        guard let joystick else { return nil }
        let start = started ?? now
        started = start
        while let first = steps.first, start + first.at <= now {
            first.apply(joystick)
            steps.removeFirst()
        }
        return steps.first.map { start + $0.at }
    }

    func detach() {
        if let joystick { SDL_JoystickClose(joystick) }
        joystick = nil
        free(feedbackLog)
    }
}
#endif
