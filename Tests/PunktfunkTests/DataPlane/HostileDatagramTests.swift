@testable import Punktfunk
import Testing

/// Hostile and broken datagrams: truncated, lying lengths, k/m out of range, odd or oversize
/// shard_bytes, frame_bytes and block_count that would size huge buffers. Each is a counted drop
/// with a reason, never a crash, and the receiver's memory never exceeds its budget. The headers
/// are sealed with the session key (a broken or hostile host can send anything it can seal).
@Suite struct HostileDatagramTests {
    static let key = try! DatagramKey(cipher: .aes128GCM, key: Array(repeating: 3, count: 16), salt: [1, 1, 1, 1])
    static let limits = VideoStreamLimits(shardBytes: 1408, maxDataShardsPerBlock: 200, maxFrameBytes: 4 << 20)

    final class HostileHost {
        let crypto = try! DatagramCrypto(key: HostileDatagramTests.key, direction: .hostToClient, sealing: true)
        var sequence: UInt64 = 0
        func seal(_ plaintext: [UInt8]) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: 8) + plaintext + [UInt8](repeating: 0, count: 16)
            out.withUnsafeMutableBytes { crypto.seal(sequence: sequence, plaintextLength: plaintext.count, in: $0) }
            sequence += 1
            return out
        }
        func datagram(_ h: VideoHeader, payload: Int? = nil) -> [UInt8] {
            seal(h.bytes + [UInt8](repeating: 0xAB, count: payload ?? Int(h.shardBytes)))
        }
    }

    /// A valid single-shard frame's header, to bend one field at a time.
    static func valid(frame: UInt32 = 0) -> VideoHeader {
        VideoHeader(frameIndex: frame, frameBytes: 1000, blockCount: 1, dataShards: 1, recoveryShards: 1, shardIndex: 0,
                    shardBytes: 1408, fecScheme: 1, flags: [.picture])
    }

    static let lies: [(String, @Sendable (inout VideoHeader) -> Void)] = [
        ("odd shard_bytes", { $0.shardBytes = 1407 }),
        ("oversize shard_bytes", { $0.shardBytes = 65535 }),
        ("zero shard_bytes", { $0.shardBytes = 0 }),
        ("no data shards", { $0.dataShards = 0 }),
        ("k above K", { $0.dataShards = 201; $0.frameBytes = 201 * 1408 }),
        ("m above the limit", { $0.recoveryShards = 4000 }),
        ("shard index past k + m", { $0.shardIndex = 2 }),
        ("zero blocks", { $0.blockCount = 0 }),
        ("65535 blocks", { $0.blockCount = 65535 }),
        ("block index past the count", { $0.blockIndex = 1 }),
        ("frame_bytes 4 GiB", { $0.frameBytes = .max }),
        ("frame_bytes beyond the limit", { $0.frameBytes = (4 << 20) + 1 }),
        ("frame_bytes needing more blocks", { $0.frameBytes = 201 * 1408 }),
        ("k disagreeing with frame_bytes", { $0.dataShards = 2 }),
        ("GF(2^8) FEC scheme", { $0.fecScheme = 0 }),
        ("bad magic", { _ in }),
    ]

    @Test(arguments: lies.indices)
    func aLyingHeaderIsACountedDrop(index: Int) throws {
        let (name, bend) = Self.lies[index]
        let host = HostileHost()
        let receiver = try VideoReceiver(key: Self.key, limits: Self.limits)
        var h = Self.valid()
        bend(&h)
        var datagram = host.datagram(h, payload: 1408)
        if name == "bad magic" {
            var plain = h.bytes + [UInt8](repeating: 0, count: 1408)
            plain[36] = 0x42
            datagram = host.seal(plain)
        }
        let events = receiver.receive(datagram, at: 0)
        #expect(events.isEmpty, "\(name)")
        #expect(receiver.counters.malformed == 1, "\(name)")
        #expect(receiver.lastRefusal != nil, "\(name)")
        #expect(receiver.bufferedBytes == 0, "\(name)")
        // The refusal reads as a sentence, not a type dump.
        let text = receiver.lastRefusal.map { String(describing: $0) } ?? ""
        #expect(!text.contains("DataPlaneError"), "\(name): \(text)")
    }

    @Test func aShardShorterThanItsHeaderSaysIsRefused() throws {
        let host = HostileHost()
        let receiver = try VideoReceiver(key: Self.key, limits: Self.limits)
        _ = receiver.receive(host.datagram(Self.valid(), payload: 1000), at: 0)
        #expect(receiver.counters.malformed == 1)
        #expect(receiver.lastRefusal == .truncated(what: "video shard", needed: 1408, available: 1000))
    }

    @Test func truncatedAndOversizeDatagramsAreRefusedAtEveryLength() throws {
        let host = HostileHost()
        let good = host.datagram(Self.valid())
        let receiver = try VideoReceiver(key: Self.key, limits: Self.limits)
        for length in 0..<good.count { _ = receiver.receive(Array(good.prefix(length)), at: 0) }
        _ = receiver.receive(good + [UInt8](repeating: 0, count: 9216), at: 0)
        #expect(receiver.counters.framesCompleted == 0)
        #expect(receiver.counters.malformed + receiver.counters.authenticationFailed == UInt64(good.count + 1))
        // The intact datagram still opens afterwards (the failures did not poison the replay window).
        #expect(receiver.receive(good, at: 0).count == 1)
    }

    @Test func unsealedTruncationsAreRefusedToo() throws {
        let receiver = try VideoReceiver(key: nil, limits: Self.limits)
        let good = Self.valid().bytes + [UInt8](repeating: 1, count: 1408)
        for length in 0..<good.count { _ = receiver.receive(Array(good.prefix(length)), at: 0) }
        #expect(receiver.counters.malformed == UInt64(good.count))
        #expect(receiver.receive(good, at: 0).count == 1)
    }

    @Test func frameBuffersNeverOutgrowTheBudget() throws {
        // Each datagram opens a new largest-size frame (4 MiB) and never finishes it.
        let limits = VideoStreamLimits(shardBytes: 1408, maxDataShardsPerBlock: 200, maxFrameBytes: 4 << 20, framesInFlight: 64,
                                       memoryBudgetBytes: 10 << 20)
        let host = HostileHost()
        let receiver = try VideoReceiver(key: Self.key, limits: limits)
        var peak = 0
        for n in 0..<200 {
            let totalData = (4 << 20) / 1408 + 1
            let blocks = (totalData + 199) / 200
            let h = VideoHeader(frameIndex: UInt32(n), frameBytes: 4 << 20, blockIndex: 0, blockCount: UInt16(blocks), dataShards: 200,
                                recoveryShards: 40, shardIndex: 0, shardBytes: 1408, fecScheme: 1)
            _ = receiver.receive(host.datagram(h), at: 0)
            peak = max(peak, receiver.bufferedBytes)
        }
        #expect(peak <= 10 << 20)
        #expect(receiver.counters.overBudget > 0)
        #expect(receiver.counters.malformed == 0)
    }

    @Test func aBlockThatChangesItsGeometryMidFrameIsRefused() throws {
        let host = HostileHost()
        let receiver = try VideoReceiver(key: Self.key, limits: Self.limits)
        var h = VideoHeader(frameIndex: 0, frameBytes: 5000, blockCount: 1, dataShards: 4, recoveryShards: 2, shardIndex: 0,
                            shardBytes: 1408, fecScheme: 1)
        _ = receiver.receive(host.datagram(h), at: 0)
        h.recoveryShards = 3          // same block, different m
        h.shardIndex = 6
        _ = receiver.receive(host.datagram(h), at: 0)
        #expect(receiver.counters.malformed == 1)
        h = VideoHeader(frameIndex: 0, frameBytes: 4300, blockCount: 1, dataShards: 4, recoveryShards: 2, shardIndex: 1,
                        shardBytes: 1408, fecScheme: 1)   // same frame, different frame_bytes
        _ = receiver.receive(host.datagram(h), at: 0)
        #expect(receiver.counters.malformed == 2)
    }

    @Test func unusableLimitsFailAtSetup() {
        #expect(throws: DataPlaneError.self) { try VideoReceiver(key: nil, limits: VideoStreamLimits(shardBytes: 1407)) }
        #expect(throws: DataPlaneError.self) { try VideoReceiver(key: nil, limits: VideoStreamLimits(shardBytes: 9200)) }
        #expect(throws: DataPlaneError.self) { try VideoReceiver(key: nil, limits: VideoStreamLimits(maxDataShardsPerBlock: 0)) }
        #expect(throws: DataPlaneError.self) { try VideoReceiver(key: nil, limits: VideoStreamLimits(maxFrameBytes: 1 << 31)) }
        #expect(throws: DataPlaneError.self) { try VideoReceiver(key: nil, limits: VideoStreamLimits(framesInFlight: 0)) }
    }
}
