/// The audio plane from datagram to samples: 0xC9 datagrams go into the jitter ring, and each
/// `render` hands the output one 5 ms frame (240 samples per channel at 48 kHz) — decoded,
/// concealed by libopus when the frame is missing, or silence while the ring primes. It never
/// waits for the network. Not thread-safe: confine to the audio thread.
public final class AudioPlayout {
    public static let frameSamples = 240
    public let decoder: OpusStreamDecoder
    public private(set) var ring: AudioJitterRing
    /// Frames the decoder refused (corrupt Opus): concealed instead.
    public private(set) var decodeErrors = 0
    /// The capture time of the frame last rendered, for A/V sync (nil while priming or concealing).
    public private(set) var lastPtsNanoseconds: UInt64?

    public init(decoder: OpusStreamDecoder, ring: AudioJitterRing = AudioJitterRing()) {
        self.decoder = decoder
        self.ring = ring
    }

    /// Takes one QUIC datagram; false when it is not an audio datagram (or too short).
    @discardableResult
    public func receive(_ datagram: [UInt8]) -> Bool {
        guard let packet = AudioPacket(datagram: datagram) else { return false }
        ring.insert(packet)
        return true
    }

    /// Writes the next frame (interleaved Float32, `channels` × 240) into `output`.
    public func render(into output: inout [Float]) {
        let count = Self.frameSamples * decoder.channels
        switch ring.next() {
        case .waiting:
            if output.count < count { output = [Float](repeating: 0, count: count) }
            for i in 0..<count { output[i] = 0 }
            lastPtsNanoseconds = nil
        case .conceal:
            decoder.conceal(frames: Self.frameSamples, into: &output)
            lastPtsNanoseconds = nil
        case let .frame(_, pts, opus):
            do {
                let n = try decoder.decode(opus, into: &output)
                if n != Self.frameSamples { decoder.conceal(frames: Self.frameSamples, into: &output) }
                lastPtsNanoseconds = pts
            } catch {
                decodeErrors += 1
                decoder.conceal(frames: Self.frameSamples, into: &output)
                lastPtsNanoseconds = nil
            }
        }
    }
}
