import Foundation

/// Runs a `VNCScript` over a connected client, step by step.
public struct VNCScriptRunner: Sendable {
    public var client: VNCClient
    /// Receives what steps print: clipboard text, files written.
    public var output: @Sendable (String) -> Void
    /// Receives a line before each step (for --verbose).
    public var trace: @Sendable (String) -> Void

    public init(client: VNCClient, output: @escaping @Sendable (String) -> Void, trace: @escaping @Sendable (String) -> Void = { _ in }) {
        self.client = client
        self.output = output
        self.trace = trace
    }

    /// A step that failed, with its line in the script.
    public struct Failure: Error, CustomStringConvertible {
        public var line: Int
        public var step: VNCScript.Step
        /// Why, on its own (what a single-step command such as `farcast vnc resize` reports).
        public var reason: String
        public var description: String { "step at line \(line) (\(VNCScriptRunner.describe(step))) failed: \(reason)" }
    }

    /// Runs every step, then waits until the server has acted on all of them.
    public func run(_ script: VNCScript) async throws(Failure) {
        for (line, step) in script.steps {
            trace("line \(line): \(Self.describe(step))")
            do {
                try await perform(step)
            } catch {
                throw Failure(line: line, step: step, reason: "\(error)")
            }
        }
        if let last = script.steps.last {
            do { try await client.sync() } catch { throw Failure(line: last.line, step: last.step, reason: "\(error)") }
        }
    }

    static func describe(_ step: VNCScript.Step) -> String {
        switch step {
        case .type(let text): return "type \(text.count) character(s)"
        case .key(let combos): return "key \(combos.joined(separator: " "))"
        case .keyDown(let c): return "keydown \(c)"
        case .keyUp(let c): return "keyup \(c)"
        case .move(let x, let y): return "move \(x) \(y)"
        case .moveBy(let dx, let dy): return "moveby \(dx) \(dy)"
        case .click(let x, let y, let button, let count):
            return "click" + (x.map { " \($0) \(y!)" } ?? "") + " button=\(button)" + (count > 1 ? " count=\(count)" : "")
        case .buttonDown(let b): return "mousedown \(b)"
        case .buttonUp(let b): return "mouseup \(b)"
        case .scroll(let d, let n): return "scroll \(d) \(n)"
        case .wait(let s): return "wait \(s)"
        case .setClipboard(let text): return "clipboard set (\(text.count) character(s))"
        case .getClipboard(let wait): return "clipboard get wait=\(wait)"
        case .resize(let w, let h, let monitors):
            return "resize \(w)x\(h)" + (monitors.isEmpty ? "" : " monitors=" + monitors.map(\.description).joined(separator: ","))
        case .screenshot(let path, let monitor): return "screenshot \(path)" + (monitor.map { " monitor=\($0)" } ?? "")
        case .expectScreen(let path, let monitor, let tolerance, let timeout):
            return "expect-screen \(path)" + (monitor.map { " monitor=\($0)" } ?? "") + " tolerance=\(tolerance) timeout=\(timeout)"
        case .sync: return "sync"
        }
    }

    private struct StepFailed: Error, CustomStringConvertible { var description: String }

    /// RFB pointer events always carry a position, and a new session learns where the pointer
    /// is only when the server reports a move it made (VMware cursor position, TigerVNC), so
    /// pressing "in place" before that or a move of ours would press at (0, 0).
    private func requirePointerPosition() async throws {
        guard await client.learnPointerPosition() else {
            throw StepFailed(description: "this session has not placed the pointer yet; move it first (move X Y, or click X Y)")
        }
    }

    private func perform(_ step: VNCScript.Step) async throws {
        switch step {
        case .type(let text):
            try await client.type(text)
        case .key(let combos):
            for combo in combos { try await client.press(combo) }
        case .keyDown(let combo):
            for key in try Keysym.combination(combo) { try await client.key(key, down: true) }
        case .keyUp(let combo):
            for key in try Keysym.combination(combo).reversed() { try await client.key(key, down: false) }
        case .move(let x, let y):
            try await checkOnScreen(x, y)
            try await client.movePointer(toX: x, y: y)
        case .moveBy(let dx, let dy):
            try await requirePointerPosition()
            try await client.movePointer(byX: dx, y: dy)
        case .click(let x, let y, let button, let count):
            if let x, let y {
                try await checkOnScreen(x, y)
                try await client.click(x: x, y: y, button: button, count: count)
            } else {
                try await requirePointerPosition()
                for _ in 0..<count {
                    try await client.button(button, down: true)
                    try await client.button(button, down: false)
                }
            }
        case .buttonDown(let b):
            try await requirePointerPosition()
            try await client.button(b, down: true)
        case .buttonUp(let b):
            try await client.button(b, down: false)
        case .scroll(let direction, let clicks):
            try await requirePointerPosition()
            try await client.scroll(direction, clicks: clicks)
        case .wait(let seconds):
            try await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
        case .sync:
            try await client.sync()
        case .setClipboard(let text):
            try await client.setClipboard(text)
        case .getClipboard(let wait):
            try await client.sync()
            guard let text = try await client.clipboardText(timeout: .milliseconds(Int(wait * 1000))) else {
                throw StepFailed(description: "the server announced no clipboard text within \(wait) s; most servers (TigerVNC, x11vnc) only announce text copied while a client is connected, so wait longer (wait=S, --wait S) and copy something on the remote desktop")
            }
            output(text)
        case .resize(let width, let height, let monitors):
            if monitors.isEmpty {
                try await client.requestDesktopSize(width: width, height: height)
            } else {
                let known = await client.screens
                let layout = monitors.enumerated().map { i, m in
                    RFBScreen(id: i < known.count ? known[i].id : UInt32(i + 1), x: m.x, y: m.y, width: m.width, height: m.height)
                }
                try await client.requestDesktopLayout(width: width, height: height, screens: layout)
            }
        case .screenshot(let path, let monitor):
            try await client.sync()
            let (image, region) = try await screen(monitor: monitor)
            let lower = path.lowercased()
            let encoded = lower.hasSuffix(".jpg") || lower.hasSuffix(".jpeg") ? try JPEGEncoder.encode(image) : try PNGEncoder.encode(image)
            guard FileManager.default.createFile(atPath: path, contents: Data(encoded)) else {
                throw StepFailed(description: "cannot write \(path): \(String(cString: strerror(errno)).lowercased())")
            }
            output("wrote \(path): \(image.width)x\(image.height)" + (monitor.map { " (monitor \($0) at \(region))" } ?? ""))
        case .expectScreen(let path, let monitor, let tolerance, let timeout):
            try await expectScreen(path: path, monitor: monitor, tolerance: tolerance, timeout: timeout)
        }
    }

    private func checkOnScreen(_ x: Int, _ y: Int) async throws {
        let fb = await client.framebuffer
        guard (0..<fb.width).contains(x), (0..<fb.height).contains(y) else {
            throw StepFailed(description: "(\(x), \(y)) is outside the \(fb.width)x\(fb.height) screen")
        }
    }

    /// The framebuffer, or one monitor of it.
    private func screen(monitor: Int?) async throws -> (Framebuffer, RFBRect) {
        let fb = await client.framebuffer
        guard let monitor else { return (fb, RFBRect(x: 0, y: 0, width: fb.width, height: fb.height)) }
        let screens = await client.screens
        guard screens.indices.contains(monitor) else {
            let list = screens.enumerated().map { "\($0.offset): \($0.element.width)x\($0.element.height)+\($0.element.x)+\($0.element.y)" }
            throw StepFailed(description: "monitor \(monitor) does not exist; the server reports \(screens.count): \(list.joined(separator: ", "))")
        }
        let s = screens[monitor]
        let region = RFBRect(x: s.x, y: s.y, width: s.width, height: s.height)
        return (fb.cropped(to: region), region)
    }

    private func expectScreen(path: String, monitor: Int?, tolerance: Double, timeout: Double) async throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw StepFailed(description: "cannot read \(path): \(String(cString: strerror(errno)).lowercased())")
        }
        let expected: Framebuffer
        do { expected = try PNGDecoder.decode(Array(data)) } catch {
            throw StepFailed(description: "\(path) is not a PNG farcast can compare with (\(error))")
        }
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        var lastDifference: Double?
        var lastSize = (0, 0)
        while true {
            let (image, _) = try await screen(monitor: monitor)
            lastSize = (image.width, image.height)
            lastDifference = PNGDecoder.meanDifference(image, expected)
            if let d = lastDifference, d <= tolerance { return }
            let remaining = deadline - .now
            guard remaining > .zero else { break }
            // Wake on the next update, or re-check every half second.
            _ = try? await client.waitForEvent(timeout: min(remaining, .milliseconds(500)), "a screen update") {
                if case .framebufferUpdated = $0 { true } else { false }
            }
            guard await client.isConnected else { throw await client.disconnectReason ?? RFBError.notConnected }
        }
        if let d = lastDifference {
            throw StepFailed(description: "the screen did not match \(path) within \(timeout) s (mean channel difference \(String(format: "%.2f", d)), tolerance \(tolerance))")
        }
        throw StepFailed(description: "the screen is \(lastSize.0)x\(lastSize.1) but \(path) is \(expected.width)x\(expected.height)")
    }
}
