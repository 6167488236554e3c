#if os(Linux)
import Foundation
import Glibc
import Testing
@testable import Tunnel

/// `UDPDatagramSocket`'s batches on loopback: one send to several destinations (runs to one
/// destination as UDP GSO super-datagrams with offload), and batch receives that say who sent
/// each datagram (UDP GRO runs split back, each segment with its sender).
@Suite struct UDPDatagramSocketTests {
    static let loopback = IPAddress.v4(0x7F00_0001)

    static func receive(_ socket: UDPDatagramSocket, into batch: PacketBatch, sources: inout [UDPEndpoint], count: Int) throws {
        let deadline = Date().addingTimeInterval(5)
        while batch.count < count && Date() < deadline {
            _ = try socket.receive(into: batch, sources: &sources, timeout: .milliseconds(200))
        }
    }

    @Test(arguments: [false, true])
    func oneBatchReachesTwoPeersInOrderAndEachSaysWhoSentIt(offload: Bool) throws {
        let sender = try UDPDatagramSocket(port: 0, offload: offload)
        let first = try UDPDatagramSocket(port: 0, offload: offload), second = try UDPDatagramSocket(port: 0, offload: offload)
        defer { sender.close(); first.close(); second.close() }
        if offload {
            #expect(sender.segmentationOffload && first.receiveOffload, "this kernel has UDP_SEGMENT and UDP_GRO")
        } else {
            #expect(!sender.segmentationOffload && !first.receiveOffload)
        }
        let toFirst = UDPEndpoint(address: Self.loopback, port: first.localPort)
        let toSecond = UDPEndpoint(address: .v6(high: 0, low: 1), port: second.localPort)   // ::1: the dual-stack socket's other family
        // Runs of one size to one peer (segmented), a shorter one ending a run, peers interleaved.
        var plan: [(UDPEndpoint, Int)] = Array(repeating: (toFirst, 1200), count: 20)
        plan += [(toFirst, 700), (toSecond, 1200), (toSecond, 1200), (toFirst, 1200)]
        plan += Array(repeating: (toSecond, 300), count: 10)
        let batch = PacketBatch(capacity: 64, slotSize: 1500)
        for (index, (_, size)) in plan.enumerated() {
            batch.append((0..<size).map { UInt8(truncatingIfNeeded: $0 &+ index &* 13) })
        }
        #expect(try sender.send(batch, to: plan.map(\.0)) == plan.count)

        for (socket, destination) in [(first, toFirst), (second, toSecond)] {
            let expected = plan.indices.filter { plan[$0].0 == destination }
            let received = PacketBatch(capacity: 64, slotSize: 1500)
            var sources: [UDPEndpoint] = []
            try Self.receive(socket, into: received, sources: &sources, count: expected.count)
            #expect(received.count == expected.count && sources.count == received.count)
            for (k, index) in expected.enumerated() where k < received.count {
                #expect(received.packetBytes(k) == batch.packetBytes(index), "datagram \(index) to \(destination)")
                #expect(sources[k].port == sender.localPort, "the sender's port: \(sources[k])")
            }
            #expect(sources.allSatisfy { $0.address == destination.address }, "the sender seen in the family it was reached by: \(sources)")
        }
    }

    @Test func aDatagramLargerThanASlotIsDroppedAndTheRestArrive() throws {
        let sender = try UDPDatagramSocket(port: 0), receiver = try UDPDatagramSocket(port: 0, offload: true)
        defer { sender.close(); receiver.close() }
        let batch = PacketBatch(capacity: 4, slotSize: 3000)
        for size in [100, 2500, 100] { batch.append([UInt8](repeating: UInt8(size & 0xFF), count: size)) }
        let to = UDPEndpoint(address: Self.loopback, port: receiver.localPort)
        #expect(try sender.send(batch, to: [to, to, to]) == 3)
        let small = PacketBatch(capacity: 8, slotSize: 1500)
        var sources: [UDPEndpoint] = []
        try Self.receive(receiver, into: small, sources: &sources, count: 2)
        #expect(small.count == 2 && (0..<small.count).allSatisfy { small.length(at: $0) == 100 } && sources.count == 2)
    }
}
#endif
