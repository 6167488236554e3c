import Foundation
@testable import Punktfunk
import Testing

/// Mutation fuzzing over recorded datagram streams (the packetizer's output for a few frames):
/// byte flips, hostile header fields, truncation, extension, duplication and reordering. The
/// receiver must never crash, never hold more than its budget or its frame slots, and — when
/// sealed — never deliver a frame that differs from one the host sent. `FARCAST_FUZZ_ITERATIONS`
/// sets the count (default 3000; see docs/punktfunk.md for the longer run).
@Suite(.timeLimit(.minutes(5)))
struct DataPlaneFuzzTests {
    static var iterations: Int { Int(ProcessInfo.processInfo.environment["FARCAST_FUZZ_ITERATIONS"] ?? "") ?? 3000 }
    static let key = try! DatagramKey(cipher: .chaCha20Poly1305, key: Array(repeating: 5, count: 32), salt: [7, 7, 7, 7])
    static let limits = VideoStreamLimits(shardBytes: 256, maxDataShardsPerBlock: 16, maxFrameBytes: 64 << 10, framesInFlight: 8,
                                          memoryBudgetBytes: 256 << 10)

    static func recording(key: DatagramKey?) throws -> (datagrams: [[UInt8]], frames: [[UInt8]]) {
        let p = try VideoPacketizer(key: key, shardBytes: 256, maxDataShardsPerBlock: 16, fecPercent: 25)
        var datagrams: [[UInt8]] = [], frames: [[UInt8]] = []
        for n in 0..<12 {
            let f = SplitMix64.bytes(seed: UInt64(n), count: [0, 100, 256, 4000, 9000, 20000][n % 6])
            frames.append(f)
            datagrams += try p.packetize(f, ptsNanoseconds: UInt64(n) * 10_000_000, probe: n == 7)
        }
        return (datagrams, frames)
    }

    static func mutate(_ d: inout [UInt8], _ rng: inout SplitMix64, headerAt: Int) {
        func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(rng.next() % UInt64(n)) }
        guard !d.isEmpty else { return }
        switch below(8) {
        case 0: d[below(d.count)] ^= UInt8(1 << below(8))
        case 1: d = Array(d.prefix(below(d.count)))
        case 2: d += SplitMix64.bytes(seed: rng.next(), count: below(300))
        case 3 where d.count >= headerAt + 40:    // a header field set to an extreme
            let offsets = [16, 24, 26, 28, 30, 32, 34, 36, 38]
            let o = headerAt + offsets[below(offsets.count)]
            let v: [UInt8] = [[0, 0], [0xFF, 0xFF], [1, 0], [0, 0x80]][below(4)]
            d[o] = v[0]
            if o + 1 < d.count { d[o + 1] = v[1] }
        case 4: for _ in 0..<(1 + below(16)) { d[below(d.count)] = UInt8(truncatingIfNeeded: rng.next()) }
        case 5: d = []
        default: d[below(d.count)] = 0
        }
    }

    @Test(arguments: [true, false])
    func mutatedDatagramsNeverBreakTheReceiver(sealed: Bool) throws {
        let recording = try Self.recording(key: sealed ? Self.key : nil)
        var rng = SplitMix64(seed: sealed ? 1 : 2)
        var receiver = try VideoReceiver(key: sealed ? Self.key : nil, limits: Self.limits)
        var delivered = 0
        var clock: UInt64 = 0
        for iteration in 0..<Self.iterations {
            if iteration % 400 == 0 { receiver = try VideoReceiver(key: sealed ? Self.key : nil, limits: Self.limits) }
            var d = recording.datagrams[Int(rng.next() % UInt64(recording.datagrams.count))]
            if rng.next() % 4 != 0 { Self.mutate(&d, &rng, headerAt: sealed ? 8 : 0) }
            clock += rng.next() % 3_000_000
            for event in receiver.receive(d, at: clock) {
                if case .frame(let f) = event {
                    delivered += 1
                    if sealed {
                        let known = recording.frames.contains(f.data)
                        #expect(known, "a sealed stream delivered bytes the host never sent")
                    }
                    #expect(f.data.count <= Self.limits.maxFrameBytes)
                }
            }
            #expect(receiver.bufferedBytes <= Self.limits.memoryBudgetBytes)
            #expect(receiver.framesInFlight <= 2 * Self.limits.framesInFlight)
        }
        _ = delivered
    }

    /// The unmodified recording, fed in random order with duplicates, delivers every frame exactly.
    @Test func theRecordingItselfDeliversEveryFrame() throws {
        let recording = try Self.recording(key: Self.key)
        let receiver = try VideoReceiver(key: Self.key, limits: Self.limits)
        var events: [VideoEvent] = []
        for d in recording.datagrams { events += receiver.receive(d, at: 0) }
        let frames = events.compactMap { if case .frame(let f) = $0 { return f.data } else { return nil } }
        #expect(frames.count == 11)
        #expect(events.contains { if case .probe = $0 { return true } else { return false } })
        let expected = recording.frames.enumerated().filter { $0.offset != 7 }.map(\.element)
        #expect(frames == expected)
    }
}
