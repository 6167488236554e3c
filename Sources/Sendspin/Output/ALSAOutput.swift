#if canImport(CALSA)
import CALSA
import FarcastSupport
import Foundation
import Synchronization

/// An ALSA playback device (`alsa:DEVICE` on the command line). Unlike the file and null sinks
/// it brings its own clock: the `ALSADAC` that drives it paces itself by the device and learns
/// from the device's delay reports when each frame will leave, so the sample stamped T leaves
/// the DAC at T.
public final class ALSASink: AudioSink {
    public let name: String
    public let device: String
    /// ALSA configuration text the device name resolves in (on top of alsa-lib's own plugin
    /// definitions), instead of the system's configuration — nil for the system's.
    public let configuration: String?
    /// Requested device buffer and period (µs); the device grants what it can near them.
    public let bufferMicroseconds: Int
    public let periodMicroseconds: Int
    /// Called on the DAC thread with each block just before it is written: the departure of its
    /// first frame and the frame duration (µs, client clock), the frames and the full-scale
    /// interleaved samples. For measurements; it must return quickly.
    public let blockObserver: (@Sendable (_ departureUs: Double, _ frameUs: Double, _ frames: Int, _ channels: Int,
                                          _ samples: UnsafeBufferPointer<Int32>) -> Void)?

    public init(device: String, configuration: String? = nil, bufferMicroseconds: Int = 100_000, periodMicroseconds: Int = 10_000,
                blockObserver: (@Sendable (Double, Double, Int, Int, UnsafeBufferPointer<Int32>) -> Void)? = nil) {
        self.device = device
        self.configuration = configuration
        self.bufferMicroseconds = bufferMicroseconds
        self.periodMicroseconds = periodMicroseconds
        self.blockObserver = blockObserver
        name = "alsa:\(device)"
    }

    /// Opens the device and closes it again: a wrong name or a busy device fails here, with
    /// alsa-lib's reason, rather than once a stream starts.
    public func check() throws {
        try ALSADevice(name: device, configuration: configuration).close()
    }

    // The ALSA DAC talks to the device itself; these exist for the protocol's sake.
    public func start(format: OutputFormat) throws {}
    public func write(_ samples: UnsafeBufferPointer<Int32>, frames: Int) throws {}
    public func finish() throws {}

    public func makeDAC(core: PlayerCore, clock: any MonotonicClock) -> (any AudioDAC)? {
        ALSADAC(sink: self, core: core, clock: clock)
    }
}

/// Plays a stream as it arrives, paced by its source rather than by a clock of ours: for
/// sound that comes in real time from elsewhere, such as a virtual machine's over VNC. A pause
/// in the stream is an underrun, recovered with a period of silence.
///
/// `@unchecked Sendable`: every use of the device goes through `lock`.
public final class ALSAStreamPlayer: @unchecked Sendable {
    private let device: ALSADevice
    private let lock = NSLock()
    private var bytes: [UInt8] = []
    private var closed = false
    /// What the device granted ("S16_LE 48000 Hz 2 ch, buffer …").
    public let deviceDescription: String
    public private(set) var underruns = 0

    public init(device name: String, configuration: String? = nil, format: OutputFormat,
                bufferMicroseconds: Int = 200_000, periodMicroseconds: Int = 20_000) throws {
        device = try ALSADevice(name: name, configuration: configuration)
        do {
            try device.configure(format, bufferUs: bufferMicroseconds, periodUs: periodMicroseconds)
            try device.prefillAndStart()
        } catch {
            device.close()
            throw error
        }
        deviceDescription = device.description
    }

    /// Plays interleaved full-scale samples; blocks while the device's buffer is full.
    public func play(_ samples: [Int32], frames: Int) throws {
        lock.lock()
        defer { lock.unlock() }
        guard !closed, frames > 0 else { return }
        if try !device.write(samples, frames: frames, into: &bytes) {
            underruns += 1
            try device.recover()
            try device.prefillAndStart()
            _ = try device.write(samples, frames: frames, into: &bytes)
        }
    }

    /// Lets what is queued play out, then closes the device.
    public func close() {
        lock.lock()
        defer { lock.unlock() }
        guard !closed else { return }
        closed = true
        device.drain()
        device.close()
    }
}

/// The ALSA playback devices this machine offers (what `aplay -L` lists), for `farcast doctor`.
public enum ALSADevices {
    public struct Device: Sendable, Equatable {
        public var name: String
        public var description: String
    }

    public static func playback() -> [Device] {
        calsa_quiet_errors()
        var hints: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
        guard snd_device_name_hint(-1, "pcm", &hints) == 0, let hints else { return [] }
        defer { snd_device_name_free_hint(hints) }
        var devices: [Device] = []
        var index = 0
        while let hint = hints[index] {
            index += 1
            func field(_ id: String) -> String? {
                guard let value = snd_device_name_get_hint(hint, id) else { return nil }
                defer { free(value) }
                return String(cString: value)
            }
            // IOID is absent for devices that do both directions, "Output" for playback only.
            guard let name = field("NAME"), field("IOID").map({ $0 == "Output" }) ?? true else { continue }
            let description = field("DESC")?.split(whereSeparator: \.isNewline).joined(separator: " — ") ?? ""
            devices.append(Device(name: name, description: description))
        }
        return devices
    }
}

/// Drives an ALSA device from the playback engine on a thread of its own.
///
/// Timing: after each wait the device's status gives a timestamp and the frames queued ahead of
/// the DAC (`delay`); the next frame written leaves at timestamp + delay × frame duration. Those
/// readings are noisy (a sound server reports its latency in steps), so a second-order
/// delay-locked loop smooths them into a departure time and a true frame duration — the
/// device's crystal against our clock — that the engine renders against. Bandwidth 1 Hz for the
/// first five seconds of a run (a crystal 300 ppm off is learnt within them), then 0.5 Hz.
///
/// Underruns are recovered (prepare, a period of silence, start) and counted; the loop keeps its
/// frame duration and takes its phase afresh. A format change drains the device and opens it
/// again in the new format.
final class ALSADAC: AudioDAC {
    private let sink: ALSASink
    private let core: PlayerCore
    private let clock: any MonotonicClock
    private let running = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)
    private let outcome = Mutex<(done: Bool, error: String?, description: String?, underruns: Int)>((false, nil, nil, 0))

    init(sink: ALSASink, core: PlayerCore, clock: any MonotonicClock) {
        self.sink = sink
        self.core = core
        self.clock = clock
    }

    var sinkName: String { sink.name }
    /// What the device granted, once it is open ("S16_LE 48000 Hz 2 ch, buffer 100.0 ms, period 10.0 ms").
    var deviceDescription: String? { outcome.withLock { $0.description } }
    var deviceUnderruns: Int { outcome.withLock { $0.underruns } }
    var failure: String? { outcome.withLock { $0.error } }

    func start() {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let thread = Thread { [self] in self.run() }
        thread.name = "farcast-alsa"
        thread.qualityOfService = .userInteractive
        started.store(true, ordering: .releasing)
        thread.start()
    }

    @discardableResult
    func stop() -> String? {
        running.store(false, ordering: .releasing)
        while started.load(ordering: .acquiring) && !outcome.withLock({ $0.done }) { usleep(2000) }
        return outcome.withLock { $0.error }
    }

    private func nowUs() -> Double { Double(clock.now().nanoseconds) / 1000 }

    private func run() {
        var device: ALSADevice?
        var failure: String?
        var format: OutputFormat?
        var loop = DelayLockedLoop()
        var block = [Int32]()
        var bytes = [UInt8]()
        while running.load(ordering: .acquiring) {
            do {
                if format == nil {
                    guard let next = core.withEngine({ $0.nextFormat }) else {
                        usleep(2000)
                        continue
                    }
                    if let open = device {
                        open.drain()
                        try open.configure(next, bufferUs: sink.bufferMicroseconds, periodUs: sink.periodMicroseconds)
                    } else {
                        let open = try ALSADevice(name: sink.device, configuration: sink.configuration)
                        device = open
                        try open.configure(next, bufferUs: sink.bufferMicroseconds, periodUs: sink.periodMicroseconds)
                    }
                    let description = device?.description
                    outcome.withLock { $0.description = description }
                    try device?.prefillAndStart()
                    format = next
                    loop = DelayLockedLoop(frameUs: 1e6 / Double(next.sampleRate))
                }
                guard let pcm = device, let current = format else { continue }
                try pcm.wait(milliseconds: 100)
                let reading = try pcm.status(now: nowUs)
                if reading.xrun {
                    try recover(pcm, &loop)
                    continue
                }
                let frames = (reading.avail / pcm.periodFrames) * pcm.periodFrames
                guard frames > 0 else { continue }
                loop.measure(departureUs: reading.timestampUs + Double(reading.delay) * loop.frameUs, atUs: reading.timestampUs)
                let departure = loop.nextDepartureUs
                let changed = core.render(into: &block, frames: frames, format: current, departureUs: departure, frameDurationUs: loop.frameUs)
                block.withUnsafeBufferPointer {
                    sink.blockObserver?(departure, loop.frameUs, frames, current.channels,
                                        UnsafeBufferPointer(rebasing: $0[0..<(frames * current.channels)]))
                }
                if try !pcm.write(block, frames: frames, into: &bytes) {
                    try recover(pcm, &loop)
                    continue
                }
                loop.advance(frames: frames)
                if changed { format = nil }
            } catch {
                failure = "\(sink.name): \(error)"
                outcome.withLock { $0.error = failure }
                running.store(false, ordering: .releasing)
            }
        }
        device?.close()
        outcome.withLock { $0.done = true; $0.error = failure }
    }

    private func recover(_ pcm: ALSADevice, _ loop: inout DelayLockedLoop) throws {
        outcome.withLock { $0.underruns += 1 }
        try pcm.recover()
        try pcm.prefillAndStart()
        loop.resetPhase()
    }
}

/// One open PCM: configuration, status, writes and recovery, with alsa-lib's errors turned
/// into `SendspinError.audioDevice`.
final class ALSADevice {
    private var pcm: OpaquePointer?
    let name: String
    private(set) var periodFrames = 0
    private(set) var bufferFrames = 0
    private(set) var channels = 0
    private(set) var sampleRate = 0
    private(set) var sampleFormat = SampleFormat.s16
    private var rawTimestamps = false
    private var silence = [UInt8]()

    enum SampleFormat: String {
        case s16 = "S16_LE", s24in32 = "S24_LE", s24packed = "S24_3LE", s32 = "S32_LE"
        var alsa: snd_pcm_format_t {
            switch self {
            case .s16: SND_PCM_FORMAT_S16_LE
            case .s24in32: SND_PCM_FORMAT_S24_LE
            case .s24packed: SND_PCM_FORMAT_S24_3LE
            case .s32: SND_PCM_FORMAT_S32_LE
            }
        }
        var bytes: Int { switch self { case .s16: 2; case .s24packed: 3; case .s24in32, .s32: 4 } }
        /// Device formats to try for a stream's bit depth, best first: exact, then wider, then narrower.
        static func candidates(bitDepth: Int) -> [SampleFormat] {
            switch bitDepth {
            case 16: [.s16, .s32, .s24in32, .s24packed]
            case 24: [.s24packed, .s24in32, .s32, .s16]
            default: [.s32, .s24in32, .s24packed, .s16]
            }
        }
    }

    init(name: String, configuration: String?) throws {
        self.name = name
        calsa_quiet_errors()
        var handle: OpaquePointer?
        let err = configuration.map { text in text.withCString { calsa_open_playback(&handle, name, $0) } }
            ?? calsa_open_playback(&handle, name, nil)
        guard err >= 0, let handle else {
            throw SendspinError.audioDevice("cannot open ALSA device '\(name)': \(Self.describe(err))"
                + " (list devices with `aplay -L`; 'default' is the system's default output)")
        }
        pcm = handle
    }

    static func describe(_ err: Int32) -> String { String(cString: calsa_error(err)) }

    var description: String {
        let rate = Double(sampleRate)
        return "\(sampleFormat.rawValue) \(sampleRate) Hz \(channels) ch, buffer \(String(format: "%.1f", Double(bufferFrames) * 1000 / rate)) ms,"
            + " period \(String(format: "%.1f", Double(periodFrames) * 1000 / rate)) ms"
    }

    /// Sets the stream's rate and channels and the best sample format the device takes.
    func configure(_ format: OutputFormat, bufferUs: Int, periodUs: Int) throws {
        guard let pcm else { throw SendspinError.audioDevice("ALSA device '\(name)' is closed") }
        snd_pcm_hw_free(pcm)
        var lastError: Int32 = 0
        for candidate in SampleFormat.candidates(bitDepth: format.bitDepth) {
            var buffer: snd_pcm_uframes_t = 0, period: snd_pcm_uframes_t = 0
            var raw: Int32 = 0
            let err = calsa_configure(pcm, candidate.alsa, UInt32(format.channels), UInt32(format.sampleRate), UInt32(bufferUs), UInt32(periodUs),
                                      &buffer, &period, &raw)
            if err >= 0 {
                sampleFormat = candidate
                bufferFrames = Int(buffer)
                periodFrames = max(1, Int(period))
                channels = format.channels
                sampleRate = format.sampleRate
                rawTimestamps = raw != 0
                silence = [UInt8](repeating: 0, count: periodFrames * channels * candidate.bytes)
                return
            }
            lastError = err
        }
        throw SendspinError.audioDevice("ALSA device '\(name)' cannot play \(format.sampleRate) Hz, \(format.channels) channels"
            + " in any 16/24/32-bit format: \(Self.describe(lastError))")
    }

    /// A period of silence, then start: the device runs with room to spare from the first frame.
    func prefillAndStart() throws {
        guard let pcm else { return }
        let written = silence.withUnsafeBytes { snd_pcm_writei(pcm, $0.baseAddress, snd_pcm_uframes_t(periodFrames)) }
        if written < 0 { throw SendspinError.audioDevice("ALSA device '\(name)': \(Self.describe(Int32(written)))") }
        let err = snd_pcm_start(pcm)
        if err < 0 { throw SendspinError.audioDevice("ALSA device '\(name)' did not start: \(Self.describe(err))") }
    }

    func wait(milliseconds: Int32) throws {
        guard let pcm else { return }
        let err = snd_pcm_wait(pcm, milliseconds)
        // -EPIPE (underrun) and -ESTRPIPE (suspend) show up in the status that follows.
        if err < 0 && err != -EPIPE && err != -ESTRPIPE {
            throw SendspinError.audioDevice("ALSA device '\(name)': \(Self.describe(err))")
        }
    }

    struct Reading {
        var timestampUs: Double
        var delay: Int
        var avail: Int
        var xrun: Bool
    }

    /// The device's status. Timestamps are taken from the status when the device stamps with
    /// CLOCK_MONOTONIC_RAW (our clock), else from `now` around the call.
    func status(now: () -> Double) throws -> Reading {
        guard let pcm else { throw SendspinError.audioDevice("ALSA device '\(name)' is closed") }
        var stamp: Int64 = 0, delay = 0, avail = 0
        var state: Int32 = 0
        let before = now()
        let err = calsa_status(pcm, &stamp, &delay, &avail, &state)
        let after = now()
        if err < 0 { throw SendspinError.audioDevice("ALSA device '\(name)': \(Self.describe(err))") }
        let xrun = state == calsa_state_xrun() || avail < 0 || (state != calsa_state_running())
        let timestamp = rawTimestamps && stamp > 0 ? Double(stamp) / 1000 : (before + after) / 2
        return Reading(timestampUs: timestamp, delay: delay, avail: avail, xrun: xrun)
    }

    /// Converts full-scale samples to the device format and writes them. Returns false on an
    /// underrun (the caller recovers).
    func write(_ block: [Int32], frames: Int, into bytes: inout [UInt8]) throws -> Bool {
        guard let pcm else { return false }
        let count = frames * channels
        let size = count * sampleFormat.bytes
        if bytes.count < size { bytes = [UInt8](repeating: 0, count: size) }
        block.withUnsafeBufferPointer { source in
            bytes.withUnsafeMutableBytes { target in
                switch sampleFormat {
                case .s16:
                    let out = target.bindMemory(to: Int16.self)
                    for i in 0..<count { out[i] = Int16(truncatingIfNeeded: source[i] >> 16).littleEndian }
                case .s32:
                    let out = target.bindMemory(to: Int32.self)
                    for i in 0..<count { out[i] = source[i].littleEndian }
                case .s24in32:
                    let out = target.bindMemory(to: Int32.self)
                    for i in 0..<count { out[i] = (source[i] >> 8).littleEndian }
                case .s24packed:
                    for i in 0..<count {
                        let v = source[i] >> 8
                        target[3 * i] = UInt8(truncatingIfNeeded: v)
                        target[3 * i + 1] = UInt8(truncatingIfNeeded: v >> 8)
                        target[3 * i + 2] = UInt8(truncatingIfNeeded: v >> 16)
                    }
                }
            }
        }
        var offset = 0
        while offset < frames {
            let written = bytes.withUnsafeBytes { raw in
                snd_pcm_writei(pcm, raw.baseAddress! + offset * channels * sampleFormat.bytes, snd_pcm_uframes_t(frames - offset))
            }
            if written == -Int(EPIPE) || written == -Int(ESTRPIPE) { return false }
            if written == -Int(EAGAIN) { continue }
            if written < 0 { throw SendspinError.audioDevice("ALSA device '\(name)': \(Self.describe(Int32(written)))") }
            offset += written
        }
        return true
    }

    func recover() throws {
        guard let pcm else { return }
        var err = snd_pcm_recover(pcm, -EPIPE, 1)
        if err < 0 { err = snd_pcm_prepare(pcm) }
        if err < 0 { throw SendspinError.audioDevice("ALSA device '\(name)' did not recover from an underrun: \(Self.describe(err))") }
    }

    /// Lets what is queued play out (before a format change).
    func drain() {
        guard let pcm else { return }
        snd_pcm_drain(pcm)
    }

    func close() {
        guard let pcm else { return }
        snd_pcm_drop(pcm)
        snd_pcm_close(pcm)
        self.pcm = nil
    }
}
#endif
