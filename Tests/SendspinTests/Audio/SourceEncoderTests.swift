import Foundation
@testable import Sendspin
import Testing

/// The source's encoders: PCM byte for byte, FLAC decoded back bit-exact by the player's own
/// decoder from the header it announces, one whole frame per chunk (after the one block libFLAC
/// holds back), and the codec chosen from what the server takes.
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

    @Test func theCodecIsTheServersWhenItTakesIt() {
        #expect(SourceCodec.choose(.flac, serverTakes: ["flac", "pcm"]) == .flac)
        #expect(SourceCodec.choose(.flac, serverTakes: ["pcm"]) == .pcm)
        #expect(SourceCodec.choose(.flac, serverTakes: nil) == .pcm)
        #expect(SourceCodec.choose(.pcm, serverTakes: ["flac"]) == .pcm)
    }
}
