import COpus

/// Encodes the microphone for the host: 48 kHz, mono or stereo 16-bit frames of 2.5–120 ms,
/// libopus's voice mode. Not thread-safe: one thread encodes.
public final class OpusFrameEncoder {
    public let channels: Int
    private let encoder: OpaquePointer
    private var output = [UInt8](repeating: 0, count: 4000)

    public init(channels: Int = 2) throws(MediaError) {
        guard channels == 1 || channels == 2 else { throw .encoder("the microphone is encoded as mono or stereo, not \(channels) channels") }
        var error: Int32 = 0
        guard let made = opus_encoder_create(48000, Int32(channels), OPUS_APPLICATION_VOIP, &error), error == OPUS_OK else {
            throw .encoder("libopus refused the encoder: \(String(cString: opus_strerror(error)))")
        }
        encoder = made
        self.channels = channels
    }

    deinit { opus_encoder_destroy(encoder) }

    /// One frame of `frames` samples per channel (120, 240, 480, 960, 1920 or 2880 at 48 kHz),
    /// interleaved, to one Opus packet.
    public func encode(_ samples: [Int16], frames: Int) throws(MediaError) -> [UInt8] {
        guard samples.count >= frames * channels, [120, 240, 480, 960, 1920, 2880].contains(frames) else {
            throw .encoder("an Opus frame of \(frames) samples is not one libopus encodes")
        }
        let n = samples.withUnsafeBufferPointer { pcm in
            output.withUnsafeMutableBufferPointer { out in opus_encode(encoder, pcm.baseAddress!, Int32(frames), out.baseAddress!, Int32(out.count)) }
        }
        guard n > 0 else { throw .encoder("libopus could not encode: \(String(cString: opus_strerror(n)))") }
        return Array(output[0..<Int(n)])
    }
}
