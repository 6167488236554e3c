import ArgumentParser
import Crypto
import FarcastSupport
import Foundation
import RFB
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

struct VNCRecordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record what a server sends for a while, for replaying without a network.",
        discussion: """
            The capture holds every byte the server sent (after TLS decryption) and the pixel format and encodings this client asked for. Replay it with 'farcast vnc replay'. Captures of busy desktops grow by tens of MB per minute.

            Example: farcast vnc record myhost:1 --duration 15 --encoding zrle -o session.rfb
            """
    )

    @OptionGroup var connection: VNCConnectionOptions

    @Option(name: .shortAndLong, help: ArgumentHelp("Where to write the capture.", valueName: "path"))
    var output: String

    @Option(help: ArgumentHelp("Seconds to record after the first complete frame.", valueName: "seconds"))
    var duration: Double = 5

    @OptionGroup var encodingOptions: VNCEncodingOptions

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard duration >= 0 else { throw ValidationError("--duration must not be negative") }
        do { try OutputPath.check(output, what: "capture") } catch let failure as CommandFailure { throw ValidationError(failure.message) }
    }

    func run() async throws {
        try await reportingFailures {
            let logger = global.makeLogger(label: "farcast.vnc")
            let endpoint = try connection.endpoint()
            var configuration = encodingOptions.configuration()
            // Continuous updates would make the recording depend on timing; requests keep the
            // stream a plain sequence of updates.
            configuration.continuousUpdates = false
            var options = try connection.clientOptions(configuration)
            // A recording holds only what a plain viewer gets, so any client can replay it: no
            // input, hence no scancode extension, and no Extended Clipboard (its negative
            // lengths would stop clients that did not negotiate it, libvncclient for one).
            options.configuration.viewOnly = true
            options.configuration.extendedClipboard = false
            options.configuration.alphaCursor = false
            let recorded = RecordBuffer()
            options.inboundTap = { bytes in recorded.append(bytes) }
            let metadata = RFBCapture.Metadata(pixelFormat: configuration.pixelFormat,
                                               encodings: RFBConnection(configuration: options.configuration).encodingList(),
                                               server: endpoint.description)
            let client = try await connection.connect(endpoint, options: options, logger: logger)
            try await client.waitForFirstFrame()
            let deadline = ContinuousClock.now + .milliseconds(Int(duration * 1000))
            // Progress rewrites one line on a terminal; elsewhere (a log, a pipe) it is quiet.
            let showProgress = !global.json && !global.quiet && isatty(2) != 0
            while ContinuousClock.now < deadline, await client.isConnected {
                try await Task.sleep(for: min(.seconds(1), deadline - ContinuousClock.now))
                if showProgress { FileHandleOutput.stderr("\rrecording: \(recorded.count / 1024) KiB") }
            }
            let disconnect = await client.disconnectReason
            await client.close()
            if showProgress { FileHandleOutput.stderr("\n") }
            if let disconnect, ContinuousClock.now < deadline {
                throw CommandFailure(message: "the session ended before the recording was complete: \(disconnect)")
            }
            // Stopping cuts the stream anywhere, usually inside an update: keep whole messages.
            let capture = try RFBCapture(metadata: metadata, stream: recorded.bytes).trimmedToLastCompleteMessage()
            try OutputPath.save(try capture.serialized(), to: output, what: "capture")
            if global.json {
                try printJSON(RecordReport(path: output, bytes: capture.stream.count, server: endpoint.description))
            } else {
                print("wrote \(output): \(capture.stream.count) bytes from \(endpoint)")
            }
        }
    }
}

struct RecordReport: Encodable {
    var path: String
    var bytes: Int
    var server: String
}

/// Bytes appended from the client's read loop, read once recording ends.
final class RecordBuffer: Sendable {
    private let storage = Mutex<[UInt8]>([])
    func append(_ bytes: [UInt8]) { storage.withLock { $0 += bytes } }
    var bytes: [UInt8] { storage.withLock { $0 } }
    var count: Int { storage.withLock { $0.count } }
}

struct VNCReplayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Decode a capture with no network and report what it held.",
        discussion: """
            Prints updates, rectangles and pixels decoded, CPU seconds, and the SHA-256 of the final framebuffer's RGB bytes (rows top to bottom, R, G, B per pixel), so decodes can be compared across clients. With --runs N the capture is decoded once to warm up and then N times from memory, and the median is reported (the method of TigerVNC's decperf).

            Example: farcast vnc replay session.rfb --runs 9 --json
            """
    )

    @Argument(help: "A capture written by 'farcast vnc record'.")
    var capture: String

    @Option(help: ArgumentHelp("Timed decodes after one warm-up (1: a single decode, no warm-up).", valueName: "count"))
    var runs: Int = 1

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (1...1000).contains(runs) else { throw ValidationError("--runs must be 1…1000") }
    }

    func run() async throws {
        try await reportingFailures {
            let parsed = try RFBCapture(bytes: try readWholeFile(capture))
            if runs > 1 { _ = try RFBReplay.run(parsed) }
            var times: [Double] = []
            var result: ReplayResult?
            for _ in 0..<runs {
                let before = cpuSeconds()
                result = try RFBReplay.run(parsed)
                times.append(cpuSeconds() - before)
            }
            guard let result else { return }
            let median = times.sorted()[times.count / 2]
            let hash = rgbSHA256(result.framebuffer)
            let report = ReplayReport(capture: capture, bytes: parsed.stream.count, updates: result.updates, rectangles: result.rectangles,
                                      pixels: result.pixels, cpuSeconds: times, medianCPUSeconds: median,
                                      mpxPerSecond: median > 0 ? Double(result.pixels) / median / 1e6 : 0,
                                      width: result.framebuffer.width, height: result.framebuffer.height, sha256: hash,
                                      peakRSSBytes: peakRSSBytes(), decoderBuffersPeakBytes: result.peakBufferBytes,
                                      framebufferBytes: result.framebuffer.width * result.framebuffer.height * 4,
                                      error: result.error.map { describe($0) })
            if global.json {
                try printJSON(report)
            } else {
                print("capture      \(capture) (\(report.bytes) bytes)")
                print("decoded      \(report.updates) updates, \(report.rectangles) rectangles, \(report.pixels) pixels")
                let spread = runs > 1 ? " (median of \(runs) after a warm-up)" : ""
                print("cpu          \(String(format: "%.3f", median)) s\(spread), \(String(format: "%.1f", report.mpxPerSecond)) Mpx/s")
                print("framebuffer  \(report.width)x\(report.height) sha256 \(hash)")
                print("memory       peak RSS \(report.peakRSSBytes / 1_048_576) MiB (capture included); decoder buffers \(report.decoderBuffersPeakBytes / 1_048_576) MiB = \(String(format: "%.2f", Double(report.decoderBuffersPeakBytes) / Double(max(report.framebufferBytes, 1))))× the framebuffer")
                if let error = report.error { print("stopped      \(error)") }
            }
            if let error = result.error { throw CommandFailure(message: "the capture did not decode to its end: \(describe(error))") }
        }
    }
}

struct ReplayReport: Encodable {
    var capture: String
    var bytes: Int
    var updates: Int
    var rectangles: Int
    var pixels: Int
    var cpuSeconds: [Double]
    var medianCPUSeconds: Double
    var mpxPerSecond: Double
    var width: Int
    var height: Int
    var sha256: String
    var peakRSSBytes: Int
    var decoderBuffersPeakBytes: Int
    var framebufferBytes: Int
    var error: String?

    enum CodingKeys: String, CodingKey {
        case capture, bytes, updates, rectangles, pixels, cpuSeconds, medianCPUSeconds = "median_cpu_seconds", mpxPerSecond = "mpx_per_s"
        case width, height, sha256, peakRSSBytes = "peak_rss_bytes", decoderBuffersPeakBytes = "decoder_buffers_peak_bytes"
        case framebufferBytes = "framebuffer_bytes", error
    }
}

/// The largest resident set this process has had, in bytes.
func peakRSSBytes() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Int(usage.ru_maxrss) * 1024     // Linux reports kilobytes
}

/// Reads a file straight into one array (captures can be hundreds of MB: no extra copies).
func readWholeFile(_ path: String) throws -> [UInt8] {
    guard let handle = FileHandle(forReadingAtPath: path) else { throw CommandFailure(message: "cannot read \(path)") }
    defer { try? handle.close() }
    let size = Int(try handle.seekToEnd())
    try handle.seek(toOffset: 0)
    var bytes = [UInt8](repeating: 0, count: size)
    let fd = handle.fileDescriptor
    var offset = 0
    try bytes.withUnsafeMutableBytes { raw in
        while offset < size {
            let n = read(fd, raw.baseAddress! + offset, size - offset)
            guard n > 0 else { throw CommandFailure(message: "cannot read \(path): \(String(cString: strerror(errno)))") }
            offset += n
        }
    }
    return bytes
}

/// User + system CPU time of this process.
func cpuSeconds() -> Double {
    var usage = rusage()
    // Glibc imports RUSAGE_SELF as an enum constant; Darwin as an Int32.
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

struct VNCWatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Connect and keep taking updates, then report what was decoded.",
        discussion: """
            With --until-eof it runs until the server closes the connection — so a recorded stream served by any replay server can be checked — and reports updates, rectangles and pixels decoded, CPU seconds, and with --hash the SHA-256 of the final framebuffer's RGB bytes (the same figure 'farcast vnc replay' prints).

            --audio plays a QEMU virtual machine's sound (QEMU's own VNC server with -vnc …,audiodev=ID) on an ALSA device, or writes it to a WAV file.

            Examples: farcast vnc watch myhost:1 --duration 60 --encoding tight --quality 6
                      farcast vnc watch 127.0.0.1::5999 --until-eof --hash
                      farcast vnc watch vm-host:0 --duration 600 --audio alsa
            """
    )

    @OptionGroup var connection: VNCConnectionOptions
    @OptionGroup var encodingOptions: VNCEncodingOptions

    @Flag(name: .customLong("until-eof"), help: "Run until the server closes the connection.")
    var untilEOF = false

    @Option(help: ArgumentHelp("Stop after this many seconds instead.", valueName: "seconds"))
    var duration: Double?

    @Flag(help: "Print the SHA-256 of the final framebuffer's RGB bytes.")
    var hash = false

    @Option(help: ArgumentHelp("Play the server's audio (QEMU): alsa, alsa:DEVICE, or write it to FILE.wav.", valueName: "alsa[:device]|file.wav"))
    var audio: String?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard untilEOF != (duration != nil) else { throw ValidationError("give exactly one of --until-eof and --duration") }
        if let duration, duration <= 0 { throw ValidationError("--duration must be positive") }
        if let audio { do { _ = try VNCAudioOutput.Destination(audio) } catch { throw ValidationError(error.message) } }
    }

    func run() async throws {
        try await reportingFailures {
            let logger = global.makeLogger(label: "farcast.vnc")
            let endpoint = try connection.endpoint()
            var configuration = encodingOptions.configuration()
            let output = try audio.map { try VNCAudioOutput(try VNCAudioOutput.Destination($0)) }
            if output != nil { configuration.audio = VNCAudioOutput.format }
            let cpuBefore = cpuSeconds()
            let client = try await connection.connect(endpoint, options: try connection.clientOptions(configuration), logger: logger)
            // Events until the server ends the session, or (--duration) the time is up; a server
            // that dies meanwhile ends the watch as a failure.
            let started = ContinuousClock.now
            let ended = await Self.watch(client.events, for: duration.map { .milliseconds(Int($0 * 1000)) }) { event in
                if case .audio(let sound) = event { output?.handle(sound) }
            }
            let framebuffer = await client.framebuffer
            let stats = await client.statistics
            let audioOffered = await client.serverSupportsAudio
            await client.close()
            let played = output?.close()
            if let failure = played?.failure { throw CommandFailure(message: "the audio output failed: \(failure)") }
            if output != nil && !audioOffered {
                logger.warning("\(VNCAudioOutput.serverSentNone)")
            }
            let cpu = cpuSeconds() - cpuBefore
            switch ended {
            case .timeUp:
                break
            case .disconnected(let reason):
                // With --until-eof the server closing is the expected end; anything else fails.
                if !untilEOF || reason != .connectionClosed("by the server") {
                    let after = ContinuousClock.now - started
                    throw CommandFailure(message: "the session ended after \(after.components.seconds) s: \(reason.map { "\($0)" } ?? "the connection closed")")
                }
            }
            let digest = hash ? rgbSHA256(framebuffer) : nil
            let report = WatchReport(server: endpoint.description, updates: stats.updates, rectangles: stats.rectangles, pixels: stats.pixels,
                                     cpuSeconds: cpu, width: framebuffer.width, height: framebuffer.height, sha256: digest,
                                     audioSeconds: played?.seconds)
            if global.json {
                try printJSON(report)
            } else {
                print("server       \(report.server)")
                print("decoded      \(report.updates) updates, \(report.rectangles) rectangles, \(report.pixels) pixels")
                print("cpu          \(String(format: "%.3f", cpu)) s")
                print("framebuffer  \(report.width)x\(report.height)\(digest.map { " sha256 \($0)" } ?? "")")
                if let seconds = played?.seconds { print("audio        \(String(format: "%.1f", seconds)) s") }
            }
        }
    }
}

extension VNCWatchCommand {
    enum WatchEnd {
        case timeUp
        case disconnected(RFBError?)
    }

    /// Consumes events until the session ends or `duration` (if any) has passed.
    static func watch(_ events: AsyncStream<RFBEvent>, for duration: Duration?,
                      onEvent: @escaping @Sendable (RFBEvent) -> Void = { _ in }) async -> WatchEnd {
        await withTaskGroup(of: WatchEnd?.self) { group in
            group.addTask {
                for await event in events {
                    onEvent(event)
                    if case .disconnected(let reason) = event { return .disconnected(reason) }
                }
                return .disconnected(nil)
            }
            if let duration {
                group.addTask {
                    try? await Task.sleep(for: duration)
                    return Task.isCancelled ? nil : .timeUp
                }
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? .timeUp
        }
    }
}

struct WatchReport: Encodable {
    var server: String
    var updates: Int
    var rectangles: Int
    var pixels: Int
    var cpuSeconds: Double
    var width: Int
    var height: Int
    var sha256: String?
    /// Seconds of QEMU audio written (with --audio).
    var audioSeconds: Double?
}

/// SHA-256 of a framebuffer's RGB bytes (`Framebuffer.rgbBytes()`), hashed row by row so the
/// picture is not copied whole first.
func rgbSHA256(_ framebuffer: Framebuffer) -> String {
    var hasher = SHA256()
    framebuffer.withRGBRows { hasher.update(bufferPointer: $0) }
    return hexString(hasher.finalize())
}
