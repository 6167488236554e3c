import CFLAC
import COpus
import FarcastSupport
import Foundation

/// Decoded audio: interleaved signed samples at the stream's bit depth (16-bit samples in
/// −32768…32767, 24-bit in −8388608…8388607, and so on), `channels` per frame.
public struct PCMBuffer: Sendable, Equatable {
    public var samples: [Int32]
    public var channels: Int
    public var bitDepth: Int

    public init(samples: [Int32], channels: Int, bitDepth: Int) {
        self.samples = samples
        self.channels = channels
        self.bitDepth = bitDepth
    }

    public var frameCount: Int { channels > 0 ? samples.count / channels : 0 }
}

/// Why a chunk could not be decoded; the chunk is dropped and counted, the session goes on.
public enum AudioDecodeError: Error, Equatable, Sendable, CustomStringConvertible {
    case unsupportedFormat(String)
    case badHeader(String)
    case badChunk(String)

    public var description: String {
        switch self {
        case .unsupportedFormat(let detail): return "unsupported audio format: \(detail)"
        case .badHeader(let detail): return "the stream's codec_header does not parse: \(detail)"
        case .badChunk(let detail): return "an audio chunk does not decode: \(detail)"
        }
    }
}

/// Turns one chunk's codec payload into samples.
public protocol AudioDecoder: AnyObject {
    var format: StreamFormat { get }
    func decode(_ payload: [UInt8]) throws(AudioDecodeError) -> PCMBuffer
}

/// Creates the decoder for a stream format.
public func makeAudioDecoder(for format: StreamFormat) throws(AudioDecodeError) -> any AudioDecoder {
    guard (1...8).contains(format.channels) else { throw .unsupportedFormat("\(format.channels) channels") }
    guard (8000...384_000).contains(format.sampleRate) else { throw .unsupportedFormat("\(format.sampleRate) Hz") }
    switch format.codec {
    case "pcm": return try PCMDecoder(format: format)
    case "flac": return try FLACDecoder(format: format)
    case "opus": return try OpusDecoder(format: format)
    default: throw .unsupportedFormat("codec '\(format.codec)'")
    }
}

/// Little-endian signed interleaved PCM, 16, 24 (packed in 3 bytes) or 32 bits.
public final class PCMDecoder: AudioDecoder {
    public let format: StreamFormat
    let bytesPerSample: Int

    init(format: StreamFormat) throws(AudioDecodeError) {
        guard let bits = format.bitDepth, [16, 24, 32].contains(bits) else {
            throw .unsupportedFormat("PCM at \(format.bitDepth.map(String.init) ?? "no") bits")
        }
        self.format = format
        bytesPerSample = bits / 8
    }

    public func decode(_ payload: [UInt8]) throws(AudioDecodeError) -> PCMBuffer {
        let frameBytes = bytesPerSample * format.channels
        guard payload.count % frameBytes == 0 else {
            throw .badChunk("\(payload.count) bytes is not a whole number of \(frameBytes)-byte frames")
        }
        let count = payload.count / bytesPerSample
        var samples = [Int32](repeating: 0, count: count)
        payload.withUnsafeBytes { raw in
            samples.withUnsafeMutableBufferPointer { out in
                switch bytesPerSample {
                case 2:
                    for i in 0..<count { out[i] = Int32(Int16(littleEndian: raw.loadUnaligned(fromByteOffset: i * 2, as: Int16.self))) }
                case 3:
                    for i in 0..<count {
                        let o = i * 3
                        let v = Int32(raw[o]) | Int32(raw[o + 1]) << 8 | Int32(raw[o + 2]) << 16
                        out[i] = (v << 8) >> 8        // sign-extend 24 bits
                    }
                default:
                    for i in 0..<count { out[i] = Int32(littleEndian: raw.loadUnaligned(fromByteOffset: i * 4, as: Int32.self)) }
                }
            }
        }
        return PCMBuffer(samples: samples, channels: format.channels, bitDepth: bytesPerSample * 8)
    }
}

/// libopus: one Opus packet per chunk, no container.
public final class OpusDecoder: AudioDecoder {
    public let format: StreamFormat
    private let decoder: OpaquePointer
    private var scratch: [Int16]

    init(format: StreamFormat) throws(AudioDecodeError) {
        guard [8000, 12000, 16000, 24000, 48000].contains(format.sampleRate), (1...2).contains(format.channels) else {
            throw .unsupportedFormat("Opus at \(format.sampleRate) Hz, \(format.channels) channels")
        }
        var error: Int32 = 0
        guard let d = opus_decoder_create(Int32(format.sampleRate), Int32(format.channels), &error), error == OPUS_OK else {
            throw .unsupportedFormat("libopus refused \(format.sampleRate) Hz/\(format.channels) ch (error \(error))")
        }
        self.format = format
        decoder = d
        // The longest Opus packet is 120 ms.
        scratch = [Int16](repeating: 0, count: format.sampleRate * 120 / 1000 * format.channels)
    }

    deinit { opus_decoder_destroy(decoder) }

    public func decode(_ payload: [UInt8]) throws(AudioDecodeError) -> PCMBuffer {
        guard !payload.isEmpty else { throw .badChunk("an empty Opus packet") }
        let maxFrames = Int32(scratch.count / format.channels)
        let frames = payload.withUnsafeBufferPointer { packet in
            scratch.withUnsafeMutableBufferPointer { out in
                opus_decode(decoder, packet.baseAddress, Int32(packet.count), out.baseAddress!, maxFrames, 0)
            }
        }
        guard frames >= 0 else {
            let message = opus_strerror(frames).map { String(cString: $0) } ?? "error \(frames)"
            throw .badChunk("libopus: \(message)")
        }
        let count = Int(frames) * format.channels
        return PCMBuffer(samples: scratch[0..<count].map { Int32($0) }, channels: format.channels, bitDepth: 16)
    }
}

/// libFLAC stream decoding: the codec_header ("fLaC" + STREAMINFO) primes the decoder, then
/// every chunk holds whole FLAC frames.
public final class FLACDecoder: AudioDecoder {
    public let format: StreamFormat
    private let decoder: UnsafeMutablePointer<FLAC__StreamDecoder>
    private let state: FLACCallbackState

    init(format: StreamFormat) throws(AudioDecodeError) {
        guard let header = format.codecHeader, let bytes = Data(base64Encoded: header).map(Array.init) else {
            throw .badHeader("FLAC needs a base64 codec_header")
        }
        guard bytes.count >= 4 + 4 + 34, bytes.starts(with: Array("fLaC".utf8)) else {
            throw .badHeader("not 'fLaC' followed by a STREAMINFO block (\(bytes.count) bytes)")
        }
        guard let d = FLAC__stream_decoder_new() else { throw .unsupportedFormat("libFLAC could not allocate a decoder") }
        self.format = format
        decoder = d
        state = FLACCallbackState()
        let status = FLAC__stream_decoder_init_stream(
            d, flacRead, nil, flacTell, nil, nil, flacWrite, flacMetadata, flacError,
            Unmanaged.passUnretained(state).toOpaque())
        // From here every stored property is set, so a throw runs deinit, which frees the
        // decoder: no manual delete on these paths.
        guard status == FLAC__STREAM_DECODER_INIT_STATUS_OK else {
            throw .unsupportedFormat("libFLAC init failed (\(status.rawValue))")
        }
        state.input = bytes[...]
        guard FLAC__stream_decoder_process_until_end_of_metadata(d) != 0, state.streamInfo != nil, state.failure == nil else {
            throw .badHeader(state.failure ?? "no STREAMINFO")
        }
        if let info = state.streamInfo, info.channels != format.channels || info.sampleRate != format.sampleRate {
            throw .badHeader("STREAMINFO says \(info.sampleRate) Hz/\(info.channels) ch, the stream says \(format.sampleRate) Hz/\(format.channels) ch")
        }
    }

    deinit {
        FLAC__stream_decoder_finish(decoder)
        FLAC__stream_decoder_delete(decoder)
    }

    public func decode(_ payload: [UInt8]) throws(AudioDecodeError) -> PCMBuffer {
        guard !payload.isEmpty else { throw .badChunk("an empty FLAC chunk") }
        state.input = payload[...]
        state.outputCount = 0
        state.failure = nil
        // libFLAC reads ahead: a chunk of several frames is taken in whole by the first frame's
        // read, so the chunk is done when libFLAC has decoded every byte it was handed, not
        // when it has been handed every byte.
        var guardCount = 0
        while !state.input.isEmpty || undecodedBytes() > 0 {
            let before = (state.input.count, undecodedBytes(), state.outputCount)
            let ok = FLAC__stream_decoder_process_single(decoder) != 0
            guardCount += 1
            if !ok || state.failure != nil || guardCount > 10_000 {
                let detail = state.failure ?? "decoder state \(FLAC__stream_decoder_get_state(decoder).rawValue)"
                FLAC__stream_decoder_flush(decoder)
                state.input = []
                throw .badChunk("libFLAC: \(detail)")
            }
            if (state.input.count, undecodedBytes(), state.outputCount) == before { break }
        }
        if state.failure != nil {
            FLAC__stream_decoder_flush(decoder)
            throw .badChunk("libFLAC: \(state.failure!)")
        }
        return PCMBuffer(samples: Array(state.output[0..<state.outputCount]), channels: format.channels, bitDepth: state.streamInfo?.bitsPerSample ?? format.bitDepth ?? 16)
    }

    /// Bytes libFLAC has read but not yet decoded (its decode position against what it was handed).
    private func undecodedBytes() -> UInt64 {
        var position: UInt64 = 0
        guard FLAC__stream_decoder_get_decode_position(decoder, &position) != 0 else { return 0 }
        return state.handedOut > position ? state.handedOut - position : 0
    }
}

/// What libFLAC's C callbacks read and write, reached through client_data.
final class FLACCallbackState {
    struct StreamInfo { var sampleRate: Int; var channels: Int; var bitsPerSample: Int }
    var input: ArraySlice<UInt8> = []
    /// Bytes handed to libFLAC so far: the stream position its tell callback reports.
    var handedOut: UInt64 = 0
    /// The chunk's frames so far, interleaved: `output[0..<outputCount]`. The array is kept
    /// from chunk to chunk (it only grows), so a frame is written once into memory already
    /// there, and the chunk's samples copied out once at its end.
    var output: [Int32] = []
    var outputCount = 0
    var streamInfo: StreamInfo?
    var failure: String?
}

private func callbackState(_ data: UnsafeMutableRawPointer?) -> FLACCallbackState {
    Unmanaged<FLACCallbackState>.fromOpaque(data!).takeUnretainedValue()
}

private let flacRead: FLAC__StreamDecoderReadCallback = { _, buffer, bytes, clientData in
    let state = callbackState(clientData)
    guard let buffer, let bytes else { return FLAC__STREAM_DECODER_READ_STATUS_ABORT }
    let n = min(Int(bytes.pointee), state.input.count)
    if n == 0 {
        // Chunks hold whole frames, so running dry mid-frame means a truncated chunk.
        bytes.pointee = 0
        state.failure = state.failure ?? "the chunk ends inside a FLAC frame"
        return FLAC__STREAM_DECODER_READ_STATUS_ABORT
    }
    state.input.withUnsafeBufferPointer { src in buffer.update(from: src.baseAddress!, count: n) }
    state.input = state.input.dropFirst(n)
    state.handedOut += UInt64(n)
    bytes.pointee = n
    return FLAC__STREAM_DECODER_READ_STATUS_CONTINUE
}

private let flacTell: FLAC__StreamDecoderTellCallback = { _, position, clientData in
    position?.pointee = callbackState(clientData).handedOut
    return FLAC__STREAM_DECODER_TELL_STATUS_OK
}

private let flacWrite: FLAC__StreamDecoderWriteCallback = { _, frame, buffers, clientData in
    let state = callbackState(clientData)
    guard let frame, let buffers else { return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT }
    let channels = Int(frame.pointee.header.channels), blocksize = Int(frame.pointee.header.blocksize)
    let start = state.outputCount
    state.outputCount += channels * blocksize
    if state.output.count < state.outputCount {
        state.output.append(contentsOf: repeatElement(0, count: state.outputCount - state.output.count))
    }
    state.output.withUnsafeMutableBufferPointer { out in
        for c in 0..<channels {
            guard let channel = buffers[c] else { continue }
            for i in 0..<blocksize { out[start + i * channels + c] = channel[i] }
        }
    }
    return FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE
}

private let flacMetadata: FLAC__StreamDecoderMetadataCallback = { _, metadata, clientData in
    guard let metadata, metadata.pointee.type == FLAC__METADATA_TYPE_STREAMINFO else { return }
    let info = metadata.pointee.data.stream_info
    callbackState(clientData).streamInfo = .init(sampleRate: Int(info.sample_rate), channels: Int(info.channels), bitsPerSample: Int(info.bits_per_sample))
}

private let flacError: FLAC__StreamDecoderErrorCallback = { _, status, clientData in
    let state = callbackState(clientData)
    state.failure = state.failure ?? "stream error \(status.rawValue)"
}
