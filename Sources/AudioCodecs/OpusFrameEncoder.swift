import COpus

/// Encodes 48 kHz 16-bit PCM, mono or stereo, one frame (2.5–120 ms) to one Opus packet: the
/// punktfunk microphone (voice) and the Sendspin line-in (music) share it. Not thread-safe: one
/// thread encodes.
public final class OpusFrameEncoder {
    /// What libopus tunes for: speech (a microphone) or music (a line-in).
    public enum Application: Sendable {
        case voice, music
    }

    /// Why an encoder could not be made or a frame not encoded (libopus's own words included).
    public struct Failure: Error, Equatable, Sendable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// The frame sizes libopus takes at 48 kHz, in samples per channel.
    public static let frameSizes = [120, 240, 480, 960, 1920, 2880]

    public let channels: Int
    /// Samples per channel the encoder looks ahead: the decoded stream lags the input by this
    /// many, so a packet's sound began that long before the first sample given with it.
    public let lookahead: Int
    private let encoder: OpaquePointer
    private var output = [UInt8](repeating: 0, count: 4000)

    /// `bitrate` in bits per second (nil: libopus's choice for the channels and application).
    public init(channels: Int = 2, application: Application = .voice, bitrate: Int? = nil) throws(Failure) {
        guard channels == 1 || channels == 2 else { throw Failure(reason: "Opus encodes mono or stereo here, not \(channels) channels") }
        var error: Int32 = 0
        let mode = application == .voice ? OPUS_APPLICATION_VOIP : OPUS_APPLICATION_AUDIO
        guard let made = opus_encoder_create(48000, Int32(channels), mode, &error), error == OPUS_OK else {
            throw Failure(reason: "libopus refused the encoder: \(String(cString: opus_strerror(error)))")
        }
        encoder = made
        self.channels = channels
        if let bitrate {
            let status = copus_encoder_set_bitrate(made, Int32(bitrate))
            guard status == OPUS_OK else {
                opus_encoder_destroy(made)
                throw Failure(reason: "libopus refused a bitrate of \(bitrate) b/s: \(String(cString: opus_strerror(status)))")
            }
        }
        var samples: Int32 = 0
        lookahead = copus_encoder_get_lookahead(made, &samples) == OPUS_OK ? Int(samples) : 0
    }

    deinit { opus_encoder_destroy(encoder) }

    /// One frame of `frames` samples per channel (one of `frameSizes`), interleaved, to one
    /// Opus packet.
    public func encode(_ samples: [Int16], frames: Int) throws(Failure) -> [UInt8] {
        guard samples.count >= frames * channels, Self.frameSizes.contains(frames) else {
            throw Failure(reason: "an Opus frame of \(frames) samples per channel is not one libopus encodes (\(Self.frameSizes.map(String.init).joined(separator: ", ")) at 48 kHz)")
        }
        let n = samples.withUnsafeBufferPointer { pcm in
            output.withUnsafeMutableBufferPointer { out in opus_encode(encoder, pcm.baseAddress!, Int32(frames), out.baseAddress!, Int32(out.count)) }
        }
        guard n > 0 else { throw Failure(reason: "libopus could not encode: \(String(cString: opus_strerror(n)))") }
        return Array(output[0..<Int(n)])
    }
}
