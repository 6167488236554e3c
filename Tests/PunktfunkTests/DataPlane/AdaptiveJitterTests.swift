@testable import Punktfunk
import Testing

/// The adaptive jitter ring: late frames deepen it at once (the head holds back a concealed
/// frame), a quiet stretch makes it shallow again, within targetDepth…maxDepth − 1.
@Suite struct AdaptiveJitterTests {
    func packet(_ s: UInt32) -> AudioPacket { AudioPacket(sequence: s, ptsNanoseconds: UInt64(s) * 5_000_000, opus: [UInt8(s & 0xFF)]) }

    @Test func aLateFrameDeepensTheBufferByOneFrame() {
        var ring = AudioJitterRing(targetDepth: 3, maxDepth: 6, adaptive: true, relaxAfterFrames: 10)
        for s in 0..<3 { ring.insert(packet(UInt32(s))) }
        #expect(ring.next() == .frame(sequence: 0, ptsNanoseconds: 0, opus: [0]))
        // Frame 0 again, after its turn: late. The target grows and the head waits one frame.
        #expect(ring.insert(packet(0)) == .late)
        #expect(ring.currentTarget == 4)
        #expect(ring.next() == .conceal(sequence: 0))
        #expect(ring.next() == .frame(sequence: 1, ptsNanoseconds: 5_000_000, opus: [1]))
        #expect(ring.counters.held == 1 && ring.counters.grown == 1)
        // Never beyond maxDepth − 1.
        for _ in 0..<10 { ring.insert(packet(0)) }
        #expect(ring.currentTarget == 5)
    }

    @Test func aQuietStretchMakesItShallowAgain() {
        var ring = AudioJitterRing(targetDepth: 3, maxDepth: 8, adaptive: true, relaxAfterFrames: 10)
        var next: UInt32 = 0
        func feed(_ n: Int) { for _ in 0..<n { ring.insert(packet(next)); next += 1 } }
        feed(3)
        _ = ring.next()
        ring.insert(packet(0))
        ring.insert(packet(0))
        #expect(ring.currentTarget == 5)
        // Steady: one frame in, one frame out.
        var shrunkAt: [Int] = []
        for step in 0..<40 {
            feed(1)
            _ = ring.next()
            if ring.counters.shrunk > shrunkAt.count { shrunkAt.append(step) }
        }
        #expect(ring.currentTarget == 3, "\(ring.counters)")
        #expect(shrunkAt.count == 2)
        #expect(ring.counters.underruns == 0)
    }

    @Test func withoutAdaptationLateFramesChangeNothing() {
        var ring = AudioJitterRing(targetDepth: 3)
        for s in 0..<3 { ring.insert(packet(UInt32(s))) }
        _ = ring.next()
        #expect(ring.insert(packet(0)) == .late)
        #expect(ring.currentTarget == 3)
        #expect(ring.next() == .frame(sequence: 1, ptsNanoseconds: 5_000_000, opus: [1]))
    }
}
