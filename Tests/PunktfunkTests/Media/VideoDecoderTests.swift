import Crypto
import Foundation
@testable import Punktfunk
import Testing

/// The Linux decoder (libavcodec, loaded on first use) on real encoder output: every picture it
/// returns is the one ffmpeg's own command decodes (MD5 of the packed planes, made by
/// scripts/vectors/make_punktfunk_media_fixtures.sh), and `DecodeGate`'s rules for gaps.
@Suite struct VideoDecoderTests {
    static func expectedMD5(_ name: String) throws -> [String] {
        let object = try JSONSerialization.jsonObject(with: Fixtures.data("media/framemd5.json")) as? [String: Any]
        return try #require(object?[name] as? [String])
    }

    /// The picture's planes packed without row padding, as ffmpeg's framemd5 hashes them.
    static func md5(_ picture: DecodedPicture) -> String {
        var hash = Insecure.MD5()
        let (w, h) = (picture.width, picture.height), (cw, ch) = ((picture.width + 1) / 2, (picture.height + 1) / 2)
        // Bytes per row and rows of each plane.
        let sizes: [(Int, Int)]
        switch picture.layout {
        case .i420: sizes = [(w, h), (cw, ch), (cw, ch)]
        case .nv12: sizes = [(w, h), (2 * cw, ch)]
        case .i420p10: sizes = [(2 * w, h), (2 * cw, ch), (2 * cw, ch)]
        case .p010: sizes = [(2 * w, h), (4 * cw, ch)]
        case .i444: sizes = [(w, h), (w, h), (w, h)]
        case .i444p10: sizes = [(2 * w, h), (2 * w, h), (2 * w, h)]
        }
        picture.withPlanes { planes, pitches in
            for (index, plane) in planes.enumerated() {
                let (bytes, rows) = sizes[index]
                for row in 0..<rows { hash.update(bufferPointer: UnsafeRawBufferPointer(start: plane + row * pitches[index], count: bytes)) }
            }
        }
        return hash.finalize().map { String(format: "%02x", $0) }.joined()
    }

    #if canImport(CFFmpeg)
    @Test(arguments: [("testsrc.hevc", VideoCodec.hevc), ("testsrc.h264", .h264), ("testsrc.obu", .av1)])
    func decodesWhatFFmpegDecodes(name: String, codec: VideoCodec) throws {
        let units = try AccessUnitTests.accessUnits(name)
        let expected = try Self.expectedMD5(name)
        let decoder = try FFmpegVideoDecoder(codec: codec, hardware: .software)
        #expect(decoder.description == "\(codec.rawValue) (software)")
        var got: [String] = []
        for (index, unit) in units.enumerated() {
            let picture = try unit.bytes.withUnsafeBytes { try decoder.decode($0, frameIndex: UInt32(index), ptsNanoseconds: UInt64(index) * 1000) }
            // Low delay: each access unit's own picture comes out of its own decode call.
            let p = try #require(picture, "\(name) AU \(index) gave no picture")
            #expect(p.frameIndex == UInt32(index))
            #expect(p.ptsNanoseconds == UInt64(index) * 1000)
            #expect(p.width == 128 && p.height == 72 && p.layout == .i420)
            got.append(Self.md5(p))
        }
        #expect(got == expected)
    }

    /// What a host sends a client that offers 10-bit or 4:4:4: decoded in its own layout, each
    /// picture ffmpeg's, and brought to 8-bit 4:2:0 for the window.
    @Test(arguments: [("testsrc-main10.hevc", PictureLayout.i420p10), ("testsrc-444.hevc", .i444)])
    func decodesTenBitAndFourFourFourAsTheyAre(name: String, layout: PictureLayout) throws {
        let units = try AccessUnitTests.accessUnits(name)
        let decoder = try FFmpegVideoDecoder(codec: .hevc, hardware: .software)
        var got: [String] = []
        for (index, unit) in units.enumerated() {
            let p = try #require(try unit.bytes.withUnsafeBytes { try decoder.decode($0, frameIndex: UInt32(index), ptsNanoseconds: 0) })
            #expect(p.layout == layout && p.width == 128 && p.height == 72)
            got.append(Self.md5(p))
            let shown = EightBitPicture(p)
            #expect(shown.layout == .i420 && shown.source == layout && shown.width == 128 && shown.height == 72)
        }
        #expect(got == (try Self.expectedMD5(name)))
    }

    @Test func picturesOutliveTheNextDecode() throws {
        // The window may still hold a picture while the decoder works on the next one.
        let units = try AccessUnitTests.accessUnits("testsrc.hevc")
        let expected = try Self.expectedMD5("testsrc.hevc")
        let decoder = try FFmpegVideoDecoder(codec: .hevc, hardware: .software)
        var kept: [DecodedPicture] = []
        for (index, unit) in units.enumerated() {
            if let p = try unit.bytes.withUnsafeBytes({ try decoder.decode($0, frameIndex: UInt32(index), ptsNanoseconds: 0) }) { kept.append(p) }
        }
        #expect(kept.map(Self.md5) == expected)
    }

    @Test func aVAAPIDeviceThatDoesNotOpenFallsBackToSoftware() throws {
        let decoder = try FFmpegVideoDecoder(codec: .hevc, hardware: .vaapi(device: "/nonexistent/renderD128"))
        #expect(!decoder.hardwareAccelerated)
        let reason = try #require(decoder.hardwareFallbackReason)
        #expect(reason.contains("/nonexistent/renderD128") && reason.contains("software"))
        let unit = try #require(AccessUnitTests.accessUnits("testsrc.hevc").first)
        let picture = try unit.bytes.withUnsafeBytes { try decoder.decode($0, frameIndex: 0, ptsNanoseconds: 0) }
        #expect(picture.map(Self.md5) == (try Self.expectedMD5("testsrc.hevc").first))
    }

    @Test func garbageIsATypedErrorNotACrash() throws {
        let decoder = try FFmpegVideoDecoder(codec: .hevc, hardware: .software)
        var rng = SplitMix64(seed: 7)
        for round in 0..<64 {
            // Start codes followed by random bytes: NAL headers the decoder must judge.
            var bytes: [UInt8] = [0, 0, 0, 1]
            for _ in 0..<(16 + round * 8) { bytes.append(UInt8(truncatingIfNeeded: rng.next())) }
            // A typed error or no picture; never a crash.
            _ = try? bytes.withUnsafeBytes { try decoder.decode($0, frameIndex: UInt32(round), ptsNanoseconds: 0) }
        }
        // Then a real stream decodes again from its keyframe.
        decoder.reset()
        let units = try AccessUnitTests.accessUnits("testsrc.hevc")
        let p = try units[0].bytes.withUnsafeBytes { try decoder.decode($0, frameIndex: 100, ptsNanoseconds: 0) }
        #expect(p.map(Self.md5) == (try Self.expectedMD5("testsrc.hevc").first))
    }
    #endif

    @Test func theGateWaitsForAKeyframeAfterAGap() {
        var gate = DecodeGate()
        #expect(gate.admit(frameIndex: 10, isRandomAccessPoint: true) == .decode)
        #expect(gate.admit(frameIndex: 11, isRandomAccessPoint: false) == .decode)
        // 12 and 13 never came: 14 builds on them.
        #expect(gate.admit(frameIndex: 14, isRandomAccessPoint: false) == .skip(requestKeyframe: true))
        #expect(gate.admit(frameIndex: 15, isRandomAccessPoint: false) == .skip(requestKeyframe: false))
        #expect(gate.admit(frameIndex: 16, isRandomAccessPoint: true) == .decode)
        #expect(gate.admit(frameIndex: 17, isRandomAccessPoint: false) == .decode)
        #expect(gate.skipped == 2)
    }

    @Test func theGateStartsOnlyAtAKeyframe() {
        var gate = DecodeGate()
        // Joined mid-stream: the first unit is skipped silently, the second asks.
        #expect(gate.admit(frameIndex: 3, isRandomAccessPoint: false) == .skip(requestKeyframe: false))
        #expect(gate.admit(frameIndex: 4, isRandomAccessPoint: false) == .skip(requestKeyframe: true))
        #expect(gate.admit(frameIndex: 5, isRandomAccessPoint: true) == .decode)
    }

    @Test func lostFramesAndDecodeErrorsCloseTheGate() {
        var gate = DecodeGate()
        _ = gate.admit(frameIndex: 0, isRandomAccessPoint: true)
        gate.framesLost()
        #expect(gate.admit(frameIndex: 1, isRandomAccessPoint: false) == .skip(requestKeyframe: true))
        _ = gate.admit(frameIndex: 2, isRandomAccessPoint: true)
        gate.decodeFailed()
        // The caller asked when the decoder failed: the gate does not ask again.
        #expect(gate.admit(frameIndex: 3, isRandomAccessPoint: false) == .skip(requestKeyframe: false))
        #expect(gate.admit(frameIndex: 4, isRandomAccessPoint: true) == .decode)
        // The frame numbers wrap around 2^32 without a gap.
        var wrap = DecodeGate()
        _ = wrap.admit(frameIndex: UInt32.max, isRandomAccessPoint: true)
        #expect(wrap.admit(frameIndex: 0, isRandomAccessPoint: false) == .decode)
    }
}
