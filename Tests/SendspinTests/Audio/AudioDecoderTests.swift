import CFLAC
import COpus
import Foundation
@testable import Sendspin
import Testing

/// PCM, FLAC (encoded here with libFLAC's encoder) and Opus (libopus's encoder) decoding, and
/// the bad inputs each must refuse without crashing.
@Suite struct AudioDecoderTests {
    /// A 440 Hz sine, stereo, at the given bit depth.
    static func sine(frames: Int, rate: Int = 48000, bits: Int = 16, start: Int = 0) -> [Int32] {
        let amplitude = Double((1 << (bits - 1)) - 1) * 0.5
        var out: [Int32] = []
        for i in start..<(start + frames) {
            let v = Int32((sin(2 * .pi * 440 * Double(i) / Double(rate)) * amplitude).rounded())
            out += [v, -v]
        }
        return out
    }

    @Test(arguments: [16, 24, 32])
    func pcmDecodesEveryDepthLittleEndian(bits: Int) throws {
        let decoder = try makeAudioDecoder(for: StreamFormat(codec: "pcm", sampleRate: 48000, channels: 2, bitDepth: bits))
        let samples = Self.sine(frames: 100, bits: bits) + [Int32(-(1 << (bits - 1))), Int32((1 << (bits - 1)) - 1)]
        var bytes: [UInt8] = []
        for s in samples { for b in 0..<(bits / 8) { bytes.append(UInt8(truncatingIfNeeded: s >> Int32(8 * b))) } }
        let buffer = try decoder.decode(bytes)
        let identical = buffer.samples == samples
        #expect(identical)
        #expect(buffer.frameCount == 101)
        #expect(buffer.bitDepth == bits)
        #expect(throws: AudioDecodeError.self) { try decoder.decode(Array(bytes.dropLast())) }
    }

    @Test func unsupportedFormatsAreRefused() {
        #expect(throws: AudioDecodeError.self) { try makeAudioDecoder(for: StreamFormat(codec: "pcm", sampleRate: 48000, channels: 2, bitDepth: 12)) }
        #expect(throws: AudioDecodeError.self) { try makeAudioDecoder(for: StreamFormat(codec: "mp3", sampleRate: 48000, channels: 2, bitDepth: 16)) }
        #expect(throws: AudioDecodeError.self) { try makeAudioDecoder(for: StreamFormat(codec: "pcm", sampleRate: 48000, channels: 0, bitDepth: 16)) }
        #expect(throws: AudioDecodeError.self) { try makeAudioDecoder(for: StreamFormat(codec: "opus", sampleRate: 44100, channels: 2, bitDepth: 16)) }
    }

    /// Encodes with libFLAC into one header (fLaC + STREAMINFO) and per-frame chunks.
    final class FLACCapture {
        var bytes: [UInt8] = []
        var frames: [[UInt8]] = []
    }

    static func encodeFLAC(_ samples: [Int32], bits: Int, blocksize: UInt32 = 1152) -> (header: [UInt8], chunks: [[UInt8]]) {
        let encoder = FLAC__stream_encoder_new()!
        defer { FLAC__stream_encoder_delete(encoder) }
        FLAC__stream_encoder_set_channels(encoder, 2)
        FLAC__stream_encoder_set_bits_per_sample(encoder, UInt32(bits))
        FLAC__stream_encoder_set_sample_rate(encoder, 48000)
        FLAC__stream_encoder_set_blocksize(encoder, blocksize)
        FLAC__stream_encoder_set_compression_level(encoder, 5)
        let capture = FLACCapture()
        let status = FLAC__stream_encoder_init_stream(encoder, { _, buffer, bytes, samples, _, clientData in
            let capture = Unmanaged<FLACCapture>.fromOpaque(clientData!).takeUnretainedValue()
            let data = Array(UnsafeBufferPointer(start: buffer, count: bytes))
            // Metadata is written with samples == 0; each audio frame in one call.
            if samples == 0 {
                capture.bytes += data
            } else {
                capture.frames.append(data)
            }
            return FLAC__STREAM_ENCODER_WRITE_STATUS_OK
        }, nil, nil, nil, Unmanaged.passUnretained(capture).toOpaque())
        precondition(status == FLAC__STREAM_ENCODER_INIT_STATUS_OK)
        samples.withUnsafeBufferPointer { _ = FLAC__stream_encoder_process_interleaved(encoder, $0.baseAddress, UInt32(samples.count / 2)) }
        FLAC__stream_encoder_finish(encoder)
        // Sendspin's codec_header is "fLaC" + the STREAMINFO block only (flagged last).
        var header = Array(capture.bytes.prefix(42))
        header[4] |= 0x80
        return (header, capture.frames)
    }

    @Test(arguments: [16, 24])
    func flacDecodesChunkByChunkBitExactly(bits: Int) throws {
        let samples = Self.sine(frames: 1152 * 6, bits: bits)
        let (header, chunks) = Self.encodeFLAC(samples, bits: bits)
        #expect(chunks.count == 6)
        let format = StreamFormat(codec: "flac", sampleRate: 48000, channels: 2, bitDepth: bits, codecHeader: Data(header).base64EncodedString())
        let decoder = try makeAudioDecoder(for: format)
        var decoded: [Int32] = []
        for chunk in chunks {
            let buffer = try decoder.decode(chunk)
            #expect(buffer.bitDepth == bits)
            decoded += buffer.samples
        }
        let identical = decoded == samples
        #expect(identical, "decoded \(decoded.count) samples, expected \(samples.count)")

        // Chunks of three frames, one, then two: a shorter chunk after a longer one carries
        // only its own samples (the decoder reuses its output memory from chunk to chunk).
        let regrouped = [chunks[0...2].flatMap { $0 }, chunks[3], chunks[4...5].flatMap { $0 }]
        let again = try makeAudioDecoder(for: format)
        let buffers = try regrouped.map { try again.decode($0) }
        #expect(buffers.map(\.frameCount) == [1152 * 3, 1152, 1152 * 2])
        let regroupedIdentical = buffers.flatMap(\.samples) == samples
        #expect(regroupedIdentical)
    }

    @Test func flacRefusesBadHeadersAndSurvivesBadChunks() throws {
        let samples = Self.sine(frames: 1152 * 3)
        let (header, chunks) = Self.encodeFLAC(samples, bits: 16)
        for bad in ["", "bm90IGZsYWM=", Data(header.prefix(20)).base64EncodedString(), "%%%"] {
            #expect(throws: AudioDecodeError.self) {
                try makeAudioDecoder(for: StreamFormat(codec: "flac", sampleRate: 48000, channels: 2, bitDepth: 16, codecHeader: bad))
            }
        }
        // STREAMINFO disagreeing with stream/start.
        #expect(throws: AudioDecodeError.self) {
            try makeAudioDecoder(for: StreamFormat(codec: "flac", sampleRate: 44100, channels: 2, bitDepth: 16, codecHeader: Data(header).base64EncodedString()))
        }
        let decoder = try makeAudioDecoder(for: StreamFormat(codec: "flac", sampleRate: 48000, channels: 2, bitDepth: 16, codecHeader: Data(header).base64EncodedString()))
        #expect(throws: AudioDecodeError.self) { try decoder.decode(Array(chunks[0].prefix(chunks[0].count / 2))) }
        #expect(throws: AudioDecodeError.self) { try decoder.decode([0xDE, 0xAD, 0xBE, 0xEF]) }
        // The decoder recovers: the next whole frames decode.
        let next = try decoder.decode(chunks[1])
        let recovered = next.samples == Array(samples[(1152 * 2)..<(1152 * 4)])
        #expect(recovered)
    }

    @Test func opusDecodesPacketsBackToTheTone() throws {
        var error: Int32 = 0
        let encoder = opus_encoder_create(48000, 2, OPUS_APPLICATION_AUDIO, &error)!
        defer { opus_encoder_destroy(encoder) }
        let decoder = try makeAudioDecoder(for: StreamFormat(codec: "opus", sampleRate: 48000, channels: 2, bitDepth: 16))
        var decoded: [Int32] = []
        for packet in 0..<50 {
            let pcm = Self.sine(frames: 960, start: packet * 960).map { Int16($0) }
            var out = [UInt8](repeating: 0, count: 4000)
            let n = opus_encode(encoder, pcm, 960, &out, 4000)
            #expect(n > 0)
            let buffer = try decoder.decode(Array(out.prefix(Int(n))))
            #expect(buffer.frameCount == 960)
            decoded += buffer.samples
        }
        // Past the codec's start-up, zero crossings of the left channel give 440 Hz.
        let left = stride(from: 0, to: decoded.count, by: 2).map { decoded[$0] }.dropFirst(4800)
        let crossings = zip(left, left.dropFirst()).filter { $0 < 0 && $1 >= 0 }.count
        let frequency = Double(crossings) / (Double(left.count) / 48000)
        #expect(abs(frequency - 440) < 3, "\(frequency) Hz")
        #expect(throws: AudioDecodeError.self) { try decoder.decode([]) }
        #expect(throws: AudioDecodeError.self) { try decoder.decode([0xFF, 0xFF, 0xFF]) }
    }
}
