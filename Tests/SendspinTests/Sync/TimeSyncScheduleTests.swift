@testable import Sendspin
import Testing

/// The client/time rule without a clock: which exchange of a burst feeds the filter, and the
/// pauses between bursts.
struct TimeSyncScheduleTests {
    /// An exchange with a given round trip (µs) and server holding time, offset 0.
    static func exchange(at t1: Int64, roundTrip: Int64, holding: Int64 = 10) -> TimeSyncSchedule.Exchange {
        let oneWay = (roundTrip - holding) / 2
        return .init(t1: t1, t2: t1 + oneWay, t3: t1 + oneWay + holding, t4: t1 + roundTrip)
    }

    @Test func theExchangeWithTheSmallestMaxErrorOfEachBurstIsChosen() {
        var schedule = TimeSyncSchedule(burstSize: 4)
        let trips: [Int64] = [900, 310, 2500, 450]
        for (i, trip) in trips.enumerated() {
            #expect(schedule.wantsExchange)
            schedule.record(Self.exchange(at: Int64(i) * 10_000, roundTrip: trip))
        }
        #expect(!schedule.wantsExchange, "a burst ends after its size")
        let (chosen, _) = schedule.endBurst()
        #expect(chosen == Self.exchange(at: 10_000, roundTrip: 310))
        // The next burst starts empty: its own best wins even when worse than the last burst's.
        #expect(schedule.wantsExchange)
        schedule.record(Self.exchange(at: 50_000, roundTrip: 5000))
        #expect(schedule.endBurst().chosen == Self.exchange(at: 50_000, roundTrip: 5000))
    }

    @Test func aBurstWithNoAnswerChoosesNothingAndDoesNotCount() {
        var schedule = TimeSyncSchedule(burstSize: 8)
        let (chosen, pause) = schedule.endBurst()
        #expect(chosen == nil)
        #expect(pause == 20)
        #expect(schedule.burstsDone == 0)
    }

    @Test func twoBurstsBackToBackThenEveryHalfSecondForTenSecondsThenEveryTwo() {
        var schedule = TimeSyncSchedule()
        let pauses = (0..<25).map { i in
            schedule.record(Self.exchange(at: Int64(i) * 1_000_000, roundTrip: 300))
            return schedule.endBurst().pauseMs
        }
        #expect(pauses[0] == 20)
        #expect(pauses[1...20].allSatisfy { $0 == 500 }, "\(pauses)")
        #expect(pauses[21...].allSatisfy { $0 == 2000 }, "\(pauses)")
    }

    /// A server that stalls at the start (its answers time out): however many bursts go
    /// unanswered, the first two it answers still run back to back, so the clock is
    /// synchronized moments after the stall instead of 500 ms later.
    @Test func unansweredBurstsKeepTheQuickStartForTheFirstTwoAnswered() {
        var schedule = TimeSyncSchedule(burstSize: 4)
        for _ in 0..<3 { #expect(schedule.endBurst().pauseMs == 20) }
        schedule.record(Self.exchange(at: 3_000_000, roundTrip: 400))
        let first = schedule.endBurst()
        #expect(first.chosen != nil && first.pauseMs == 20)
        schedule.record(Self.exchange(at: 3_020_000, roundTrip: 400))
        #expect(schedule.endBurst().pauseMs == 500)
        #expect(schedule.burstsDone == 2)
    }

    @Test func aBurstSizeBelowOneStillExchangesOnce() {
        var schedule = TimeSyncSchedule(burstSize: 0)
        #expect(schedule.wantsExchange)
        schedule.record(Self.exchange(at: 0, roundTrip: 100))
        #expect(!schedule.wantsExchange)
    }
}
