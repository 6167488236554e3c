import ArgumentParser
import FarcastSupport
import Foundation
import Logging
import RFB
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Connects, waits for the first frame (so the screen size, monitors and the server's
/// extensions are known), runs `steps` and closes once the server has acted on them. A
/// single-step command (`type`, `resize`…) reports a failure by its reason alone; a script by
/// its line. With --json, one object on stdout says what was done (`report` adds to it).
func runVNCSteps(_ steps: [(line: Int, step: VNCScript.Step)], connection: VNCConnectionOptions, global: GlobalOptions,
                 script: Bool = false, timeout: Double = 30,
                 output: @escaping @Sendable (String) -> Void = { print($0) },
                 afterwards: (VNCClient, Logger) async throws -> [String: JSONValue] = { _, _ in [:] }) async throws {
    let logger = global.makeLogger(label: "farcast.vnc")
    let endpoint = try connection.endpoint()
    let started = ContinuousClock.now
    // With --json the steps' own lines (files written, clipboard text) go to stderr.
    let toStderr: @Sendable (String) -> Void = { line in FileHandleOutput.stderr(line + "\n") }
    let stepOutput = global.json ? toStderr : output
    let client = try await connection.connect(endpoint, options: try connection.clientOptions(RFBConnection.Configuration()), logger: logger)
    var extra: [String: JSONValue] = [:]
    do {
        try await client.waitForFirstFrame(timeout: .milliseconds(Int(timeout * 1000)))
        let runner = VNCScriptRunner(client: client, output: stepOutput, trace: { logger.info("\($0)") })
        do {
            try await runner.run(VNCScript(steps: steps))
        } catch {
            throw script ? CommandFailure(message: error.description) : CommandFailure(message: error.reason)
        }
        extra = try await afterwards(client, logger)
    } catch {
        await client.close()
        throw error
    }
    await client.close()
    if global.json {
        var report: [String: JSONValue] = ["server": .string(endpoint.description), "steps": .number(Double(steps.count)),
                                           "seconds": .number(secondsSince(started))]
        report.merge(extra) { _, new in new }
        try printJSON(report)
    }
}

func secondsSince(_ start: ContinuousClock.Instant) -> Double {
    let elapsed = ContinuousClock.now - start
    return elapsed.inSeconds
}

/// Reads a text argument, or standard input when it is "-" or absent.
func textArgument(_ text: String?) throws -> String {
    if let text, text != "-" { return text }
    guard let data = try? FileHandle.standardInput.readToEnd() else { return "" }
    guard let string = String(data: data, encoding: .utf8) else {
        throw CommandFailure(message: "standard input is not UTF-8 text", exitCode: 2)
    }
    return string
}

struct VNCTypeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "type",
        abstract: "Type text on the remote desktop.",
        discussion: """
            Each character is sent as its X11 keysym (Latin-1, the legacy tables, else Unicode), so any text the server's keyboard handling knows arrives as written, whatever its layout. A newline presses Return, a tab presses Tab.

            Example: farcast vnc type localhost:1 'Grüße, 世界'
            """
    )

    @OptionGroup var connection: VNCConnectionOptions

    @Argument(help: ArgumentHelp("The text; '-' or nothing reads it from standard input.", valueName: "text"))
    var text: String?

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            try await runVNCSteps([(1, .type(try textArgument(text)))], connection: connection, global: global)
        }
    }
}

struct VNCKeyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "key",
        abstract: "Press keys or key combinations, one after the other.",
        discussion: """
            Keys are X11 keysym names (Return, Escape, Tab, BackSpace, Left, Page_Up, Home, F1…F35, Delete, Super_L, ISO_Level3_Shift…), aliases (ctrl, alt, shift, super, meta, win, enter, esc, del, ins, pgup, pgdn, space, plus, minus; rctrl, ralt, rshift, rsuper for the right-hand modifiers), a single character, or 0x… for a raw keysym. Join keys with + to hold them together: they go down in order and up in reverse.

            When the server offers QEMU extended key events, layout-independent keys (modifiers, arrows, function keys…) carry their scancode too.

            Examples: farcast vnc key localhost:1 ctrl+alt+Delete
                      farcast vnc key localhost:1 alt+F2 Escape Return
            """
    )

    @OptionGroup var connection: VNCConnectionOptions

    @Argument(help: ArgumentHelp("Combinations to press in turn.", valueName: "combination"))
    var combinations: [String]

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard !combinations.isEmpty else { throw ValidationError("name at least one key, e.g. Return or ctrl+alt+Delete") }
        for combo in combinations {
            do { _ = try Keysym.combination(combo) } catch { throw ValidationError(error.description) }
        }
    }

    func run() async throws {
        try await reportingFailures {
            try await runVNCSteps([(1, .key(combinations))], connection: connection, global: global)
        }
    }
}

struct VNCClickCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "click",
        abstract: "Move the pointer to X Y and click.",
        discussion: """
            Buttons: 1 left, 2 middle, 3 right; 4/5 wheel up/down, 6/7 wheel left/right. Coordinates are framebuffer pixels from the top-left corner.

            Examples: farcast vnc click myhost:1 400 300
                      farcast vnc click myhost:1 400 300 --button 3 --count 2
            """
    )

    @OptionGroup var connection: VNCConnectionOptions

    @Argument(help: "Column, from 0 at the left.")
    var x: Int

    @Argument(help: "Row, from 0 at the top.")
    var y: Int

    @Option(help: ArgumentHelp("The button to click, 1–15 (8 back, 9 forward; 9–15 need a server with ExtendedMouseButtons).", valueName: "n"))
    var button = 1

    @Option(help: ArgumentHelp("How many clicks (2 for a double click).", valueName: "n"))
    var count = 1

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...15).contains(button) else { throw ValidationError("--button must be 1…15") }
        guard (1...100).contains(count) else { throw ValidationError("--count must be 1…100") }
        guard x >= 0, y >= 0 else { throw ValidationError("X and Y must not be negative") }
    }

    func run() async throws {
        try await reportingFailures {
            try await runVNCSteps([(1, .click(x: x, y: y, button: button, count: count))], connection: connection, global: global)
        }
    }
}

struct VNCMoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "move",
        abstract: "Move the pointer to X Y (no button pressed).",
        discussion: """
            Example: farcast vnc move myhost:1 640 400
            """
    )

    @OptionGroup var connection: VNCConnectionOptions

    @Argument(help: "Column, from 0 at the left.")
    var x: Int

    @Argument(help: "Row, from 0 at the top.")
    var y: Int

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard x >= 0, y >= 0 else { throw ValidationError("X and Y must not be negative") }
    }

    func run() async throws {
        try await reportingFailures {
            try await runVNCSteps([(1, .move(x: x, y: y))], connection: connection, global: global)
        }
    }
}

struct VNCClipboardCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clipboard",
        abstract: "Read or set the remote clipboard.",
        discussion: """
            With servers that offer the Extended Clipboard (TigerVNC, for one) text travels as UTF-8. Otherwise the classic messages carry ISO 8859-1: characters outside it are sent as '?', and such servers only announce their clipboard when it changes, so `get` can only report text that changed while connected.
            """,
        subcommands: [VNCClipboardGetCommand.self, VNCClipboardSetCommand.self]
    )
}

struct VNCClipboardGetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Print the remote clipboard's text.",
        discussion: """
            Servers announce their clipboard when it changes, and most (TigerVNC, x11vnc) only to clients connected at the time: with --wait, copy something on the remote desktop while farcast waits.

            Example: farcast vnc clipboard get myhost:1 --wait 20 > copied.txt
            """
    )

    @OptionGroup var connection: VNCConnectionOptions

    @Option(help: ArgumentHelp("Seconds to wait for the server to announce clipboard text.", valueName: "seconds"))
    var wait: Double = 2

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard wait >= 0, wait <= 86400 else { throw ValidationError("--wait takes 0…86400 seconds") }
    }

    func run() async throws {
        try await reportingFailures {
            let text = Mutex<String?>(nil)
            var quiet = global
            quiet.json = false      // the text is the result: printed once, below
            try await runVNCSteps([(1, .getClipboard(wait: wait))], connection: connection, global: quiet) { value in text.withLock { $0 = value } }
            let value = text.withLock { $0 } ?? ""
            if global.json {
                struct Clipboard: Encodable { var text: String }
                try printJSON(Clipboard(text: value))
            } else {
                // Exactly the text, plus a line end on a terminal so the prompt stays tidy.
                var bytes = Array(value.utf8)
                if isatty(1) != 0 && !value.hasSuffix("\n") { bytes.append(0x0A) }
                FileHandle.standardOutput.write(Data(bytes))
            }
        }
    }
}

struct VNCClipboardSetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Put text on the remote clipboard.",
        discussion: """
            Servers differ in who keeps the text. Some fetch it from the client only when an application pastes (TigerVNC with the Extended Clipboard): farcast then stays connected until the text has been pasted once, at most --hold seconds (default 60). Others take the text at once; farcast leaves at once unless --hold is given — but TigerVNC forgets a client's clipboard when the client leaves, so with it pass --hold, or set and paste in one `farcast vnc do` script.

            Examples: farcast vnc clipboard set myhost:1 'text to paste'
                      date | farcast vnc clipboard set myhost:1 --hold 120
            """
    )

    @OptionGroup var connection: VNCConnectionOptions

    @Argument(help: ArgumentHelp("The text; '-' or nothing reads it from standard input.", valueName: "text"))
    var text: String?

    @Option(help: ArgumentHelp("Stay connected up to this many seconds so the server can serve pastes (default: until the first paste, at most 60 s, with servers that fetch on paste; else leave at once).", valueName: "seconds"))
    var hold: Double?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let hold, !(0...86400).contains(hold) { throw ValidationError("--hold takes 0…86400 seconds") }
    }

    func run() async throws {
        try await reportingFailures {
            let text = try textArgument(text)
            try await runVNCSteps([], connection: connection, global: global, afterwards: { client, logger in
                let delivery = try await client.setClipboard(text)
                try await client.sync()
                switch (delivery, hold) {
                case (.offered, let seconds) where (seconds ?? 60) > 0:
                    // TigerVNC and others fetch the text only when an application pastes: stay to
                    // serve that paste, and say plainly if none comes.
                    let limit = seconds ?? 60
                    if !global.quiet {
                        FileHandleOutput.stderr("farcast: the server fetches clipboard text when an application pastes; waiting up to \(Int(limit)) s for a paste on the remote desktop (Ctrl-C to stop)\n")
                    }
                    do {
                        try await client.waitForClipboardFetch(timeout: .milliseconds(Int(limit * 1000)))
                        try await client.sync()
                        return ["delivery": "fetched on paste", "pasted": true]
                    } catch RFBError.timedOut {
                        throw CommandFailure(message: "nothing was pasted on the remote desktop within \(Int(limit)) s, and this server forgets the text when farcast leaves: paste while `clipboard set` waits (--hold S for longer), or set and paste in one `farcast vnc do` script")
                    }
                case (.offered, _):
                    return ["delivery": "offered", "pasted": false]
                case (.delivered, let seconds?) where seconds > 0:
                    logger.notice("holding the connection for \(Int(seconds)) s")
                    try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
                    return ["delivery": "delivered"]
                default:
                    return ["delivery": "delivered"]
                }
            })
        }
    }
}

struct VNCResizeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resize",
        abstract: "Ask the server to change the desktop size (servers with ExtendedDesktopSize, such as Xvnc).",
        discussion: """
            Without --monitors the layout becomes one screen of the new size. Fails with the server's reason when it refuses.

            Examples: farcast vnc resize myhost:1 1920x1080
                      farcast vnc resize myhost:1 2560x1024 --monitors 1280x1024+0+0,1280x1024+1280+0
            """
    )

    @OptionGroup var connection: VNCConnectionOptions

    @Argument(help: ArgumentHelp("The new size, e.g. 1280x720.", valueName: "WxH"))
    var size: String

    @Option(help: ArgumentHelp("Split the desktop into monitors, e.g. 800x600+0+0,800x600+800+0 (servers that support several screens).", valueName: "list"))
    var monitors: String?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        do {
            _ = try VNCScript.parseSize(size)
            if let monitors { _ = try VNCScript.parseMonitors(monitors) }
        } catch { throw ValidationError(error.message) }
    }

    func run() async throws {
        try await reportingFailures {
            let (width, height) = try VNCScript.parseSize(size)
            let layout = try monitors.map { try VNCScript.parseMonitors($0) } ?? []
            try await runVNCSteps([(1, .resize(width: width, height: height, monitors: layout))], connection: connection, global: global)
        }
    }
}

struct VNCDoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "do",
        abstract: "Run a script of steps over one connection (typing, keys, pointer, clipboard, waits, screenshots).",
        discussion: """
            The script has one step per line; lines starting with # are comments. Steps:

            \(VNCScript.syntax)

            The whole script is checked before connecting, with the images it compares with (except those an earlier screenshot step of the script writes, which are read when their step runs). A failing step stops the script with its line number. Example:

              # log in and check the desktop appears
              click 400 300
              type alice\\n
              wait 1
              expect-screen desktop.png tolerance=2 timeout=20
              screenshot after-login.png
            """
    )

    @OptionGroup var connection: VNCConnectionOptions

    @Argument(help: ArgumentHelp("The script file; '-' reads standard input.", valueName: "script"))
    var script: String?

    @Option(name: [.customShort("e"), .customLong("step")], help: ArgumentHelp("A step given inline instead of a file (repeatable), e.g. -e 'key Return'.", valueName: "step"))
    var inlineSteps: [String] = []

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (script == nil) != inlineSteps.isEmpty else {
            throw ValidationError(script == nil ? "give a script file (or -) or steps with -e" : "give either a script file or -e steps, not both")
        }
        // Standard input can be read only once: a script from it is checked when the command runs.
        if script != "-" { try check(try parsed()) }
    }

    private func parsed() throws -> VNCScript {
        do {
            if let script {
                let text: String
                if script == "-" {
                    text = try textArgument("-")
                } else {
                    let (contents, _) = try Secrets.readWhole(ofFile: script, what: "script")
                    text = contents
                }
                return try VNCScript.parse(text)
            }
            return try VNCScript.parse(inlineSteps.joined(separator: "\n"))
        } catch let errors as VNCScript.ParseErrors {
            let listed = errors.errors.map { script == nil ? "-e step \($0.line): \($0.message)" : "line \($0.line): \($0.message)" }
            throw ValidationError((script.map { "\($0): " } ?? "") + listed.joined(separator: "; "))
        } catch let failure as CommandFailure {
            throw ValidationError(failure.message)
        }
    }

    /// Every file the script reads (but those an earlier step writes) must exist and every file it
    /// writes must be writable, before anything is sent to the server.
    private func check(_ script: VNCScript) throws {
        guard !script.steps.isEmpty else { throw ValidationError("the script has no steps") }
        var problems: [String] = []
        for (line, path) in script.files.read {
            guard let data = FileManager.default.contents(atPath: path) else {
                problems.append("line \(line): cannot read \(path): \(String(cString: strerror(errno)).lowercased())")
                continue
            }
            do { _ = try PNGDecoder.decode(Array(data)) } catch {
                problems.append("line \(line): \(path) is not a PNG farcast can compare with (\(describe(error)))")
            }
        }
        for (line, path) in script.files.written {
            do {
                try OutputPath.check(path, what: "screenshot")
                let lower = path.lowercased()
                guard lower.hasSuffix(".png") || lower.hasSuffix(".jpg") || lower.hasSuffix(".jpeg") else {
                    throw CommandFailure(message: "name the screenshot \(path) .png or .jpg", exitCode: 2)
                }
            } catch let failure as CommandFailure { problems.append("line \(line): \(failure.message)") }
        }
        guard problems.isEmpty else { throw ValidationError(problems.joined(separator: "; ")) }
    }

    func run() async throws {
        try await reportingFailures {
            let parsed = try self.parsed()
            if script == "-" { try check(parsed) }
            try await runVNCSteps(parsed.steps, connection: connection, global: global, script: true)
        }
    }
}
