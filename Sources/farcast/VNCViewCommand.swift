import ArgumentParser
import FarcastSupport
import Foundation
import Logging
import RFB
import Synchronization
import Viewer

struct VNCViewCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "view",
        abstract: "Open a window on the remote desktop and work in it.",
        discussion: """
            The window follows the remote desktop's size; keys, pointer, wheel and the clipboard go to the server (not with --view-only). F8 opens the menu: full screen, view only, scaling, monitor, clipboard sync, keyboard grab, relative pointer, the statistics overlay, Ctrl+Alt+Del, F8 itself, reconnect, disconnect.

            A dropped connection is retried with back-off (1 s doubling to 30 s) and the window says so. Without --password-file or FARCAST_VNC_PASSWORD the password is asked at the terminal, or in the window when there is no terminal (started from a desktop menu); a refused password is asked again. Quality is automatic by default: lossless on a fast link, Tight JPEG on a slow one (measured from how fast updates arrive); --quality 0-9 fixes a JPEG level, --encodings the encodings asked for.

            Needs a display (DISPLAY, or a desktop session). Examples:
              farcast vnc view myhost:1
              farcast vnc view vnc://myhost:5901 --scale 1:1 --resize-remote
              farcast vnc view myhost:1 --view-only --fullscreen --monitor 1
            """
    )

    @OptionGroup var connection: VNCConnectionOptions

    @Flag(help: "Start full screen (F8 menu toggles).")
    var fullscreen = false

    @Option(help: ArgumentHelp("How the picture fills the window: fit (whole picture, letterboxed), 1:1 (one pixel per pixel, pans), fill (stretched).", valueName: "fit|1:1|fill"))
    var scale: ScaleMode = .fit

    @Option(help: ArgumentHelp("Show only this monitor (1 is the first; `farcast vnc info` lists them).", valueName: "n"))
    var monitor: Int?

    @Flag(name: .customLong("resize-remote"), help: "Make the remote desktop follow the window's size (SetDesktopSize), as TigerVNC's viewer does.")
    var resizeRemote = false

    @Option(help: ArgumentHelp("auto (lossless on fast links, JPEG on slow ones) or a JPEG quality level 0 (smallest) to 9 (best).", valueName: "auto|0-9"))
    var quality: String = "auto"

    @Option(help: ArgumentHelp("Encodings to ask for, most preferred first, comma-separated, from: \(RFBEncoding.decodable.map(\.name).joined(separator: ", ")).", valueName: "list"))
    var encodings: String?

    @Flag(name: .customLong("no-clipboard"), help: "Do not exchange clipboard text with the server (the menu can turn it on).")
    var noClipboard = false

    @Flag(name: .customLong("grab-keyboard"), help: "Grab the keyboard so system shortcuts (Alt+Tab, Super) go to the remote desktop.")
    var grabKeyboard = false

    @Flag(name: .customLong("relative-pointer"), help: "Capture the pointer and move the remote one by how far the mouse moves, not to where it points (F8 frees it; the menu toggles it).")
    var relativePointer = false

    @Option(help: ArgumentHelp("Play the server's audio (QEMU's own VNC server with -vnc …,audiodev=ID): alsa, alsa:DEVICE, or write it to FILE.wav.", valueName: "alsa[:device]|file.wav"))
    var audio: String?

    @Flag(help: "Show the statistics overlay (updates/s, Mbit/s, update→present latency, encoding, quality).")
    var hud = false

    @Option(name: .customLong("hud-corner"), help: ArgumentHelp("Where the statistics overlay sits: top-left, top-right, bottom-right or bottom-left (F8 → Statistics overlay moves it on).", valueName: "corner"))
    var hudCorner: ViewerCorner = .topLeft

    @Option(help: ArgumentHelp("Close the window after this many seconds (scripts, benchmarks).", valueName: "seconds"))
    var duration: Double?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let monitor, monitor < 1 { throw ValidationError("--monitor counts from 1") }
        _ = try qualityChoice()
        _ = try encodingList()
        if let duration, !(duration > 0) { throw ValidationError("--duration must be positive") }
        if let audio { do { _ = try VNCAudioOutput.Destination(audio) } catch { throw ValidationError(error.message) } }
    }

    /// nil: automatic.
    func qualityChoice() throws -> AdaptiveQuality.Choice? {
        if quality == "auto" { return nil }
        guard let level = Int(quality), (0...9).contains(level) else { throw ValidationError("--quality must be auto or 0…9, not '\(quality)'") }
        return .jpeg(level)
    }

    func encodingList() throws -> [RFBEncoding]? {
        guard let encodings else { return nil }
        var list: [RFBEncoding] = []
        for name in encodings.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
            guard let encoding = RFBEncoding(name: name) else {
                throw ValidationError("unknown encoding '\(name)'; choose from \(RFBEncoding.decodable.map(\.name).joined(separator: ", "))")
            }
            list.append(encoding)
        }
        guard !list.isEmpty else { throw ValidationError("--encodings needs at least one encoding") }
        return list
    }

    func run() async throws {
        try await reportingFailures {
            let logger = global.makeLogger(label: "farcast.vnc")
            let endpoint = try connection.endpoint()
            var configuration = RFBConnection.Configuration()
            configuration.encodings = try encodingList()
            let fixedQuality = try qualityChoice()
            configuration.jpegQuality = fixedQuality?.jpegQuality
            let output = try audio.map { try VNCAudioOutput(try VNCAudioOutput.Destination($0)) }
            if output != nil { configuration.audio = VNCAudioOutput.format }
            let options = try connection.clientOptions(configuration)

            var viewerConfiguration = ViewerConfiguration()
            viewerConfiguration.title = "\(endpoint)"
            viewerConfiguration.scale = scale
            viewerConfiguration.fullscreen = fullscreen
            viewerConfiguration.viewOnly = connection.viewOnly
            viewerConfiguration.viewOnlyLocked = connection.viewOnly
            viewerConfiguration.clipboardSync = !noClipboard
            viewerConfiguration.grabKeyboard = grabKeyboard
            viewerConfiguration.relativePointer = relativePointer
            viewerConfiguration.resizeRemote = resizeRemote
            viewerConfiguration.showHUD = hud
            viewerConfiguration.hudCorner = hudCorner
            viewerConfiguration.monitor = monitor.map { $0 - 1 }
            let viewer = ViewerWindow(configuration: viewerConfiguration)
            do { try await viewer.open() } catch let error as ViewerError { throw CommandFailure(message: error.description) }

            let session = ViewSession(viewer: viewer, logger: logger, autoQuality: fixedQuality == nil, audio: output)
            let signals = SignalWatcher { _ in viewer.close() }
            defer { signals.cancel() }
            let inputs = Task { await session.forwardInput() }
            let timer = duration.map { seconds in Task { try await Task.sleep(for: .milliseconds(Int(seconds * 1000))); viewer.close() } }

            var connectedOnce = false
            var backoff = 1
            var failure: (any Error)?
            while await !session.stopped {
                viewer.setStatus(connectedOnce ? .reconnecting(reason: await session.lastReason ?? "reconnecting", retryIn: 0) : .connecting("\(endpoint)"))
                let client: VNCClient
                do {
                    client = try await connection.connect(endpoint, options: options, logger: logger, promptAttempts: 3,
                                                          ask: { prompt, secret in await viewer.ask(prompt, secret: secret) })
                } catch {
                    // The first connection failing is the command failing; later ones are retried.
                    guard connectedOnce, await !session.stopped else { failure = error; break }
                    let reason = Self.reason(error)
                    for remaining in stride(from: backoff, to: 0, by: -1) {
                        viewer.setStatus(.reconnecting(reason: reason, retryIn: remaining))
                        if await session.waitForReconnectOrStop(seconds: 1) { break }
                    }
                    backoff = min(backoff * 2, 30)
                    continue
                }
                connectedOnce = true
                backoff = 1
                let reason = await session.run(client)
                if await session.stopped { break }
                if let reason { logger.info("connection lost: \(reason)") }
            }
            viewer.close()
            await viewer.waitUntilClosed()
            inputs.cancel()
            timer?.cancel()
            let played = output?.close()
            if let failure = played?.failure { logger.warning("the audio output failed: \(failure)") }
            if let failure { throw failure }
            let stats = viewer.statistics
            let summary = await session.summary()
            if output != nil && !summary.audioOffered {
                logger.warning("\(VNCAudioOutput.serverSentNone)")
            }
            if global.json {
                try printJSON(ViewReport(framesPresented: stats.framesPresented, partialFrames: stats.partialFrames, updates: stats.updates,
                                         latencyP50Milliseconds: stats.latencyP50Milliseconds, latencyP95Milliseconds: stats.latencyP95Milliseconds,
                                         renderer: stats.renderer, quality: summary.quality, linkMegabitsPerSecond: summary.linkMbps,
                                         encodings: summary.encodings, sessions: summary.sessions, audioSeconds: played?.seconds))
            } else if !global.quiet {
                let p50 = stats.latencyP50Milliseconds.map { String(format: "%.1f", $0) } ?? "–"
                let p95 = stats.latencyP95Milliseconds.map { String(format: "%.1f", $0) } ?? "–"
                FileHandleOutput.stderr("presented \(stats.framesPresented) frame(s) from \(stats.updates) update(s); update→present p50 \(p50) ms, p95 \(p95) ms (\(stats.renderer)); quality \(summary.quality)\n")
            }
        }
    }

    static func reason(_ error: any Error) -> String {
        if let failure = error as? CommandFailure { return failure.message }
        return "\(describe(error))"
    }
}

struct ViewReport: Encodable {
    var framesPresented: Int
    var partialFrames: Int
    var updates: Int
    var latencyP50Milliseconds: Double?
    var latencyP95Milliseconds: Double?
    var renderer: String
    var quality: String
    var linkMegabitsPerSecond: Double?
    var encodings: [String: Int]
    var sessions: Int
    /// Seconds of QEMU audio played or written (with --audio).
    var audioSeconds: Double?
}

/// One viewer window's life across connections: forwards the window's input to the current
/// client, the client's updates to the window, and keeps the automatic quality.
actor ViewSession {
    private let viewer: ViewerWindow
    private let logger: Logger
    private var client: VNCClient?
    private var quality: AdaptiveQuality?
    private(set) var stopped = false
    private var reconnectRequested = false
    private(set) var lastReason: String?
    private var sessions = 0
    private var encodings: [String: Int] = [:]
    private var lastBytes = 0
    private let audio: VNCAudioOutput?
    /// A server confirmed audio (QEMU's, asked for with --audio) in some session.
    private var audioOffered = false

    init(viewer: ViewerWindow, logger: Logger, autoQuality: Bool, audio: VNCAudioOutput? = nil) {
        self.viewer = viewer
        self.logger = logger
        self.audio = audio
        quality = autoQuality ? AdaptiveQuality() : nil
    }

    /// Runs one connection until it ends; returns why (nil when the person ended it).
    func run(_ client: VNCClient) async -> String? {
        self.client = client
        sessions += 1
        reconnectRequested = false
        lastBytes = 0
        let name = await client.desktopName
        viewer.setStatus(.connected(desktopName: name))
        viewer.setScreens(await client.screens.map { ViewerRect(x: $0.x, y: $0.y, width: $0.width, height: $0.height) })
        if let cursor = await client.cursor { viewer.setCursor(Self.viewerCursor(cursor)) }
        if let quality, let level = quality.choice.jpegQuality { try? await client.setJPEGQuality(level) }
        // The picture as it is now (a reconnect keeps the window; the first update repaints).
        await stage(client, dirty: [])
        var reason: String?
        for await event in client.events {
            switch event {
            case .framebufferUpdated(let dirty, _):
                await stage(client, dirty: dirty.map { ViewerRect(x: $0.x, y: $0.y, width: $0.width, height: $0.height) })
                await adaptQuality(client)
            case .resized(_, _, let screens):
                viewer.setScreens(screens.map { ViewerRect(x: $0.x, y: $0.y, width: $0.width, height: $0.height) })
                await stage(client, dirty: [])
            case .cursorChanged(let cursor):
                viewer.setCursor(Self.viewerCursor(cursor))
            case .serverClipboard(let text):
                viewer.setRemoteClipboard(text)
            case .desktopNameChanged(let name):
                viewer.setStatus(.connected(desktopName: name))
            case .audio(let sound):
                audio?.handle(sound)
            case .disconnected(let error):
                reason = error.map { "\($0)" }
            default:
                break
            }
        }
        for (encoding, count) in await client.rectanglesByEncoding { encodings["\(encoding)", default: 0] += count }
        if await client.serverSupportsAudio { audioOffered = true }
        // The window keeps the last picture (for redraws, and until the next connection's first
        // update) once the client no longer lends it.
        let frames = viewer.frames
        await client.withFramebuffer { fb in
            fb.pixels.withUnsafeBufferPointer { frames.keep(width: fb.width, height: fb.height, stride: fb.width, from: $0) }
        }
        self.client = nil
        if stopped || reconnectRequested { return nil }
        lastReason = reason ?? "the server closed the connection"
        return lastReason
    }

    private func stage(_ client: VNCClient, dirty: [ViewerRect]) async {
        let now = ViewerWindow.now()
        let total = await client.bytesReceived
        let bytes = max(0, total - lastBytes)
        lastBytes = total
        let size = await client.withFramebuffer { ($0.width, $0.height) }
        // Nothing is copied here: the window borrows the decoder's framebuffer when it uploads.
        viewer.frames.markChanged(width: size.0, height: size.1, dirty: dirty, arrival: now, bytes: bytes) { body in
            client.lendFramebuffer(body)
        }
        viewer.wake()
    }

    private func adaptQuality(_ client: VNCClient) async {
        guard var adaptive = quality else { return }
        let transfers = await client.takeUpdateTransfers()
        let choice = adaptive.observe(transfers)
        quality = adaptive
        guard let choice else { return }
        let link = String(format: "%.1f", adaptive.megabitsPerSecond ?? 0)
        logger.info("quality: \(choice) (link ≈ \(link) Mbit/s)")
        try? await client.setJPEGQuality(choice.jpegQuality)
        viewer.setHUDExtra(["quality \(choice) (auto, link ≈ \(link) Mbit/s)"])
    }

    static func viewerCursor(_ c: RFBCursor) -> ViewerCursor {
        ViewerCursor(width: c.width, height: c.height, hotspotX: c.hotspotX, hotspotY: c.hotspotY, rgba: c.rgba)
    }

    /// Sends the window's input to whichever client is connected (dropped in between).
    func forwardInput() async {
        for await input in viewer.input {
            switch input {
            case .closed, .command(.disconnect):
                stopped = true
                await client?.close()
                return
            case .command(.reconnect):
                reconnectRequested = true
                await client?.close()
            default:
                guard let client else { continue }
                do {
                    try await Self.send(input, to: client)
                } catch {
                    logger.debug("input not sent: \(describe(error))")
                }
            }
        }
        stopped = true
    }

    static func send(_ input: ViewerInput, to client: VNCClient) async throws {
        switch input {
        case .key(let key, let down, let usage):
            let scancode = usage.flatMap { XTScancode.forUSBUsage($0) }
            switch key {
            case .keysym(let keysym):
                try await client.key(keysym, down: down, scancode: scancode)
            case .character(let scalar):
                for keysym in Keysym.forText(String(scalar)) { try await client.key(keysym, down: down, scancode: scancode) }
            }
        case .pointer(let x, let y, let buttons):
            try await client.setPointer(x: x, y: y, buttons: buttons)
        case .pointerMotion(let dx, let dy, let buttons):
            try await client.movePointer(byX: dx, y: dy, buttons: buttons)
        case .clipboard(let text):
            _ = try await client.setClipboard(text)
        case .resizeRemote(let width, let height):
            try await client.requestDesktopSize(width: width, height: height, timeout: .seconds(5))
        case .command(.pressKeys(let keys)):
            try await client.press(keysyms: keys)
        case .command, .gamepad, .closed:
            break
        }
    }

    /// Waits up to `seconds` between reconnection attempts; true when the person asked to
    /// reconnect now or to stop.
    func waitForReconnectOrStop(seconds: Double) async -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if stopped || reconnectRequested { reconnectRequested = false; return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    struct Summary {
        var quality: String
        var linkMbps: Double?
        var encodings: [String: Int]
        var sessions: Int
        var audioOffered: Bool
    }

    func summary() async -> Summary {
        var encodings = self.encodings
        var audioOffered = self.audioOffered
        if let client {
            for (encoding, count) in await client.rectanglesByEncoding { encodings["\(encoding)", default: 0] += count }
            if await client.serverSupportsAudio { audioOffered = true }
        }
        return Summary(quality: quality.map { "\($0.choice) (auto)" } ?? "fixed", linkMbps: quality?.megabitsPerSecond, encodings: encodings,
                       sessions: sessions, audioOffered: audioOffered)
    }
}
