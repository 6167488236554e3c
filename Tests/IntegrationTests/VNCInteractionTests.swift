import FarcastSupport
import Foundation
import RFB
import Testing

/// Working *through* a real Xvnc with `farcast vnc type/key/click/move/clipboard/resize/do`,
/// checked from the X side: an X client that echoes its input, xdotool, xclip, xdpyinfo, xwd.
@Suite(.tags(.timing), .serialized, .timeLimit(.minutes(3)))
struct VNCInteractionTests {
    let folder: TemporaryFolder
    let environment: [String: String]

    init() throws {
        folder = try TemporaryFolder()
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = folder.path + "/state"
        env.removeValue(forKey: "DISPLAY")
        environment = env
    }

    private func farcast(_ arguments: [String], stdin: Data? = nil) throws -> ProcessResult {
        try run(try farcastBinary(), arguments, environment: environment, stdin: stdin ?? Data(), timeout: 60)
    }

    private func farcastInBackground(_ arguments: [String]) throws -> BackgroundProcess {
        try BackgroundProcess(try farcastBinary(), arguments, environment: environment, logName: "farcast")
    }

    private func server(_ geometry: String = "400x300") throws -> (XvncServer, String) {
        let server = try XvncServer(geometry: geometry, securityTypes: "None", passwords: nil)
        return (server, "127.0.0.1::\(server.port)")
    }

    /// Key presses that typed text, joined; modifier presses the server adds on its own
    /// (Shift, Caps Lock for capitals) type nothing and drop out.
    private func typedText(_ events: [XInputEvent]) -> String {
        events.compactMap { if case .key(_, let text?) = $0 { text } else { nil } }.joined()
    }

    private func pressedKeysyms(_ events: [XInputEvent]) -> [UInt32] {
        let fakeModifiers: Set<UInt32> = [0xFFE1, 0xFFE2, 0xFFE5, 0xFE03]
        return events.compactMap { if case .key(let k, _) = $0, !fakeModifiers.contains(k) { k } else { nil } }
    }

    @Test func typedUnicodeTextAndNamedKeysArriveInAnXClient() throws {
        let (server, url) = try server()
        let echo = try InputEcho(on: server)
        let info = try farcast(["vnc", "info", url])
        #expect(info.stdout.contains("scancodes (QEMU extended key events)"), "Xvnc offers QEMU key events: \(info.stdout)")

        let text = "Hello, wörld! ~ αβγ Жж 日本語 😀 ½"
        let typed = try farcast(["vnc", "type", url, text])
        #expect(typed.status == 0, "stderr: \(typed.stderr)")
        try echo.waitForEvents("the typed text") { typedText($0) == text }

        // Text from standard input; a newline presses Return.
        let piped = try farcast(["vnc", "type", url, "-"], stdin: Data("ok\n".utf8))
        #expect(piped.status == 0, "stderr: \(piped.stderr)")
        let afterPipe = try echo.waitForEvents("the piped text") { typedText($0) == text + "ok\r" }
        let before = afterPipe.count

        let keys = try farcast(["vnc", "key", url, "Return", "F5", "ctrl+x", "Left", "BackSpace"])
        #expect(keys.status == 0, "stderr: \(keys.stderr)")
        let events = try echo.waitForEvents("the named keys") { pressedKeysyms(Array($0.dropFirst(before))).count >= 6 }
        let tail = Array(events.dropFirst(before))
        #expect(pressedKeysyms(tail) == [0xFF0D, 0xFFC2, 0xFFE3, 0x78, 0xFF51, 0xFF08])
        #expect(tail.contains(.keyUp(keysym: 0xFFE3)), "ctrl was released after the combination")

        // View-only sends nothing and says why.
        let refused = try farcast(["vnc", "type", "--view-only", url, "q"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("view-only"), "stderr: \(refused.stderr)")
        _ = try farcast(["vnc", "key", url, "Escape"])
        let final = try echo.waitForEvents("Escape") { $0.contains(.key(keysym: 0xFF1B, text: "\u{1B}")) || $0.contains { if case .key(0xFF1B, _) = $0 { true } else { false } } }
        #expect(!final.contains { if case .key(0x71, _) = $0 { true } else { false } }, "no 'q' from the view-only session")

        // Unknown key names fail before connecting, naming the key.
        let unknown = try farcast(["vnc", "key", url, "ctrl+bogus"])
        #expect(unknown.status != 0 && unknown.stderr.contains("unknown key 'bogus'"), "stderr: \(unknown.stderr)")
    }

    /// Under CPU load, typing stays lossless: Xvnc maps characters outside its keymap onto spare
    /// keycodes, and a client that sees the key before the keymap change read keysym 0 (an α
    /// was lost once in a full run). One busy loop more than the machine has cores, and text
    /// that needs fresh keycodes all the way, typed three times.
    @Test func typingStaysLosslessWhileTheMachineIsBusy() throws {
        let (server, url) = try server()
        let echo = try InputEcho(on: server)
        let hogs = try (0...ProcessInfo.processInfo.activeProcessorCount).map { _ in try BackgroundProcess("/bin/sh", ["-c", "while :; do :; done"], logName: "cpu-hog") }
        defer { for hog in hogs { hog.stop() } }
        let text = "αβγδεζ ЖжЩщЯя ½¾ ö 日本語 ∑∂ ąę"
        var expected = ""
        for round in 1...3 {
            let typed = try farcast(["vnc", "type", url, text])
            #expect(typed.status == 0, "stderr: \(typed.stderr)")
            expected += text
            var seen = ""
            do {
                try echo.waitForEvents("round \(round) of the typed text", timeout: 20) { events in
                    seen = typedText(events)
                    return seen.count >= expected.count
                }
            } catch {
                Issue.record("round \(round): typed so far \(seen.debugDescription)")
                throw error
            }
            #expect(seen == expected, "round \(round): \(seen.debugDescription)")
        }
    }

    @Test func pointerMovesClicksAndWheelLandWhereSent() throws {
        let (server, url) = try server()
        let echo = try InputEcho(on: server)

        #expect(try farcast(["vnc", "move", url, "123", "45"]).status == 0)
        #expect(try server.pointerLocation() == (123, 45))

        #expect(try farcast(["vnc", "click", url, "200", "100", "--button", "3"]).status == 0)
        try echo.waitForEvents("the right click") { $0.contains(.button(3, x: 200, y: 100)) && $0.contains(.release(3)) }
        #expect(try server.pointerLocation() == (200, 100))

        // Relative motion keeps fractions: three moves of 0.4 px add up to one pixel.
        let before = echo.events.count
        let script = try farcast(["vnc", "do", url, "-e", "move 10 10", "-e", "moveby 0.4 0.4", "-e", "moveby 0.4 0.4", "-e", "moveby 0.4 0.4",
                                  "-e", "scroll down 2", "-e", "scroll left", "-e", "click button=2 count=2"])
        #expect(script.status == 0, "stderr: \(script.stderr)")
        let events = try echo.waitForEvents("wheel and double click") { Array($0.dropFirst(before)).filter { if case .release = $0 { true } else { false } }.count >= 5 }
        let buttons = events.dropFirst(before).compactMap { if case .button(let b, _, _) = $0 { b } else { nil } }
        #expect(buttons == [5, 5, 6, 2, 2])
        #expect(events.dropFirst(before).contains(.button(2, x: 11, y: 11)), "the click lands at the accumulated position")
        #expect(try server.pointerLocation() == (11, 11))

        // Keys and buttons still held when the session ends are released.
        let held = echo.events.count
        #expect(try farcast(["vnc", "do", url, "-e", "move 11 11", "-e", "keydown shift", "-e", "mousedown 1"]).status == 0)
        let released = try echo.waitForEvents("releases on disconnect") {
            let tail = $0.dropFirst(held)
            return tail.contains(.release(1)) && tail.contains(.keyUp(keysym: 0xFFE1))
        }
        #expect(released.dropFirst(held).contains(.button(1, x: 11, y: 11)))

        // A new session does not know where the pointer is: pressing in place needs a move first.
        let nowhere = try farcast(["vnc", "do", url, "-e", "click"])
        #expect(nowhere.status == 1 && nowhere.stderr.contains("move it first"), "stderr: \(nowhere.stderr)")

        let outside = try farcast(["vnc", "click", url, "999", "10"])
        #expect(outside.status == 1 && outside.stderr.contains("outside the 400x300 screen"), "stderr: \(outside.stderr)")
    }

    /// TigerVNC tells a client that asked for the VMware cursor position where its pointer went
    /// when something else moved it (here xdotool, as an application warping the pointer would):
    /// a click "in place" then lands there, with no `move` from this session.
    @Test func aClickInPlaceLandsWhereTheServerMovedThePointer() throws {
        let (server, url) = try server()
        let echo = try InputEcho(on: server)
        let session = try farcastInBackground(["vnc", "do", url, "-e", "sync", "-e", "wait 4", "-e", "click button=3"])
        defer { session.stop() }
        // Xvnc logs the client's pixel format as it handles SetPixelFormat, which our client
        // sends just before its encodings: from then on the server reports pointer moves.
        try waitUntil("the session to reach Xvnc", timeout: 20) {
            server.process.log.components(separatedBy: "Client pixel format").count > 1
        }
        usleep(300_000)
        _ = try server.x("xdotool", ["mousemove", "150", "160"], package: "xdotool")
        try echo.waitForEvents("the click in place", timeout: 20) { $0.contains(.release(3)) }
        #expect(echo.events.contains(.button(3, x: 150, y: 160)), "events: \(echo.events)")
        #expect(session.waitForExit(timeout: 10) && session.terminationStatus == 0, "farcast: \(session.log)")
    }

    @Test func clipboardRoundTripsUnicodeBothWays() throws {
        let (server, url) = try server()

        // farcast → X: Xvnc fetches the text when an X client pastes; farcast leaves after that.
        let text = "Grüße, 世界 ✓\nzweite Zeile"
        let setter = try farcastInBackground(["vnc", "clipboard", "set", url, text, "--quiet"])
        var pasted: String?
        try waitUntil("xclip to read the clipboard farcast set", timeout: 15) {
            pasted = try server.selection()
            return pasted == text
        }
        try waitUntil("farcast to leave after the paste", timeout: 10) { !setter.isRunning }
        #expect(setter.terminationStatus == 0, "farcast: \(setter.log)")

        // X → farcast: the text copied while farcast waits is printed exactly.
        let copied = "naïve — ünïcødé ✓ 🎉\nline two"
        let getter = try farcastInBackground(["vnc", "clipboard", "get", url, "--wait", "20", "--quiet"])
        var owners: [BackgroundProcess] = []
        defer { owners.forEach { $0.stop() } }
        try waitUntil("farcast to print the X clipboard", timeout: 25) {
            // Copied again and again: farcast may connect after the first copy.
            owners.append(try server.setSelection(copied, in: folder))
            usleep(300_000)
            return !getter.isRunning
        }
        #expect(getter.terminationStatus == 0)
        #expect(getter.log == copied, "farcast printed \(getter.log.debugDescription)")

        // The classic messages (--latin1-clipboard) carry ISO 8859-1: ☕ becomes "?".
        let classic = try farcastInBackground(["vnc", "do", "--latin1-clipboard", url, "-e", "clipboard set café ☕ ok", "-e", "wait 5", "--quiet"])
        try waitUntil("xclip to read the Latin-1 clipboard", timeout: 10) { try server.selection() == "café ? ok" }
        classic.stop()
    }

    @Test func remoteResizeChangesTheXScreenAndMonitorsCrop() throws {
        let (server, url) = try server()
        let resized = try farcast(["vnc", "resize", url, "640x480"])
        #expect(resized.status == 0, "stderr: \(resized.stderr)")
        #expect(try server.x("xdpyinfo", [], package: "x11-utils").stdout.contains("dimensions:    640x480 pixels"))

        // Two monitors side by side, then a screenshot of the second one only.
        let split = try farcast(["vnc", "resize", url, "800x300", "--monitors", "400x300+0+0,400x300+400+0"])
        #expect(split.status == 0, "stderr: \(split.stderr)")
        #expect(try server.x("xdpyinfo", [], package: "x11-utils").stdout.contains("dimensions:    800x300 pixels"))
        let info = try farcast(["vnc", "info", url, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any]
        let monitors = (object?["monitors"] as? [[String: Any]])?.map { "\($0["width"]!)x\($0["height"]!)+\($0["x"]!)+\($0["y"]!)" }
        #expect(monitors == ["400x300+0+0", "400x300+400+0"])

        let viewer = try server.drawTestContent(width: 700, height: 200, in: folder)
        defer { viewer.stop() }
        let shot = folder.path + "/monitor1.png"
        let taken = try farcast(["vnc", "screenshot", url, "--monitor", "1", "-o", shot])
        #expect(taken.status == 0, "stderr: \(taken.stderr)")
        let png = try decodePNG(Array(try Data(contentsOf: URL(fileURLWithPath: shot))))
        let screen = try XWDImage.captureRoot(of: server)
        #expect(png.width == 400 && png.height == 300)
        let rightHalf = (0..<300).flatMap { y in screen.pixels[(y * 800 + 400)..<(y * 800 + 800)] }
        #expect(png.pixels == rightHalf, "monitor 1 is the right half of the X screen")

        let missing = try farcast(["vnc", "screenshot", url, "--monitor", "2", "-o", shot])
        #expect(missing.status == 1 && missing.stderr.contains("monitor 2 does not exist"), "stderr: \(missing.stderr)")
    }

    @Test func x11vncRefusesResizeWithItsReason() throws {
        let server = try X11vncServer(password: nil, folder: folder)
        let refused = try farcast(["vnc", "resize", "127.0.0.1::\(server.port)", "640x480"])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("administratively prohibited"), "stderr: \(refused.stderr)")
        // A single-step command reports the server's reason alone, not "step at line 1".
        #expect(!refused.stderr.contains("step at line"), "stderr: \(refused.stderr)")
        // The same for `clipboard get` when nothing arrives.
        let empty = try farcast(["vnc", "clipboard", "get", "127.0.0.1::\(server.port)", "--wait", "1"])
        #expect(!empty.stderr.contains("step at line"), "status \(empty.status), stderr: \(empty.stderr)")
    }

    @Test func doScriptsRunStepsAndExpectScreenWaitsForTheScreen() throws {
        let (server, url) = try server("320x200")
        try server.x("xsetroot", ["-solid", "steelblue"])
        let blue = folder.path + "/blue.png", red = folder.path + "/red.png"
        let first = try farcast(["vnc", "do", url, "-e", "screenshot \(blue)"])
        #expect(first.status == 0 && first.stdout.contains("wrote \(blue): 320x200"), "stdout: \(first.stdout) stderr: \(first.stderr)")
        try server.x("xsetroot", ["-solid", "firebrick"])
        #expect(try farcast(["vnc", "do", url, "-e", "wait 0.5", "-e", "screenshot \(red)"]).status == 0)
        try server.x("xsetroot", ["-solid", "steelblue"])

        // A script file: comments, a match, and a wait for a change made while it runs.
        let script = folder.path + "/steps.txt"
        try """
            # the screen is blue now
            expect-screen \(blue) timeout=10
            expect-screen \(red) timeout=20
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let running = try farcastInBackground(["vnc", "do", url, script])
        usleep(1_500_000)
        #expect(running.isRunning, "expect-screen waits for the red screen")
        try server.x("xsetroot", ["-solid", "firebrick"])
        try waitUntil("the script to see the red screen", timeout: 20) { !running.isRunning }
        #expect(running.terminationStatus == 0, "farcast: \(running.log)")

        // A screen that never comes: the step fails with its line and the difference.
        let failing = try farcast(["vnc", "do", url, "-e", "type x", "-e", "expect-screen \(blue) timeout=1"])
        #expect(failing.status == 1)
        #expect(failing.stderr.contains("line 2") && failing.stderr.contains("did not match"), "stderr: \(failing.stderr)")

        // Mistakes in the script are reported before connecting.
        try "move 10\n".write(toFile: script, atomically: true, encoding: .utf8)
        let bad = try farcast(["vnc", "do", url, script])
        #expect(bad.status != 0 && bad.stderr.contains("line 1: usage: move X Y"), "stderr: \(bad.stderr)")
    }

    /// A script may read what an earlier step of the same script writes (the demo's screenshot of
    /// a monitor compared with expect-screen): the up-front check covers only files no earlier
    /// step makes, and a file gone when its step runs fails that step, by line.
    @Test func doScriptsReadWhatAnEarlierStepWrote() throws {
        let (server, url) = try server("320x200")
        try server.x("xsetroot", ["-solid", "steelblue"])
        let shot = folder.path + "/own.png"
        let script = folder.path + "/own-steps.txt"
        // The same file under another spelling counts as the script's own too.
        try """
            # take a picture, then compare the screen with it
            screenshot \(shot)
            expect-screen \(folder.path)/./own.png timeout=5
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let own = try farcast(["vnc", "do", url, script])
        #expect(own.status == 0, "stderr: \(own.stderr)")
        #expect(own.stdout.contains("wrote \(shot): 320x200"), "stdout: \(own.stdout)")

        // An input that no earlier step makes is still checked before connecting: a read on
        // line 1 of a file that line 2 writes is missing.
        let later = folder.path + "/later.png"
        let early = try farcast(["vnc", "do", url, "-e", "expect-screen \(later)", "-e", "screenshot \(later)"])
        #expect(early.status == 2, "status \(early.status), stderr: \(early.stderr)")
        #expect(early.stderr.contains("line 1: cannot read \(later): no such file or directory"), "stderr: \(early.stderr)")
        #expect(!FileManager.default.fileExists(atPath: later), "nothing ran: the check came before connecting")

        // The script's own file removed between its steps: the reading step fails with its line.
        let gone = folder.path + "/gone.png"
        let running = try farcastInBackground(["vnc", "do", url, "-e", "screenshot \(gone)", "-e", "wait 3", "-e", "expect-screen \(gone) timeout=1"])
        try waitUntil("the screenshot step to write \(gone)", timeout: 20) { FileManager.default.fileExists(atPath: gone) }
        try FileManager.default.removeItem(atPath: gone)
        try waitUntil("the script to end", timeout: 20) { !running.isRunning }
        #expect(running.terminationStatus == 1, "farcast: \(running.log)")
        #expect(running.log.contains("line 3") && running.log.contains("cannot read \(gone): no such file or directory"), "farcast: \(running.log)")
    }
}
