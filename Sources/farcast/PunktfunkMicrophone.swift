import FarcastSupport
import AudioCodecs
import Foundation
import Punktfunk
import Sendspin
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The person's microphone to the host (`--mic alsa:DEVICE`): ALSA capture at 48 kHz stereo
/// (alsa-lib resampling where the device differs), 20 ms Opus frames, sent as 0xCB datagrams
/// with a sequence number and the capture time on the host's clock. A thread of its own, paced
/// by the device — and, for devices that never block (ALSA's null and file plugins), never
/// ahead of the wall clock. The menu turns sending on and off; the device stays open.
final class PunktfunkMicrophone: Sendable {
    static let frameSamples = 960   // 20 ms at 48 kHz

    struct Statistics: Sendable, Encodable {
        var framesSent = 0
        var overruns = 0
        var failure: String?
    }

    private let enabled = Atomic<Bool>(true)
    private let stopped = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    private let stats = Mutex(Statistics())

    /// `device`: an ALSA capture device name. `send` takes each datagram; `hostOffsetNs` says
    /// the host clock's offset from ours (host − client) when a frame is stamped.
    init(device: String, send: @escaping @Sendable ([UInt8]) -> Void, hostOffsetNs: @escaping @Sendable () -> Int64) throws {
        #if canImport(CALSA)
        let capture = try ALSACapture(device: device, sampleRate: 48000, channels: 2, periodMicroseconds: 20_000)
        let encoder = try OpusFrameEncoder(channels: 2)
        let box = CaptureBox(capture: capture, encoder: encoder)
        let thread = Thread { [self] in
            run(box, send: send, hostOffsetNs: hostOffsetNs)
            box.capture.close()
            finished.store(true, ordering: .releasing)
        }
        thread.name = "farcast punktfunk microphone"
        thread.start()
        #else
        throw CommandFailure(message: "this build has no ALSA capture")
        #endif
    }

    var isEnabled: Bool {
        get { enabled.load(ordering: .relaxed) }
        set { enabled.store(newValue, ordering: .relaxed) }
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        for _ in 0..<200 where !finished.load(ordering: .acquiring) { usleep(5_000) }
    }

    var statistics: Statistics { stats.withLock { $0 } }

    #if canImport(CALSA)
    private final class CaptureBox: @unchecked Sendable {
        // @unchecked: handed to the microphone thread once and used only there.
        let capture: ALSACapture
        let encoder: OpusFrameEncoder
        init(capture: ALSACapture, encoder: OpusFrameEncoder) { self.capture = capture; self.encoder = encoder }
    }

    private func run(_ box: CaptureBox, send: @Sendable ([UInt8]) -> Void, hostOffsetNs: @Sendable () -> Int64) {
        var samples: [Int16] = []
        var sequence: UInt32 = 0
        let start = SystemClock().now().nanoseconds
        var read: Int64 = 0
        while !stopped.load(ordering: .acquiring) {
            // Frame n is complete at start + (n + 1) × 20 ms, not before.
            let due = start + (read + 1) * 20_000_000
            let now = SystemClock().now().nanoseconds
            if due > now { usleep(useconds_t(min(20_000, (due - now) / 1000))); continue }
            do {
                try box.capture.read(frames: Self.frameSamples, into: &samples)
                read += 1
                guard enabled.load(ordering: .relaxed) else { continue }
                let opus = try box.encoder.encode(samples, frames: Self.frameSamples)
                // Stamped with when its first sample was taken, on the host's clock.
                let pts = UInt64(max(0, Int64(DataPlaneSocket.realtime()) - 20_000_000 + hostOffsetNs()))
                send(AudioPacket(sequence: sequence, ptsNanoseconds: pts, opus: opus).microphoneDatagram)
                sequence &+= 1
                let overruns = box.capture.overruns
                stats.withLock { $0.framesSent += 1; $0.overruns = overruns }
            } catch {
                stats.withLock { $0.failure = "\(error)" }
                return
            }
        }
    }
    #endif
}
