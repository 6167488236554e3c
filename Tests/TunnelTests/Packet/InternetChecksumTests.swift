@testable import Tunnel
import Testing

@Suite struct InternetChecksumTests {
    @Test func rfc1071ExampleSumsToDDF2() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2 (so the checksum is 220d).
        let bytes: [UInt8] = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]
        let folded = bytes.withUnsafeBytes { UInt16(bigEndian: InternetChecksum.fold(InternetChecksum.sum($0.baseAddress!, count: 8))) }
        #expect(folded == 0xddf2)
        let checksum = bytes.withUnsafeBytes { UInt16(bigEndian: InternetChecksum.checksum($0.baseAddress!, count: 8)) }
        #expect(checksum == 0x220d)
    }

    @Test func knownIPv4HeaderChecksum() {
        // A classic example header (checksum field zeroed); its checksum is b861.
        let header: [UInt8] = [0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00,
                               0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7]
        let checksum = header.withUnsafeBytes { UInt16(bigEndian: InternetChecksum.checksum($0.baseAddress!, count: 20)) }
        #expect(checksum == 0xb861)
    }

    @Test func fastSumMatchesTheReferenceAtEveryLengthAndAlignment() {
        var rng = SplitMix(seed: 7)
        let data = (0..<2100).map { _ in UInt8.random(in: 0...255, using: &rng) }
        data.withUnsafeBytes { raw in
            for offset in 0..<9 {
                for length in [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 31, 32, 33, 63, 64, 65, 95, 96, 97, 127, 128, 129, 1499, 1500, 2048] where offset + length <= data.count {
                    let fast = UInt16(bigEndian: InternetChecksum.checksum(raw.baseAddress! + offset, count: length))
                    #expect(fast == referenceChecksum(Array(data[offset..<(offset + length)])), "offset \(offset) length \(length)")
                }
            }
        }
    }

    @Test func allOnesDataDoesNotOverflowTheAccumulator() {
        let data = [UInt8](repeating: 0xff, count: 65535)
        let fast = data.withUnsafeBytes { UInt16(bigEndian: InternetChecksum.checksum($0.baseAddress!, count: $0.count)) }
        #expect(fast == referenceChecksum(data))
    }
}
