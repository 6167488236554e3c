import FarcastSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite struct MonotonicClockTests {
    @Test(arguments: ClockSource.allCases)
    func systemClockNeverGoesBackwards(source: ClockSource) {
        let clock = SystemClock(source)
        var last = clock.now()
        #expect(last.nanoseconds > 0)
        for _ in 0..<10_000 {
            let next = clock.now()
            #expect(next >= last)
            last = next
        }
    }

    @Test(arguments: ClockSource.allCases)
    func systemClockAdvancesWithRealTime(source: ClockSource) {
        let clock = SystemClock(source)
        let start = clock.now()
        usleep(20_000)
        let elapsed = clock.now().nanoseconds(since: start)
        // Slept 20 ms; allow generous scheduling slack above, none below.
        #expect(elapsed >= 19_000_000)
        #expect(elapsed < 2_000_000_000)
    }

    @Test func manualClockMovesOnlyWhenTold() {
        let clock = ManualClock(start: MonotonicInstant(microseconds: 5))
        #expect(clock.now().microseconds == 5)
        #expect(clock.now().microseconds == 5)
        clock.advance(byMicroseconds: 1_000)
        #expect(clock.now().nanoseconds == 1_005_000)
    }

    @Test func instantArithmetic() {
        let a = MonotonicInstant(nanoseconds: 1_500)
        let b = a.advanced(byNanoseconds: 2_500)
        #expect(b.nanoseconds(since: a) == 2_500)
        #expect(a.nanoseconds(since: b) == -2_500)
        #expect(b.microseconds == 4)
        #expect(a < b)
    }
}
