import Testing
@testable import Tunnel

/// The ten-byte `virtio_net_hdr` (little-endian fields) and the `TUN_F_*` flag word.
@Suite struct VirtioNetHeaderTests {
    @Test func storesAndLoadsEveryFieldLittleEndian() throws {
        let header = VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, gsoType: .tcpv6, headerLength: 0x0102,
                                     gsoSize: 0x0304, checksumStart: 0x0506, checksumOffset: 0x0708)
        #expect(header.bytes == [0x01, 0x04, 0x02, 0x01, 0x04, 0x03, 0x06, 0x05, 0x08, 0x07])
        let parsed = try #require(header.bytes.withUnsafeBytes { VirtioNetHeader($0) })
        #expect(parsed == header)
        #expect(parsed.needsChecksum && parsed.gsoType == .tcpv6)
    }

    @Test func theECNBitDoesNotHideTheGSOTypeAndUnknownTypesAreNil() throws {
        let ecn = try #require([UInt8]([0, 0x80 | 1, 0, 0, 0, 0, 0, 0, 0, 0]).withUnsafeBytes { VirtioNetHeader($0) })
        #expect(ecn.gsoType == .tcpv4)
        let unknown = try #require([UInt8]([0, 2, 0, 0, 0, 0, 0, 0, 0, 0]).withUnsafeBytes { VirtioNetHeader($0) })
        #expect(unknown.gsoType == nil)
        let uso = try #require([UInt8]([0, 5, 0, 0, 0, 0, 0, 0, 0, 0]).withUnsafeBytes { VirtioNetHeader($0) })
        #expect(uso.gsoType == .udpL4)
    }

    @Test func fewerThanTenBytesIsNoHeader() {
        for n in 0..<VirtioNetHeader.size {
            #expect([UInt8](repeating: 0, count: n).withUnsafeBytes { VirtioNetHeader($0) } == nil)
        }
    }

    @Test func offloadFeatureNamesForReports() {
        #expect(OffloadFeatures.preferred.rawValue == 0x67)
        #expect(OffloadFeatures.withoutUSO.rawValue == 0x07)
        #expect(OffloadFeatures.preferred.names == ["csum", "tso4", "tso6", "uso4", "uso6"])
        #expect(OffloadFeatures().names == [])
        #expect(OffloadFeatures().description == "none")
    }
}
