@testable import Tunnel
import Testing

/// Mutation fuzzing of both offload directions: virtio-net headers and packets with random
/// bytes changed, cut or grown, through the splitter, and random batches through the GRO table,
/// as TUN packets and as TAP frames (an Ethernet header in front, which mutations hit too).
/// Nothing may crash, write outside a slot, or disturb what the batch already held; the table's
/// plan must write every packet of the batch exactly once, in writes no longer than 64 KiB. Deterministic seeds; a longer run:
/// `FARCAST_FUZZ_ROUNDS=2000000 swift test --filter OffloadFuzzTests`.
@Suite struct OffloadFuzzTests {
    static let rounds = Int(ProcessInfo.processInfo.environment["FARCAST_FUZZ_ROUNDS"] ?? "") ?? 8_000

    static let ethernetHeader: [UInt8] = [2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00]

    @Test(arguments: [false, true])
    func mutatedSuperPacketsNeverCrashTheSplitter(tap: Bool) {
        let vectors = OffloadVectors.shared.split
        guard !vectors.isEmpty else { Issue.record("vectors missing"); return }
        var rng = SplitMix(seed: 0x5eed)
        let batch = PacketBatch(capacity: 48, slotSize: 1500)
        let marker: [UInt8] = [0x45, 0, 0, 20] + [UInt8](repeating: 0xab, count: 16)
        var accepted = 0
        for round in 0..<Self.rounds {
            let vector = vectors[round % vectors.count]
            var header = [UInt8](hex: vector.header)
            var packet = [UInt8](hex: vector.packet)
            if tap {
                packet = Self.ethernetHeader + packet
                header[6] = header[6] &+ 14      // checksum start counts the Ethernet header
            }
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                switch Int.random(in: 0..<6, using: &rng) {
                case 0: header[Int.random(in: 0..<10, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                case 1: packet[Int.random(in: 0..<packet.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
                case 2: packet = Array(packet.prefix(Int.random(in: 0...packet.count, using: &rng)))
                case 3: packet += (0..<Int.random(in: 1...3000, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                case 4: header[4] = UInt8.random(in: 0...255, using: &rng); header[5] = UInt8.random(in: 0...8, using: &rng)
                default: header[6] = UInt8.random(in: 0...80, using: &rng); header[7] = 0
                }
                if packet.isEmpty { packet = [0x45] }
            }
            batch.removeAll()
            batch.append(marker)
            let parsed = header.withUnsafeBytes { VirtioNetHeader($0) }!
            do {
                let n = try packet.withUnsafeBytes { raw in
                    try GSOSplitter.split(raw, header: parsed, linkLayer: tap ? .ethernet : .none, into: batch)
                }
                accepted += 1
                #expect(batch.count == 1 + n)
                for i in 1..<batch.count { #expect(batch.length(at: i) <= batch.slotSize) }
            } catch {
                #expect(batch.count == 1, "a refused packet must add nothing")
            }
            #expect(batch.packetBytes(0) == marker, "round \(round): the packet before was disturbed")
        }
        #expect(accepted > 0)
    }

    @Test(arguments: [false, true])
    func randomBatchesNeverCrashTheCoalescer(tap: Bool) {
        let pool = OffloadVectors.shared.coalesce.flatMap { $0.packets.map { (tap ? Self.ethernetHeader : []) + [UInt8](hex: $0) } }
        guard !pool.isEmpty else { Issue.record("vectors missing"); return }
        var rng = SplitMix(seed: 0xc0a1)
        let table = GROTable(capacity: 32, linkHeaderLength: tap ? 14 : 0)
        let batch = PacketBatch(capacity: 32, slotSize: 2000)
        for _ in 0..<(Self.rounds / 10) {
            batch.removeAll()
            var inputs: [[UInt8]] = []
            for _ in 0..<Int.random(in: 1...32, using: &rng) {
                var p = pool[Int.random(in: 0..<pool.count, using: &rng)]
                if Int.random(in: 0..<3, using: &rng) == 0 {
                    for _ in 0..<Int.random(in: 1...3, using: &rng) { p[Int.random(in: 0..<min(p.count, 74), using: &rng)] = UInt8.random(in: 0...255, using: &rng) }
                }
                if Int.random(in: 0..<8, using: &rng) == 0 { p = Array(p.prefix(Int.random(in: 1...p.count, using: &rng))) }
                inputs.append(p)
                batch.append(p)
            }
            table.udpEnabled = Bool.random(using: &rng)
            let writes = table.plan(batch)
            var segments = 0
            var iovecs = 0
            for w in 0..<writes {
                let write = table.write(w)
                segments += write.segments
                iovecs += write.iovecCount
                #expect(write.byteCount <= 10 + (tap ? 14 : 0) + 65535)
                #expect(write.iovecCount == write.segments)
            }
            #expect(segments == inputs.count, "every packet is written exactly once")
            #expect(iovecs == inputs.count)
        }
    }
}

import Foundation
