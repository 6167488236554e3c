import FarcastSupport
import Foundation
import Testing

/// An X server for the viewer's window (Xvfb, no window manager), apart from the VNC server's.
final class ViewerScreen: XDisplay, @unchecked Sendable {
    let display: Int
    let port = 0
    let xvfb: BackgroundProcess

    init(geometry: String = "1280x1024") throws {
        display = DisplayNumbers.allocate()
        xvfb = try startXvfb(display: display, geometry: geometry)
    }

    /// The id of the viewer's window once it is connected (its title ends in "farcast").
    func viewerWindow(_ viewer: BackgroundProcess, timeout: TimeInterval = 20) throws -> String {
        try window(titled: "farcast$", of: viewer, timeout: timeout)
    }

    /// The id of the viewer's window once its title (_NET_WM_NAME, what window managers show)
    /// matches `pattern`, a regular expression. The window is found by its class, "farcast".
    func window(titled pattern: String, of viewer: BackgroundProcess, timeout: TimeInterval = 20) throws -> String {
        var id = ""
        var titles: [String] = []
        do {
            try waitUntil("a viewer window titled /\(pattern)/ on :\(display)", timeout: timeout) {
                guard viewer.isRunning else { throw PeerFailed(name: "farcast vnc view", log: viewer.log) }
                let found = try run(try requireExecutable("xdotool", package: "xdotool"), ["search", "--class", "^farcast$"],
                                    environment: environment, timeout: 10)
                titles = []
                for window in found.stdout.split(separator: "\n").map(String.init) {
                    let title = try title(of: window)
                    titles.append(title)
                    if title.range(of: pattern, options: .regularExpression) != nil { id = window; return true }
                }
                return false
            }
        } catch {
            Issue.record("windows of class farcast were titled \(titles); Xvfb :\(display) \(xvfb.isRunning ? "running" : "exited: \(xvfb.log)")")
            throw error
        }
        return id
    }

    /// A window's _NET_WM_NAME, in UTF-8.
    func title(of window: String) throws -> String {
        var env = environment
        env["LC_ALL"] = "C.UTF-8"
        let shown = try run(try requireExecutable("xprop", package: "x11-utils"), ["-id", window, "_NET_WM_NAME"], environment: env, timeout: 10)
        // _NET_WM_NAME(UTF8_STRING) = "title"
        guard let start = shown.stdout.firstIndex(of: "\""), let end = shown.stdout.lastIndex(of: "\""), start < end else { return "" }
        return String(shown.stdout[shown.stdout.index(after: start)..<end])
    }

    deinit {
        xvfb.stop()
        removeStaleXFiles(display)
    }
}

/// `farcast vnc view`: the window, checked from the outside — its pixels read back with xwd,
/// input typed and clicked into it with xdotool (XTEST, as a person's keyboard) and seen by an
/// X client on the VNC server's desktop, the clipboard read with xclip on both displays.
@Suite(.tags(.timing), .serialized, .timeLimit(.minutes(4)))
struct VNCViewerWindowTests {
    let folder: TemporaryFolder

    init() throws {
        folder = try TemporaryFolder()
    }

    private func view(_ server: some XDisplay, on screen: ViewerScreen, _ extra: [String] = []) throws -> BackgroundProcess {
        var env = screen.environment
        env["XDG_STATE_HOME"] = folder.path + "/state"
        return try BackgroundProcess(try farcastBinary(), ["vnc", "view", "127.0.0.1::\(server.port)"] + extra,
                                     environment: env, logName: "farcast-view")
    }

    /// The JSON report `--json` prints when the window closes (its last line starting with "{").
    static func report(_ log: String) -> [String: Any]? {
        guard let line = log.split(separator: "\n").last(where: { $0.hasPrefix("{") }) else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }

    /// Waits until the window shows exactly the server's screen (1:1), pixel for pixel.
    private func expectWindowShowsServer(_ window: String, on screen: ViewerScreen, _ server: some XDisplay, _ what: String) throws {
        var last = ""
        do {
            try waitUntil("the window to show \(what)", timeout: 15) {
                let expected = try XWDImage.captureRoot(of: server)
                let shown = try XWDImage.capture(window: window, of: screen)
                guard shown.width == expected.width && shown.height == expected.height else {
                    last = "window \(shown.width)x\(shown.height), server \(expected.width)x\(expected.height)"
                    return false
                }
                let differing = zip(shown.pixels, expected.pixels).filter { $0 != $1 }.count
                last = "\(differing) of \(expected.pixels.count) pixels differ"
                return differing == 0
            }
        } catch {
            Issue.record("\(what): \(last)")
            throw error
        }
    }

    @Test func windowShowsTheServersScreenPixelForPixelThroughUpdatesAndAResize() throws {
        let server = try XvncServer(geometry: "400x300", securityTypes: "None", passwords: nil)
        let first = try server.drawTestContent(kind: "mixed", seed: 1, in: folder)
        let screen = try ViewerScreen()
        let viewer = try view(server, on: screen, ["--scale", "1:1", "--no-clipboard", "--json"])
        defer { viewer.stop() }
        let window = try screen.viewerWindow(viewer)
        try expectWindowShowsServer(window, on: screen, server, "the first frame")

        // A series of updates: new pictures over the old one.
        first.stop()
        let second = try server.drawTestContent(kind: "photo", seed: 2, background: "darkolivegreen", in: folder)
        try expectWindowShowsServer(window, on: screen, server, "the second picture")
        second.stop()
        let third = try server.drawTestContent(kind: "mixed", seed: 3, background: "gray30", in: folder)
        defer { third.stop() }
        try expectWindowShowsServer(window, on: screen, server, "the third picture")

        // Updates went straight to the window surface; the menu (F8) makes the next frames whole
        // redraws from the texture, which must have caught up with them.
        try screen.x("xdotool", ["windowfocus", "--sync", window], package: "xdotool")
        try screen.x("xdotool", ["key", "F8"], package: "xdotool")
        try waitUntil("the menu to cover part of the picture", timeout: 10) {
            try XWDImage.capture(window: window, of: screen).pixels != XWDImage.captureRoot(of: server).pixels
        }
        try screen.x("xdotool", ["key", "Escape"], package: "xdotool")
        try expectWindowShowsServer(window, on: screen, server, "the picture after the menu closed (a whole redraw)")

        // The remote desktop changes size: the window follows and still matches.
        let resized = try run(try farcastBinary(), ["vnc", "resize", "127.0.0.1::\(server.port)", "520x360"],
                              environment: ["XDG_STATE_HOME": folder.path + "/state"], timeout: 30)
        #expect(resized.status == 0, "stderr: \(resized.stderr)")
        try expectWindowShowsServer(window, on: screen, server, "the resized desktop")

        // Without a GPU the window is drawn by SDL's software renderer, and updates after the
        // first frame send only their rectangles: the pictures above were checked through that path.
        viewer.terminate()
        #expect(viewer.waitForExit(timeout: 10), "the viewer stops on SIGTERM")
        let report = Self.report(viewer.log)
        #expect(report?["renderer"] as? String == "software", "\(viewer.log)")
        #expect((report?["partial_frames"] as? Int ?? 0) > 0, "\(viewer.log)")
    }

    @Test func keysTypedAndClicksMadeInTheWindowArriveOnTheRemoteDesktop() throws {
        let server = try XvncServer(geometry: "400x300", securityTypes: "None", passwords: nil)
        let echo = try InputEcho(on: server)
        let screen = try ViewerScreen()
        let viewer = try view(server, on: screen, ["--scale", "1:1", "--no-clipboard"])
        defer { viewer.stop() }
        let window = try screen.viewerWindow(viewer)
        try screen.x("xdotool", ["windowfocus", "--sync", window], package: "xdotool")

        // Typed as a keyboard would (XTEST): Latin-1, Greek and Cyrillic through the input
        // method's text, Return through its keycode.
        let text = "Hi wörld αβγ Жж"
        try screen.x("xdotool", ["type", "--delay", "40", text], package: "xdotool")
        try screen.x("xdotool", ["key", "Return"], package: "xdotool")
        try echo.waitForEvents("the typed text") { events in
            events.compactMap { if case .key(_, let t?) = $0 { t } else { nil } }.joined() == text + "\r"
        }
        // Every key pressed was released again.
        let events = echo.events
        let presses = events.filter { if case .key(let k, _) = $0, ![0xFFE1, 0xFFE2, 0xFE03].contains(k) { true } else { false } }.count
        let releases = events.filter { if case .keyUp(let k) = $0, ![0xFFE1, 0xFFE2, 0xFE03].contains(k) { true } else { false } }.count
        #expect(presses == releases, "every key press has its release: \(events)")

        // A click at a window point lands on the same remote pixel (1:1, window at its origin).
        let geometry = try screen.x("xdotool", ["getwindowgeometry", window], package: "xdotool").stdout
        let position = geometry.split(separator: "\n").first { $0.contains("Position:") }?
            .split(separator: " ").dropFirst().first?.split(separator: ",").compactMap { Int($0) } ?? []
        #expect(position.count == 2, "xdotool getwindowgeometry: \(geometry)")
        guard position.count == 2 else { return }
        try screen.x("xdotool", ["mousemove", "--sync", "\(position[0] + 123)", "\(position[1] + 77)", "click", "3"], package: "xdotool")
        try echo.waitForEvents("the right click") { $0.contains(.button(3, x: 123, y: 77)) && $0.contains(.release(3)) }
        // The wheel: one notch down is button 5 pressed and released.
        try screen.x("xdotool", ["click", "5"], package: "xdotool")
        try echo.waitForEvents("the wheel click") { $0.contains { if case .button(5, _, _) = $0 { true } else { false } } && $0.contains(.release(5)) }
    }

    /// Typing through an input method, as users of Chinese, Japanese, Vietnamese or accented
    /// Latin do: IBus runs on the viewer's display with m17n's Latin prefix engine, where `"`
    /// then `a` compose "ä" and `'` then `e` "é". The keys the engine takes in never reach the
    /// remote side on their own; its committed text does, as the characters it composed.
    @Test func textComposedByAnInputMethodArrivesAsItsCharacters() throws {
        let server = try XvncServer(geometry: "400x300", securityTypes: "None", passwords: nil)
        let echo = try InputEcho(on: server)
        let screen = try ViewerScreen()
        let ime = try IBusInputMethod(on: screen, engine: "m17n:t:latn-pre", folder: folder)
        defer { ime.stop() }
        var env = screen.environment.merging(ime.environment) { $1 }
        env["XDG_STATE_HOME"] = folder.path + "/state"
        let viewer = try BackgroundProcess(try farcastBinary(), ["vnc", "view", "127.0.0.1::\(server.port)", "--scale", "1:1", "--no-clipboard"],
                                           environment: env, logName: "farcast-view")
        defer { viewer.stop() }
        let window = try screen.viewerWindow(viewer)
        try screen.x("xdotool", ["windowfocus", "--sync", window], package: "xdotool")

        try screen.x("xdotool", ["type", "--delay", "60", "x\"ay 'e"], package: "xdotool")
        try screen.x("xdotool", ["key", "Return"], package: "xdotool")
        let typed = { (events: [XInputEvent]) in events.compactMap { if case .key(_, let t?) = $0 { t } else { nil } }.joined() }
        try echo.waitForEvents("the composed text") { typed($0).hasSuffix("\r") }
        #expect(typed(echo.events) == "xäy é\r", "the remote desktop read \(echo.events)")
        #expect(!echo.events.contains(.key(keysym: 0x22, text: "\"")) && !echo.events.contains(.key(keysym: 0x27, text: "'")),
                "the keys the input method composed with reached the remote side: \(echo.events)")
    }

    @Test func clipboardTravelsBothWays() throws {
        let server = try XvncServer(geometry: "400x300", securityTypes: "None", passwords: nil)
        let screen = try ViewerScreen()
        let viewer = try view(server, on: screen, ["--scale", "1:1"])
        defer { viewer.stop() }
        let window = try screen.viewerWindow(viewer)
        try screen.x("xdotool", ["windowfocus", "--sync", window], package: "xdotool")

        // Copied on the viewer's desktop → pasteable on the remote one.
        let local = "from the viewer: grüße ✓"
        let owner = try screen.setSelection(local, in: folder)
        try waitUntil("the remote clipboard to hold the viewer's text", timeout: 10) { try server.selection() == local }
        owner.stop()

        // Copied on the remote desktop → on the viewer's clipboard.
        let remote = "from the server: ½ αβγ"
        let remoteOwner = try server.setSelection(remote, in: folder)
        defer { remoteOwner.stop() }
        try waitUntil("the viewer's clipboard to hold the server's text", timeout: 10) { try screen.selection() == remote }
    }

    @Test func viewerReconnectsByItselfWhenTheServerRestarts() throws {
        var server = try XvncServer(geometry: "400x300", securityTypes: "None", passwords: nil)
        let display = server.display
        let screen = try ViewerScreen()
        var env = screen.environment
        env["XDG_STATE_HOME"] = folder.path + "/state"
        let viewer = try BackgroundProcess(try farcastBinary(), ["vnc", "view", "127.0.0.1::\(server.port)", "--scale", "1:1", "--no-clipboard", "--json"],
                                           environment: env, logName: "farcast-view")
        defer { viewer.stop() }
        let window = try screen.viewerWindow(viewer)
        try expectWindowShowsServer(window, on: screen, server, "the first server")

        server.stop()
        server = try XvncServer(geometry: "400x300", securityTypes: "None", passwords: nil, reuseDisplay: display)
        let content = try server.drawTestContent(kind: "mixed", seed: 9, background: "firebrick", in: folder)
        defer { content.stop() }
        // Back-off is 1 s, 2 s, 4 s…: the restarted server is found within a few seconds.
        try expectWindowShowsServer(window, on: screen, server, "the restarted server's desktop")

        viewer.terminate()
        #expect(viewer.waitForExit(timeout: 10), "the viewer stops on SIGTERM")
        let report = Self.report(viewer.log)
        #expect(report?["sessions"] as? Int == 2, "one session before the restart, one after: \(viewer.log)")
    }

    @Test func automaticQualityPicksJPEGOnASlowLinkAndLosslessOnLoopback() throws {
        let server = try XvncServer(geometry: "640x480", securityTypes: "None", passwords: nil)
        let screen = try ViewerScreen()

        func watch(seconds: Int) throws -> [String: Any] {
            let viewer = try view(server, on: screen, ["--no-clipboard", "--json", "--duration", "\(seconds)"])
            defer { viewer.stop() }
            _ = try screen.viewerWindow(viewer, timeout: 30)
            // Changing photographic content: large updates that show the link's speed.
            for seed in 1...4 {
                let picture = try server.drawTestContent(kind: "photo", width: 600, height: 440, seed: seed, in: folder)
                usleep(700_000)
                picture.stop()
            }
            #expect(viewer.waitForExit(timeout: Double(seconds) + 20), "the viewer closes after --duration")
            guard let report = Self.report(viewer.log) else {
                Issue.record("no JSON report: \(viewer.log)")
                return [:]
            }
            return report
        }

        let fast = try watch(seconds: 6)
        #expect((fast["quality"] as? String)?.hasPrefix("lossless") == true, "loopback stays lossless: \(fast)")

        // 5 Mbit/s with 40 ms delay on what the server sends (this kernel has no netem).
        let link = try ImpairedLink(match: "-p tcp --sport \(server.port)", options: ["--rate-kbit", "5000", "--delay-ms", "40"], folder: folder)
        defer { link.stop() }
        let slow = try watch(seconds: 10)
        #expect((slow["quality"] as? String)?.hasPrefix("JPEG") == true, "a 5 Mbit/s link gets JPEG: \(slow)")
        #expect((slow["link_megabits_per_second"] as? Double).map { $0 < 10 } == true, "the link estimate is below 10 Mbit/s: \(slow)")
    }

    /// Started without a terminal (a session of its own, as from a desktop menu), the viewer
    /// asks for the password in its window; a refused one is asked for again.
    @Test func withoutATerminalThePasswordIsAskedInTheWindowAndAgainWhenRefused() throws {
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(passwords: passwords)
        let screen = try ViewerScreen()
        var env = screen.environment
        env["XDG_STATE_HOME"] = folder.path + "/state"
        env.removeValue(forKey: "FARCAST_VNC_PASSWORD")
        let viewer = try BackgroundProcess(try farcastBinary(), ["vnc", "view", "127.0.0.1::\(server.port)", "--scale", "1:1", "--no-clipboard"],
                                           environment: env, logName: "farcast-view", newSession: true)
        defer { viewer.stop() }
        func answer(_ text: String) throws {
            let window = try screen.window(titled: " — password$", of: viewer)
            try screen.x("xdotool", ["windowfocus", "--sync", window], package: "xdotool")
            try screen.x("xdotool", ["type", "--delay", "30", text], package: "xdotool")
            try screen.x("xdotool", ["key", "Return"], package: "xdotool")
        }
        try answer("wrong-one")
        try waitUntil("the wrong password to be refused", timeout: 15) { viewer.log.contains("try again") }
        try answer(passwords.password)
        let window = try screen.viewerWindow(viewer)
        try expectWindowShowsServer(window, on: screen, server, "the desktop after the password")
    }

    /// --relative-pointer: the remote pointer moves by how far the mouse moved, and buttons
    /// press where it is.
    @Test func relativePointerMovesTheRemotePointerByTheMotion() throws {
        let server = try XvncServer(geometry: "400x300", securityTypes: "None", passwords: nil)
        let echo = try InputEcho(on: server)
        let screen = try ViewerScreen()
        let viewer = try view(server, on: screen, ["--scale", "1:1", "--no-clipboard", "--relative-pointer"])
        defer { viewer.stop() }
        let window = try screen.viewerWindow(viewer)
        try screen.x("xdotool", ["windowfocus", "--sync", window], package: "xdotool")
        try screen.x("xdotool", ["mousemove", "--window", window, "200", "150"], package: "xdotool")
        usleep(300_000)
        func clickAfterMoving(_ dx: Int, _ dy: Int) throws -> (x: Int, y: Int) {
            let before = echo.events.count
            try screen.x("xdotool", ["mousemove_relative", "--", "\(dx)", "\(dy)"], package: "xdotool")
            usleep(200_000)
            try screen.x("xdotool", ["click", "1"], package: "xdotool")
            var at: (x: Int, y: Int)?
            try echo.waitForEvents("a click after moving by (\(dx), \(dy))") { events in
                for case .button(1, let x, let y) in events.dropFirst(before) { at = (x, y) }
                return at != nil && events.dropFirst(before).contains(.release(1))
            }
            return at ?? (0, 0)
        }
        let first = try clickAfterMoving(30, 20)
        let second = try clickAfterMoving(40, -10)
        #expect(second.x - first.x == 40 && second.y - first.y == -10, "moved by (40, -10): \(first) → \(second)")
    }

    /// QEMU takes keys as XT scancodes (QEMU extended key events): the viewer sends the
    /// physical key's scancode with every keysym, read back from QEMU's key-event trace.
    @Test func keysReachQEMUWithTheirPhysicalScancodes() throws {
        let server = try QEMUVNCServer(folder: folder)
        let screen = try ViewerScreen()
        var env = screen.environment
        env["XDG_STATE_HOME"] = folder.path + "/state"
        let viewer = try BackgroundProcess(try farcastBinary(), ["vnc", "view", "127.0.0.1::\(server.port)", "--security", "none", "--no-clipboard"],
                                           environment: env, logName: "farcast-view")
        defer { viewer.stop() }
        let window = try screen.viewerWindow(viewer)
        try screen.x("xdotool", ["windowfocus", "--sync", window], package: "xdotool")
        try screen.x("xdotool", ["type", "--delay", "40", "aZ1"], package: "xdotool")
        try screen.x("xdotool", ["key", "Return", "ctrl+c", "F5"], package: "xdotool")
        // keysym → the XT scancode of the US-layout key that types it.
        let expected: [(UInt32, UInt32)] = [(0x61, 0x1E), (0xFFE1, 0x2A), (0x5A, 0x2C), (0x31, 0x02), (0xFF0D, 0x1C), (0xFFE3, 0x1D), (0x63, 0x2E), (0xFFC2, 0x3F)]
        var seen: [(down: Bool, keysym: UInt32, scancode: UInt32?)] = []
        do {
            try waitUntil("QEMU to see every key pressed and released", timeout: 15) {
                seen = server.keyEvents
                return expected.allSatisfy { key in seen.contains { !$0.down && $0.keysym == key.0 } }
            }
        } catch {
            Issue.record("QEMU saw \(seen)")
            throw error
        }
        for (keysym, scancode) in expected {
            let events = seen.filter { $0.keysym == keysym }
            #expect(events.count == 2 && events.allSatisfy { $0.scancode == scancode },
                    "keysym 0x\(String(keysym, radix: 16)): one press and one release with scancode 0x\(String(scancode, radix: 16)), got \(events)")
        }
        #expect(seen.allSatisfy { $0.scancode != nil }, "every key went as an extended key event: \(seen)")
    }

    /// On Wayland: the same window under Weston, the picture pixel for pixel and typed keys
    /// arriving. Weston runs with its X11 backend inside an Xvfb, because that gives it a seat
    /// (a keyboard and pointer xdotool can drive); SDL 2.26 crashes in SDL_Init on a compositor
    /// without any seat, such as Weston's headless backend — no desktop has none.
    @Test func onWaylandTheWindowShowsTheDesktopAndTakesKeys() throws {
        let server = try XvncServer(geometry: "400x300", securityTypes: "None", passwords: nil)
        let content = try server.drawTestContent(kind: "mixed", seed: 5, in: folder)
        defer { content.stop() }
        let screen = try ViewerScreen()
        let runtime = folder.path + "/xdg-runtime"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // kiosk-shell: the one window fills the output, so the picture's place is known.
        try "[core]\nshell=kiosk-shell.so\n".write(toFile: folder.path + "/weston.ini", atomically: true, encoding: .utf8)
        var westonEnv = screen.environment
        westonEnv["XDG_RUNTIME_DIR"] = runtime
        let weston = try BackgroundProcess(try requireExecutable("weston", package: "weston"),
                                           ["--config=\(folder.path)/weston.ini", "--backend=x11-backend.so", "--use-pixman", "--socket=wayland-farcast",
                                            "--width=800", "--height=600", "--idle-time=0"], environment: westonEnv, logName: "weston")
        defer { weston.stop() }
        try waitUntil("Weston's socket", timeout: 15) {
            guard weston.isRunning else { throw PeerFailed(name: "weston", log: weston.log) }
            return FileManager.default.fileExists(atPath: runtime + "/wayland-farcast")
        }
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "DISPLAY")
        env["WAYLAND_DISPLAY"] = "wayland-farcast"
        env["XDG_RUNTIME_DIR"] = runtime
        env["XDG_STATE_HOME"] = folder.path + "/state"
        let viewer = try BackgroundProcess(try farcastBinary(), ["vnc", "view", "127.0.0.1::\(server.port)", "--scale", "1:1", "--no-clipboard", "--json"],
                                           environment: env, logName: "farcast-view")
        defer { viewer.stop() }
        var output = ""
        try waitUntil("Weston's window on :\(screen.display)", timeout: 15) {
            let found = try run(try requireExecutable("xdotool", package: "xdotool"), ["search", "--class", "^Weston Compositor$"],
                                environment: screen.environment, timeout: 10)
            output = found.stdout.split(separator: "\n").first.map(String.init) ?? ""
            return !output.isEmpty
        }

        // The 400×300 picture at 1:1, centred in the 800×600 output.
        var last = ""
        do {
            try waitUntil("the picture on Weston's output", timeout: 20) {
                guard viewer.isRunning else { throw PeerFailed(name: "farcast vnc view", log: viewer.log) }
                let expected = try XWDImage.captureRoot(of: server)
                let shown = try XWDImage.capture(window: output, of: screen)
                guard shown.width == 800, shown.height == 600 else { last = "output \(shown.width)x\(shown.height)"; return false }
                var differing = 0
                for y in 0..<300 { for x in 0..<400 where shown.pixels[(150 + y) * 800 + 200 + x] != expected.pixels[y * 400 + x] { differing += 1 } }
                last = "\(differing) of 120000 pixels differ"
                return differing == 0
            }
        } catch {
            Issue.record("Wayland picture: \(last); viewer: \(viewer.log)")
            throw error
        }

        // Keys typed into Weston's window reach the remote desktop.
        content.stop()
        let echo = try InputEcho(on: server)
        func typed(_ events: ArraySlice<XInputEvent>) -> String {
            events.compactMap { if case .key(_, let t?) = $0 { t } else { nil } }.joined()
        }
        func typeIntoWeston() throws {
            try screen.x("xdotool", ["windowfocus", "--sync", output], package: "xdotool")
            try screen.x("xdotool", ["mousemove", "--window", output, "400", "300"], package: "xdotool")
            try screen.x("xdotool", ["type", "--delay", "40", "Wayland ok"], package: "xdotool")
        }
        try typeIntoWeston()
        // In CI, now and then not one key of the text arrives: the keyboard focus had not reached
        // the viewer's surface inside Weston, whose X11 backend follows the X focus xdotool
        // changes (never seen in dozens of runs alone). That is the harness's seat, not the
        // viewer: click into Weston's output (which activates the surface under the pointer),
        // type again, and require every key of that attempt; at most three attempts. Some keys
        // of an attempt arriving and others not is a real failure and is not retried.
        for attempt in 1...3 {
            do {
                try echo.waitForEvents("the text typed on Wayland (attempt \(attempt))", timeout: 6) { typed($0[...]) == "Wayland ok" }
                break
            } catch {
                guard attempt < 3, typed(echo.events[...]).isEmpty else { throw error }
                print("Wayland: no key arrived on attempt \(attempt); clicking into Weston's output and typing again. Weston's log:\n\(weston.log.suffix(1000))")
                try screen.x("xdotool", ["mousemove", "--window", output, "400", "300", "click", "1"], package: "xdotool")
                usleep(500_000)
                try typeIntoWeston()
            }
        }
        viewer.terminate()
        #expect(viewer.waitForExit(timeout: 10), "the viewer stops on SIGTERM")
        #expect(Self.report(viewer.log)?["frames_presented"] as? Int ?? 0 > 0, "frames were presented: \(viewer.log)")
    }

    /// `view --audio`: while the window shows a beeping QEMU guest, its 1 kHz tone plays on an
    /// ALSA device (ALSA's file plugin records what reaches it), and the report counts the
    /// seconds played. A server with no audio (Xvnc) gets a warning that says where audio
    /// comes from, and the window works as without the option.
    @Test func aGuestsSoundPlaysWhileTheWindowShowsIt() throws {
        let server = try QEMUVNCServer.beeping(in: folder)
        let device = try ALSACaptureDevice(in: folder)
        let screen = try ViewerScreen()
        var env = screen.environment
        env["XDG_STATE_HOME"] = folder.path + "/state"
        env["HOME"] = device.home
        let viewer = try BackgroundProcess(try farcastBinary(), ["vnc", "view", "127.0.0.1::\(server.port)", "--security", "none", "--no-clipboard",
                                                                "--audio", "alsa:\(ALSACaptureDevice.name)", "--duration", "4", "--json"],
                                           environment: env, logName: "farcast-view")
        defer { viewer.stop() }
        _ = try screen.viewerWindow(viewer)
        #expect(viewer.waitForExit(timeout: 20), "the window closes after --duration")
        #expect(viewer.terminationStatus == 0, "log: \(viewer.log)")
        let tone = LeftChannelTone(device.captured, skipping: 0)
        #expect(tone.seconds > 2 && abs(tone.hertz - 1000) < 20, "what reached the ALSA device: \(tone)")
        let played = Self.report(viewer.log)?["audio_seconds"] as? Double
        #expect(played.map { $0 > 2 } == true, "audio_seconds in the report: \(viewer.log)")
        #expect(!viewer.log.contains("sent no audio"), "log: \(viewer.log)")

        let silent = try XvncServer(geometry: "400x300", securityTypes: "None", passwords: nil)
        let quiet = try BackgroundProcess(try farcastBinary(), ["vnc", "view", "127.0.0.1::\(silent.port)", "--no-clipboard",
                                                               "--audio", folder.path + "/none.wav", "--duration", "6", "--json"],
                                          environment: env, logName: "farcast-view")
        defer { quiet.stop() }
        let window = try screen.viewerWindow(quiet)
        try expectWindowShowsServer(window, on: screen, silent, "a server without audio")
        #expect(quiet.waitForExit(timeout: 20) && quiet.terminationStatus == 0, "log: \(quiet.log)")
        #expect(quiet.log.contains("the server sent no audio") && quiet.log.contains("audiodev"), "log: \(quiet.log)")
    }

    @Test func withoutADisplayTheViewerSaysSoAndExits() throws {
        let server = try XvncServer(geometry: "400x300", securityTypes: "None", passwords: nil)
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "DISPLAY")
        env.removeValue(forKey: "WAYLAND_DISPLAY")
        env["XDG_STATE_HOME"] = folder.path + "/state"
        let result = try run(try farcastBinary(), ["vnc", "view", "127.0.0.1::\(server.port)"], environment: env, timeout: 30)
        #expect(result.status == 1)
        #expect(result.stderr.contains("cannot open a window"), "stderr: \(result.stderr)")
    }
}
