#if canImport(CSDL2)
import CSDL2
import CSDL2Loader
import ViewerKernels
import Foundation

extension ViewerWindow {
    func pushWakeEvent(_ type: UInt32) {
        var event = SDL_Event()
        event.type = type
        SDL_PushEvent(&event)
    }

    /// Opens the window and runs it on the calling thread until it is closed (by the person, by
    /// `close()`, or by a Disconnect from the menu); `onOpen` runs once it is on screen.
    func run(onOpen: () -> Void) throws {
        let loop = try WindowLoop(owner: self)
        defer { loop.shutdown() }
        onOpen()
        loop.run()
    }
}

/// The window thread's state. Lives and dies on that thread; SDL is only called from here.
final class WindowLoop {
    private unowned let owner: ViewerWindow
    private let window: OpaquePointer
    private let renderer: OpaquePointer
    private let rendererName: String
    private var texture: OpaquePointer?
    private var textureGeneration = -1
    private var remoteWidth = 0
    private var remoteHeight = 0
    private var screens: [ViewerRect] = []
    private var settings: ViewerMenu.Settings
    private var menu = ViewerMenu()
    private var menuOpen = false
    private var pan = (x: 0, y: 0)
    /// Keys sent down, by SDL scancode, so each release names the key its press named.
    private var heldKeys: [Int32: (key: ViewerKey, usage: UInt16?)] = [:]
    private var buttons: UInt16 = 0
    private var wheel = WheelAccumulator()
    private var lastPointer: (x: Int, y: Int)?
    private var pendingMotion: (x: Int, y: Int)?
    private var lastLocalClipboard: String?
    private var nextClipboardPoll = 0.0
    private var focused = false
    private var status: ViewerStatus = .connecting("")
    /// The whole window must be drawn again (size, overlays, exposure, settings).
    private var needsRedraw = true
    /// Parts of the picture (remote coordinates) uploaded since the last present.
    private var damage: [ViewerRect] = []
    /// The renderer draws into the window's own surface (SDL's software renderer), so a present
    /// can send only the changed rectangles to the display instead of the whole window.
    private var presentsPartially = false
    private var partialFrames = 0
    /// Window rectangles already written into the window surface straight from the stage
    /// (software renderer, 1:1, no overlay), to be sent to the display by the next present.
    private var drawnDirectly: [SDL_Rect] = []
    /// Remote rectangles written to the window surface but not to the texture: the texture is
    /// brought up to date from the stage before it is next drawn.
    private var staleInTexture: [ViewerRect] = []
    private var stats = PresentationStats()
    private var hudLines: [String] = []
    private var nextHUDRefresh = 0.0
    private let text: TextOverlay?
    private var sdlCursor: OpaquePointer?
    private var pendingRemoteResize: (due: Double, width: Int, height: Int)?
    private var lastRequestedRemoteSize: (width: Int, height: Int)?
    private var running = true
    /// A question the protocol side asked (`ViewerWindow.ask`), shown over the picture until
    /// answered; keys go to it, not to the remote side.
    private var question: (prompt: String, secret: Bool, answer: CheckedContinuation<String?, Never>, typed: String)?
    /// SDL's relative mouse mode is on (the setting, unless the menu or a question needs the pointer).
    private var relativeActive = false
    /// Relative motion not yet sent, in remote pixels.
    private var pendingDelta = (x: 0.0, y: 0.0)
    /// The remote cursor as it came, and the factor it is shown at (the picture's scale).
    private var cursorImage: ViewerCursor = .dot
    private var cursorScale = 1.0

    init(owner: ViewerWindow) throws {
        self.owner = owner
        let c = owner.configuration
        // SDL is opened here, when a window is wanted, not linked into every command.
        if let problem = farcast_sdl_load() { throw ViewerError.libraryMissing(String(cString: problem)) }
        Self.useUTF8Characters()
        SDL_SetHint(SDL_HINT_VIDEO_X11_NET_WM_BYPASS_COMPOSITOR, "0")
        // No SDL signal handlers: the command handles SIGINT/SIGTERM itself.
        SDL_SetHint(SDL_HINT_NO_SIGNAL_HANDLERS, "1")
        guard SDL_Init(SDL_INIT_VIDEO) == 0 else { throw ViewerError.noDisplay(String(cString: SDL_GetError())) }
        // SDL falls back to drivers that show nothing (offscreen, dummy, KMS/DRM without a
        // seat): without a display a person could see, that is an error, not a window.
        let driver = SDL_GetCurrentVideoDriver().map { String(cString: $0) } ?? "none"
        if !["x11", "wayland", "cocoa", "uikit"].contains(driver) && ProcessInfo.processInfo.environment["SDL_VIDEODRIVER"] == nil {
            SDL_Quit()
            let environment = ProcessInfo.processInfo.environment
            let seen = ["DISPLAY", "WAYLAND_DISPLAY"].map { name in environment[name].map { "\(name)=\($0)" } ?? "\(name) unset" }
            throw ViewerError.noDisplay("no X11 or Wayland display SDL could open (\(seen.joined(separator: ", ")); "
                                        + "SDL fell back to its '\(driver)' driver)")
        }
        let flags = SDL_WINDOW_RESIZABLE.rawValue | SDL_WINDOW_ALLOW_HIGHDPI.rawValue | (c.fullscreen ? SDL_WINDOW_FULLSCREEN_DESKTOP.rawValue : 0)
        guard let window = SDL_CreateWindow(c.title, csdl_windowpos_centered(), csdl_windowpos_centered(), 800, 600, flags) else {
            let message = String(cString: SDL_GetError())
            SDL_Quit()
            throw ViewerError.sdl("creating the window: \(message)")
        }
        self.window = window
        // Accelerated when there is a GPU, software otherwise (SDL_RENDER_DRIVER chooses). OpenGL
        // on a software rasterizer (Mesa's llvmpipe, what a machine without a GPU driver gets)
        // composites the whole window on the CPU for every present: SDL's software renderer,
        // which puts the picture straight into the window (XShm, wl_shm), costs a fraction —
        // measured by `scripts/bench viewer`: 2–4.6× TigerVNC's CPU per frame on llvmpipe,
        // about 1× this way.
        // X11 only: SDL's Wayland backend has no window surface of its own (it draws that through
        // OpenGL too).
        var renderer = SDL_CreateRenderer(window, -1, SDL_RENDERER_ACCELERATED.rawValue | SDL_RENDERER_PRESENTVSYNC.rawValue)
        if let accelerated = renderer, driver == "x11", ProcessInfo.processInfo.environment["SDL_RENDER_DRIVER"] == nil,
           Self.rasterizesOnTheCPU(accelerated) {
            SDL_DestroyRenderer(accelerated)
            // The window surface goes to the X server directly (XShm), not through a texture.
            SDL_SetHint(SDL_HINT_FRAMEBUFFER_ACCELERATION, "0")
            renderer = SDL_CreateRenderer(window, -1, SDL_RENDERER_SOFTWARE.rawValue)
                ?? SDL_CreateRenderer(window, -1, SDL_RENDERER_ACCELERATED.rawValue | SDL_RENDERER_PRESENTVSYNC.rawValue)
        }
        renderer = renderer ?? SDL_CreateRenderer(window, -1, SDL_RENDERER_SOFTWARE.rawValue)
        guard let renderer else {
            let message = String(cString: SDL_GetError())
            SDL_DestroyWindow(window)
            SDL_Quit()
            throw ViewerError.sdl("creating a renderer: \(message)")
        }
        self.renderer = renderer
        var info = SDL_RendererInfo()
        SDL_GetRendererInfo(renderer, &info)
        rendererName = info.name.map { String(cString: $0) } ?? "unknown"
        presentsPartially = rendererName == "software"
        settings = ViewerMenu.Settings(fullscreen: c.fullscreen, viewOnly: c.viewOnly, viewOnlyLocked: c.viewOnlyLocked, scale: c.scale,
                                       monitor: c.monitor, monitorCount: 1, clipboardSync: c.clipboardSync, keyboardGrab: c.grabKeyboard, hud: c.showHUD,
                                       relativePointer: c.relativePointer)
        text = TextOverlay(path: c.fontPath, size: 14)
        if text == nil { FileHandle.standardError.write(Data("farcast: no font for the window's overlays (install fonts-dejavu-core); the menu and statistics are not drawn\n".utf8)) }
        if c.grabKeyboard { SDL_SetWindowKeyboardGrab(window, SDL_TRUE) }
        SDL_StartTextInput()
        setCursor(.dot)
        let type = SDL_RegisterEvents(1)
        owner.shared.withLock { [rendererName] in $0.statistics.renderer = rendererName }
        owner.wakeEventType.store(type == UInt32.max ? 0 : type, ordering: .releasing)
    }

    /// True when an OpenGL renderer runs on a software rasterizer (llvmpipe, softpipe, swrast):
    /// its GL_RENDERER string says so.
    private static func rasterizesOnTheCPU(_ renderer: OpaquePointer) -> Bool {
        var info = SDL_RendererInfo()
        guard SDL_GetRendererInfo(renderer, &info) == 0, let name = info.name.map({ String(cString: $0) }), name.hasPrefix("opengl"),
              let address = SDL_GL_GetProcAddress("glGetString") else { return false }
        typealias GetString = @convention(c) (UInt32) -> UnsafePointer<UInt8>?
        let glGetString = unsafeBitCast(address, to: GetString.self)
        guard let text = glGetString(0x1F01) else { return false }   // GL_RENDERER
        let description = String(cString: text).lowercased()
        return ["llvmpipe", "softpipe", "software rasterizer", "swrast"].contains { description.contains($0) }
    }

    /// Swift programs start in the C locale, where Xlib cannot convert a title with any
    /// character beyond ASCII: SDL then leaves _NET_WM_NAME (what window managers show) at the
    /// first title. The character type comes from the environment instead, or C.UTF-8.
    private static func useUTF8Characters() {
        guard let current = setlocale(LC_CTYPE, nil).map({ String(cString: $0) }), current == "C" || current == "POSIX" else { return }
        if let chosen = setlocale(LC_CTYPE, ""), String(cString: chosen).uppercased().replacingOccurrences(of: "-", with: "").contains("UTF8") { return }
        if setlocale(LC_CTYPE, "C.UTF-8") == nil { setlocale(LC_CTYPE, "C") }
    }

    func shutdown() {
        releaseEverything()
        question?.answer.resume(returning: nil)
        question = nil
        if relativeActive { SDL_SetRelativeMouseMode(SDL_FALSE) }
        owner.inputSink.yield(.closed)
        owner.inputSink.finish()
        owner.wakeEventType.store(0, ordering: .releasing)
        text?.flush()
        if let texture { SDL_DestroyTexture(texture) }
        if let sdlCursor { SDL_FreeCursor(sdlCursor) }
        SDL_DestroyRenderer(renderer)
        SDL_DestroyWindow(window)
        SDL_Quit()
    }

    // MARK: - The loop

    func run() {
        var event = SDL_Event()
        while running {
            let timeout = waitTimeout()
            if SDL_WaitEventTimeout(&event, timeout) != 0 {
                handle(event)
                while running && SDL_PollEvent(&event) != 0 { handle(event) }
            }
            flushMotion()
            owner.wakePending.store(false, ordering: .releasing)
            guard running else { break }
            takeShared()
            updatePointerMode()
            let now = ViewerWindow.now()
            if let pending = pendingRemoteResize, now >= pending.due {
                pendingRemoteResize = nil
                requestRemoteSize(width: pending.width, height: pending.height)
            }
            if settings.clipboardSync && focused && now >= nextClipboardPoll { pollClipboard(now) }
            let latencyStart = upload()
            if settings.hud && now >= nextHUDRefresh { refreshHUD(now); needsRedraw = true }
            if needsRedraw || !damage.isEmpty || !drawnDirectly.isEmpty { present(latencyStart: latencyStart) }
        }
    }

    /// Sleeps until an event, but wakes for timed work (a pending resize, the HUD, the clipboard).
    private func waitTimeout() -> Int32 {
        let now = ViewerWindow.now()
        var due = now + 1
        if let pending = pendingRemoteResize { due = min(due, pending.due) }
        if settings.hud { due = min(due, nextHUDRefresh) }
        if settings.clipboardSync && focused { due = min(due, nextClipboardPoll) }
        return Int32(max(1, min(1000, (due - now) * 1000)))
    }

    private func handle(_ event: SDL_Event) {
        switch event.type {
        case SDL_QUIT.rawValue:
            running = false
        case SDL_WINDOWEVENT.rawValue:
            handleWindowEvent(event.window)
        case SDL_KEYDOWN.rawValue:
            keyDown(event.key)
        case SDL_KEYUP.rawValue:
            keyUp(event.key)
        case SDL_TEXTINPUT.rawValue:
            // Text that came after its key's press, or an input method's commit.
            textArrived(Self.text(of: event.text))
        case SDL_MOUSEMOTION.rawValue:
            if relativeActive {
                mouseMovedBy(x: Double(event.motion.xrel), y: Double(event.motion.yrel))
            } else {
                mouseMoved(x: Double(event.motion.x), y: Double(event.motion.y))
            }
        case SDL_MOUSEBUTTONDOWN.rawValue, SDL_MOUSEBUTTONUP.rawValue:
            mouseButton(event.button, down: event.type == SDL_MOUSEBUTTONDOWN.rawValue)
        case SDL_MOUSEWHEEL.rawValue:
            mouseWheel(event.wheel)
        default:
            break
        }
    }

    private func handleWindowEvent(_ e: SDL_WindowEvent) {
        switch UInt32(e.event) {
        case SDL_WINDOWEVENT_FOCUS_LOST.rawValue:
            focused = false
            releaseEverything()
        case SDL_WINDOWEVENT_FOCUS_GAINED.rawValue:
            focused = true
            nextClipboardPoll = 0
        case SDL_WINDOWEVENT_SIZE_CHANGED.rawValue:
            needsRedraw = true
            if owner.configuration.resizeRemote {
                let size = outputSize()
                pendingRemoteResize = (ViewerWindow.now() + 0.3, size.width, size.height)
            }
        case SDL_WINDOWEVENT_EXPOSED.rawValue, SDL_WINDOWEVENT_SHOWN.rawValue, SDL_WINDOWEVENT_RESTORED.rawValue:
            needsRedraw = true
        case SDL_WINDOWEVENT_LEAVE.rawValue:
            flushMotion()
        default:
            break
        }
    }

    // MARK: - Keyboard

    private func keyDown(_ e: SDL_KeyboardEvent) {
        resolvePendingCharacter()
        let keycode = e.keysym.sym
        let scancode = Int32(e.keysym.scancode.rawValue)
        let mods = UInt32(e.keysym.mod)
        if question != nil { questionKey(keycode, mods: mods); return }
        if menuOpen { menuKey(keycode); dropText(); return }
        if keycode == owner.configuration.menuKeycode && mods & (KMOD_CTRL.rawValue | KMOD_SHIFT.rawValue | KMOD_ALT.rawValue | KMOD_GUI.rawValue) == 0 {
            dropText()
            releaseEverything()
            menuOpen = true
            needsRedraw = true
            return
        }
        guard !settings.viewOnly else { dropText(); return }
        let usage = UInt16(truncatingIfNeeded: scancode)
        if e.repeat != 0, let held = heldKeys[scancode] {
            // Auto-repeat: the same key down again, as a physical keyboard does.
            dropText()
            send(.key(held.key, down: true, usbUsage: held.usage))
            return
        }
        let key: ViewerKey?
        if let named = KeyMapping.namedKey(keycode: keycode, scancode: scancode, numLock: mods & KMOD_NUM.rawValue != 0) {
            dropText()
            key = .keysym(named)
        } else if mods & (KMOD_CTRL.rawValue | KMOD_LALT.rawValue | KMOD_GUI.rawValue) != 0 {
            // Shortcuts type no text: the keycode names the layout's character for the key.
            dropText()
            key = KeyMapping.character(keycode: keycode).map { .character($0) }
        } else {
            // A character key: its text usually sits right behind it in SDL's queue; when it
            // is not there yet, the key waits for it (a dead key's text never comes: its
            // composed character arrives with the next key).
            let typed = takeText()
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

    /// A character key whose text has not arrived: (scancode, keycode, usage, shift held).
    private var pendingCharacter: (scancode: Int32, keycode: Int32, usage: UInt16, shift: Bool)?

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

    /// Text that arrived after its key's press (or, from an input method, with none).
    private func textArrived(_ typed: String) {
        if question != nil {
            question?.typed += typed
            needsRedraw = true
            return
        }
        guard !menuOpen, !settings.viewOnly else { pendingCharacter = nil; return }
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

    /// A character key whose text never came before the next key event: the keycode's
    /// character (upper case with Shift) stands in; a dead key (keycode 0) sends nothing.
    private func resolvePendingCharacter() {
        guard let pending = pendingCharacter else { return }
        pendingCharacter = nil
        guard var scalar = KeyMapping.character(keycode: pending.keycode) else { return }
        if pending.shift, let upper = String(scalar).uppercased().unicodeScalars.first, String(scalar).uppercased().unicodeScalars.count == 1 { scalar = upper }
        heldKeys[pending.scancode] = (.character(scalar), pending.usage)
        send(.key(.character(scalar), down: true, usbUsage: pending.usage))
    }

    private func keyUp(_ e: SDL_KeyboardEvent) {
        let scancode = Int32(e.keysym.scancode.rawValue)
        if let pending = pendingCharacter {
            if pending.scancode == scancode { dropText() }
            resolvePendingCharacter()
        }
        guard let held = heldKeys.removeValue(forKey: scancode) else { return }
        send(.key(held.key, down: false, usbUsage: held.usage))
    }

    /// The text events SDL queued for the key just pressed.
    private func takeText() -> String {
        var result = ""
        var event = SDL_Event()
        while SDL_PeepEvents(&event, 1, SDL_GETEVENT, SDL_TEXTINPUT.rawValue, SDL_TEXTINPUT.rawValue) == 1 {
            result += Self.text(of: event.text)
        }
        return result
    }

    private func dropText() { _ = takeText() }

    static func text(of e: SDL_TextInputEvent) -> String {
        withUnsafeBytes(of: e.text) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Releases every key and button this window holds down on the remote side (focus lost,
    /// menu opened, window closing), so nothing stays stuck there.
    private func releaseEverything() {
        flushMotion()
        pendingCharacter = nil
        for (_, held) in heldKeys.sorted(by: { $0.key < $1.key }) {
            send(.key(held.key, down: false, usbUsage: held.usage))
        }
        heldKeys = [:]
        if buttons != 0 {
            buttons = 0
            if relativeActive {
                send(.pointerMotion(dx: 0, dy: 0, buttons: 0))
            } else if let p = lastPointer {
                send(.pointer(x: p.x, y: p.y, buttons: 0))
            }
        }
    }

    // MARK: - Pointer

    private func transform() -> ViewTransform {
        let size = outputSize()
        return ViewTransform.make(source: sourceRect(), windowWidth: size.width, windowHeight: size.height, mode: settings.scale, pan: pan)
    }

    /// Window (logical) coordinates → renderer output pixels (they differ on HiDPI displays).
    private func outputPoint(x: Double, y: Double) -> (Double, Double) {
        var ww: Int32 = 0, wh: Int32 = 0
        SDL_GetWindowSize(window, &ww, &wh)
        let out = outputSize()
        guard ww > 0, wh > 0 else { return (x, y) }
        return (x * Double(out.width) / Double(ww), y * Double(out.height) / Double(wh))
    }

    /// Relative mode: the pointer moved by (x, y) window points; the remote side is told how
    /// many of its pixels that is at the picture's scale.
    private func mouseMovedBy(x: Double, y: Double) {
        guard !settings.viewOnly, remoteWidth > 0 else { return }
        let (ox, oy) = outputPoint(x: x, y: y)
        let scale = transform().scale
        pendingDelta.x += ox / scale.x
        pendingDelta.y += oy / scale.y
    }

    private func mouseMoved(x: Double, y: Double) {
        guard question == nil else { return }
        let (ox, oy) = outputPoint(x: x, y: y)
        if menuOpen {
            if let index = menuItem(at: oy), index != menu.selected { menu.selected = index; needsRedraw = true }
            return
        }
        if settings.scale == .oneToOne { panFollowing(x: ox, y: oy) }
        guard !settings.viewOnly, remoteWidth > 0 else { return }
        let p = transform().remotePoint(windowX: ox, windowY: oy)
        pendingMotion = p
    }

    /// A 1:1 view larger than the window scrolls with the pointer: the pointer's place in the
    /// window is its place in the picture.
    private func panFollowing(x: Double, y: Double) {
        let size = outputSize(), source = sourceRect()
        let nx = source.width > size.width ? Int(x / Double(max(1, size.width)) * Double(source.width - size.width)) : 0
        let ny = source.height > size.height ? Int(y / Double(max(1, size.height)) * Double(source.height - size.height)) : 0
        if nx != pan.x || ny != pan.y { pan = (nx, ny); needsRedraw = true }
    }

    private func flushMotion() {
        if pendingDelta != (0, 0) {
            let delta = pendingDelta
            pendingDelta = (0, 0)
            owner.inputSink.yield(.pointerMotion(dx: delta.x, dy: delta.y, buttons: buttons))
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

    private func mouseButton(_ e: SDL_MouseButtonEvent, down: Bool) {
        let (ox, oy) = outputPoint(x: Double(e.x), y: Double(e.y))
        if menuOpen {
            guard down, e.button == 1 else { return }
            if let index = menuItem(at: oy) { menu.selected = index; chooseMenuItem() } else { menuOpen = false; needsRedraw = true }
            return
        }
        guard question == nil, !settings.viewOnly, remoteWidth > 0, let button = Self.remoteButton(e.button) else { return }
        let bit = UInt16(1) << (button - 1)
        if relativeActive {
            flushMotion()
            buttons = down ? buttons | bit : buttons & ~bit
            send(.pointerMotion(dx: 0, dy: 0, buttons: buttons))
            return
        }
        let p = transform().remotePoint(windowX: ox, windowY: oy)
        pendingMotion = nil
        buttons = down ? buttons | bit : buttons & ~bit
        lastPointer = p
        send(.pointer(x: p.x, y: p.y, buttons: buttons))
    }

    private func mouseWheel(_ e: SDL_MouseWheelEvent) {
        guard !menuOpen, question == nil, !settings.viewOnly, remoteWidth > 0 else { return }
        flushMotion()
        let flip: Float = e.direction == SDL_MOUSEWHEEL_FLIPPED.rawValue ? -1 : 1
        let clicks = wheel.add(x: Double(e.preciseX * flip), y: Double(e.preciseY * flip))
        let p = lastPointer ?? (0, 0)
        for (count, button) in [(clicks.up, 4), (clicks.down, 5), (clicks.left, 6), (clicks.right, 7)] where count > 0 {
            let bit = UInt16(1) << (button - 1)
            for _ in 0..<count {
                if relativeActive {
                    send(.pointerMotion(dx: 0, dy: 0, buttons: buttons | bit))
                    send(.pointerMotion(dx: 0, dy: 0, buttons: buttons))
                } else {
                    send(.pointer(x: p.x, y: p.y, buttons: buttons | bit))
                    send(.pointer(x: p.x, y: p.y, buttons: buttons))
                }
            }
        }
    }

    private func send(_ input: ViewerInput) {
        if case .pointer = input {} else if case .pointerMotion = input {} else { flushMotion() }
        owner.inputSink.yield(input)
    }

    /// SDL's relative mode follows the setting, except while the menu or a question is open
    /// (the person needs the pointer there) or input is not being sent.
    private func updatePointerMode() {
        let wanted = settings.relativePointer && !menuOpen && question == nil && !settings.viewOnly
        guard wanted != relativeActive else { return }
        flushMotion()
        if !wanted && buttons != 0 { releaseEverything() }
        relativeActive = SDL_SetRelativeMouseMode(wanted ? SDL_TRUE : SDL_FALSE) == 0 ? wanted : false
    }

    // MARK: - Questions

    private func questionKey(_ keycode: Int32, mods: UInt32) {
        guard var q = question else { return }
        switch keycode {
        case 13, (1 << 30) | 88: // Return, keypad Enter
            dropText()
            answer(q.typed)
        case 27: // Escape
            dropText()
            answer(nil)
        case 8: // Backspace
            dropText()
            if !q.typed.isEmpty { q.typed.removeLast() }
            question = q
        case 118 where mods & KMOD_CTRL.rawValue != 0, 117 where mods & KMOD_CTRL.rawValue != 0:
            // Ctrl+V pastes the clipboard's first line; Ctrl+U clears the field.
            dropText()
            if keycode == 117 {
                q.typed = ""
            } else if SDL_HasClipboardText() == SDL_TRUE, let raw = SDL_GetClipboardText() {
                q.typed += String(cString: raw).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
                SDL_free(raw)
            }
            question = q
        default:
            break // the key's text arrives as a text event
        }
        needsRedraw = true
    }

    private func answer(_ text: String?) {
        guard let q = question else { return }
        question = nil
        q.answer.resume(returning: text)
        SDL_SetWindowTitle(window, title())
        needsRedraw = true
    }

    private func drawQuestion(_ text: TextOverlay) {
        guard let q = question else { return }
        let field = (q.secret ? String(repeating: "•", count: q.typed.count) : q.typed) + "▏"
        let lines = [q.prompt, "", "> " + field, "", "Return: send   Esc: cancel   Ctrl+V: paste"]
        let size = outputSize()
        let width = lines.map { text.width(of: $0) }.max() ?? 0
        let x = max(8, (Int32(size.width) - width) / 2), y = max(8, (Int32(size.height) - text.lineHeight * Int32(lines.count)) / 2)
        var box = SDL_Rect(x: x - 16, y: y - 12, w: width + 32, h: text.lineHeight * Int32(lines.count) + 24)
        SDL_SetRenderDrawBlendMode(renderer, SDL_BLENDMODE_BLEND)
        SDL_SetRenderDrawColor(renderer, 20, 20, 24, 235)
        SDL_RenderFillRect(renderer, &box)
        for (i, line) in lines.enumerated() { text.draw(line, x: x, y: y + Int32(i) * text.lineHeight, renderer: renderer) }
    }

    // MARK: - Menu

    private func menuKey(_ keycode: Int32) {
        switch keycode {
        case 27, owner.configuration.menuKeycode: menuOpen = false
        case (1 << 30) | 82: menu.move(by: -1)       // Up
        case (1 << 30) | 81: menu.move(by: 1)        // Down
        case 13, 32, (1 << 30) | 88: chooseMenuItem() // Return, space, keypad Enter
        default: break
        }
        needsRedraw = true
    }

    private func chooseMenuItem() {
        settings.monitorCount = max(1, screens.count)
        switch ViewerMenu.choose(menu.items[menu.selected], settings) {
        case .changed(let next):
            apply(next)
        case .command(let command):
            menuOpen = false
            if command == .disconnect { running = false }
            owner.inputSink.yield(.command(command))
        case .closeMenu:
            menuOpen = false
        }
        needsRedraw = true
    }

    private func apply(_ next: ViewerMenu.Settings) {
        let before = settings
        settings = next
        if next.fullscreen != before.fullscreen {
            SDL_SetWindowFullscreen(window, next.fullscreen ? SDL_WINDOW_FULLSCREEN_DESKTOP.rawValue : 0)
        }
        if next.keyboardGrab != before.keyboardGrab { SDL_SetWindowKeyboardGrab(window, next.keyboardGrab ? SDL_TRUE : SDL_FALSE) }
        if next.monitor != before.monitor { pan = (0, 0); fitWindowToPicture() }
        if next.hud != before.hud { nextHUDRefresh = 0 }
        if next.clipboardSync && !before.clipboardSync { nextClipboardPoll = 0 }
    }

    /// The menu row under an output y coordinate.
    private func menuItem(at y: Double) -> Int? {
        guard let text else { return nil }
        let layout = menuLayout(text)
        let row = Int((y - Double(layout.top)) / Double(text.lineHeight))
        return y >= Double(layout.top) && row >= 0 && row < menu.items.count ? row : nil
    }

    private func menuLayout(_ text: TextOverlay) -> (left: Int32, top: Int32, width: Int32, height: Int32) {
        let size = outputSize()
        let width: Int32 = 360, height = text.lineHeight * Int32(menu.items.count)
        return ((Int32(size.width) - width) / 2, max(8, (Int32(size.height) - height) / 2), width, height)
    }

    // MARK: - From the protocol side

    private func takeShared() {
        let (cursor, clipboard, status, screens, close, asked) = owner.shared.withLock { s in
            defer { s.cursor = nil; s.cursorChanged = false; s.clipboard = nil; s.status = nil; s.screens = nil; s.question = nil }
            return (s.cursorChanged ? s.cursor : nil, s.clipboard, s.status, s.screens, s.closeRequested, s.question)
        }
        if let asked {
            question?.answer.resume(returning: nil)
            if text == nil {
                // Nothing to draw the question with: the person would type blind.
                FileHandle.standardError.write(Data("farcast: cannot ask in the window without a font (install fonts-dejavu-core)\n".utf8))
                asked.answer.resume(returning: nil)
            } else {
                releaseEverything()
                menuOpen = false
                question = (asked.prompt, asked.secret, asked.answer, "")
                SDL_RaiseWindow(window)
                SDL_SetWindowTitle(window, title())
                needsRedraw = true
            }
        }
        if close { running = false; return }
        if let cursor { setCursor(cursor) }
        if let clipboard, settings.clipboardSync {
            lastLocalClipboard = clipboard
            SDL_SetClipboardText(clipboard)
        }
        if let screens {
            self.screens = screens
            if let m = settings.monitor, m >= screens.count { settings.monitor = nil; fitWindowToPicture() }
            needsRedraw = true
        }
        if let status {
            self.status = status
            SDL_SetWindowTitle(window, title())
            needsRedraw = true
        }
    }

    private func title() -> String {
        if let question { return "\(owner.configuration.title) — \(question.secret ? "password" : "question")" }
        switch status {
        case .connecting(let what): return "\(owner.configuration.title) — connecting\(what.isEmpty ? "" : " to \(what)")…"
        case .connected(let name): return "\(name.isEmpty ? owner.configuration.title : name) — farcast" + (settings.viewOnly ? " (view only)" : "")
        case .reconnecting: return "\(owner.configuration.title) — reconnecting…"
        case .ended: return "\(owner.configuration.title) — disconnected"
        }
    }

    private func setCursor(_ cursor: ViewerCursor) {
        cursorImage = cursor
        cursorScale = Self.cursorFactor(transform(), window: window, output: outputSize())
        showCursor(cursor.scaled(by: cursorScale))
    }

    /// The cursor drawn at the picture's scale (in window points, which may differ from
    /// output pixels on HiDPI displays).
    private static func cursorFactor(_ t: ViewTransform, window: OpaquePointer, output: (width: Int, height: Int)) -> Double {
        var ww: Int32 = 0, wh: Int32 = 0
        SDL_GetWindowSize(window, &ww, &wh)
        let points = output.width > 0 ? Double(ww) / Double(output.width) : 1
        let factor = min(t.scale.x, t.scale.y) * points
        // Within 2 % of 1:1 the cursor keeps its exact pixels.
        return abs(factor - 1) < 0.02 ? 1 : factor
    }

    /// Follows the picture's scale with the cursor's size (window resized, scaling changed).
    private func updateCursorScale(_ t: ViewTransform) {
        let factor = Self.cursorFactor(t, window: window, output: outputSize())
        guard abs(factor - cursorScale) > 0.01 else { return }
        cursorScale = factor
        showCursor(cursorImage.scaled(by: factor))
    }

    private func showCursor(_ cursor: ViewerCursor) {
        if cursor.width == 0 || cursor.height == 0 || cursor.rgba.count < cursor.width * cursor.height * 4 {
            SDL_ShowCursor(SDL_DISABLE)
            return
        }
        var rgba = cursor.rgba
        let created: OpaquePointer? = rgba.withUnsafeMutableBytes { raw in
            // R, G, B, A bytes in memory: SDL's ABGR8888 on a little-endian machine.
            guard let surface = SDL_CreateRGBSurfaceWithFormatFrom(raw.baseAddress, Int32(cursor.width), Int32(cursor.height), 32,
                                                                    Int32(cursor.width * 4), SDL_PIXELFORMAT_RGBA32.rawValue) else { return nil }
            defer { SDL_FreeSurface(surface) }
            return SDL_CreateColorCursor(surface, Int32(cursor.hotspotX), Int32(cursor.hotspotY))
        }
        guard let created else { return }
        SDL_SetCursor(created)
        SDL_ShowCursor(SDL_ENABLE)
        if let sdlCursor { SDL_FreeCursor(sdlCursor) }
        sdlCursor = created
    }

    private func pollClipboard(_ now: Double) {
        nextClipboardPoll = now + 1
        guard SDL_HasClipboardText() == SDL_TRUE, let raw = SDL_GetClipboardText() else { return }
        let text = String(cString: raw)
        SDL_free(raw)
        guard text != lastLocalClipboard, !text.isEmpty else { return }
        lastLocalClipboard = text
        guard !settings.viewOnly else { return }
        send(.clipboard(text))
    }

    private func requestRemoteSize(width: Int, height: Int) {
        guard width > 0, height > 0, !settings.viewOnly else { return }
        if let last = lastRequestedRemoteSize, last == (width, height) { return }
        if width == remoteWidth && height == remoteHeight { return }
        lastRequestedRemoteSize = (width, height)
        send(.resizeRemote(width: width, height: height))
    }

    // MARK: - Picture

    private func sourceRect() -> ViewerRect {
        let all = ViewerRect(x: 0, y: 0, width: remoteWidth, height: remoteHeight)
        guard let m = settings.monitor, screens.indices.contains(m) else { return all }
        let r = screens[m].intersection(all)
        return r.isEmpty ? all : r
    }

    private func outputSize() -> (width: Int, height: Int) {
        var w: Int32 = 0, h: Int32 = 0
        SDL_GetRendererOutputSize(renderer, &w, &h)
        return (Int(w), Int(h))
    }

    /// Makes the window the picture's size (within the display), unless full screen or the
    /// remote desktop follows the window.
    private func fitWindowToPicture() {
        needsRedraw = true
        guard !settings.fullscreen, !owner.configuration.resizeRemote else { return }
        let source = sourceRect()
        guard !source.isEmpty else { return }
        var bounds = SDL_Rect()
        let display = max(0, SDL_GetWindowDisplayIndex(window))
        var w = Int32(source.width), h = Int32(source.height)
        let haveBounds = SDL_GetDisplayUsableBounds(display, &bounds) == 0
        if haveBounds {
            w = min(w, bounds.w)
            h = min(h, bounds.h)
        }
        SDL_SetWindowSize(window, w, h)
        // Grown in place, the window may now reach past the screen's edge: move it back in.
        if haveBounds {
            var x: Int32 = 0, y: Int32 = 0
            SDL_GetWindowPosition(window, &x, &y)
            let nx = max(bounds.x, min(x, bounds.x + bounds.w - w)), ny = max(bounds.y, min(y, bounds.y + bounds.h - h))
            if nx != x || ny != y { SDL_SetWindowPosition(window, nx, ny) }
        }
    }

    /// Uploads what was staged into the texture; returns the arrival time of the oldest update
    /// it contained (the start of this present's latency), nil when nothing was new.
    private func upload() -> Double? {
        var resized = false
        var oldest: Double?
        let direct = directSurface()
        owner.frames.drain { pending, pixels in
            guard pending.width > 0, pending.height > 0 else { return }
            if pending.generation != textureGeneration || texture == nil {
                if let texture { SDL_DestroyTexture(texture) }
                texture = SDL_CreateTexture(renderer, SDL_PIXELFORMAT_XRGB8888.rawValue, Int32(SDL_TEXTUREACCESS_STREAMING.rawValue),
                                            Int32(pending.width), Int32(pending.height))
                textureGeneration = pending.generation
                needsRedraw = true
                resized = pending.width != remoteWidth || pending.height != remoteHeight
                remoteWidth = pending.width
                remoteHeight = pending.height
            }
            guard let texture else { return }
            if let direct, !needsRedraw {
                // One copy, picture → window surface, instead of picture → texture → surface.
                for rect in pending.dirty {
                    staleInTexture.append(rect)
                    guard let copy = direct.transform.partialCopy(of: rect, windowWidth: direct.width, windowHeight: direct.height) else { continue }
                    let src = pixels.baseAddress! + copy.source.y * pending.width + copy.source.x
                    let dst = direct.pixels + copy.window.y * direct.pitch + copy.window.x * 4
                    viewer_copy_rows_streaming(dst, direct.pitch, src, pending.width, copy.window.width, copy.window.height)
                    drawnDirectly.append(SDL_Rect(x: Int32(copy.window.x), y: Int32(copy.window.y),
                                                  w: Int32(copy.window.width), h: Int32(copy.window.height)))
                }
                if staleInTexture.count > FrameStaging.maximumRects {
                    staleInTexture = [staleInTexture.reduce(ViewerRect(x: 0, y: 0, width: 0, height: 0)) { $0.union($1) }]
                }
            } else if !pixels.isEmpty {
                for rect in staleInTexture + pending.dirty {
                    let r0 = rect.intersection(ViewerRect(x: 0, y: 0, width: pending.width, height: pending.height))
                    guard !r0.isEmpty else { continue }
                    var r = SDL_Rect(x: Int32(r0.x), y: Int32(r0.y), w: Int32(r0.width), h: Int32(r0.height))
                    SDL_UpdateTexture(texture, &r, pixels.baseAddress! + r0.y * pending.width + r0.x, Int32(pending.width * 4))
                }
                staleInTexture = []
                damage += pending.dirty
            }
            stats.recordUpdates(pending.updates, bytes: pending.bytes)
            if !pending.dirty.isEmpty { oldest = pending.oldestArrival }
        }
        if resized {
            if owner.configuration.resizeRemote {
                let size = outputSize()
                lastRequestedRemoteSize = nil
                pendingRemoteResize = (ViewerWindow.now() + 0.3, size.width, size.height)
            } else {
                fitWindowToPicture()
            }
        }
        return oldest
    }

    private func present(latencyStart: Double?) {
        if !staleInTexture.isEmpty && (needsRedraw || !damage.isEmpty) { syncTexture() }
        if needsRedraw {
            presentWhole()
        } else if !drawnDirectly.isEmpty && damage.isEmpty && SDL_UpdateWindowSurfaceRects(window, drawnDirectly, Int32(drawnDirectly.count)) == 0 {
            partialFrames += 1
        } else if presentsPartially && presentDamage() {
            partialFrames += 1
        } else {
            if !staleInTexture.isEmpty { syncTexture() }
            presentWhole()
        }
        drawnDirectly = []
        damage = []
        needsRedraw = false
        let latency = latencyStart.map { ViewerWindow.now() - $0 }
        stats.recordPresent(latency: latency)
        let quantiles = stats.latencies(quantiles: 0.5, 0.95)
        let snapshot = ViewerStatistics(framesPresented: stats.framesPresented, partialFrames: partialFrames, updates: stats.updates,
                                        latencyP50Milliseconds: quantiles.first.map { $0 * 1000 },
                                        latencyP95Milliseconds: quantiles.last.map { $0 * 1000 }, renderer: rendererName)
        owner.shared.withLock { $0.statistics = snapshot }
    }

    /// The window surface, when updates can be written into it straight from the stage: SDL's
    /// software renderer draws there (so the surface is what the display shows), the view is
    /// 1:1 with no overlay, and the surface's pixels are the stage's (32-bit XRGB).
    private func directSurface() -> (pixels: UnsafeMutableRawPointer, pitch: Int, width: Int, height: Int, transform: ViewTransform)? {
        guard presentsPartially, !needsRedraw, texture != nil, remoteWidth > 0, !settings.hud, !menuOpen, question == nil else { return nil }
        guard case .connected = status else { return nil }
        let t = transform()
        guard t.isUnscaled, let surface = SDL_GetWindowSurface(window), let pixels = surface.pointee.pixels,
              surface.pointee.format.pointee.format == SDL_PIXELFORMAT_XRGB8888.rawValue, surface.pointee.flags & UInt32(SDL_RLEACCEL) == 0 else { return nil }
        let size = outputSize()
        guard Int(surface.pointee.w) == size.width, Int(surface.pointee.h) == size.height else { return nil }
        return (pixels, Int(surface.pointee.pitch), size.width, size.height, t)
    }

    /// Brings the texture up to date with what was written to the window surface directly.
    private func syncTexture() {
        guard let texture else { staleInTexture = []; return }
        let read = owner.frames.read { width, height, pixels in
            for rect in staleInTexture {
                let r0 = rect.intersection(ViewerRect(x: 0, y: 0, width: width, height: height))
                guard !r0.isEmpty else { continue }
                var r = SDL_Rect(x: Int32(r0.x), y: Int32(r0.y), w: Int32(r0.width), h: Int32(r0.height))
                SDL_UpdateTexture(texture, &r, pixels.baseAddress! + r0.y * width + r0.x, Int32(width * 4))
            }
        }
        // Unreadable just now (the producer could not lend its picture): tried again next present.
        if read { staleInTexture = [] }
    }

    /// Only the changed rectangles, copied into the window's surface and sent to the display
    /// (what a full present costs per frame — clearing, copying and sending the whole window —
    /// is most of the viewer's CPU when updates are small). False when that cannot be done:
    /// a scaled view, or an overlay drawn over the picture.
    private func presentDamage() -> Bool {
        guard let texture, remoteWidth > 0, !settings.hud, !menuOpen, question == nil else { return false }
        guard case .connected = status else { return false }
        let t = transform()
        guard t.isUnscaled else { return false }
        let size = outputSize()
        var sent: [SDL_Rect] = []
        for rect in damage {
            guard let copy = t.partialCopy(of: rect, windowWidth: size.width, windowHeight: size.height) else { continue }
            var src = SDL_Rect(x: Int32(copy.source.x), y: Int32(copy.source.y), w: Int32(copy.source.width), h: Int32(copy.source.height))
            var dst = SDL_Rect(x: Int32(copy.window.x), y: Int32(copy.window.y), w: Int32(copy.window.width), h: Int32(copy.window.height))
            SDL_RenderCopy(renderer, texture, &src, &dst)
            sent.append(dst)
        }
        SDL_RenderFlush(renderer)
        guard !sent.isEmpty else { return true }
        // A surface SDL invalidated (a resize not yet seen as an event) refuses: draw it whole.
        return SDL_UpdateWindowSurfaceRects(window, sent, Int32(sent.count)) == 0
    }

    private func presentWhole() {
        SDL_SetRenderDrawColor(renderer, 0, 0, 0, 255)
        SDL_RenderClear(renderer)
        if let texture, remoteWidth > 0 {
            let t = transform()
            updateCursorScale(t)
            SDL_SetTextureScaleMode(texture, t.isUnscaled ? SDL_ScaleModeNearest : SDL_ScaleModeLinear)
            var src = SDL_Rect(x: Int32(t.source.x), y: Int32(t.source.y), w: Int32(t.source.width), h: Int32(t.source.height))
            var dst = SDL_Rect(x: Int32(t.destination.x), y: Int32(t.destination.y), w: Int32(t.destination.width), h: Int32(t.destination.height))
            SDL_RenderCopy(renderer, texture, &src, &dst)
        }
        if let text {
            if question == nil { drawStatus(text) }
            if settings.hud { drawLines(hudLines, x: 8, y: 8, text) }
            if menuOpen { drawMenu(text) }
            drawQuestion(text)
        }
        SDL_RenderPresent(renderer)
    }

    private func refreshHUD(_ now: Double) {
        nextHUDRefresh = now + 0.5
        let rates = stats.rates(now: now)
        func ms(_ q: Double) -> String { stats.latency(quantile: q).map { String(format: "%.1f", $0 * 1000) } ?? "–" }
        hudLines = [
            String(format: "%.1f updates/s  %.2f Mbit/s", rates.updatesPerSecond, rates.megabitsPerSecond),
            "update→present p50 \(ms(0.5)) ms  p95 \(ms(0.95)) ms",
            "\(remoteWidth)x\(remoteHeight)  \(settings.scale.rawValue)  \(rendererName)  frames \(stats.framesPresented)",
        ] + owner.hudExtra()
    }

    private func drawLines(_ lines: [String], x: Int32, y: Int32, _ text: TextOverlay) {
        guard !lines.isEmpty else { return }
        let width = lines.map { text.width(of: $0) }.max() ?? 0
        var box = SDL_Rect(x: x - 4, y: y - 2, w: width + 8, h: text.lineHeight * Int32(lines.count) + 4)
        SDL_SetRenderDrawBlendMode(renderer, SDL_BLENDMODE_BLEND)
        SDL_SetRenderDrawColor(renderer, 0, 0, 0, 180)
        SDL_RenderFillRect(renderer, &box)
        for (i, line) in lines.enumerated() { text.draw(line, x: x, y: y + Int32(i) * text.lineHeight, renderer: renderer) }
    }

    private func drawStatus(_ text: TextOverlay) {
        let line: String
        switch status {
        case .connected: return
        case .connecting(let what): line = "Connecting\(what.isEmpty ? "" : " to \(what)")…"
        case .reconnecting(let reason, let retryIn): line = "Connection lost (\(reason)) — reconnecting" + (retryIn > 0 ? " in \(retryIn) s" : "…")
        case .ended(let reason): line = "Disconnected: \(reason)"
        }
        let size = outputSize()
        let w = text.width(of: line)
        drawLines([line], x: max(8, (Int32(size.width) - w) / 2), y: max(8, Int32(size.height) / 2 - text.lineHeight), text)
    }

    private func drawMenu(_ text: TextOverlay) {
        settings.monitorCount = max(1, screens.count)
        let layout = menuLayout(text)
        var box = SDL_Rect(x: layout.left - 8, y: layout.top - 8, w: layout.width + 16, h: layout.height + 16)
        SDL_SetRenderDrawBlendMode(renderer, SDL_BLENDMODE_BLEND)
        SDL_SetRenderDrawColor(renderer, 20, 20, 24, 230)
        SDL_RenderFillRect(renderer, &box)
        for (i, item) in menu.items.enumerated() {
            let y = layout.top + Int32(i) * text.lineHeight
            if i == menu.selected {
                var row = SDL_Rect(x: layout.left - 4, y: y, w: layout.width + 8, h: text.lineHeight)
                SDL_SetRenderDrawColor(renderer, 60, 100, 170, 255)
                SDL_RenderFillRect(renderer, &row)
            }
            text.draw(ViewerMenu.label(item, settings), x: layout.left, y: y, renderer: renderer)
        }
    }
}

extension ViewerWindow {
    /// Extra HUD lines from the protocol side (encoding, quality), set with `setHUDExtra`.
    func hudExtra() -> [String] { hudExtraLines.withLock { $0 } }
}
#else
extension ViewerWindow {
    func pushWakeEvent(_ type: UInt32) {}
    func run(onOpen: () -> Void) throws { throw ViewerError.unavailable }
    func hudExtra() -> [String] { [] }
}
#endif
