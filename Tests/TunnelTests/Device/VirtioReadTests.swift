#if canImport(Glibc)
import Glibc
#endif
@testable import Tunnel
import Testing

/// `TunQueue.readPackets` with a virtio-net header, driven through its own read path: what the
/// kernel hands a TUN reader with offload on is one datagram-like read per super-packet, so a
/// Unix datagram socket pair stands in for the device descriptor here (a real device cannot be
/// made to deliver a truncated header or a chosen super-packet). Each datagram is one read.
@Suite struct VirtioReadTests {
    static func pair(headerSize: Int) throws -> (TunQueue, Int32) {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0, &fds) == 0)
        return (try TunQueue(fileDescriptor: fds[0], framing: .virtioNetHeader(size: headerSize)), fds[1])
    }

    static func send(_ fd: Int32, _ bytes: [UInt8]) {
        #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
    }

    /// Reads with batches of `capacity` until `expected` packets came; returns them in order.
    static func read(_ queue: TunQueue, capacity: Int, expected: Int) throws -> [String] {
        let batch = PacketBatch(capacity: capacity, slotSize: 1500)
        var packets: [String] = []
        var calls = 0
        while packets.count < expected && calls < expected + 4 {
            batch.removeAll()
            let n = try queue.readPackets(into: batch, timeout: .seconds(2))
            #expect(n <= capacity)
            for i in 0..<batch.count { packets.append(batch.packetBytes(i).hex) }
            calls += 1
        }
        return packets
    }

    /// A super-packet with more segments than the batch has slots comes out whole across
    /// several calls, each segment as the splitter makes it in one go (the Scapy vectors).
    @Test(arguments: OffloadVectors.shared.split.filter { $0.segments.count >= 2 })
    func aSuperPacketLargerThanTheBatchSpansCalls(vector: OffloadVectors.Split) throws {
        let header = [UInt8](hex: vector.header)
        let (queue, peer) = try Self.pair(headerSize: header.count)
        defer { queue.close(); Glibc.close(peer) }
        Self.send(peer, header + [UInt8](hex: vector.packet))
        Self.send(peer, header + [UInt8](hex: vector.packet))
        // One slot, then a batch that holds a packet already: both get every segment, in order.
        let one = try Self.read(queue, capacity: 1, expected: vector.segments.count)
        #expect(one == vector.segments)
        let batch = PacketBatch(capacity: vector.segments.count, slotSize: 1500)
        _ = batch.append([0x45, 0, 0, 20] + [UInt8](repeating: 0, count: 16))
        var rest: [String] = []
        while rest.count < vector.segments.count {
            let before = batch.count
            #expect(try queue.readPackets(into: batch, timeout: .seconds(2)) > 0, "a partly filled batch still makes progress")
            rest += (before..<batch.count).map { batch.packetBytes($0).hex }
            let keep = batch.packetBytes(0)
            batch.removeAll()
            _ = batch.append(keep)
        }
        #expect(rest == vector.segments)
        #expect(queue.statistics.malformedDropped == 0)
    }

    /// A read shorter than the virtio-net header is dropped and counted; the packet after it
    /// arrives intact.
    @Test func aTruncatedHeaderIsDroppedAndTheNextPacketArrives() throws {
        let vector = try #require(OffloadVectors.shared.split.first)
        let header = [UInt8](hex: vector.header)
        let (queue, peer) = try Self.pair(headerSize: header.count)
        defer { queue.close(); Glibc.close(peer) }
        Self.send(peer, Array(header.prefix(5)))
        Self.send(peer, header + [UInt8](hex: vector.packet))
        let packets = try Self.read(queue, capacity: 64, expected: vector.segments.count)
        #expect(packets == vector.segments)
        #expect(queue.statistics.malformedDropped == 1)
    }
}
