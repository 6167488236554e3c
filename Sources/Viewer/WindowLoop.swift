#if canImport(CSDL2)
import CSDL2
import CSDL2Loader
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

/// The window thread's state: SDL's window and renderer, the loop that waits for events and
/// for the protocol side's wake-ups, and the settings the menu changes. What it shows is
/// `WindowPresenter`'s, what goes to the remote side `WindowInput`'s, what is drawn over the
/// picture `WindowOverlays`'; this type routes each event to the part it belongs to (a key to
/// the open question, the menu, or the remote side) and keeps them in step. Lives and dies on
/// that thread; SDL is only called from here.
final class WindowLoop {
    private unowned let owner: ViewerWindow
    private let presenter: WindowPresenter
    private let input: WindowInput
    private let overlays: WindowOverlays
    /// Game controllers, when the configuration asks for them.
    private let gamepads: WindowGamepads?
    private var settings: ViewerMenu.Settings
    private var lastLocalClipboard: String?
    private var nextClipboardPoll = 0.0
    private var focused = false
    private var status: ViewerStatus = .connecting("")
    private var pendingRemoteResize: (due: Double, width: Int, height: Int)?
    private var lastRequestedRemoteSize: (width: Int, height: Int)?
    private var running = true
    /// When a stream's next picture may be shown (`ViewerConfiguration.maximumPictureRate`, else the display's refresh).
    private var pacer = PresentPacer(rate: nil)

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
        presenter = WindowPresenter(window: window, renderer: renderer)
        input = WindowInput { [inputSink = owner.inputSink] in inputSink.yield($0) }
        settings = ViewerMenu.Settings(fullscreen: c.fullscreen, viewOnly: c.viewOnly, viewOnlyLocked: c.viewOnlyLocked, scale: c.scale,
                                       monitor: c.monitor, monitorCount: 1, clipboardSync: c.clipboardSync, keyboardGrab: c.grabKeyboard, hud: c.showHUD, hudCorner: c.hudCorner,
                                       relativePointer: c.relativePointer)
        overlays = WindowOverlays(fontPath: c.fontPath, menu: ViewerMenu(actions: c.menuActions, hidden: c.hiddenMenuItems))
        gamepads = c.gamepads ? WindowGamepads { [inputSink = owner.inputSink] in inputSink.yield($0) } : nil
        if overlays.text == nil { FileHandle.standardError.write(Data("farcast: no font for the window's overlays (install fonts-dejavu-core); the menu and statistics are not drawn\n".utf8)) }
        if c.grabKeyboard { SDL_SetWindowKeyboardGrab(window, SDL_TRUE) }
        SDL_StartTextInput()
        presenter.setCursor(.dot, settings)
        let type = SDL_RegisterEvents(1)
        owner.shared.withLock { [rendererName = presenter.rendererName] in $0.statistics.renderer = rendererName }
        owner.wakeEventType.store(type == UInt32.max ? 0 : type, ordering: .releasing)
        updateCadence()
    }

    /// The pacer's rate: the display's refresh rate (60 when it does not say), or the configured
    /// limit when that is lower.
    private func updateCadence() {
        var mode = SDL_DisplayMode()
        let display = SDL_GetWindowDisplayMode(presenter.window, &mode) == 0 && mode.refresh_rate > 0 ? Double(mode.refresh_rate) : 60
        let rate = min(display, owner.configuration.maximumPictureRate ?? display)
        pacer = PresentPacer(rate: rate)
        owner.pictures.cadence = rate
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
        input.releaseEverything()
        overlays.answer(nil)
        if input.relative { SDL_SetRelativeMouseMode(SDL_FALSE) }
        owner.inputSink.yield(.closed)
        owner.inputSink.finish()
        owner.wakeEventType.store(0, ordering: .releasing)
        overlays.text?.flush()
        gamepads?.shutdown()
        presenter.destroy()
        SDL_DestroyRenderer(presenter.renderer)
        SDL_DestroyWindow(presenter.window)
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
            input.flushMotion()
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
            let alone = pictureAlone
            let (latencyStart, resized) = presenter.upload(from: owner.frames, settings, pictureAlone: alone)
            if resized { pictureResized() }
            // A video stream's newest picture, shown once and at most at the pacer's cadence (one
            // not yet due stays in the slot, where a newer one replaces it); one not uploaded is
            // still counted as taken.
            let picture = now >= pacer.due ? owner.pictures.take() : nil
            if picture != nil { pacer.presented(at: now) }
            if let picture, presenter.upload(picture: picture.picture) == true { pictureResized() }
            if settings.hud && now >= overlays.nextHUDRefresh { refreshHUD(now); presenter.needsRedraw = true }
            if presenter.hasWork {
                let snapshot = presenter.present(latencyStart: latencyStart, from: owner.frames, settings, pictureAlone: alone) { renderer, output in
                    var shown = settings
                    shown.monitorCount = max(1, presenter.screens.count)
                    overlays.draw(on: renderer, output: output, status: status, hud: settings.hud, settings: shown)
                }
                owner.shared.withLock { $0.statistics = snapshot }
                if let picture { owner.pictures.presented(picture, at: PictureSlot.realtimeNanoseconds()) }
            }
        }
    }

    /// Nothing is drawn over the picture (no HUD, no menu or question, no connection status),
    /// so changed rectangles may be presented on their own.
    private var pictureAlone: Bool {
        guard !settings.hud, overlays.isClear, case .connected = status else { return false }
        return true
    }

    /// Sleeps until an event, but wakes for timed work (a pending resize, the HUD, the clipboard).
    private func waitTimeout() -> Int32 {
        let now = ViewerWindow.now()
        var due = now + 1
        if let pending = pendingRemoteResize { due = min(due, pending.due) }
        if settings.hud { due = min(due, overlays.nextHUDRefresh) }
        if settings.clipboardSync && focused { due = min(due, nextClipboardPoll) }
        if let next = gamepads?.advance(now: now) { due = min(due, next) }
        if owner.pictures.hasPending { due = min(due, pacer.due) }
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
            input.keyUp(event.key)
        case SDL_TEXTINPUT.rawValue:
            // Text that came after its key's press, or an input method's commit.
            textArrived(WindowInput.text(of: event.text))
        case SDL_MOUSEMOTION.rawValue:
            if input.relative {
                mouseMovedBy(x: Double(event.motion.xrel), y: Double(event.motion.yrel))
            } else {
                mouseMoved(x: Double(event.motion.x), y: Double(event.motion.y))
            }
        case SDL_MOUSEBUTTONDOWN.rawValue, SDL_MOUSEBUTTONUP.rawValue:
            mouseButton(event.button, down: event.type == SDL_MOUSEBUTTONDOWN.rawValue)
        case SDL_MOUSEWHEEL.rawValue:
            guard overlays.isClear, !settings.viewOnly, presenter.remoteWidth > 0 else { return }
            input.wheel(event.wheel)
        default:
            _ = gamepads?.handle(event)
        }
    }

    private func handleWindowEvent(_ e: SDL_WindowEvent) {
        switch UInt32(e.event) {
        case SDL_WINDOWEVENT_FOCUS_LOST.rawValue:
            focused = false
            input.releaseEverything()
            if captured { releaseCapture() }
        case SDL_WINDOWEVENT_FOCUS_GAINED.rawValue:
            focused = true
            nextClipboardPoll = 0
        case SDL_WINDOWEVENT_SIZE_CHANGED.rawValue:
            presenter.needsRedraw = true
            if owner.configuration.resizeRemote {
                let size = presenter.outputSize()
                pendingRemoteResize = (ViewerWindow.now() + 0.3, size.width, size.height)
            }
        case SDL_WINDOWEVENT_EXPOSED.rawValue, SDL_WINDOWEVENT_SHOWN.rawValue, SDL_WINDOWEVENT_RESTORED.rawValue:
            presenter.needsRedraw = true
        case SDL_WINDOWEVENT_LEAVE.rawValue:
            input.flushMotion()
        case SDL_WINDOWEVENT_DISPLAY_CHANGED.rawValue:
            updateCadence()
        default:
            break
        }
    }

    // MARK: - Routing input

    /// A key goes to the open question, the open menu, or (unless view-only) the remote side;
    /// the menu key opens the menu.
    private func keyDown(_ e: SDL_KeyboardEvent) {
        input.resolvePendingCharacter()
        let keycode = e.keysym.sym
        let mods = UInt32(e.keysym.mod)
        switch overlays.modal {
        case .question:
            overlays.questionKey(keycode, mods: mods)
            if overlays.question == nil { SDL_SetWindowTitle(presenter.window, title()) }
            presenter.needsRedraw = true
            return
        case .menu:
            if overlays.menuKey(keycode, menuKeycode: owner.configuration.menuKeycode) == .choose { chooseMenuItem() }
            WindowInput.dropText()
            presenter.needsRedraw = true
            return
        case .none:
            break
        }
        if keycode == owner.configuration.menuKeycode && mods & (KMOD_CTRL.rawValue | KMOD_SHIFT.rawValue | KMOD_ALT.rawValue | KMOD_GUI.rawValue) == 0 {
            WindowInput.dropText()
            input.releaseEverything()
            overlays.openMenu()
            presenter.needsRedraw = true
            return
        }
        if captured && keycode == Int32(UInt8(ascii: "z")) && mods & KMOD_CTRL.rawValue != 0 && mods & KMOD_ALT.rawValue != 0 && mods & KMOD_SHIFT.rawValue != 0 {
            WindowInput.dropText()
            releaseCapture()
            return
        }
        guard !settings.viewOnly else { WindowInput.dropText(); return }
        input.keyDown(e)
    }

    // MARK: - Capture (`ViewerConfiguration.captureOnClick`)

    /// The pointer and keyboard are the remote side's: relative motion, keyboard grabbed.
    private var captured: Bool { owner.configuration.captureOnClick && settings.relativePointer }
    /// The click that engaged capture: its release is not sent either.
    private var swallowRelease = false

    private func engageCapture() {
        settings.relativePointer = true
        settings.keyboardGrab = true
        SDL_SetWindowKeyboardGrab(presenter.window, SDL_TRUE)
        SDL_SetWindowTitle(presenter.window, title())
        presenter.needsRedraw = true
    }

    /// Everything held is released on the remote side, the pointer is free and absolute again.
    private func releaseCapture() {
        input.releaseEverything()
        settings.relativePointer = false
        settings.keyboardGrab = owner.configuration.grabKeyboard
        SDL_SetWindowKeyboardGrab(presenter.window, settings.keyboardGrab ? SDL_TRUE : SDL_FALSE)
        updatePointerMode()
        SDL_SetWindowTitle(presenter.window, title())
        presenter.needsRedraw = true
    }

    private func textArrived(_ typed: String) {
        if overlays.question != nil {
            overlays.type(typed)
            presenter.needsRedraw = true
            return
        }
        guard overlays.isClear, !settings.viewOnly else { input.forgetPendingCharacter(); return }
        input.textArrived(typed)
    }

    /// Relative mode: the pointer moved by (x, y) window points; the remote side is told how
    /// many of its pixels that is at the picture's scale.
    private func mouseMovedBy(x: Double, y: Double) {
        guard !settings.viewOnly, presenter.remoteWidth > 0 else { return }
        let (ox, oy) = presenter.outputPoint(x: x, y: y)
        let scale = presenter.transform(settings).scale
        input.moveBy(dx: ox / scale.x, dy: oy / scale.y)
    }

    private func mouseMoved(x: Double, y: Double) {
        let (ox, oy) = presenter.outputPoint(x: x, y: y)
        switch overlays.modal {
        case .question:
            return
        case .menu:
            if let index = overlays.menuItem(at: oy, output: presenter.outputSize()), index != overlays.menu.selected {
                overlays.menu.selected = index
                presenter.needsRedraw = true
            }
            return
        case .none:
            break
        }
        if settings.scale == .oneToOne { presenter.panFollowing(x: ox, y: oy, settings) }
        guard !settings.viewOnly, presenter.remoteWidth > 0 else { return }
        input.moveTo(presenter.transform(settings).remotePoint(windowX: ox, windowY: oy))
    }

    private func mouseButton(_ e: SDL_MouseButtonEvent, down: Bool) {
        let (ox, oy) = presenter.outputPoint(x: Double(e.x), y: Double(e.y))
        if overlays.menuOpen {
            guard down, e.button == 1 else { return }
            if let index = overlays.menuItem(at: oy, output: presenter.outputSize()) {
                overlays.menu.selected = index
                chooseMenuItem()
            } else {
                overlays.closeMenu()
                presenter.needsRedraw = true
            }
            return
        }
        guard overlays.isClear, !settings.viewOnly, presenter.remoteWidth > 0, let button = WindowInput.remoteButton(e.button) else { return }
        if owner.configuration.captureOnClick && e.button == 1 {
            // A click into the stream takes the pointer and keyboard; it is not sent itself.
            if down && !captured { swallowRelease = true; engageCapture(); return }
            if !down && swallowRelease { swallowRelease = false; return }
        }
        let (presenter, settings) = (presenter, settings)
        input.press(button: button, down: down) { presenter.transform(settings).remotePoint(windowX: ox, windowY: oy) }
    }

    /// SDL's relative mode follows the setting, except while the menu or a question is open
    /// (the person needs the pointer there) or input is not being sent.
    private func updatePointerMode() {
        input.setRelative(settings.relativePointer && overlays.isClear && !settings.viewOnly)
    }

    // MARK: - Menu

    private func chooseMenuItem() {
        settings.monitorCount = max(1, presenter.screens.count)
        switch ViewerMenu.choose(overlays.menu.items[overlays.menu.selected], settings) {
        case .changed(let next):
            apply(next)
        case .command(let command):
            overlays.closeMenu()
            if command == .disconnect { running = false }
            owner.inputSink.yield(.command(command))
        case .closeMenu:
            overlays.closeMenu()
        }
        presenter.needsRedraw = true
    }

    private func apply(_ next: ViewerMenu.Settings) {
        let before = settings
        settings = next
        if next.fullscreen != before.fullscreen {
            SDL_SetWindowFullscreen(presenter.window, next.fullscreen ? SDL_WINDOW_FULLSCREEN_DESKTOP.rawValue : 0)
        }
        if next.keyboardGrab != before.keyboardGrab { SDL_SetWindowKeyboardGrab(presenter.window, next.keyboardGrab ? SDL_TRUE : SDL_FALSE) }
        if next.monitor != before.monitor { presenter.resetPan(); fitWindowToPicture() }
        if next.hud != before.hud { overlays.refreshHUDSoon() }
        if next.clipboardSync && !before.clipboardSync { nextClipboardPoll = 0 }
    }

    // MARK: - From the protocol side

    private func takeShared() {
        let (cursor, clipboard, status, screens, close, asked, padFeedback) = owner.shared.withLock { s in
            defer { s.cursor = nil; s.cursorChanged = false; s.clipboard = nil; s.status = nil; s.screens = nil; s.question = nil; s.padFeedback = [] }
            return (s.cursorChanged ? s.cursor : nil, s.clipboard, s.status, s.screens, s.closeRequested, s.question, s.padFeedback)
        }
        for (pad, feedback) in padFeedback { gamepads?.apply(feedback, toPad: pad) }
        if let asked {
            if overlays.text == nil {
                // Nothing to draw the question with: the person would type blind.
                FileHandle.standardError.write(Data("farcast: cannot ask in the window without a font (install fonts-dejavu-core)\n".utf8))
                asked.answer.resume(returning: nil)
            } else {
                input.releaseEverything()
                overlays.ask(WindowQuestion(prompt: asked.prompt, secret: asked.secret, answer: asked.answer))
                SDL_RaiseWindow(presenter.window)
                SDL_SetWindowTitle(presenter.window, title())
                presenter.needsRedraw = true
            }
        }
        if close { running = false; return }
        if let cursor { presenter.setCursor(cursor, settings) }
        if let clipboard, settings.clipboardSync {
            lastLocalClipboard = clipboard
            SDL_SetClipboardText(clipboard)
        }
        if let screens {
            presenter.screens = screens
            if let m = settings.monitor, m >= screens.count { settings.monitor = nil; fitWindowToPicture() }
            presenter.needsRedraw = true
        }
        if let status {
            self.status = status
            SDL_SetWindowTitle(presenter.window, title())
            presenter.needsRedraw = true
        }
    }

    private func title() -> String {
        if let question = overlays.question { return "\(owner.configuration.title) — \(question.secret ? "password" : "question")" }
        switch status {
        case .connecting(let what): return "\(owner.configuration.title) — connecting\(what.isEmpty ? "" : " to \(what)")…"
        case .connected(let name):
            return "\(name.isEmpty ? owner.configuration.title : name)" + (captured ? " (Ctrl+Alt+Shift+Z frees the mouse)" : "") + " — farcast"
                + (settings.viewOnly ? " (view only)" : "")
        case .reconnecting: return "\(owner.configuration.title) — reconnecting…"
        case .ended: return "\(owner.configuration.title) — disconnected"
        }
    }

    private func pollClipboard(_ now: Double) {
        nextClipboardPoll = now + 1
        guard SDL_HasClipboardText() == SDL_TRUE, let raw = SDL_GetClipboardText() else { return }
        let text = String(cString: raw)
        SDL_free(raw)
        guard text != lastLocalClipboard, !text.isEmpty else { return }
        lastLocalClipboard = text
        guard !settings.viewOnly else { return }
        input.send(.clipboard(text))
    }

    private func requestRemoteSize(width: Int, height: Int) {
        guard width > 0, height > 0, !settings.viewOnly else { return }
        if let last = lastRequestedRemoteSize, last == (width, height) { return }
        if width == presenter.remoteWidth && height == presenter.remoteHeight { return }
        lastRequestedRemoteSize = (width, height)
        input.send(.resizeRemote(width: width, height: height))
    }

    private func fitWindowToPicture() {
        presenter.fitWindowToPicture(settings, remoteFollowsWindow: owner.configuration.resizeRemote)
    }

    /// The remote picture changed size: the remote desktop is asked to follow the window, or
    /// the window follows the picture.
    private func pictureResized() {
        if owner.configuration.resizeRemote {
            let size = presenter.outputSize()
            lastRequestedRemoteSize = nil
            pendingRemoteResize = (ViewerWindow.now() + 0.3, size.width, size.height)
        } else {
            fitWindowToPicture()
        }
    }

    private func refreshHUD(_ now: Double) {
        overlays.refreshHUD(now, lines: presenter.hudLines(now: now, settings) + owner.hudExtra())
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
