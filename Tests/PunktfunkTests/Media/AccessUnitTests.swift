import Foundation
@testable import Punktfunk
import Testing

/// Access units from real encoders (libx265, libx264, libaom through ffmpeg; ffprobe's keyframe
/// flags are the independent answer), Annex-B edge cases, length-prefixed repacking, and AV1 OBU
/// refusals.
@Suite struct AccessUnitTests {
    struct Probe: Decodable { let size: Int, keyframe: Bool }

    static func accessUnits(_ name: String) throws -> [(bytes: [UInt8], keyframe: Bool)] {
        let stream = Array(try Fixtures.data("media/\(name)"))
        let probes = try JSONDecoder().decode([String: [Probe]].self,
                                              from: Data(try Fixtures.data("media/ffprobe.json")).dropFirstCommentKey())[name] ?? []
        var out: [(bytes: [UInt8], keyframe: Bool)] = []
        var at = 0
        for p in probes {
            out.append((Array(stream[at..<(at + p.size)]), p.keyframe))
            at += p.size
        }
        #expect(at == stream.count, "ffprobe's packets cover \(name)")
        return out
    }

    @Test(arguments: [("testsrc.hevc", VideoCodec.hevc), ("testsrc.h264", .h264), ("testsrc.obu", .av1)])
    func keyframesAgreeWithFFprobe(name: String, codec: VideoCodec) throws {
        let units = try Self.accessUnits(name)
        #expect(units.count == 6)
        for (index, unit) in units.enumerated() {
            let au = try AccessUnit(unit.bytes, codec: codec)
            #expect(au.isKeyframe == unit.keyframe, "\(name) AU \(index)")
            #expect(au.hasPicture, "\(name) AU \(index)")
            // The host puts parameter sets in band with every keyframe.
            if unit.keyframe { #expect(au.carriesParameterSets, "\(name) AU \(index)") }
        }
    }

    @Test func hevcUnitsAndParameterSets() throws {
        let idr = try #require(Self.accessUnits("testsrc.hevc").first)
        let au = try AccessUnit(idr.bytes, codec: .hevc)
        #expect(au.types.first == HEVCNALType.accessUnitDelimiter)
        #expect(au.types.contains(HEVCNALType.vps) && au.types.contains(HEVCNALType.sps) && au.types.contains(HEVCNALType.pps))
        #expect(au.types.contains { HEVCNALType.isIDR($0) })
        #expect(au.videoParameterSets.count == 1 && au.sequenceParameterSets.count == 1 && au.pictureParameterSets.count == 1)
        // The VPS unit starts with its two-byte NAL header (type 32 << 1).
        #expect(idr.bytes[au.videoParameterSets[0].lowerBound] == 32 << 1)
    }

    @Test func hevcCRAIsARandomAccessPointButNotAnIDR() throws {
        // AUD, then a CRA slice (type 21: header byte 21 << 1).
        let au = try AccessUnit([0, 0, 0, 1, 35 << 1, 1, 0x50, 0, 0, 1, 21 << 1, 1, 0xAF, 0x00, 0x01], codec: .hevc)
        #expect(au.types == [35, 21])
        #expect(au.isRandomAccessPoint && !au.isKeyframe && au.hasPicture && !au.carriesParameterSets)
    }

    @Test func annexBStartCodesAndTrailingZeros() {
        let bytes: [UInt8] = [0xFF, 0xEE,                 // junk before the first start code
                              0, 0, 0, 1, 0x67, 1, 2,      // 4-byte start code, SPS
                              0, 0, 1, 0x68, 3, 0, 0,      // 3-byte start code, PPS, trailing zeros
                              0, 0, 0, 1, 0x65, 4, 5, 6,   // IDR slice
                              0, 0, 1]                     // a start code with nothing after it
        let units = AnnexB.nalUnits(in: bytes)
        #expect(units == [6..<9, 12..<14, 20..<24])
        #expect(AnnexB.nalUnits(in: []) .isEmpty)
        #expect(AnnexB.nalUnits(in: [1, 2, 3, 4]).isEmpty)
        #expect(AnnexB.nalUnits(in: [0, 0, 1]).isEmpty)
        let au = try? AccessUnit(bytes, codec: .h264)
        #expect(au?.types == [7, 8, 5])
        #expect(au?.isKeyframe == true)
        #expect(au?.carriesParameterSets == true)
    }

    @Test func lengthPrefixedRoundTripAndParameterSetsDropped() throws {
        let units = try Self.accessUnits("testsrc.hevc")
        for unit in units {
            let avcc = AnnexB.lengthPrefixed(unit.bytes, codec: .hevc)
            let back = try AnnexB.annexB(fromLengthPrefixed: avcc)
            #expect(AnnexB.nalUnits(in: back).map { Array(back[$0]) } == AnnexB.nalUnits(in: unit.bytes).map { Array(unit.bytes[$0]) })
        }
        let idr = units[0].bytes
        let slicesOnly = AnnexB.lengthPrefixed(idr, codec: .hevc, dropping: [HEVCNALType.vps, HEVCNALType.sps, HEVCNALType.pps, HEVCNALType.accessUnitDelimiter])
        let kept = try AccessUnit(AnnexB.annexB(fromLengthPrefixed: slicesOnly), codec: .hevc)
        #expect(kept.types.allSatisfy { HEVCNALType.isVCL($0) || $0 == HEVCNALType.prefixSEI || $0 == HEVCNALType.suffixSEI })
        #expect(throws: MediaError.truncated(what: "NAL unit", needed: 9, available: 2)) {
            try AnnexB.annexB(fromLengthPrefixed: [0, 0, 0, 9, 1, 2])
        }
        #expect(throws: MediaError.self) { try AnnexB.annexB(fromLengthPrefixed: [0, 0, 1]) }
    }

    @Test func av1OBUsAndTheirRefusals() throws {
        // Temporal delimiter, a sequence header, a key frame header with an extension byte, and
        // a trailing OBU without a size field.
        let td: [UInt8] = [0x12, 0x00]
        let sequence: [UInt8] = [0x0A, 0x03, 0x00, 0x00, 0x00]
        let frame: [UInt8] = [0x36, 0x20, 0x02, 0x10, 0xAA]       // FRAME with extension, size 2, frame_type KEY
        let padding: [UInt8] = [0x78, 1, 2, 3]                       // PADDING, no size field: to the end
        let obus = try AV1.obus(in: td + sequence + frame + padding)
        #expect(obus.map(\.type) == [2, 1, 6, 15])
        #expect(obus[2].temporalID == 1 && obus[2].spatialID == 0)
        #expect(obus[3].payload == 13..<16)
        let au = try AccessUnit(td + sequence + frame, codec: .av1)
        #expect(au.isKeyframe && au.carriesParameterSets)
        let inter = try AccessUnit(td + [0x32, 0x01, 0x20], codec: .av1)     // FRAME, frame_type INTER
        #expect(!inter.isKeyframe && inter.hasPicture)

        #expect(throws: MediaError.self) { try AV1.obus(in: [0x92, 0x00]) }                          // forbidden bit
        #expect(throws: MediaError.self) { try AV1.obus(in: [0x12, 0x05, 1, 2]) }                     // size past the end
        #expect(throws: MediaError.self) { try AV1.obus(in: [0x12] + [UInt8](repeating: 0xFF, count: 9)) } // LEB128 too long
        #expect(throws: MediaError.self) { try AV1.obus(in: [0x12, 0x80]) }                           // LEB128 unterminated
        #expect(throws: MediaError.self) { try AV1.obus(in: [0x16]) }                                 // extension byte missing
        #expect(AV1.leb128(0) == [0] && AV1.leb128(300) == [0xAC, 0x02])
    }

    @Test func randomBytesNeverCrashTheParsers() {
        var rng = SplitMix64(seed: 99)
        for n in 0..<3000 {
            let bytes = SplitMix64.bytes(seed: rng.next(), count: n % 300)
            var biased = bytes
            if n % 3 == 0 { for i in stride(from: 0, to: biased.count, by: 7) { biased[i] = 0 } }
            for codec in VideoCodec.allCases { _ = try? AccessUnit(biased, codec: codec) }
            _ = try? AnnexB.annexB(fromLengthPrefixed: biased)
        }
    }
}

extension Data {
    /// The ffprobe summary keeps a "$comment" string beside the arrays; drop it for decoding.
    func dropFirstCommentKey() -> Data {
        guard var object = (try? JSONSerialization.jsonObject(with: self)) as? [String: Any] else { return self }
        object.removeValue(forKey: "$comment")
        return (try? JSONSerialization.data(withJSONObject: object)) ?? self
    }
}
