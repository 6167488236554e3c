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
        discussion: "The capture holds every byte the server sent (after TLS decryption) and the pixel format and encodings this client asked for. Replay it with 'farcast vnc replay'. Captures of busy desktops grow by tens of MB per minute."
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
    }

    func run() async throws {
        try await reportingFailures {
            let logger = global.makeLogger(label: "farcast.vnc")
            let endpoint = try connection.endpoint()
            var configuration = RFBConnection.Configuration()
            encodingOptions.apply(to: &configuration)
            // Continuous updates would make the recording depend on timing; requests keep the
            // stream a plain sequence of updates.
            configuration.continuousUpdates = false
            var options = try connection.clientOptions(configuration)
            let recorded = RecordBuffer()
            options.inboundTap = { bytes in recorded.append(bytes) }
            let metadata = RFBCapture.Metadata(pixelFormat: configuration.pixelFormat,
                                               encodings: RFBConnection(configuration: options.configuration).encodingList(),
                                               server: endpoint.description)
            let client = try await VNCClient.connect(to: endpoint, credentials: connection.credentialProvider(endpoint: endpoint, logger: logger),
                                                     options: options, logger: logger)
            try await client.waitForFirstFrame()
            let deadline = ContinuousClock.now + .milliseconds(Int(duration * 1000))
            while ContinuousClock.now < deadline, await client.isConnected {
                try await Task.sleep(for: min(.seconds(1), deadline - ContinuousClock.now))
                if !global.json && !global.quiet {
                    FileHandleOutput.stderr("\rrecording: \(recorded.count / 1024) KiB")
                }
            }
            await client.close()
            if !global.json && !global.quiet { FileHandleOutput.stderr("\n") }
            let capture = RFBCapture(metadata: metadata, stream: recorded.bytes)
            guard FileManager.default.createFile(atPath: output, contents: Data(try capture.serialized())) else {
                throw CommandFailure(message: "cannot write \(output)")
            }
            if global.json {
                try printJSON(["path": output, "bytes": "\(capture.stream.count)"])
            } else {
                print("wrote \(output): \(capture.stream.count) bytes from \(endpoint)")
            }
        }
    }
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
        discussion: "Prints updates, rectangles and pixels decoded, CPU seconds, and the SHA-256 of the final framebuffer's RGB bytes (rows top to bottom, R, G, B per pixel), so decodes can be compared across clients."
    )

    @Argument(help: "A capture written by 'farcast vnc record'.")
    var capture: String

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            guard let data = FileManager.default.contents(atPath: capture) else { throw CommandFailure(message: "cannot read \(capture)") }
            let parsed = try RFBCapture(bytes: Array(data))
            let cpuBefore = cpuSeconds()
            let result = try RFBReplay.run(parsed)
            let cpu = cpuSeconds() - cpuBefore
            let hash = hexString(SHA256.hash(data: result.framebuffer.rgbBytes()))
            let report = ReplayReport(capture: capture, bytes: parsed.stream.count, updates: result.updates, rectangles: result.rectangles,
                                      pixels: result.pixels, cpuSeconds: cpu, mpxPerSecond: cpu > 0 ? Double(result.pixels) / cpu / 1e6 : 0,
                                      width: result.framebuffer.width, height: result.framebuffer.height, sha256: hash,
                                      error: result.error.map { "\($0)" })
            if global.json {
                try printJSON(report)
            } else {
                print("capture      \(capture) (\(report.bytes) bytes)")
                print("decoded      \(report.updates) updates, \(report.rectangles) rectangles, \(report.pixels) pixels")
                print("cpu          \(String(format: "%.3f", cpu)) s (\(String(format: "%.1f", report.mpxPerSecond)) Mpx/s)")
                print("framebuffer  \(report.width)x\(report.height) sha256 \(hash)")
                if let error = report.error { print("stopped      \(error)") }
            }
            if let error = result.error { throw CommandFailure(message: "the capture did not decode to its end: \(error)") }
        }
    }
}

struct ReplayReport: Encodable {
    var capture: String
    var bytes: Int
    var updates: Int
    var rectangles: Int
    var pixels: Int
    var cpuSeconds: Double
    var mpxPerSecond: Double
    var width: Int
    var height: Int
    var sha256: String
    var error: String?
}

/// User + system CPU time of this process.
func cpuSeconds() -> Double {
    var usage = rusage()
    // Glibc imports RUSAGE_SELF as an enum constant; Darwin as an Int32.
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}
