#if canImport(Glibc)
import Glibc
#endif
@testable import Tunnel
import Testing

/// Coalescing for writes: segments from Scapy (Fixtures/offload-vectors.json) must become the
/// super-packets and virtio-net headers the kernel expects, and everything else must pass
/// unchanged, in an order that never lets a later segment of a flow overtake an earlier one.
@Suite struct GROTableTests {
    /// Runs the table over `packets` and returns each write's bytes (header + packet).
    /// `linkHeaderLength` 14: the packets are TAP frames.
    static func coalesce(_ packets: [[UInt8]], udp: Bool, headerSize: Int = 10, linkHeaderLength: Int = 0) -> [[UInt8]] {
        let batch = PacketBatch(capacity: 64, slotSize: 2000)
        for p in packets { batch.append(p) }
        let table = GROTable(capacity: 64, tcp: true, udp: udp, linkHeaderLength: linkHeaderLength)
        let n = table.plan(batch, headerSize: headerSize)
        return (0..<n).map { w in
            let write = table.write(w)
            var bytes: [UInt8] = []
            for k in write.firstIOVec..<(write.firstIOVec + write.iovecCount) {
                let v = table.iovecs[k]
                bytes += UnsafeRawBufferPointer(start: v.iov_base, count: v.iov_len)
            }
            #expect(bytes.count == write.byteCount)
            return bytes
        }
    }

    @Test func vectorsArePresent() {
        #expect(OffloadVectors.shared.coalesce.count >= 10, "Fixtures/offload-vectors.json missing: run scripts/vectors/make_tun_offload_vectors.py")
    }

    @Test(arguments: OffloadVectors.shared.coalesce)
    func coalescesAsScapyExpects(vector: OffloadVectors.Coalesce) {
        let writes = Self.coalesce(vector.packets.map { [UInt8](hex: $0) }, udp: vector.udp)
        #expect(writes.count == vector.writes.count)
        for (i, expected) in vector.writes.enumerated() where i < writes.count {
            #expect(writes[i].prefix(10).map { $0 }.hex == expected.header, "write \(i) header")
            #expect(writes[i].dropFirst(10).map { $0 }.hex == expected.packet, "write \(i) packet")
        }
    }

    @Test func twelveByteHeadersCarryAZeroBufferCount() throws {
        let vector = try #require(OffloadVectors.shared.coalesce.first)
        let writes = Self.coalesce(vector.packets.map { [UInt8](hex: $0) }, udp: false, headerSize: 12)
        #expect(writes.count == 1)
        #expect(writes[0].prefix(10).map { $0 }.hex == vector.writes[0].header)
        #expect(writes[0][10...11] == [0, 0])
        #expect(writes[0].dropFirst(12).map { $0 }.hex == vector.writes[0].packet)
    }

    @Test func udpIsLeftAloneUnlessEnabled() throws {
        let vector = try #require(OffloadVectors.shared.coalesce.first { $0.udp })
        let writes = Self.coalesce(vector.packets.map { [UInt8](hex: $0) }, udp: false)
        #expect(writes.count == vector.packets.count)
        for (w, p) in zip(writes, vector.packets) { #expect(w.dropFirst(10).map { $0 }.hex == p) }
    }

    @Test func splitThenCoalesceGivesBackTheSuperPacket() throws {
        // The two halves of offload are inverses: a kernel super-packet, split, then coalesced,
        // is the same packet with the same header.
        for vector in OffloadVectors.shared.split where vector.segments.count > 1 {
            let batch = PacketBatch(capacity: 64, slotSize: 2000)
            let header = try #require([UInt8](hex: vector.header).withUnsafeBytes { VirtioNetHeader($0) })
            _ = try [UInt8](hex: vector.packet).withUnsafeBytes { raw in try GSOSplitter.split(raw, header: header, into: batch) }
            let table = GROTable(capacity: 64)
            // FIN and CWR segments are not coalesced (the kernel would not either).
            guard table.plan(batch) == 1 else {
                #expect(vector.name.contains("FIN"), "\(vector.name) did not coalesce")
                continue
            }
            let write = table.write(0)
            var bytes: [UInt8] = []
            for k in write.firstIOVec..<(write.firstIOVec + write.iovecCount) {
                bytes += UnsafeRawBufferPointer(start: table.iovecs[k].iov_base, count: table.iovecs[k].iov_len)
            }
            #expect(bytes.dropFirst(10).map { $0 }.hex == vector.packet, "\(vector.name)")
            var expectedHeader = header
            expectedHeader.gsoTypeByte &= ~VirtioNetHeader.gsoECN
            #expect(VirtioNetHeader(bytes.withUnsafeBytes { $0 }) == expectedHeader, "\(vector.name)")
        }
    }

    @Test func aSuperPacketStopsAt64KiB() {
        // 60 segments of 1388 bytes would be 83 KiB: the first write takes what fits in 65535.
        var packets: [[UInt8]] = []
        let template = [UInt8](hex: OffloadVectors.shared.coalesce[0].packets[0])
        for i in 0..<60 {
            var p = template
            let seq = UInt32(0x1122_3344) &+ UInt32(i * 1388)
            p[24] = UInt8(seq >> 24); p[25] = UInt8(seq >> 16 & 0xff); p[26] = UInt8(seq >> 8 & 0xff); p[27] = UInt8(seq & 0xff)
            p[4] = 0; p[5] = UInt8(i)            // IP id
            Self.fixChecksums(&p)
            packets.append(p)
        }
        let writes = Self.coalesce(packets, udp: false)
        #expect(writes.count == 2)
        let first = writes[0].dropFirst(10)
        #expect(first.count <= 65535)
        #expect(first.count == 52 + 47 * 1388)
        #expect(writes[1].count == 10 + 52 + 13 * 1388)
    }

    static func fixChecksums(_ p: inout [UInt8]) {
        p[10] = 0; p[11] = 0
        let ip = referenceChecksum(Array(p[0..<20]))
        p[10] = UInt8(ip >> 8); p[11] = UInt8(ip & 0xff)
        p[36] = 0; p[37] = 0
        let length = p.count - 20
        let pseudo = Array(p[12..<20]) + [0, 6, UInt8(length >> 8), UInt8(length & 0xff)]
        let tcp = referenceChecksum(pseudo + Array(p[20...]))
        p[36] = UInt8(tcp >> 8); p[37] = UInt8(tcp & 0xff)
    }

    @Test func hostileAndRuntPacketsPassThroughUnchanged() {
        let good = [UInt8](hex: OffloadVectors.shared.coalesce[0].packets[0])
        var lyingLength = good; lyingLength[2] = 0xff
        var options = good; options[0] = 0x46
        var fragment = good; fragment[6] = 0x20
        let packets: [[UInt8]] = [[0x45], [0x60, 0, 0], Array(good[0..<30]), lyingLength, options, fragment, [0x99] + good.dropFirst()]
        let writes = Self.coalesce(packets, udp: true)
        #expect(writes.count == packets.count)
        for (w, p) in zip(writes, packets) {
            #expect(w.prefix(10).allSatisfy { $0 == 0 })
            #expect(Array(w.dropFirst(10)) == p)
        }
    }
}
