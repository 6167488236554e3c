#if canImport(CSDL2)
import CSDL2
import Foundation

/// The game-controller part of a window (`ViewerConfiguration.gamepads`): SDL's game-controller
/// subsystem, each pad opened as it arrives and reported as `ViewerInput.gamepad`, force
/// feedback played on the pad it is for. Lives on the window thread.
///
/// `FARCAST_VIRTUAL_GAMEPAD=FILE` attaches an SDL virtual controller that plays FILE's script
/// (lines `MS button NAME down|up` or `MS axis NAME VALUE`, milliseconds after it attaches) and
/// appends the feedback it receives to FILE.feedback (`rumble LOW HIGH`, `led R G B`): the
/// stand-in for a physical pad in the tests — these machines have no input devices and no uinput.
final class WindowGamepads {
    private let sink: (ViewerInput) -> Void
    /// Open controllers by SDL instance id.
    private var open: [Int32: OpaquePointer] = [:]
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
        for (_, controller) in open { SDL_GameControllerClose(controller) }
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
            open[id] = controller
            let name = SDL_GameControllerName(controller).map { String(cString: $0) } ?? "controller"
            sink(.gamepad(.arrived(id: id, name: name, kind: Self.kind(SDL_GameControllerGetType(controller)))))
        case SDL_CONTROLLERDEVICEREMOVED.rawValue:
            let id = event.cdevice.which
            if let controller = open.removeValue(forKey: id) { SDL_GameControllerClose(controller) }
            sink(.gamepad(.removed(id: id)))
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

    /// Force feedback for the pad `id` (amplitudes 0…65535; 0/0 stops).
    func rumble(id: Int32, low: UInt16, high: UInt16, milliseconds: UInt32) {
        guard let controller = open[id] else { return }
        SDL_GameControllerRumble(controller, low, high, milliseconds)
    }

    /// The light bar's colour on the pad `id` (a DualSense's; pads without one ignore it).
    func setLight(id: Int32, red: UInt8, green: UInt8, blue: UInt8) {
        guard let controller = open[id] else { return }
        SDL_GameControllerSetLED(controller, red, green, blue)
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
/// with the standard buttons and axes, driven by a script.
final class VirtualPad {
    private var joystick: OpaquePointer?
    private var steps: [(at: Double, apply: (OpaquePointer) -> Void)] = []
    private var started: Double?
    /// Keeps the feedback file's path alive for the C callbacks (passed as their userdata).
    private let feedbackLog: UnsafeMutablePointer<CChar>

    init?(scriptPath: String) {
        feedbackLog = strdup(scriptPath + ".feedback")
        guard let text = try? String(contentsOfFile: scriptPath, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let f = line.split(separator: " ").map(String.init)
            guard f.count >= 3, let ms = Double(f[0]) else { continue }
            if f[1] == "button", f.count == 4, let b = ViewerGamepadButton.allCases.first(where: { "\($0)" == f[2] }) {
                let down: UInt8 = f[3] == "down" ? 1 : 0
                steps.append((ms / 1000, { SDL_JoystickSetVirtualButton($0, Int32(b.rawValue), down) }))
            } else if f[1] == "axis", f.count == 4, let a = ViewerGamepadAxis.allCases.first(where: { "\($0)" == f[2] }), let v = Int16(f[3]) {
                steps.append((ms / 1000, { SDL_JoystickSetVirtualAxis($0, Int32(a.rawValue), v) }))
            }
        }
        var desc = SDL_VirtualJoystickDesc()
        desc.version = UInt16(SDL_VIRTUAL_JOYSTICK_DESC_VERSION)
        desc.type = UInt16(SDL_JOYSTICK_TYPE_GAMECONTROLLER.rawValue)
        desc.naxes = UInt16(ViewerGamepadAxis.allCases.count)
        desc.nbuttons = UInt16(ViewerGamepadButton.allCases.count)
        desc.vendor_id = 0x045E   // shown as an Xbox 360 pad
        desc.product_id = 0x028E
        desc.userdata = UnsafeMutableRawPointer(feedbackLog)
        desc.Rumble = { userdata, low, high in VirtualPad.log(userdata, "rumble \(low) \(high)") }
        desc.SetLED = { userdata, red, green, blue in VirtualPad.log(userdata, "led \(red) \(green) \(blue)") }
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
