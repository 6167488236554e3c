import AudioCodecs
import CFLAC
import Foundation

/// How a source's captured blocks go on the wire (source@v1): 16-bit interleaved samples in,
/// one chunk's codec data out, with the format `client-stream/start` announces.
public protocol SourceEncoder: AnyObject {
    var format: SourceFormat { get }
    /// Blocks the codec holds back before its first output: the chunk `encode` returns is the
    /// block given that many calls before (empty until then).
    var heldBlocks: Int { get }
    /// How long before a block's first captured sample its chunk's decoded sound begins (µs):
    /// a codec's look-ahead delays what the decoder gives back, so the chunk is stamped earlier
    /// by as much.
    var delayMicroseconds: Int64 { get }
    func encode(_ samples: [Int16]) throws(SendspinError) -> [UInt8]
}

extension SourceEncoder {
    public var delayMicroseconds: Int64 { 0 }
}

/// The codecs a source can send, by preference.
public enum SourceCodec: String, Sendable, CaseIterable {
    case flac, opus, pcm

    /// An encoder for 16-bit `channels` at `sampleRate`, `blockFrames` per chunk.
    public func makeEncoder(sampleRate: Int, channels: Int, blockFrames: Int) throws(SendspinError) -> any SourceEncoder {
        switch self {
        case .pcm: PCMSourceEncoder(sampleRate: sampleRate, channels: channels)
        case .flac: try FLACSourceEncoder(sampleRate: sampleRate, channels: channels, blockFrames: blockFrames)
        case .opus: try OpusSourceEncoder(sampleRate: sampleRate, channels: channels, blockFrames: blockFrames)
        }
    }

    /// `preferred` when the server takes it (its hello lists the codecs), else PCM, which every
    /// server takes.
    public static func choose(_ preferred: SourceCodec, serverTakes codecs: [String]?) -> SourceCodec {
        codecs?.contains(preferred.rawValue) == true ? preferred : .pcm
    }
}

/// PCM: the samples little-endian, as they are.
public final class PCMSourceEncoder: SourceEncoder {
    public let format: SourceFormat
    public var heldBlocks: Int { 0 }

    public init(sampleRate: Int, channels: Int) {
        format = SourceFormat(codec: "pcm", channels: channels, sampleRate: sampleRate, bitDepth: 16)
    }

    public func encode(_ samples: [Int16]) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: samples.count * 2)
        for (i, sample) in samples.enumerated() {
            let v = UInt16(bitPattern: sample)
            bytes[2 * i] = UInt8(truncatingIfNeeded: v)
            bytes[2 * i + 1] = UInt8(truncatingIfNeeded: v >> 8)
        }
        return bytes
    }
}

/// FLAC (libFLAC's stream encoder, level 5): one FLAC frame per block, the block size fixed, so
/// each chunk is one whole frame; `codec_header` is "fLaC" and the STREAMINFO the encoder wrote
/// first (flagged as the last metadata block). libFLAC encodes a block once a sample of the next
/// one has come, so each chunk is the block before.
public final class FLACSourceEncoder: SourceEncoder {
    public private(set) var format: SourceFormat
    public var heldBlocks: Int { 1 }
    private let encoder: UnsafeMutablePointer<FLAC__StreamEncoder>
    private let channels: Int
    private final class Output {
        var metadata: [UInt8] = []
        var frame: [UInt8] = []
    }
    private let output = Output()

    public init(sampleRate: Int, channels: Int, blockFrames: Int) throws(SendspinError) {
        guard let made = FLAC__stream_encoder_new() else { throw .audioDevice("libFLAC could not allocate an encoder") }
        encoder = made
        self.channels = channels
        FLAC__stream_encoder_set_channels(encoder, UInt32(channels))
        FLAC__stream_encoder_set_bits_per_sample(encoder, 16)
        FLAC__stream_encoder_set_sample_rate(encoder, UInt32(sampleRate))
        FLAC__stream_encoder_set_blocksize(encoder, UInt32(blockFrames))
        FLAC__stream_encoder_set_compression_level(encoder, 5)
        FLAC__stream_encoder_set_streamable_subset(encoder, 1)
        let status = FLAC__stream_encoder_init_stream(encoder, { _, buffer, bytes, samples, _, clientData in
            guard let clientData, let buffer else { return FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR }
            let output = Unmanaged<Output>.fromOpaque(clientData).takeUnretainedValue()
            // Metadata comes with no samples; a frame may come in more than one call.
            if samples == 0 && output.frame.isEmpty {
                output.metadata += UnsafeBufferPointer(start: buffer, count: bytes)
            } else {
                output.frame += UnsafeBufferPointer(start: buffer, count: bytes)
            }
            return FLAC__STREAM_ENCODER_WRITE_STATUS_OK
        }, nil, nil, nil, Unmanaged.passUnretained(output).toOpaque())
        guard status == FLAC__STREAM_ENCODER_INIT_STATUS_OK, output.metadata.count >= 42 else {
            FLAC__stream_encoder_delete(encoder)
            throw .audioDevice("libFLAC could not start an encoder (status \(status.rawValue))")
        }
        var header = Array(output.metadata.prefix(42))
        header[4] |= 0x80
        format = SourceFormat(codec: "flac", channels: channels, sampleRate: sampleRate, bitDepth: 16, codecHeader: Data(header).base64EncodedString())
    }

    deinit {
        FLAC__stream_encoder_finish(encoder)
        FLAC__stream_encoder_delete(encoder)
    }

    public func encode(_ samples: [Int16]) throws(SendspinError) -> [UInt8] {
        let wide = samples.map { Int32($0) }
        output.frame = []
        let ok = wide.withUnsafeBufferPointer { FLAC__stream_encoder_process_interleaved(encoder, $0.baseAddress, UInt32(samples.count / channels)) }
        guard ok != 0 else { throw .audioDevice("libFLAC failed to encode a block") }
        return output.frame
    }
}

/// Opus (libopus in its music mode, 128 kb/s for stereo, 64 kb/s for mono): one packet per block,
/// which must be a frame size Opus has at 48 kHz (the line-in's 20 ms block is 960 samples). No
/// `codec_header`. The decoder's output lags by the encoder's look-ahead (6.5 ms), which the
/// chunk's timestamp takes off.
public final class OpusSourceEncoder: SourceEncoder {
    public let format: SourceFormat
    public var heldBlocks: Int { 0 }
    public let delayMicroseconds: Int64
    private let encoder: OpusFrameEncoder
    private let blockFrames: Int

    public init(sampleRate: Int, channels: Int, blockFrames: Int) throws(SendspinError) {
        guard sampleRate == 48000 else { throw .audioDevice("Opus takes 48 kHz here; the input is \(sampleRate) Hz") }
        guard OpusFrameEncoder.frameSizes.contains(blockFrames) else {
            throw .audioDevice("Opus cannot take blocks of \(blockFrames) samples (one of \(OpusFrameEncoder.frameSizes.map(String.init).joined(separator: ", ")))")
        }
        do {
            encoder = try OpusFrameEncoder(channels: channels, application: .music, bitrate: channels == 2 ? 128_000 : 64_000)
        } catch {
            throw .audioDevice(error.reason)
        }
        self.blockFrames = blockFrames
        delayMicroseconds = Int64(encoder.lookahead) * 1_000_000 / 48000
        format = SourceFormat(codec: "opus", channels: channels, sampleRate: sampleRate, bitDepth: 16)
    }

    public func encode(_ samples: [Int16]) throws(SendspinError) -> [UInt8] {
        do { return try encoder.encode(samples, frames: blockFrames) } catch { throw .audioDevice(error.reason) }
    }
}
