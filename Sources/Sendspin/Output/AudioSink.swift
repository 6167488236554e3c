import FarcastSupport
import Foundation

/// Where played audio goes. The DAC driving a sink hands it blocks of full-scale 32-bit
/// interleaved frames in playback order.
public protocol AudioSink: AnyObject, Sendable {
    var name: String { get }
    /// (Re)configures for a format; called before the first block and on every format change.
    func start(format: OutputFormat) throws
    func write(_ samples: UnsafeBufferPointer<Int32>, frames: Int) throws
    /// Flushes and closes.
    func finish() throws
    /// A sink with a clock of its own (a sound device) makes the DAC that drives it; nil (the
    /// default) means the software DAC paces the sink from the monotonic clock.
    func makeDAC(core: PlayerCore, clock: any MonotonicClock) -> (any AudioDAC)?
    /// The period the software DAC works for this sink: how far ahead of their moment frames are
    /// rendered, and so how often it wakes. A sink whose output is heard, or read as a recording
    /// of what a device would have played, wants a device's 10 ms (the default); one whose audio
    /// goes nowhere can take longer periods and wake less, its timing record as exact.
    var softwarePeriod: Duration { get }
}

extension AudioSink {
    public func makeDAC(core: PlayerCore, clock: any MonotonicClock) -> (any AudioDAC)? { nil }
    public var softwarePeriod: Duration { .milliseconds(10) }
}

/// What pulls frames from the playback engine in real time and hands them to a sink.
public protocol AudioDAC: AnyObject, Sendable {
    var sinkName: String { get }
    /// Starts the output; `onFailure` is called (on the output's thread) once, after `failure`
    /// is set, if the output stops with an error.
    func start(onFailure: @escaping @Sendable () -> Void)
    /// Stops and finishes the sink; returns the output's error, if one occurred.
    @discardableResult func stop() -> String?
    /// The error that stopped the output while running, if any.
    var failure: String? { get }
    /// What the output device granted ("S16_LE 48000 Hz 2 ch, buffer 100.0 ms, period 10.0 ms"), if it is a device.
    var deviceDescription: String? { get }
    /// Underruns the output device reported and recovered from.
    var deviceUnderruns: Int { get }
}

extension AudioDAC {
    /// Starts the output; a failure is only seen by reading `failure`.
    public func start() { start(onFailure: {}) }
    public var deviceDescription: String? { nil }
    public var deviceUnderruns: Int { 0 }
}

/// Discards audio: with the software DAC it is a timing-exact player with no sound device —
/// a display, an LED controller or a test that wants the clock, the metadata and the timing
/// record but no sound. Nothing downstream needs a device's short period, so the DAC renders
/// 50 ms at a time (as snapclient's file player does): a fifth of the wakes, the same record.
/// The cost is the one a device with a 50 ms period has: a chunk must arrive 50 ms before its
/// moment (servers send seconds ahead), and a stream/clear takes effect after what was rendered.
public final class NullSink: AudioSink {
    public let name = "null"
    public let softwarePeriod: Duration = .milliseconds(50)
    public init() {}
    public func start(format: OutputFormat) throws {}
    public func write(_ samples: UnsafeBufferPointer<Int32>, frames: Int) throws {}
    public func finish() throws {}
}

/// Writes what would have been played to a WAV file at the stream's bit depth. A format change
/// starts a new file next to the first (`name-2.wav`, `name-3.wav`, …).
///
/// `@unchecked Sendable`: only the DAC thread calls it after `init`, serially.
public final class WAVSink: AudioSink, @unchecked Sendable {
    public let name: String
    private let basePath: String
    private var handle: FileHandle?
    private var format: OutputFormat?
    private var dataBytes = 0
    private var segment = 0
    public private(set) var writtenPaths: [String] = []

    public init(path: String) {
        basePath = path
        name = "wav:\(path)"
    }

    private func path(for segment: Int) -> String {
        guard segment > 1 else { return basePath }
        let url = URL(fileURLWithPath: basePath)
        let stem = url.deletingPathExtension().path
        return "\(stem)-\(segment).\(url.pathExtension.isEmpty ? "wav" : url.pathExtension)"
    }

    public func start(format: OutputFormat) throws {
        if format == self.format { return }
        try finish()
        segment += 1
        let target = path(for: segment)
        guard FileManager.default.createFile(atPath: target, contents: nil), let h = FileHandle(forWritingAtPath: target) else {
            throw SendspinError.audioDevice("cannot write the WAV file \(target): \(String(cString: strerror(errno)).lowercased())")
        }
        handle = h
        self.format = format
        dataBytes = 0
        writtenPaths.append(target)
        try h.write(contentsOf: header(format: format, dataBytes: 0))
    }

    private func header(format: OutputFormat, dataBytes: Int) -> Data {
        var d = Data()
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(truncatingIfNeeded: v).littleEndian) { d.append(contentsOf: $0) } }
        func u16(_ v: Int) { withUnsafeBytes(of: UInt16(truncatingIfNeeded: v).littleEndian) { d.append(contentsOf: $0) } }
        let bytesPerSample = format.bitDepth / 8
        d.append(contentsOf: Array("RIFF".utf8)); u32(36 + dataBytes)
        d.append(contentsOf: Array("WAVEfmt ".utf8)); u32(16); u16(1); u16(format.channels); u32(format.sampleRate)
        u32(format.sampleRate * format.channels * bytesPerSample); u16(format.channels * bytesPerSample); u16(format.bitDepth)
        d.append(contentsOf: Array("data".utf8)); u32(dataBytes)
        return d
    }

    public func write(_ samples: UnsafeBufferPointer<Int32>, frames: Int) throws {
        guard let handle, let format else { return }
        let bytesPerSample = format.bitDepth / 8
        let count = frames * format.channels
        var bytes = [UInt8](repeating: 0, count: count * bytesPerSample)
        let shift = Int32(32 - format.bitDepth)
        for i in 0..<count {
            let v = samples[i] >> shift
            for b in 0..<bytesPerSample { bytes[i * bytesPerSample + b] = UInt8(truncatingIfNeeded: v >> Int32(8 * b)) }
        }
        try handle.write(contentsOf: bytes)
        dataBytes += bytes.count
    }

    public func finish() throws {
        guard let handle, let format else { return }
        try handle.seek(toOffset: 0)
        try handle.write(contentsOf: header(format: format, dataBytes: dataBytes))
        try handle.close()
        self.handle = nil
        self.format = nil
    }
}
