@testable import Punktfunk
import Testing

struct ClockOffsetEstimatorTests {
    @Test func sampleArithmeticFollowsTheNotes() {
        // Host 5 ms ahead, 1 ms each way, 0.1 ms in the host.
        let t1: UInt64 = 1_000_000_000
        let s = ClockSample(t1: t1, t2: t1 + 1_000_000 + 5_000_000, t3: t1 + 1_100_000 + 5_000_000, t4: t1 + 2_100_000)
        #expect(s.offsetNs == 5_000_000)
        #expect(s.rttNs == 2_000_000)
        // Host behind the client: negative offset, no wrap-around.
        let b = ClockSample(t1: t1, t2: t1 - 3_000_000 + 500, t3: t1 - 3_000_000 + 600, t4: t1 + 1100)
        #expect(b.offsetNs == -3_000_000)
        #expect(b.rttNs == 1000)
    }

    @Test func theSmallestRTTSampleWins() {
        var e = ClockOffsetEstimator()
        let batch = [ClockSample(offsetNs: 900, rttNs: 5000), ClockSample(offsetNs: 100, rttNs: 800),
                     ClockSample(offsetNs: 300, rttNs: 1200), ClockSample(offsetNs: 7, rttNs: -5)]
        do { let accepted = e.apply(batch: batch); #expect(accepted) }
        #expect(e.offsetNs == 100)
        #expect(e.rttNs == 800)
    }

    @Test func noAnswerMeansASharedClock() {
        var e = ClockOffsetEstimator()
        do { let accepted = e.apply(batch: []); #expect(!accepted) }
        #expect(e.offsetNs == 0)
    }

    @Test func resyncAcceptsWithinLimitAndFallsBackAfterThreeRejections() {
        var e = ClockOffsetEstimator()
        e.apply(batch: [ClockSample(offsetNs: 10, rttNs: 4_000_000)])
        // Limit = max(2 ms, 1.5 × 4 ms) = 6 ms.
        do { let accepted = e.apply(batch: [ClockSample(offsetNs: 20, rttNs: 6_000_000)]); #expect(accepted) }
        #expect(e.offsetNs == 20)
        do { let accepted = e.apply(batch: [ClockSample(offsetNs: 30, rttNs: 9_000_000)]); #expect(!accepted) }
        do { let accepted = e.apply(batch: [ClockSample(offsetNs: 31, rttNs: 7_000_000)]); #expect(!accepted) }
        #expect(e.offsetNs == 20)
        do { let accepted = e.apply(batch: [ClockSample(offsetNs: 32, rttNs: 8_000_000)]); #expect(accepted) }
        #expect(e.offsetNs == 31)  // the best of the three rejected batches
        // The 2 ms floor: a 0.1 ms session still accepts a 1.9 ms batch.
        var fast = ClockOffsetEstimator()
        fast.apply(batch: [ClockSample(offsetNs: 1, rttNs: 100_000)])
        do { let accepted = fast.apply(batch: [ClockSample(offsetNs: 2, rttNs: 1_900_000)]); #expect(accepted) }
    }

    @Test func latencyAddsTheOffset() {
        var e = ClockOffsetEstimator()
        e.apply(batch: [ClockSample(offsetNs: -2_000_000, rttNs: 10)])
        // pts on the host clock (2 ms behind), received 5 ms later in client time.
        #expect(e.latencyNs(ptsNs: 1_000_000_000, receivedNs: 1_007_000_000) == 5_000_000)
    }
}
