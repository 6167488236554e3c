import Foundation

/// A sequence of things to do to a remote desktop over one connection — what `farcast vnc do`
/// runs, and what the single-step commands (`type`, `key`, `click`…) are made of.
///
/// The text form has one step per line; `#` starts a comment line. Words are separated by
/// spaces; `type` and `clipboard set` take the rest of the line, where `\n`, `\t` and `\\` are
/// escapes. See `VNCScript.syntax`.
public struct VNCScript: Sendable, Equatable {
    public enum Step: Sendable, Equatable {
        case type(String)
        /// Key combinations pressed one after the other ("ctrl+alt+Delete", "Return").
        case key([String])
        case keyDown(String)
        case keyUp(String)
        case move(x: Int, y: Int)
        case moveBy(dx: Double, dy: Double)
        /// A click at a position, or where the pointer is when the position is nil.
        case click(x: Int?, y: Int?, button: Int, count: Int)
        case buttonDown(Int)
        case buttonUp(Int)
        case scroll(VNCClient.ScrollDirection, clicks: Int)
        case wait(seconds: Double)
        case setClipboard(String)
        /// Prints the server's clipboard, waiting up to `wait` seconds for it to be announced.
        case getClipboard(wait: Double)
        /// A new desktop size, optionally split into monitors (else one covering it all).
        case resize(width: Int, height: Int, monitors: [RFBRect] = [])
        /// Writes the screen (or one monitor) as a PNG.
        case screenshot(path: String, monitor: Int?)
        /// Waits until the screen (or one monitor) matches a PNG within a mean per-channel
        /// difference of `tolerance` (0–255), failing after `timeout` seconds.
        case expectScreen(path: String, monitor: Int?, tolerance: Double, timeout: Double)
        /// Waits until the server has processed everything sent so far.
        case sync
    }

    public var steps: [(line: Int, step: Step)]

    public init(steps: [(line: Int, step: Step)]) { self.steps = steps }

    public static func == (a: VNCScript, b: VNCScript) -> Bool {
        a.steps.count == b.steps.count && zip(a.steps, b.steps).allSatisfy { $0.line == $1.line && $0.step == $1.step }
    }

    public static let syntax = """
        type TEXT                 type the rest of the line
                                  (\\n Return, \\t Tab, \\\\ backslash)
        key COMBO [COMBO…]        press combinations in turn:
                                  Return, ctrl+alt+Delete, shift+F10
        keydown COMBO             hold keys down
        keyup COMBO               release them
        move X Y                  move the pointer to (X, Y)
        moveby DX DY              move relative to where it is
                                  (fractions accumulate)
        click [X Y] [button=N] [count=N]
                                  click (1 left, 2 middle, 3 right)
                                  at (X, Y) or in place
        mousedown N / mouseup N   hold or release button N (1–15)
        scroll up|down|left|right [N]
                                  turn the wheel N clicks
        wait SECONDS              pause (fractions allowed: wait 0.25)
        sync                      wait until the server has acted
                                  on everything sent
        clipboard set TEXT        put the rest of the line on the
                                  server's clipboard
        clipboard get [wait=S]    print the server's clipboard (waits
                                  up to S s, default 2, for one)
        resize WxH [monitors=G,…] ask for a new desktop size, optionally
                                  split into monitors (G = WxH+X+Y)
        screenshot PATH [monitor=N]
                                  write the screen (or monitor N, from 0)
                                  as PNG (.png) or JPEG (.jpg)
        expect-screen PATH [monitor=N] [tolerance=T] [timeout=S]
                                  wait until the screen matches PATH
                                  (mean channel difference ≤ T, default 0;
                                  timeout default 10 s)
        """

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public var line: Int
        public var message: String
        public var description: String { "line \(line): \(message)" }
    }

    /// Every line of a script that could not be read, so all can be fixed at once.
    public struct ParseErrors: Error, Equatable, CustomStringConvertible {
        public var errors: [ParseError]
        public var description: String { errors.map(\.description).joined(separator: "; ") }
    }

    /// Parses the text form, reporting every bad line.
    public static func parse(_ text: String) throws(ParseErrors) -> VNCScript {
        var steps: [(Int, Step)] = []
        var errors: [ParseError] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = String(raw)
            if line.hasSuffix("\r") { line.removeLast() }
            let trimmed = line.drop { $0 == " " || $0 == "\t" }
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            do {
                steps.append((index + 1, try step(from: String(trimmed))))
            } catch let message as StepError {
                errors.append(ParseError(line: index + 1, message: message.text))
            } catch {
                errors.append(ParseError(line: index + 1, message: "\(error)"))
            }
        }
        guard errors.isEmpty else { throw ParseErrors(errors: errors) }
        return VNCScript(steps: steps)
    }

    /// The files the script needs before it starts (expect-screen images that no earlier step
    /// writes) and the files it writes (screenshots), by line. A file an earlier screenshot step
    /// makes is the script's own, so it is not an input: whether it can be read is known only
    /// when the step that reads it runs.
    public var files: (read: [(line: Int, path: String)], written: [(line: Int, path: String)]) {
        var read: [(Int, String)] = [], written: [(Int, String)] = []
        var made = Set<String>()
        for (line, step) in steps {
            switch step {
            case .expectScreen(let path, _, _, _):
                if !made.contains(Self.samePathKey(path)) { read.append((line, path)) }
            case .screenshot(let path, _):
                written.append((line, path))
                made.insert(Self.samePathKey(path))
            default: break
            }
        }
        return (read, written)
    }

    /// One spelling per file for comparing paths a script names ("./a.png" and "a.png").
    private static func samePathKey(_ path: String) -> String {
        URL(fileURLWithPath: path).standardizedFileURL.path
    }

    struct StepError: Error { var text: String }

    /// Parses one step ("click 10 20 button=3").
    public static func parseStep(_ text: String) throws(ParseError) -> Step {
        do {
            return try step(from: text)
        } catch let error as StepError {
            throw ParseError(line: 1, message: error.text)
        } catch {
            throw ParseError(line: 1, message: "\(error)")
        }
    }

    private static func step(from text: String) throws -> Step {
        let (command, rest) = splitCommand(text)
        let words = rest.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        func number<T: LosslessStringConvertible>(_ word: String, _ what: String) throws -> T {
            guard let value = T(word) else { throw StepError(text: "\(what) must be a number, not '\(word)'") }
            return value
        }
        func options(_ words: ArraySlice<String>, allowed: Set<String>) throws -> [String: String] {
            var out: [String: String] = [:]
            for word in words {
                let parts = word.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, allowed.contains(parts[0]) else {
                    throw StepError(text: "unexpected '\(word)' (options here: \(allowed.sorted().map { "\($0)=…" }.joined(separator: ", ")))")
                }
                out[parts[0]] = parts[1]
            }
            return out
        }
        func expectCount(_ range: ClosedRange<Int>, _ usage: String) throws {
            guard range.contains(words.count) else { throw StepError(text: "usage: \(usage)") }
        }
        switch command.lowercased() {
        case "type":
            guard !rest.isEmpty else { throw StepError(text: "usage: type TEXT") }
            return .type(try unescape(rest))
        case "key":
            try expectCount(1...1000, "key COMBO [COMBO…]")
            for combo in words { _ = try Keysym.combination(combo) }
            return .key(words)
        case "keydown", "keyup":
            try expectCount(1...1, "\(command) COMBO")
            _ = try Keysym.combination(words[0])
            return command.lowercased() == "keydown" ? .keyDown(words[0]) : .keyUp(words[0])
        case "move":
            try expectCount(2...2, "move X Y")
            return .move(x: try number(words[0], "X"), y: try number(words[1], "Y"))
        case "moveby":
            try expectCount(2...2, "moveby DX DY")
            let dx: Double = try number(words[0], "DX"), dy: Double = try number(words[1], "DY")
            guard dx.isFinite, dy.isFinite else { throw StepError(text: "DX and DY must be finite") }
            return .moveBy(dx: dx, dy: dy)
        case "click":
            let positional = words.prefix { !$0.contains("=") }
            guard positional.count == 0 || positional.count == 2 else { throw StepError(text: "usage: click [X Y] [button=N] [count=N]") }
            let opts = try options(words.dropFirst(positional.count), allowed: ["button", "count"])
            let button: Int = try opts["button"].map { try number($0, "button") } ?? 1
            let count: Int = try opts["count"].map { try number($0, "count") } ?? 1
            guard (1...15).contains(button) else { throw StepError(text: "button must be 1–15") }
            guard (1...100).contains(count) else { throw StepError(text: "count must be 1–100") }
            if positional.isEmpty { return .click(x: nil, y: nil, button: button, count: count) }
            return .click(x: try number(positional[0], "X"), y: try number(positional[1], "Y"), button: button, count: count)
        case "mousedown", "mouseup":
            try expectCount(1...1, "\(command) BUTTON")
            let button: Int = try number(words[0], "BUTTON")
            guard (1...15).contains(button) else { throw StepError(text: "button must be 1–15") }
            return command.lowercased() == "mousedown" ? .buttonDown(button) : .buttonUp(button)
        case "scroll":
            try expectCount(1...2, "scroll up|down|left|right [N]")
            guard let direction = ["up": VNCClient.ScrollDirection.up, "down": .down, "left": .left, "right": .right][words[0].lowercased()] else {
                throw StepError(text: "scroll direction must be up, down, left or right")
            }
            let clicks: Int = words.count == 2 ? try number(words[1], "N") : 1
            guard (1...1000).contains(clicks) else { throw StepError(text: "N must be 1–1000") }
            return .scroll(direction, clicks: clicks)
        case "wait", "pause", "sleep":
            try expectCount(1...1, "wait SECONDS")
            let seconds: Double = try number(words[0], "SECONDS")
            guard seconds >= 0, seconds <= 86400 else { throw StepError(text: "wait takes 0…86400 seconds") }
            return .wait(seconds: seconds)
        case "sync":
            try expectCount(0...0, "sync")
            return .sync
        case "clipboard":
            let (action, text) = splitCommand(rest)
            switch action.lowercased() {
            case "get":
                let opts = try options(text.split(separator: " ").map(String.init)[...], allowed: ["wait"])
                let wait: Double = try opts["wait"].map { try number($0, "wait") } ?? 2
                guard wait >= 0, wait <= 86400 else { throw StepError(text: "wait takes 0…86400 seconds") }
                return .getClipboard(wait: wait)
            case "set": return .setClipboard(try unescape(text))
            default: throw StepError(text: "usage: clipboard get [wait=S] | clipboard set TEXT")
            }
        case "resize":
            try expectCount(1...2, "resize WxH [monitors=WxH+X+Y,…]")
            let size = try parseSize(words[0])
            let opts = try options(words.dropFirst(), allowed: ["monitors"])
            return .resize(width: size.width, height: size.height, monitors: try opts["monitors"].map { try parseMonitors($0) } ?? [])
        case "screenshot", "capture":
            guard !words.isEmpty else { throw StepError(text: "usage: screenshot PATH [monitor=N]") }
            let opts = try options(words.dropFirst(), allowed: ["monitor"])
            return .screenshot(path: words[0], monitor: try opts["monitor"].map { try number($0, "monitor") })
        case "expect-screen", "expect":
            guard !words.isEmpty else { throw StepError(text: "usage: expect-screen PATH [monitor=N] [tolerance=T] [timeout=S]") }
            let opts = try options(words.dropFirst(), allowed: ["monitor", "tolerance", "timeout"])
            let tolerance: Double = try opts["tolerance"].map { try number($0, "tolerance") } ?? 0
            let timeout: Double = try opts["timeout"].map { try number($0, "timeout") } ?? 10
            guard (0...255).contains(tolerance) else { throw StepError(text: "tolerance is a mean channel difference, 0–255") }
            guard timeout >= 0, timeout <= 86400 else { throw StepError(text: "timeout takes 0…86400 seconds") }
            return .expectScreen(path: words[0], monitor: try opts["monitor"].map { try number($0, "monitor") }, tolerance: tolerance, timeout: timeout)
        default:
            throw StepError(text: "unknown step '\(command)'; steps: type, key, keydown, keyup, move, moveby, click, mousedown, mouseup, scroll, wait, sync, clipboard, resize, screenshot, expect-screen")
        }
    }

    /// "1280x720" → (1280, 720).
    public static func parseSize(_ text: String) throws(ParseError) -> (width: Int, height: Int) {
        let parts = text.lowercased().split(separator: "x").map(String.init)
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]),
              (1...Framebuffer.maximumDimension).contains(w), (1...Framebuffer.maximumDimension).contains(h) else {
            throw ParseError(line: 1, message: "size must be WIDTHxHEIGHT, each 1…\(Framebuffer.maximumDimension), e.g. 1280x720 (not '\(text)')")
        }
        return (w, h)
    }

    /// "800x600+0+0,800x600+800+0" → the rectangles of each monitor.
    public static func parseMonitors(_ text: String) throws(ParseError) -> [RFBRect] {
        var out: [RFBRect] = []
        for part in text.split(separator: ",") {
            let pieces = part.split(separator: "+").map(String.init)
            guard pieces.count == 3, let x = Int(pieces[1]), let y = Int(pieces[2]), x >= 0, y >= 0,
                  let size = try? parseSize(pieces[0]) else {
                throw ParseError(line: 1, message: "a monitor is WIDTHxHEIGHT+X+Y, e.g. 800x600+800+0 (not '\(part)')")
            }
            out.append(RFBRect(x: x, y: y, width: size.width, height: size.height))
        }
        guard !out.isEmpty else { throw ParseError(line: 1, message: "list at least one monitor") }
        return out
    }

    private static func splitCommand(_ text: String) -> (String, String) {
        guard let space = text.firstIndex(where: { $0 == " " || $0 == "\t" }) else { return (text, "") }
        return (String(text[..<space]), String(text[text.index(after: space)...]))
    }

    /// Resolves \n, \t, \r and \\ escapes.
    static func unescape(_ text: String) throws -> String {
        var out = ""
        var escaping = false
        for c in text {
            if escaping {
                switch c {
                case "n": out.append("\n")
                case "t": out.append("\t")
                case "r": out.append("\r")
                case "\\": out.append("\\")
                default: throw StepError(text: "unknown escape '\\\(c)' (use \\n, \\t, \\r or \\\\)")
                }
                escaping = false
            } else if c == "\\" {
                escaping = true
            } else {
                out.append(c)
            }
        }
        if escaping { throw StepError(text: "a lone backslash ends the text (write \\\\ for one)") }
        return out
    }
}
