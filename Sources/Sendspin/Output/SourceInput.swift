import FarcastSupport
import Foundation
import Synchronization

/// Where a source client's audio comes from (source@v1): blocks of `blockFrames` frames of
/// 16-bit interleaved samples, each with the client time (µs, monotonic raw) its first sample
/// was captured at.
public protocol SourceInput: Sendable {
    var sampleRate: Int { get }
    var channels: Int { get }
    var blockFrames: Int { get }
    /// Starts capturing; `deliver` is called from the input's own thread for each block.
    func start(_ deliver: @escaping @Sendable (_ samples: [Int16], _ capturedAt: Int64) -> Void) throws
    /// Stops capturing (the device is closed until the next start).
    func stop()
    /// Why capturing stopped on its own, if it did.
    var failure: String? { get }
}

/// When a block of captured audio was taken, from noisy readings: a block's measured capture
/// time (the read's return less what was read and what the device still held) can only be late
/// — the reader was scheduled late — never early. So the blocks' times are a line, block n at
/// offset + n × duration, with the offset the earliest reading relative to it over the last
/// `window` blocks (short enough to follow a device clock that drifts against ours). Pure.
public struct CaptureClock: Sendable {
    public let blockUs: Double
    public let window: Int
    private var readings: [(block: Int64, offset: Double)] = []

    public init(blockUs: Double, window: Int = 100) {
        self.blockUs = blockUs
        self.window = window
    }

    /// The capture time (µs) of block `block`, given its measured time.
    public mutating func stamp(block: Int64, measured: Int64) -> Int64 {
        readings.append((block, Double(measured) - Double(block) * blockUs))
        if readings.count > window { readings.removeFirst(readings.count - window) }
        let offset = readings.map(\.offset).min() ?? 0
        return Int64((offset + Double(block) * blockUs).rounded())
    }
}

#if canImport(CALSA)
/// A line-in on ALSA (`alsa:DEVICE`): 48 kHz stereo 16-bit in 20 ms blocks (alsa-lib converts
/// where the device differs). Paced by the device, and for devices that never block (the null
/// and file plugins) by the wall clock. The capture time of a block's first sample is the time
/// the read returned less the block and what the device still holds, steadied by `CaptureClock`.
public final class ALSALineIn: SourceInput {
    public let device: String
    public let sampleRate = 48000
    public let channels = 2
    public let blockFrames = 960                     // 20 ms
    private let clock = SystemClock(.monotonicRaw)
    private struct State {
        var running = false
        var finished = true
        var failure: String?
    }
    private let state = Mutex(State())

    /// Opens `device` once to say now whether it can record (then closes it until `start`).
    public init(device: String) throws {
        self.device = device
        let probe = try ALSACapture(device: device, sampleRate: sampleRate, channels: channels)
        probe.close()
    }

    public var failure: String? { state.withLock { $0.failure } }

    public func start(_ deliver: @escaping @Sendable ([Int16], Int64) -> Void) throws {
        let capture = try ALSACapture(device: device, sampleRate: sampleRate, channels: channels)
        let go = state.withLock { s -> Bool in
            guard !s.running && s.finished else { return false }
            (s.running, s.finished, s.failure) = (true, false, nil)
            return true
        }
        guard go else { capture.close(); return }
        let box = CaptureBox(capture)
        let thread = Thread { [self] in
            run(box.capture, deliver)
            box.capture.close()
            state.withLock { $0.finished = true }
        }
        thread.name = "farcast-line-in"
        thread.qualityOfService = .userInteractive
        thread.start()
    }

    public func stop() {
        state.withLock { $0.running = false }
        for _ in 0..<200 where !state.withLock({ $0.finished }) { usleep(5_000) }
    }

    private final class CaptureBox: @unchecked Sendable {
        // @unchecked: handed to the capture thread once and used only there.
        let capture: ALSACapture
        init(_ capture: ALSACapture) { self.capture = capture }
    }

    private func run(_ capture: ALSACapture, _ deliver: @Sendable ([Int16], Int64) -> Void) {
        var samples: [Int16] = []
        let frames = blockFrames, rate = Int64(sampleRate)
        let blockUs = Int64(frames) * 1_000_000 / rate
        let start = clock.now().microseconds
        var blocks: Int64 = 0
        var stamps = CaptureClock(blockUs: Double(frames) * 1e6 / Double(rate))
        while state.withLock({ $0.running }) {
            // Block n is complete at start + (n + 1) × 20 ms, not before (a device that never
            // blocks would otherwise be read as fast as the loop runs).
            let due = start + (blocks + 1) * blockUs
            let now = clock.now().microseconds
            if due > now + 1_000 { usleep(useconds_t(min(20_000, due - now - 500))); continue }
            do {
                try capture.read(frames: frames, into: &samples)
            } catch {
                state.withLock { $0.failure = "\(error)" }
                return
            }
            let readAt = clock.now().microseconds
            let behind = Int64(capture.pendingFrames() ?? 0)
            let capturedAt = stamps.stamp(block: blocks, measured: readAt - (Int64(frames) + behind) * 1_000_000 / rate)
            blocks += 1
            deliver(Array(samples.prefix(frames * channels)), capturedAt)
        }
    }
}
#endif
