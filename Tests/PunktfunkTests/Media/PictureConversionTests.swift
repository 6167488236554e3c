@testable import Punktfunk
import Testing

/// `EightBitPicture`: every layout a decoder gives, brought to 8-bit 4:2:0 with known answers
/// (samples built by hand, odd sizes and row padding included).
@Suite struct PictureConversionTests {
    /// A picture over hand-made planes (bytes, row pitch in bytes).
    final class HandMade: DecodedPicture, @unchecked Sendable {
        let width: Int, height: Int, layout: PictureLayout
        let colour = PictureColour(matrix: .bt2020, fullRange: false)
        let frameIndex: UInt32 = 7, ptsNanoseconds: UInt64 = 99
        let planes: [[UInt8]], pitches: [Int]
        init(_ width: Int, _ height: Int, _ layout: PictureLayout, _ planes: [[UInt8]], _ pitches: [Int]) {
            (self.width, self.height, self.layout, self.planes, self.pitches) = (width, height, layout, planes, pitches)
        }
        func withPlanes<R>(_ body: ([UnsafePointer<UInt8>], [Int]) throws -> R) rethrows -> R {
            let copies = planes.map { p -> UnsafeMutablePointer<UInt8> in
                let m = UnsafeMutablePointer<UInt8>.allocate(capacity: p.count)
                m.initialize(from: p, count: p.count)
                return m
            }
            defer { copies.forEach { $0.deallocate() } }
            return try body(copies.map { UnsafePointer($0) }, pitches)
        }
    }

    /// 16-bit little-endian samples, each row padded with `pad` junk bytes.
    static func wide(_ rows: [[UInt16]], pad: Int = 0) -> [UInt8] {
        rows.flatMap { row in row.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] } + Array(repeating: 0xEE, count: pad) }
    }

    static func planes(_ p: DecodedPicture) -> [[UInt8]] {
        let cw = (p.width + 1) / 2, ch = (p.height + 1) / 2
        return p.withPlanes { planes, pitches in
            zip(planes, pitches).enumerated().map { i, plane in
                let (w, h) = i == 0 ? (p.width, p.height) : (cw, ch)
                return (0..<h).flatMap { y in (0..<w).map { plane.0[y * plane.1 + $0] } }
            }
        }
    }

    @Test func tenBitSamplesRoundToTheirTopEightBits() {
        // 3x1 luma: 0, 514 (128.5 → 129), 1023 (255.75 → 255, not 256); chroma 2x1.
        let p = HandMade(3, 1, .i420p10, [Self.wide([[0, 514, 1023]], pad: 2), Self.wide([[512, 3]]), Self.wide([[1, 2]])], [8, 4, 4])
        let shown = EightBitPicture(p)
        #expect(Self.planes(shown) == [[0, 129, 255], [128, 1], [0, 1]])
        #expect(shown.layout == .i420 && shown.source == .i420p10 && shown.colour == p.colour && shown.frameIndex == 7 && shown.ptsNanoseconds == 99)
    }

    @Test func p010KeepsTheHighBitsAndSplitsTheChroma() {
        // Values in the top ten bits: 0x8040 → 128 (0x80.40 rounds down), 0xFFC0 → 255; UV pairs.
        let p = HandMade(2, 2, .p010, [Self.wide([[0x8040, 0xFFC0], [0x0080, 0x0180]]), Self.wide([[0x4000, 0xC000]])], [4, 4])
        #expect(Self.planes(EightBitPicture(p)) == [[128, 255, 1, 2], [64], [192]])
    }

    @Test func fourFourFourChromaIsTheRoundedMeanOfEachBlock() {
        // 3x3: blocks of 2x2, the odd column and row repeating their last sample.
        let u: [UInt8] = [10, 11, 200, 12, 13, 0, 255, 254, 7]
        let v: [UInt8] = [0, 1, 2, 3, 4, 5, 6, 7, 8]
        let y: [UInt8] = Array(1...9)
        let p = HandMade(3, 3, .i444, [y, u, v], [3, 3, 3])
        // U: (10+11+12+13)/4 = 11.5 → 12; (200+200+0+0)/4 = 100; (255+254+255+254)/4 = 254.5 → 255; (7*4)/4 = 7.
        #expect(Self.planes(EightBitPicture(p)) == [y, [12, 100, 255, 7], [2, 4, 7, 8]])
    }

    @Test func tenBitFourFourFourNarrowsAndAverages() {
        let p = HandMade(2, 1, .i444p10, [Self.wide([[1020, 4]]), Self.wide([[1000, 1023]]), Self.wide([[0, 6]])], [4, 4, 4])
        // Chroma 2x1 repeats its row: (1000+1023)*2/16 = 252.875 → 253; (0+6)*2/16 = 0.75 → 1.
        #expect(Self.planes(EightBitPicture(p)) == [[255, 1], [253], [1]])
    }

    @Test func eightBitLayoutsCopyUnchanged() {
        let i420 = HandMade(2, 2, .i420, [[1, 2, 9, 3, 4, 9], [5, 9], [6, 9]], [3, 2, 2])
        #expect(Self.planes(EightBitPicture(i420)) == [[1, 2, 3, 4], [5], [6]])
        let nv12 = HandMade(2, 2, .nv12, [[1, 2, 3, 4], [5, 6]], [2, 2])
        #expect(Self.planes(EightBitPicture(nv12)) == [[1, 2, 3, 4], [5], [6]])
    }
}
