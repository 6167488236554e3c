@testable import RFB
import Testing

/// The row kernels the tile decoders share, against a pixel-by-pixel reading of the same bytes,
/// at every width from 1 to 70 (whole and partial bytes and quads) and with guard words on both
/// sides of the row, so a kernel that writes one pixel too many or too few fails here.
@Suite struct PixelFillTests {
    static let guardWord: UInt32 = 0xDEAD_BEEF
    static let colours: [UInt32] = (0..<256).map { 0xFF00_0000 | UInt32($0) &* 0x0001_0307 }

    /// Deterministic bytes (a linear congruential sequence): the same on every run.
    static func bytes(_ count: Int, seed: UInt32) -> [UInt8] {
        var state = seed
        return (0..<count).map { _ in
            state = state &* 1_664_525 &+ 1_013_904_223
            return UInt8(truncatingIfNeeded: state >> 24)
        }
    }

    /// Runs `kernel` on a row of `count` pixels between guard words and returns the row.
    static func paint(_ count: Int, _ kernel: (UnsafeMutablePointer<UInt32>) -> Void) -> [UInt32] {
        var row = [UInt32](repeating: guardWord, count: count + 8)
        row.withUnsafeMutableBufferPointer { kernel($0.baseAddress! + 4) }
        #expect(row[0..<4].allSatisfy { $0 == guardWord } && row[(count + 4)...].allSatisfy { $0 == guardWord },
                "a kernel wrote outside its row of \(count)")
        return Array(row[4..<(count + 4)])
    }

    @Test func oneBitRowsMatchThePixelByPixelReading() {
        for count in 1...70 {
            let line = Self.bytes((count + 7) / 8, seed: UInt32(count))
            let got = Self.paint(count) { row in
                withUnsafeTemporaryAllocation(of: PixelFill.Quad.self, capacity: 16) { patterns in
                    PixelFill.makeOneBitPatterns(patterns.baseAddress!, colour0: 0xFF11_2233, colour1: 0xFF44_5566)
                    line.withUnsafeBufferPointer { PixelFill.expandOneBitRow(row, from: $0.baseAddress!, count: count, patterns: patterns.baseAddress!) }
                }
            }
            let want = (0..<count).map { (x: Int) -> UInt32 in
                let bit = (line[x / 8] >> UInt8(7 - x % 8)) & 1
                return bit == 0 ? 0xFF11_2233 : 0xFF44_5566
            }
            #expect(got == want, "width \(count)")
        }
    }

    @Test func twoBitBytesMatchThePixelByPixelReadingAndFlagIndexThreeOfAPaletteOfThree() {
        for size in [3, 4] {
            for count in 1...70 {
                // Indices below `size` only: a palette of three has no index 3 (made 2 here).
                let line = Self.bytes((count + 3) / 4, seed: UInt32(count * 7 + size)).map { b -> UInt8 in
                    var out: UInt8 = 0
                    for k in 0..<4 {
                        var field = (b >> (6 - 2 * k)) & 3
                        if size == 3 && field == 3 { field = 2 }
                        out |= field << (6 - 2 * k)
                    }
                    return out
                }
                var result: (painted: Int, bad: Bool) = (0, false)
                let got = Self.paint(count) { row in
                    withUnsafeTemporaryAllocation(of: SIMD2<UInt32>.self, capacity: 16) { pairs in
                        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { invalid in
                            Self.colours.withUnsafeBufferPointer { colours in
                                PixelFill.makeTwoBitPairs(pairs.baseAddress!, invalid: invalid.baseAddress!, colours: colours.baseAddress!, size: size)
                            }
                            line.withUnsafeBufferPointer {
                                result = PixelFill.expandTwoBitBytes(row, from: $0.baseAddress!, count: count, pairs: pairs.baseAddress!, invalid: invalid.baseAddress!)
                            }
                        }
                    }
                }
                #expect(result.painted == count / 4 * 4 && !result.bad, "width \(count), palette of \(size)")
                let want = (0..<result.painted).map { (x: Int) -> UInt32 in
                    let field = (line[x / 4] >> UInt8(6 - 2 * (x % 4))) & 3
                    return Self.colours[Int(field)]
                }
                #expect(Array(got[0..<result.painted]) == want, "width \(count), palette of \(size)")
            }
        }
        // Index 3 in the second whole byte of a palette of three is flagged.
        let line: [UInt8] = [0b0001_1000, 0b0000_0011]
        var result: (painted: Int, bad: Bool) = (0, false)
        _ = Self.paint(8) { row in
            withUnsafeTemporaryAllocation(of: SIMD2<UInt32>.self, capacity: 16) { pairs in
                withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { invalid in
                    Self.colours.withUnsafeBufferPointer { PixelFill.makeTwoBitPairs(pairs.baseAddress!, invalid: invalid.baseAddress!, colours: $0.baseAddress!, size: 3) }
                    line.withUnsafeBufferPointer { result = PixelFill.expandTwoBitBytes(row, from: $0.baseAddress!, count: 8, pairs: pairs.baseAddress!, invalid: invalid.baseAddress!) }
                }
            }
        }
        #expect(result.painted == 8 && result.bad)
    }

    @Test func fourBitBytePairsMatchThePixelByPixelReadingAndReportTheHighestIndex() {
        for count in 1...70 {
            let line = Self.bytes((count + 1) / 2, seed: UInt32(count * 13))
            var result: (painted: Int, highest: Int) = (0, 0)
            let got = Self.paint(count) { row in
                Self.colours.withUnsafeBufferPointer { colours in
                    line.withUnsafeBufferPointer { result = PixelFill.expandFourBitBytes(row, from: $0.baseAddress!, count: count, colours: colours.baseAddress!) }
                }
            }
            #expect(result.painted == count / 4 * 4, "width \(count)")
            let indices = (0..<result.painted).map { (x: Int) -> Int in
                let nibble = (line[x / 2] >> UInt8(4 - 4 * (x % 2))) & 15
                return Int(nibble)
            }
            #expect(Array(got[0..<result.painted]) == indices.map { Self.colours[$0] }, "width \(count)")
            #expect(result.highest == (indices.max() ?? 0), "width \(count)")
        }
    }

    @Test func eightBitIndexRowsMatchThePixelByPixelReading() {
        for count in 1...70 {
            let line = Self.bytes(count, seed: UInt32(count * 17))
            let got = Self.paint(count) { row in
                Self.colours.withUnsafeBufferPointer { colours in
                    line.withUnsafeBufferPointer { PixelFill.expandIndexRow(row, from: $0.baseAddress!, count: count, colours: colours.baseAddress!) }
                }
            }
            #expect(got == line.map { Self.colours[Int($0)] }, "width \(count)")
        }
    }

    @Test func threeBytePixelRowsMatchThePixelByPixelReadingInBothByteOrders() {
        for count in 1...70 {
            let line = Self.bytes(count * 3, seed: UInt32(count * 19))
            for bigEndian in [false, true] {
                let got = Self.paint(count) { row in
                    // An exact-size copy: a kernel reading past the row would read past the array.
                    let exact = UnsafeMutableRawBufferPointer.allocate(byteCount: count * 3, alignment: 1)
                    defer { exact.deallocate() }
                    exact.copyBytes(from: line)
                    PixelFill.widenRow(row, from: UnsafeRawPointer(exact.baseAddress!), count: count, bigEndian: bigEndian)
                }
                let want = (0..<count).map { (x: Int) -> UInt32 in
                    let b0 = UInt32(line[3 * x]), b1 = UInt32(line[3 * x + 1]), b2 = UInt32(line[3 * x + 2])
                    let rgb: UInt32 = b0 << 16 | b1 << 8 | b2
                    let bgr: UInt32 = b0 | b1 << 8 | b2 << 16
                    return bigEndian ? 0xFF00_0000 | rgb : bgr
                }
                #expect(got == want, "width \(count), \(bigEndian ? "R, G, B" : "B, G, R")")
            }
        }
    }
}
