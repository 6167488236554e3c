import FarcastSupport
import Foundation
import Punktfunk
import Sendspin
import Synchronization

/// The stream's sound on an ALSA device: the host's 0xC9 datagrams go into an `AudioPlayout`
/// (jitter ring + libopus, concealing what is missing) from the QUIC thread; a thread of its own
/// renders one 5 ms frame after another, folds it to stereo, and writes it to the device. The
/// device paces that thread (a write blocks while its buffer is full); so that a device that
/// never blocks (ALSA's null and file plugins) cannot make it render ahead of the stream, the
/// thread also never gets more than the device's buffer ahead of the wall clock (with 0.1 % of
/// slack, more than any real sound card's drift).
final class PunktfunkAudioOutput: Sendable {
    struct Statistics: Sendable, Encodable {
        var framesPlayed = 0
        var concealed = 0
        var late = 0
        /// The device ran dry (ALSA underruns), and the jitter ring did (it then primed again, in silence).
        var underruns = 0
        var ringUnderruns = 0
        /// The jitter ring's delay now (it adapts to late frames between 15 and 85 ms).
        var jitterDelayMs = 0
        var decodeErrors = 0
        var failure: String?
    }

    static let sampleRate = 48000
    static let bufferMicroseconds = 40_000

    private let playout: Mutex<AudioPlayout>
    private let stopped = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    private let stats = Mutex(Statistics())
    let deviceDescription: String
    private let sourceChannels: Int

    /// Opens `device` (an ALSA name) for the Welcome's channel count; throws alsa-lib's reason.
    init(device: String, channels: Int) throws {
        let decoder = try OpusStreamDecoder(channels: channels)
        playout = Mutex(AudioPlayout(decoder: decoder, ring: AudioJitterRing(adaptive: true)))
        sourceChannels = channels
        #if canImport(CALSA)
        let player = try ALSAStreamPlayer(device: device, format: OutputFormat(sampleRate: Self.sampleRate, channels: 2, bitDepth: 16),
                                          bufferMicroseconds: Self.bufferMicroseconds, periodMicroseconds: 10_000)
        deviceDescription = player.deviceDescription
        let thread = Thread { [self] in
            run(player)
            player.close()
            finished.store(true, ordering: .releasing)
        }
        thread.name = "farcast punktfunk audio"
        thread.start()
        #else
        throw CommandFailure(message: "this build has no ALSA output")
        #endif
    }

    /// One QUIC datagram from the host (any thread); audio ones go into the jitter ring.
    func receive(_ datagram: [UInt8]) {
        guard datagram.first == 0xC9 else { return }
        playout.withLock { _ = $0.receive(datagram) }
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        for _ in 0..<200 where !finished.load(ordering: .acquiring) { usleep(5_000) }
    }

    var statistics: Statistics {
        var s = stats.withLock { $0 }
        let counters = playout.withLock { ($0.ring.counters, $0.decodeErrors, $0.ring.currentTarget) }
        s.concealed = counters.0.concealed
        s.late = counters.0.late
        s.ringUnderruns = counters.0.underruns
        s.decodeErrors = counters.1
        s.jitterDelayMs = counters.2 * 5
        return s
    }

    #if canImport(CALSA)
    private func run(_ player: ALSAStreamPlayer) {
        let frame = AudioPlayout.frameSamples
        var decoded: [Float] = [], stereo: [Float] = []
        var samples = [Int32](repeating: 0, count: frame * 2)
        let start = SystemClock().now().nanoseconds
        let lead = Int64(Self.bufferMicroseconds) * 1000
        var rendered: Int64 = 0
        while !stopped.load(ordering: .acquiring) {
            // Rendered time may lead the wall clock by the device's buffer, no more.
            let due = start + Int64(Double(rendered) * 1e9 / Double(Self.sampleRate) / 1.001) - lead
            let now = SystemClock().now().nanoseconds
            if due > now { usleep(useconds_t(min(50_000, (due - now) / 1000))); continue }
            playout.withLock { $0.render(into: &decoded) }
            ChannelFold.fold(decoded, frames: frame, from: sourceChannels, to: 2, into: &stereo)
            for i in 0..<(frame * 2) {
                samples[i] = Int32((max(-1, min(1, Double(stereo[i]))) * Double(Int32.max)).rounded())
            }
            do {
                try player.play(samples, frames: frame)
            } catch {
                stats.withLock { $0.failure = "\(error)" }
                return
            }
            rendered += Int64(frame)
            stats.withLock { $0.framesPlayed += frame; $0.underruns = player.underruns }
        }
    }
    #endif
}
