import Foundation
import Synchronization

/// scripts/lib/x11_input_echo.c built once per test process: an X client that prints the key
/// and button events it receives (see the C file for its output format).
enum InputEchoBinary {
    private static let built = Mutex<Result<String, any Error>?>(nil)

    static func path() throws -> String {
        try built.withLock { state in
            if let state { return try state.get() }
            let result = Result<String, any Error> {
                let gcc = try requireExecutable("gcc", package: "gcc")
                let output = NSTemporaryDirectory() + "farcast-x11-input-echo-\(getpid())"
                let source = packageRoot.appendingPathComponent("scripts/lib/x11_input_echo.c").path
                let made = try run(gcc, ["-O1", "-o", output, source, "-lX11"])
                guard made.status == 0 else {
                    throw MissingPeer(what: "a working Xlib build (Debian package libx11-dev) — gcc said: \(made.stderr)")
                }
                return output
            }
            state = result
            return try result.get()
        }
    }
}

/// One event the echo client saw.
enum XInputEvent: Equatable {
    case key(keysym: UInt32, text: String?)
    case keyUp(keysym: UInt32)
    case button(Int, x: Int, y: Int)
    case release(Int)
}

/// The echo client running on a display, covering it and holding the keyboard focus.
final class InputEcho: @unchecked Sendable {
    // @unchecked: `process` is immutable after init; BackgroundProcess handles its own state.
    let process: BackgroundProcess

    init(on display: some XDisplay) throws {
        process = try BackgroundProcess(try InputEchoBinary.path(), [], environment: display.environment, logName: "x11-input-echo")
        try waitUntil("the input echo client to map its window", timeout: 10) { self.process.log.contains("ready\n") }
    }

    /// Every event so far, in order.
    var events: [XInputEvent] {
        process.log.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ").map(String.init)
            switch f.first {
            case "key" where f.count == 3:
                guard let keysym = UInt32(f[1].dropFirst(2), radix: 16) else { return nil }
                return .key(keysym: keysym, text: f[2] == "-" ? nil : String(decoding: hexBytes(f[2]), as: UTF8.self))
            case "keyup" where f.count == 2:
                return UInt32(f[1].dropFirst(2), radix: 16).map { .keyUp(keysym: $0) }
            case "button" where f.count == 4:
                guard let b = Int(f[1]), let x = Int(f[2]), let y = Int(f[3]) else { return nil }
                return .button(b, x: x, y: y)
            case "release" where f.count == 2:
                return Int(f[1]).map { .release($0) }
            default:
                return nil
            }
        }
    }

    /// Waits until the events satisfy `condition`, then returns them.
    @discardableResult
    func waitForEvents(_ what: String, timeout: TimeInterval = 10, until condition: ([XInputEvent]) -> Bool) throws -> [XInputEvent] {
        var latest: [XInputEvent] = []
        do {
            try waitUntil(what, timeout: timeout) {
                latest = self.events
                return condition(latest)
            }
        } catch {
            throw EventsMissing(what: what, detail: "\(error)", events: latest)
        }
        return latest
    }

    private func hexBytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = hex.startIndex
        while let j = hex.index(i, offsetBy: 2, limitedBy: hex.endIndex), i < hex.endIndex {
            if let b = UInt8(hex[i..<j], radix: 16) { out.append(b) }
            i = j
        }
        return out
    }
}

/// The X client echoing input ran, but what a test waited for never arrived.
struct EventsMissing: Error, CustomStringConvertible {
    var what: String
    var detail: String
    var events: [XInputEvent]
    var description: String { "x11_input_echo never saw \(what) (\(detail)); events so far: \(events)" }
}

/// Polls `condition` until it holds or `timeout` passes.
func waitUntil(_ what: String, timeout: TimeInterval, _ condition: () throws -> Bool) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return }
        usleep(50_000)
    }
    if try condition() { return }
    throw TimedOut(command: "waiting for \(what)", seconds: timeout)
}

extension XDisplay {
    /// Puts text on an X selection: xclip in the foreground (-quiet) serves it until another
    /// owner takes the selection or the returned process is stopped.
    func setSelection(_ text: String, selection: String = "clipboard", in folder: TemporaryFolder) throws -> BackgroundProcess {
        let file = folder.path + "/selection-\(UInt32.random(in: 0...UInt32.max))"
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        let owner = try BackgroundProcess(try requireExecutable("xclip", package: "xclip"), ["-quiet", "-selection", selection, "-i", file],
                                          environment: environment, logName: "xclip")
        // Owned once xclip answers a read with the text.
        try waitUntil("xclip to own the \(selection) selection", timeout: 10) { try self.selection(selection) == text }
        return owner
    }

    /// Reads an X selection with xclip (nil when nobody owns it or it has no text).
    func selection(_ selection: String = "clipboard") throws -> String? {
        let result = try run(try requireExecutable("xclip", package: "xclip"), ["-selection", selection, "-o"],
                             environment: environment, timeout: 10)
        return result.status == 0 ? result.stdout : nil
    }

    /// The pointer position according to the X server (xdotool getmouselocation).
    func pointerLocation() throws -> (x: Int, y: Int) {
        let out = try x("xdotool", ["getmouselocation"], package: "xdotool").stdout
        var x = -1, y = -1
        for field in out.split(separator: " ") {
            if field.hasPrefix("x:") { x = Int(field.dropFirst(2)) ?? -1 }
            if field.hasPrefix("y:") { y = Int(field.dropFirst(2)) ?? -1 }
        }
        return (x, y)
    }
}
