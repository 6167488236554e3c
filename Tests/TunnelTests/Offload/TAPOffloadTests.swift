@testable import Tunnel
import Testing

/// Offload on a TAP device: the same Scapy vectors as the TUN tests (Fixtures/offload-vectors.json),
/// each packet behind an Ethernet header. A super-frame must split into the TUN segments each
/// behind a copy of its Ethernet header, frames must coalesce into the TUN super-packets behind
/// one, the virtio-net header's offsets must count the 14 bytes, and frames that are not IP must
/// pass through untouched.
@Suite struct TAPOffloadTests {
    /// Destination and source MAC addresses, then the EtherType for the packet's IP version.
    /// `serviceVLAN` adds an 802.1ad S-tag before the 802.1Q one.
    static func ethernet(for packet: [UInt8], destination: UInt8 = 0x02, vlan: UInt16? = nil, serviceVLAN: UInt16? = nil) -> [UInt8] {
        let type: [UInt8] = packet.first.map { $0 >> 4 == 6 } == true ? [0x86, 0xDD] : [0x08, 0x00]
        let tag: [UInt8] = vlan.map { [0x81, 0x00, UInt8($0 >> 8), UInt8($0 & 0xff)] } ?? []
        let serviceTag: [UInt8] = serviceVLAN.map { [0x88, 0xA8, UInt8($0 >> 8), UInt8($0 & 0xff)] } ?? []
        return [destination, 0x11, 0x22, 0x33, 0x44, 0x55, 0x02, 0x66, 0x77, 0x88, 0x99, 0xaa] + serviceTag + tag + type
    }

    /// A virtio-net header with checksum start and header length moved by `shift` bytes.
    static func shifted(_ header: [UInt8], by shift: Int) -> [UInt8] {
        var h = header
        for offset in [2, 6] {
            let value = Int(h[offset]) | Int(h[offset + 1]) << 8
            guard value != 0 else { continue }
            h[offset] = UInt8((value + shift) & 0xff)
            h[offset + 1] = UInt8((value + shift) >> 8)
        }
        return h
    }

    static func split(header: [UInt8], frame: [UInt8]) throws -> [[UInt8]] {
        let parsed = try #require(header.withUnsafeBytes { VirtioNetHeader($0) })
        let batch = PacketBatch(capacity: 64, slotSize: 1600)
        _ = try frame.withUnsafeBytes { try GSOSplitter.split($0, header: parsed, linkLayer: .ethernet, into: batch) }
        return (0..<batch.count).map { batch.packetBytes($0) }
    }

    @Test(arguments: OffloadVectors.shared.split)
    func aSuperFrameSplitsIntoTheTUNSegmentsEachBehindItsEthernetHeader(vector: OffloadVectors.Split) throws {
        let packet = [UInt8](hex: vector.packet)
        let ethernet = Self.ethernet(for: packet)
        let segments = try Self.split(header: Self.shifted([UInt8](hex: vector.header), by: 14), frame: ethernet + packet)
        #expect(segments.map { $0.hex } == vector.segments.map { (ethernet + [UInt8](hex: $0)).hex })
    }

    @Test func aVLANTaggedSuperFrameKeepsItsTagInEverySegment() throws {
        let vector = try #require(OffloadVectors.shared.split.first { $0.segments.count > 1 })
        let packet = [UInt8](hex: vector.packet)
        let ethernet = Self.ethernet(for: packet, vlan: 42)
        let segments = try Self.split(header: Self.shifted([UInt8](hex: vector.header), by: 18), frame: ethernet + packet)
        #expect(segments.map { $0.hex } == vector.segments.map { (ethernet + [UInt8](hex: $0)).hex })
    }

    @Test func aDoubleTaggedSuperFrameKeepsBothTagsInEverySegment() throws {
        let vector = try #require(OffloadVectors.shared.split.first { $0.segments.count > 1 })
        let packet = [UInt8](hex: vector.packet)
        let ethernet = Self.ethernet(for: packet, vlan: 42, serviceVLAN: 7)
        let segments = try Self.split(header: Self.shifted([UInt8](hex: vector.header), by: 22), frame: ethernet + packet)
        #expect(segments.map { $0.hex } == vector.segments.map { (ethernet + [UInt8](hex: $0)).hex })
    }

    @Test func anEthernetHeaderWithNothingAfterItIsRefusedNotReadPast() {
        for frame in [Self.ethernet(for: [0x45]), Self.ethernet(for: [0x60]), Self.ethernet(for: [0x45], vlan: 3)] {
            // An exact-size buffer: a read past the header would leave it.
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: frame.count, alignment: 1)
            defer { buffer.deallocate() }
            buffer.copyBytes(from: frame)
            let batch = PacketBatch(capacity: 4, slotSize: 1600)
            #expect(throws: OffloadError.self) {
                _ = try GSOSplitter.split(UnsafeRawBufferPointer(buffer), header: VirtioNetHeader(), linkLayer: .ethernet, into: batch)
            }
            #expect(batch.count == 0)
        }
    }

    @Test func framesThatAreNotIPPassThroughAndSegmentingThemIsRefused() throws {
        // An ARP request: EtherType 0x0806, no offload asked.
        let arp: [UInt8] = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x66, 0x77, 0x88, 0x99, 0xaa, 0x08, 0x06]
            + [0, 1, 8, 0, 6, 4, 0, 1] + [UInt8](repeating: 7, count: 20)
        let segments = try Self.split(header: [UInt8](repeating: 0, count: 10), frame: arp)
        #expect(segments == [arp])
        // The same frame claiming to be a TCPv4 super-packet: refused as not IP.
        var header = [UInt8](repeating: 0, count: 10)
        header[0] = 1        // needs checksum
        header[1] = 1        // TCPv4
        header[4] = 0xb4; header[5] = 0x05
        #expect(throws: OffloadError.self) { _ = try Self.split(header: header, frame: arp) }
    }

    static func coalesce(_ frames: [[UInt8]], udp: Bool) -> [[UInt8]] {
        GROTableTests.coalesce(frames, udp: udp, linkHeaderLength: 14)
    }

    @Test(arguments: OffloadVectors.shared.coalesce)
    func framesCoalesceIntoTheTUNSuperPacketsBehindOneEthernetHeader(vector: OffloadVectors.Coalesce) {
        let frames = vector.packets.map { p in let b = [UInt8](hex: p); return Self.ethernet(for: b) + b }
        let writes = Self.coalesce(frames, udp: vector.udp)
        #expect(writes.count == vector.writes.count)
        for (i, expected) in vector.writes.enumerated() where i < writes.count {
            let packet = [UInt8](hex: expected.packet)
            #expect(writes[i].prefix(10).map { $0 }.hex == Self.shifted([UInt8](hex: expected.header), by: 14).hex, "write \(i) header")
            #expect(writes[i].dropFirst(10).map { $0 }.hex == (Self.ethernet(for: packet) + packet).hex, "write \(i) frame")
        }
    }

    @Test func framesForDifferentMACAddressesDoNotCoalesce() throws {
        let vector = try #require(OffloadVectors.shared.coalesce.first { !$0.udp && $0.writes.count == 1 && $0.packets.count > 1 })
        let frames = vector.packets.enumerated().map { i, p in
            let b = [UInt8](hex: p)
            return Self.ethernet(for: b, destination: i == 1 ? 0x04 : 0x02) + b
        }
        let writes = Self.coalesce(frames, udp: false)
        #expect(writes.count > 1, "the second frame has another destination MAC: it cannot ride in the first one's super-frame")
        #expect(writes.count <= frames.count)
    }

    @Test func splitThenCoalesceGivesBackTheSuperFrame() throws {
        let vector = try #require(OffloadVectors.shared.split.first { $0.segments.count > 2 && [UInt8](hex: $0.header)[1] == 1 })
        let packet = [UInt8](hex: vector.packet)
        let ethernet = Self.ethernet(for: packet)
        let header = Self.shifted([UInt8](hex: vector.header), by: 14)
        let segments = try Self.split(header: header, frame: ethernet + packet)
        let writes = Self.coalesce(segments, udp: false)
        try #require(writes.count == 1)
        // The same frame, and a header that asks the kernel for the same segmentation.
        #expect(writes[0].dropFirst(10).count == ethernet.count + packet.count)
        #expect(Array(writes[0].dropFirst(10).prefix(14)) == ethernet)
        let written = try #require(writes[0].withUnsafeBytes { VirtioNetHeader($0) })
        let original = try #require(header.withUnsafeBytes { VirtioNetHeader($0) })
        #expect(written.gsoType == original.gsoType && written.gsoSize == original.gsoSize)
        #expect(written.checksumStart == original.checksumStart && written.checksumOffset == original.checksumOffset)
    }
}
