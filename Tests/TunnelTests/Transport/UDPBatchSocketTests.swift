#if os(Linux)
import Foundation
import Glibc
import Synchronization
import Testing
@testable import Tunnel

/// `UDPBatchSocket` between two sockets on 127.0.0.1 (the kernel's own loopback is the peer: it
/// segments UDP GSO sends and coalesces for UDP GRO receives like any route would).
@Suite struct UDPBatchSocketTests {
    static let loopback = IPAddress.v4(0x7F00_0001)

    /// A free UDP port on 127.0.0.1 (bound, read back, released).
    static func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        let any = UDPEndpoint(address: loopback, port: 0)
        try #require(any.withSocketAddress { bind(fd, $0, $1) } == 0)
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Two sockets connected to each other.
    static func pair(offload: Bool) throws -> (UDPBatchSocket, UDPBatchSocket) {
        let portB = try freePort()
        let a = try UDPBatchSocket(localPort: 0, localAddress: loopback, remote: UDPEndpoint(address: loopback, port: portB),
                                   segmentationOffload: offload, receiveOffload: offload)
        let b = try UDPBatchSocket(localPort: portB, localAddress: loopback, remote: UDPEndpoint(address: loopback, port: a.localPort),
                                   segmentationOffload: offload, receiveOffload: offload)
        return (a, b)
    }

    /// Receives until `count` packets are in `batch` or `seconds` pass.
    static func receive(_ socket: UDPBatchSocket, into batch: PacketBatch, count: Int, seconds: Double = 5) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while batch.count < count && Date() < deadline {
            _ = try socket.receive(into: batch, timeout: .milliseconds(200))
        }
    }

    static func packet(_ index: Int, size: Int) -> [UInt8] {
        (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index &* 7) }
    }

    @Test(arguments: [false, true])
    func aBatchOfMixedSizesArrivesInOrderAndIntact(offload: Bool) throws {
        let (a, b) = try Self.pair(offload: offload)
        defer { a.close(); b.close() }
        if offload {
            // This kernel (≥ 5.0) has both; a machine without them would fall back silently,
            // which this test must notice.
            #expect(a.segmentationOffload, "UDP_SEGMENT refused by the kernel")
            #expect(b.receiveOffload, "UDP_GRO refused by the kernel")
        } else {
            #expect(!a.segmentationOffload && !b.receiveOffload)
        }
        // Runs of equal sizes (sent as GSO super-datagrams), a shorter one ending a run, a
        // longer one starting the next, and single bytes.
        let sizes = Array(repeating: 1200, count: 30) + [700] + Array(repeating: 1400, count: 19) + [1, 1, 1472] + Array(repeating: 64, count: 70)
        // Sent in three batches, each received before the next leaves, so that even the default
        // socket buffer of a process without CAP_NET_ADMIN (no SO_RCVBUFFORCE) holds a batch.
        let chunks = [0..<31, 31..<53, 53..<sizes.count]
        let out = PacketBatch(capacity: sizes.count, slotSize: 1500)
        let into = PacketBatch(capacity: sizes.count, slotSize: 1500)
        for chunk in chunks {
            out.removeAll()
            for i in chunk { #expect(out.append(Self.packet(i, size: sizes[i]))) }
            #expect(try a.send(out) == chunk.count)
            try Self.receive(b, into: into, count: chunk.upperBound)
        }
        #expect(into.count == sizes.count, "\(into.count) of \(sizes.count) datagrams arrived: \(b.statistics)")
        for i in 0..<min(into.count, sizes.count) {
            #expect(into.packetBytes(i) == Self.packet(i, size: sizes[i]), "datagram \(i) (\(sizes[i]) bytes) differs")
        }
        let sent = a.statistics, received = b.statistics
        #expect(sent.datagramsSent == sizes.count && sent.dropped == 0, "\(sent)")
        #expect(received.datagramsReceived == sizes.count && received.dropped == 0, "\(received)")
        if offload {
            #expect(sent.sendCalls == chunks.count, "one sendmmsg per batch: \(sent)")
        }
    }

    @Test(arguments: [false, true])
    func aDatagramLargerThanASlotIsDroppedAndTheNextIsIntact(offload: Bool) throws {
        let (a, b) = try Self.pair(offload: offload)
        defer { a.close(); b.close() }
        let out = PacketBatch(capacity: 2, slotSize: 1500)
        #expect(out.append(Self.packet(0, size: 1400)))
        #expect(out.append(Self.packet(1, size: 100)))
        try a.send(out)
        let into = PacketBatch(capacity: 8, slotSize: 1000)
        try Self.receive(b, into: into, count: 1, seconds: 2)
        _ = try b.receive(into: into, timeout: .milliseconds(100))
        #expect(into.count == 1)
        #expect(into.count == 1 && into.packetBytes(0) == Self.packet(1, size: 100))
        #expect(b.statistics.dropped == 1, "\(b.statistics)")
    }

    @Test func aReceiveTimesOutEmptyAndInterruptEndsABlockedOne() throws {
        let (a, b) = try Self.pair(offload: true)
        defer { a.close(); b.close() }
        let batch = PacketBatch(capacity: 4, slotSize: 1500)
        let started = Date()
        #expect(try b.receive(into: batch, timeout: .milliseconds(150)) == 0)
        #expect(Date().timeIntervalSince(started) >= 0.14)

        final class Outcome: Sendable { let value = Mutex<Result<Int, TunnelError>?>(nil) }
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            let blocked = PacketBatch(capacity: 4, slotSize: 1500)
            let result = Result { () throws(TunnelError) -> Int in try b.receive(into: blocked) }
            outcome.value.withLock { $0 = result }
            done.signal()
        }
        thread.start()
        usleep(100_000)
        #expect(outcome.value.withLock { $0 } == nil, "the receive must block while nothing arrives")
        b.interrupt()
        #expect(done.wait(timeout: .now() + 2) == .success, "interrupt() did not end the blocked receive")
        #expect(outcome.value.withLock { $0 } == .failure(.interrupted))
    }

    @Test func aPeerThatIsNotListeningIsNotAnError() throws {
        let port = try Self.freePort()
        let a = try UDPBatchSocket(localPort: 0, localAddress: Self.loopback, remote: UDPEndpoint(address: Self.loopback, port: port))
        defer { a.close() }
        let out = PacketBatch(capacity: 1, slotSize: 1500)
        #expect(out.append(Self.packet(0, size: 100)))
        // The first send draws an ICMP port unreachable; later calls see ECONNREFUSED.
        for _ in 0..<3 {
            _ = try a.send(out)
            usleep(20_000)
        }
        let into = PacketBatch(capacity: 1, slotSize: 1500)
        #expect(try a.receive(into: into, timeout: .milliseconds(50)) == 0)
        #expect(a.statistics.dropped >= 1, "refused datagrams are counted: \(a.statistics)")
    }

    @Test func aLocalAddressOfTheOtherFamilyIsRefused() {
        #expect(throws: TunnelError.self) {
            try UDPBatchSocket(localPort: 0, localAddress: .v6(high: 0, low: 1), remote: UDPEndpoint(address: Self.loopback, port: 9))
        }
    }
}
#endif
