@testable import Tunnel
import Testing

/// GSO super-packets as the kernel hands them to a TUN reader, split and compared with the
/// segments Scapy builds for the same data (Fixtures/offload-vectors.json), then hostile
/// headers: each is a typed error for that packet and leaves the batch as it was.
@Suite struct GSOSplitterTests {
    static func split(header: [UInt8], packet: [UInt8], into batch: PacketBatch) throws -> Int {
        guard let parsed = header.withUnsafeBytes({ VirtioNetHeader($0) }) else {
            throw OffloadError.truncatedVirtioHeader(length: header.count)
        }
        return try packet.withUnsafeBytes { raw in try GSOSplitter.split(raw, header: parsed, into: batch) }
    }

    @Test func vectorsArePresent() {
        #expect(OffloadVectors.shared.split.count >= 8, "Fixtures/offload-vectors.json missing: run scripts/vectors/make_tun_offload_vectors.py")
    }

    @Test(arguments: OffloadVectors.shared.split)
    func splitsIntoTheSegmentsScapyBuilds(vector: OffloadVectors.Split) throws {
        let batch = PacketBatch(capacity: 64, slotSize: 1500)
        let n = try Self.split(header: [UInt8](hex: vector.header), packet: [UInt8](hex: vector.packet), into: batch)
        #expect(n == vector.segments.count)
        #expect(batch.count == vector.segments.count)
        for (i, expected) in vector.segments.enumerated() where i < batch.count {
            #expect(batch.packetBytes(i).hex == expected, "segment \(i)")
            #expect(checksumsHold(batch.packetBytes(i)) || batch.packetBytes(i)[9] == 1, "segment \(i) checksums")
        }
    }

    @Test func splitAppendsAfterWhatTheBatchHolds() throws {
        let vector = try #require(OffloadVectors.shared.split.first)
        let batch = PacketBatch(capacity: 64, slotSize: 1500)
        batch.append([0x45, 0, 0, 20] + [UInt8](repeating: 0, count: 16))
        _ = try Self.split(header: [UInt8](hex: vector.header), packet: [UInt8](hex: vector.packet), into: batch)
        #expect(batch.count == 1 + vector.segments.count)
        #expect(batch.packetBytes(1).hex == vector.segments[0])
    }

    @Test func ignoresAWrongHeaderLengthFromTheKernel() throws {
        // hdr_len is only a hint (some kernels get it wrong); the split recomputes it.
        let vector = try #require(OffloadVectors.shared.split.first)
        var header = [UInt8](hex: vector.header)
        for bogus: UInt16 in [0, 1, 20, 9999, 65535] {
            header[2] = UInt8(bogus & 0xff)
            header[3] = UInt8(bogus >> 8)
            let batch = PacketBatch(capacity: 64, slotSize: 1500)
            _ = try Self.split(header: header, packet: [UInt8](hex: vector.packet), into: batch)
            #expect((0..<batch.count).map { batch.packetBytes($0).hex } == vector.segments, "hdr_len \(bogus)")
        }
    }

    /// A hostile header and the error it must produce.
    struct Hostile: CustomTestStringConvertible, Sendable {
        var name: String
        var mutate: @Sendable (inout [UInt8], inout [UInt8]) -> Void
        var expected: OffloadError
        var testDescription: String { name }
    }

    static let hostile: [Hostile] = [
        Hostile(name: "gso_size 0", mutate: { h, _ in h[4] = 0; h[5] = 0 }, expected: .zeroGSOSize),
        Hostile(name: "unknown GSO type 7", mutate: { h, _ in h[1] = 7 }, expected: .unknownGSOType(7)),
        Hostile(name: "UFO never enabled", mutate: { h, _ in h[1] = 3 }, expected: .unsupportedGSOType(3)),
        Hostile(name: "TCPv6 on an IPv4 packet", mutate: { h, _ in h[1] = 4 }, expected: .gsoTypeMismatch(gsoType: 4, ipVersion: 4, protocolNumber: 6)),
        Hostile(name: "UDP GSO on a TCP packet", mutate: { h, _ in h[1] = 5; h[8] = 6 }, expected: .gsoTypeMismatch(gsoType: 5, ipVersion: 4, protocolNumber: 6)),
        Hostile(name: "GSO without NEEDS_CSUM", mutate: { h, _ in h[0] = 0 }, expected: .gsoWithoutChecksum),
        Hostile(name: "csum_start inside the IP header", mutate: { h, _ in h[6] = 12 }, expected: .badTransportOffset(12)),
        Hostile(name: "csum_start past the end", mutate: { h, _ in h[6] = 0xff; h[7] = 0xff }, expected: .badTransportOffset(65535)),
        Hostile(name: "csum_offset not the TCP checksum", mutate: { h, _ in h[8] = 2 }, expected: .badChecksumOffset(2)),
        Hostile(name: "TCP data offset of 4 bytes", mutate: { _, p in p[32] = 0x10 }, expected: .badTCPHeaderLength(4)),
        Hostile(name: "not IP", mutate: { _, p in p[0] = 0x15 }, expected: .notIP(versionNibble: 1)),
        Hostile(name: "IHL past the packet", mutate: { _, p in p.removeSubrange(30...) ; p[0] = 0x4f }, expected: .packetTooShort(length: 30, needed: 60)),
        Hostile(name: "runt: 3 bytes", mutate: { _, p in p.removeSubrange(3...) }, expected: .packetTooShort(length: 3, needed: 20)),
        Hostile(name: "runt: TCP header cut", mutate: { _, p in p.removeSubrange(45...) }, expected: .badTCPHeaderLength(32)),
        Hostile(name: "gso_size 1: more segments than slots", mutate: { h, _ in h[4] = 1; h[5] = 0 }, expected: .tooManySegments(4000, capacity: 63)),
        Hostile(name: "gso_size larger than a slot", mutate: { h, _ in h[4] = 0xa0; h[5] = 0x0f }, expected: .segmentLargerThanSlot(segment: 4052, slot: 1500)),
    ]

    @Test(arguments: hostile)
    func hostileHeadersAreTypedErrorsThatLeaveTheBatchAlone(_ hostile: Hostile) throws {
        let vector = try #require(OffloadVectors.shared.split.first)
        var header = [UInt8](hex: vector.header)
        var packet = [UInt8](hex: vector.packet)
        hostile.mutate(&header, &packet)
        let batch = PacketBatch(capacity: 64, slotSize: 1500)
        let before: [UInt8] = [0x45, 0, 0, 20, 1, 2, 3, 4] + [UInt8](repeating: 9, count: 12)
        batch.append(before)
        #expect(throws: hostile.expected) { _ = try Self.split(header: header, packet: packet, into: batch) }
        #expect(batch.count == 1)
        #expect(batch.packetBytes(0) == before)
        // The next, good packet splits as if nothing had happened.
        _ = try Self.split(header: [UInt8](hex: vector.header), packet: [UInt8](hex: vector.packet), into: batch)
        #expect((1..<batch.count).map { batch.packetBytes($0).hex } == vector.segments)
    }

    @Test func aTruncatedVirtioHeaderIsReported() {
        #expect(VirtioNetHeader([UInt8](repeating: 0, count: 9).withUnsafeBytes { $0 }) == nil)
        #expect(throws: OffloadError.truncatedVirtioHeader(length: 9)) {
            _ = try Self.split(header: [UInt8](repeating: 0, count: 9), packet: [0x45], into: PacketBatch(capacity: 4))
        }
    }

    @Test func partialChecksumOutsideThePacketIsRefused() throws {
        let packet = [UInt8](hex: try #require(OffloadVectors.shared.split.first { $0.name.contains("partial checksum only") }).packet)
        let batch = PacketBatch(capacity: 4)
        let header = VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, checksumStart: UInt16(packet.count - 1), checksumOffset: 0)
        #expect(throws: OffloadError.checksumOutsidePacket(start: packet.count - 1, offset: 0, length: packet.count)) {
            _ = try packet.withUnsafeBytes { raw in try GSOSplitter.split(raw, header: header, into: batch) }
        }
        #expect(batch.isEmpty)
    }

    @Test func aComputedUDPChecksumOfZeroIsSentAsFFFF() {
        // Search a payload whose UDP checksum comes out 0: the split must write 0xffff (0 means
        // "no checksum", and IPv6 forbids it).
        let base: [UInt8] = [UInt8](hex: "45000020000040004011" + "0000" + "0a3d00010a3d0002" + "9c415151000c0000") + [0, 0, 0, 0]
        for a in 0...255 {
            for b in stride(from: 0, through: 255, by: 1) {
                var packet = base
                packet[28] = UInt8(a); packet[29] = UInt8(b)
                // Fill in the IPv4 header checksum, then compute the UDP one the plain way.
                let ipSum = referenceChecksum(Array(packet[0..<20]))
                packet[10] = UInt8(ipSum >> 8); packet[11] = UInt8(ipSum & 0xff)
                var udp = packet
                udp[26] = 0; udp[27] = 0
                let pseudo: [UInt8] = Array(packet[12..<20]) + [0, 17, 0, 12]
                guard referenceChecksum(pseudo + Array(udp[20...])) == 0 else { continue }
                // Found one: give it to the splitter as a partial-checksum packet.
                let partial = ~referenceChecksum(pseudo)
                udp[26] = UInt8(partial >> 8); udp[27] = UInt8(partial & 0xff)
                let batch = PacketBatch(capacity: 2)
                let header = VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, checksumStart: 20, checksumOffset: 6)
                _ = try? udp.withUnsafeBytes { raw in try GSOSplitter.split(raw, header: header, into: batch) }
                #expect(batch.packetBytes(0)[26...27] == [0xff, 0xff])
                return
            }
        }
        Issue.record("no payload with a zero UDP checksum found")
    }
}
