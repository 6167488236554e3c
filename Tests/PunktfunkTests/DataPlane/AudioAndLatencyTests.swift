import COpus
import Foundation
@testable import Punktfunk
import Testing

/// Audio: libopus's own encoder makes the host's 5 ms CELT frames (stereo, and 5.1/7.1 through
/// its surround multistream encoder), our decoder plays them back, the jitter ring reorders,
/// conceals gaps without blocking, primes, and bounds latency. And the latency meter.
@Suite struct AudioAndLatencyTests {
    /// Encodes `frames` 5 ms frames of a per-channel sine with libopus's surround encoder.
    static func encode(channels: Int, frames: Int) throws -> (packets: [[UInt8]], streams: Int32, coupled: Int32, mapping: [UInt8]) {
        var streams: Int32 = 0, coupled: Int32 = 0, error: Int32 = 0
        var mapping = [UInt8](repeating: 0, count: channels)
        let family: Int32 = channels > 2 ? 1 : 0
        guard let enc = opus_multistream_surround_encoder_create(48000, Int32(channels), family, &streams, &coupled, &mapping,
                                                                 OPUS_APPLICATION_RESTRICTED_LOWDELAY, &error), error == OPUS_OK
        else { throw MediaError.decoder("encoder: \(error)") }
        defer { opus_multistream_encoder_destroy(enc) }
        var packets: [[UInt8]] = []
        var t = 0
        for _ in 0..<frames {
            var pcm = [Float](repeating: 0, count: 240 * channels)
            for i in 0..<240 {
                for c in 0..<channels {
                    // The last channel of 5.1/7.1 (Vorbis order) is the LFE, which the surround encoder low-passes: a bass tone.
                    let hz = channels > 2 && c == channels - 1 ? 60.0 : Double(300 + 100 * c)
                    pcm[i * channels + c] = Float(0.3 * sin(2 * Double.pi * hz * Double(t) / 48000))
                }
                t += 1
            }
            var out = [UInt8](repeating: 0, count: 4000)
            let n = opus_multistream_encode_float(enc, pcm, 240, &out, 4000)
            guard n > 0 else { throw MediaError.decoder("encode: \(n)") }
            packets.append(Array(out.prefix(Int(n))))
        }
        return (packets, streams, coupled, mapping)
    }

    @Test(arguments: [2, 6, 8])
    func decodesTheHostsFramesForEveryLayout(channels: Int) throws {
        let encoded = try Self.encode(channels: channels, frames: 60)
        let decoder = try OpusStreamDecoder(channels: channels, streams: Int(encoded.streams), coupledStreams: Int(encoded.coupled),
                                            mapping: encoded.mapping)
        if channels > 2 {   // the defaults are libopus's surround layout
            let defaults = try OpusStreamDecoder(channels: channels)
            _ = defaults
            #expect(encoded.mapping == (channels == 6 ? [0, 4, 1, 2, 3, 5] : [0, 6, 1, 2, 3, 4, 5, 7]))
        }
        var out: [Float] = []
        var energy = [Double](repeating: 0, count: channels)
        for packet in encoded.packets.dropFirst(20) {
            let n = try decoder.decode(packet, into: &out)
            #expect(n == 240)
            for i in 0..<n { for c in 0..<channels { energy[c] += Double(out[i * channels + c] * out[i * channels + c]) } }
        }
        // Every channel carries its sine (RMS about 0.21 for amplitude 0.3).
        for c in 0..<channels { #expect(sqrt(energy[c] / Double(40 * 240)) > 0.1, "channel \(c)") }
        #expect(decoder.conceal(frames: 240, into: &out) == 240)
        #expect(throws: MediaError.self) { try decoder.decode([0xFF, 0xFF, 0xFF], into: &out) }
        #expect(throws: MediaError.self) { try OpusStreamDecoder(channels: 3) }
    }

    @Test func theRingReordersPrimesAndConceals() {
        var ring = AudioJitterRing(targetDepth: 3, maxDepth: 8, capacity: 32, maxConcealRun: 2)
        func packet(_ s: UInt32) -> AudioPacket { AudioPacket(sequence: s, ptsNanoseconds: UInt64(s) * 5_000_000, opus: [UInt8(s & 0xFF)]) }
        #expect(ring.next() == .waiting)
        #expect(ring.insert(packet(101)) == .accepted)
        #expect(ring.insert(packet(100)) == .late)               // the first arrival set the play head
        #expect(ring.insert(packet(103)) == .accepted)
        #expect(ring.next() == .frame(sequence: 101, ptsNanoseconds: 505_000_000, opus: [101]))  // depth 3 reached
        #expect(ring.next() == .conceal(sequence: 102))           // 102 never came, 103 did
        #expect(ring.insert(packet(102)) == .late)
        #expect(ring.insert(packet(103)) == .duplicate)
        #expect(ring.next() == .frame(sequence: 103, ptsNanoseconds: 515_000_000, opus: [103]))
        // Dry: conceal two frames, then prime again rather than blocking.
        #expect(ring.next() == .conceal(sequence: 104))
        #expect(ring.next() == .conceal(sequence: 105))
        #expect(ring.next() == .waiting)
        #expect(ring.counters.underruns == 1)
        for s: UInt32 in 106...108 { ring.insert(packet(s)) }
        #expect(ring.next() == .frame(sequence: 106, ptsNanoseconds: 530_000_000, opus: [106]))
        // A burst beyond maxDepth drops the oldest back to the target depth.
        // (107…114 fits in 8; 115 makes 9, so 107…112 go and 113…115 stay; 116…120 refill to 8.)
        for s: UInt32 in 109...120 { ring.insert(packet(s)) }
        #expect(ring.depth == 8)
        #expect(ring.counters.droppedForLatency == 6)
        #expect(ring.next() == .frame(sequence: 113, ptsNanoseconds: 565_000_000, opus: [113]))
        // Far ahead: the stream restarts there.
        #expect(ring.insert(packet(5000)) == .restarted)
        #expect(ring.next() == .waiting)
    }

    @Test func theRingSurvivesSequenceWrapAndHostileSequences() {
        var ring = AudioJitterRing(targetDepth: 2)
        ring.insert(AudioPacket(sequence: .max, ptsNanoseconds: 0, opus: [1]))
        ring.insert(AudioPacket(sequence: 0, ptsNanoseconds: 0, opus: [2]))
        #expect(ring.next() == .frame(sequence: .max, ptsNanoseconds: 0, opus: [1]))
        #expect(ring.next() == .frame(sequence: 0, ptsNanoseconds: 0, opus: [2]))
        var rng = SplitMix64(seed: 3)
        for _ in 0..<20000 {
            ring.insert(AudioPacket(sequence: UInt32(truncatingIfNeeded: rng.next()) % 300, ptsNanoseconds: 0, opus: []))
            if rng.next() % 2 == 0 { _ = ring.next() }
            #expect(ring.depth <= ring.capacity)
        }
    }

    @Test func latencyPercentilesAndSkew() {
        var meter = LatencyMeter(window: 100, clockOffsetNanoseconds: 1_000_000)
        // Host clock 1 ms ahead; latencies 1…100 ms.
        for ms in 1...100 {
            let pts: UInt64 = 1_700_000_000_000_000_000
            let received = pts + UInt64(ms) * 1_000_000 - 1_000_000
            #expect(meter.record(ptsNanoseconds: pts, receivedAtNanoseconds: received) == .latency(nanoseconds: Int64(ms) * 1_000_000))
        }
        let p = meter.percentiles()
        #expect(p == LatencyMeter.Percentiles(p50: 50_000_000, p95: 95_000_000, p99: 99_000_000, count: 100))
        #expect(meter.record(ptsNanoseconds: 2_000_000_000, receivedAtNanoseconds: 1_000_000_000) == .skewed(nanoseconds: -999_000_000))
        #expect(meter.record(ptsNanoseconds: 0, receivedAtNanoseconds: 20_000_000_000) == .skewed(nanoseconds: 20_001_000_000))
        #expect(meter.skewed == 2 && meter.accepted == 100)
        #expect(meter.percentiles()?.count == 100)
        #expect(!meter.clockLooksWrong)
        var wrong = LatencyMeter()
        for _ in 0..<20 { wrong.record(ptsNanoseconds: 5_000_000_000, receivedAtNanoseconds: 1) }
        #expect(wrong.clockLooksWrong && wrong.percentiles() == nil)
    }
}

/// The playout from datagrams to samples with loss: output never stops, gaps are concealed.
@Suite struct AudioPlayoutTests {
    @Test func lossIsConcealedAndTheOutputNeverWaits() throws {
        let encoded = try AudioAndLatencyTests.encode(channels: 2, frames: 100)
        let playout = AudioPlayout(decoder: try OpusStreamDecoder(channels: 2), ring: AudioJitterRing(targetDepth: 3))
        var out: [Float] = []
        var rendered = 0, silentFrames = 0
        for (i, packet) in encoded.packets.enumerated() {
            if i % 10 != 5 {   // lose every tenth frame
                #expect(playout.receive(AudioPacket(sequence: UInt32(i), ptsNanoseconds: UInt64(i) * 5_000_000, opus: packet).datagram))
            }
            playout.render(into: &out)
            rendered += 1
            if out.prefix(480).allSatisfy({ $0 == 0 }) { silentFrames += 1 }
        }
        #expect(rendered == 100)
        #expect(playout.ring.counters.concealed >= 9)
        #expect(silentFrames <= 3)          // only while priming
        #expect(!playout.receive([0xCA, 0, 0, 0, 0, 0, 0]))
    }
}
