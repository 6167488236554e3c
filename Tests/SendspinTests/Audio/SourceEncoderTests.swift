import Foundation
@testable import Sendspin
import Testing

/// The source's encoders: PCM byte for byte, FLAC decoded back bit-exact by the player's own
/// decoder from the header it announces, one whole frame per chunk (after the one block libFLAC
/// holds back), Opus decoded back by the player's decoder with the look-ahead the chunk's stamp
/// takes off, and the codec chosen from what the server takes.
@Suite struct SourceEncoderTests {
    static func block(_ n: Int, frames: Int = 960) -> [Int16] {
        (0..<frames).flatMap { i -> [Int16] in
            let v = Int16(9_000 * sin(2 * Double.pi * 440 * Double(n * frames + i) / 48_000))
            return [v, v / 2]
        }
    }

    @Test func pcmIsTheSamplesLittleEndian() {
        let encoder = PCMSourceEncoder(sampleRate: 48000, channels: 2)
        #expect(encoder.format == SourceFormat(codec: "pcm", channels: 2, sampleRate: 48000, bitDepth: 16))
        #expect(encoder.encode([1, -2, 0x1234]) == [1, 0, 0xFE, 0xFF, 0x34, 0x12])
        #expect(encoder.heldBlocks == 0)
    }

    @Test func flacDecodesBackBitExactlyFrameByFrame() throws {
        let encoder = try FLACSourceEncoder(sampleRate: 48000, channels: 2, blockFrames: 960)
        #expect(encoder.format.codec == "flac" && encoder.format.bitDepth == 16)
        let decoder = try makeAudioDecoder(for: StreamFormat(codec: "flac", sampleRate: 48000, channels: 2, bitDepth: 16, codecHeader: encoder.format.codecHeader))
        var chunks: [[UInt8]] = []
        for n in 0..<6 { chunks.append(try encoder.encode(Self.block(n))) }
        // libFLAC holds one block back; every chunk after that is one whole frame, in order.
        let heldBack = chunks.prefix(encoder.heldBlocks).allSatisfy { $0.isEmpty }
        #expect(heldBack)
        for (n, chunk) in chunks.dropFirst(encoder.heldBlocks).enumerated() {
            let decoded = try decoder.decode(chunk)
            let expected = Self.block(n).map { Int32($0) }
            #expect(decoded.samples == expected, "block \(n)")
        }
        #expect(chunks.last!.count < 960 * 4, "compressed: \(chunks.last!.count) bytes")
    }

    /// A click at a known sample of block 3: the decoded stream has it `lookahead` samples later,
    /// which is the delay the encoder reports (6.5 ms at 48 kHz in libopus's music mode).
    @Test func opusDecodesBackDelayedByTheLookAheadItReports() throws {
        let encoder = try OpusSourceEncoder(sampleRate: 48000, channels: 2, blockFrames: 960)
        #expect(encoder.format == SourceFormat(codec: "opus", channels: 2, sampleRate: 48000, bitDepth: 16))
        #expect(encoder.heldBlocks == 0)
        #expect((2_000...20_000).contains(encoder.delayMicroseconds), "look-ahead \(encoder.delayMicroseconds) µs")
        let decoder = try makeAudioDecoder(for: StreamFormat(codec: "opus", sampleRate: 48000, channels: 2, bitDepth: 16, codecHeader: nil))
        let clickAt = 3 * 960 + 100
        var left: [Int32] = []
        for n in 0..<8 {
            var block = [Int16](repeating: 0, count: 960 * 2)
            for i in 0..<960 where n * 960 + i >= clickAt && n * 960 + i < clickAt + 48 {
                block[2 * i] = 20_000
                block[2 * i + 1] = 20_000
            }
            let chunk = try encoder.encode(block)
            #expect(!chunk.isEmpty && chunk.count < 960 * 4)
            let decoded = try decoder.decode(chunk)
            #expect(decoded.samples.count == 960 * 2)
            left += stride(from: 0, to: decoded.samples.count, by: 2).map { decoded.samples[$0] }
        }
        // Where the decoded click rises past half its height.
        let rise = try #require(left.firstIndex { $0 > 10_000 })
        let lag = rise - clickAt
        let expected = Int(encoder.delayMicroseconds * 48 / 1000)
        #expect(abs(lag - expected) <= 3, "the click came \(lag) samples late; the encoder says \(expected)")
        #expect(throws: SendspinError.self) { try OpusSourceEncoder(sampleRate: 48000, channels: 2, blockFrames: 1000) }
        #expect(throws: SendspinError.self) { try OpusSourceEncoder(sampleRate: 44100, channels: 2, blockFrames: 960) }
    }

    @Test func theCodecIsTheServersWhenItTakesIt() {
        #expect(SourceCodec.choose(.flac, serverTakes: ["flac", "pcm"]) == .flac)
        #expect(SourceCodec.choose(.flac, serverTakes: ["pcm"]) == .pcm)
        #expect(SourceCodec.choose(.flac, serverTakes: nil) == .pcm)
        #expect(SourceCodec.choose(.pcm, serverTakes: ["flac"]) == .pcm)
        #expect(SourceCodec.choose(.opus, serverTakes: ["flac", "pcm", "opus"]) == .opus)
        #expect(SourceCodec.choose(.opus, serverTakes: ["flac", "pcm"]) == .pcm)
    }
}
