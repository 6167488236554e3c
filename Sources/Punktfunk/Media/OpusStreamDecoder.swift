import COpus

/// Decodes the host's Opus audio: stereo as one coupled stream, 5.1 and 7.1 as Opus multistream
/// with the Vorbis channel order (mapping family 1), 48 kHz, to interleaved Float32. A lost frame
/// is concealed by libopus's packet-loss concealment rather than played as a gap.
///
/// Not thread-safe (libopus decoder state): confine to the audio thread.
public final class OpusStreamDecoder {
    public let channels: Int
    public let sampleRate: Int32
    private let decoder: OpaquePointer
    /// The longest Opus frame, 120 ms at 48 kHz, per channel.
    public static let maxFrameSamples = 5760

    /// - Parameters: `streams`, `coupledStreams` and `mapping` default to libopus's surround layout
    ///   for 1, 2, 6 (5.1) and 8 (7.1) channels; pass the host's when it names them.
    public init(channels: Int, sampleRate: Int32 = 48000, streams: Int? = nil, coupledStreams: Int? = nil,
                mapping: [UInt8]? = nil) throws(MediaError) {
        let layout: (Int, Int, [UInt8])
        switch channels {
        case 1: layout = (1, 0, [0])
        case 2: layout = (1, 1, [0, 1])
        case 6: layout = (4, 2, [0, 4, 1, 2, 3, 5])
        case 8: layout = (5, 3, [0, 6, 1, 2, 3, 4, 5, 7])
        default:
            guard streams != nil, coupledStreams != nil, mapping != nil else {
                throw .decoder("no default Opus layout for \(channels) channels; give streams, coupled streams and mapping")
            }
            layout = (0, 0, [])
        }
        let s = streams ?? layout.0, c = coupledStreams ?? layout.1, map = mapping ?? layout.2
        guard (1...255).contains(channels), map.count == channels, s >= 1, c >= 0, c <= s, s + c <= 255 else {
            throw .decoder("Opus layout of \(channels) channels, \(s) streams, \(c) coupled is impossible")
        }
        var error: Int32 = 0
        let made = map.withUnsafeBufferPointer {
            opus_multistream_decoder_create(sampleRate, Int32(channels), Int32(s), Int32(c), $0.baseAddress!, &error)
        }
        guard let made, error == OPUS_OK else {
            throw .decoder("libopus refused the decoder: \(Self.message(error))")
        }
        decoder = made
        self.channels = channels
        self.sampleRate = sampleRate
    }

    deinit { opus_multistream_decoder_destroy(decoder) }

    /// Decodes one packet into `output` (interleaved, resized as needed); returns the samples per
    /// channel. An empty packet conceals one frame of `concealFrames` samples.
    @discardableResult
    public func decode(_ packet: [UInt8], into output: inout [Float], concealFrames: Int = 240) throws(MediaError) -> Int {
        if packet.isEmpty { return conceal(frames: concealFrames, into: &output) }
        if output.count < Self.maxFrameSamples * channels { output = [Float](repeating: 0, count: Self.maxFrameSamples * channels) }
        let n = packet.withUnsafeBufferPointer { p in
            output.withUnsafeMutableBufferPointer { out in
                opus_multistream_decode_float(decoder, p.baseAddress, Int32(p.count), out.baseAddress!, Int32(Self.maxFrameSamples), 0)
            }
        }
        guard n >= 0 else { throw .decoder("Opus packet of \(packet.count) bytes refused: \(Self.message(n))") }
        return Int(n)
    }

    /// Packet-loss concealment for `frames` samples per channel (a multiple of 2.5 ms).
    @discardableResult
    public func conceal(frames: Int, into output: inout [Float]) -> Int {
        let frames = max(120, min(frames, Self.maxFrameSamples)) / 120 * 120
        if output.count < frames * channels { output = [Float](repeating: 0, count: frames * channels) }
        let n = output.withUnsafeMutableBufferPointer { out in
            opus_multistream_decode_float(decoder, nil, 0, out.baseAddress!, Int32(frames), 0)
        }
        if n < 0 {
            for i in 0..<(frames * channels) { output[i] = 0 }
            return frames
        }
        return Int(n)
    }

    /// Forgets the decoder's history (after a long gap or a stream restart).
    public func reset() { _ = copus_multistream_decoder_reset(decoder) }

    static func message(_ code: Int32) -> String {
        opus_strerror(code).map { String(cString: $0) } ?? "error \(code)"
    }
}
