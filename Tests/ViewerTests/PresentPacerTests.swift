import Testing
@testable import Viewer

struct PresentPacerTests {
    @Test func aStreamAtTheDisplaysRateIsShownAtOnceEvenWithJitter() {
        for jitter in [0.0, 0.003, 0.004] {
            var pacer = PresentPacer(rate: 60)
            // 60 pictures a second, arriving alternately early and late by `jitter`.
            for i in 0..<120 {
                let t = Double(i) / 60 + (i % 2 == 0 ? jitter : -jitter)
                #expect(t >= pacer.due, "jitter \(jitter): picture \(i) at \(t) would wait until \(pacer.due)")
                pacer.presented(at: t)
            }
        }
    }

    @Test func aFasterStreamIsShownAtMostOncePerRefresh() {
        var pacer = PresentPacer(rate: 60)
        var shown: [Double] = []
        // 240 pictures a second for one second; each is shown when due, or replaced by the next.
        for i in 0..<240 {
            let t = Double(i) / 240
            if t >= pacer.due {
                pacer.presented(at: t)
                shown.append(t)
            }
        }
        #expect((59...61).contains(shown.count), "\(shown.count) presents in a second")
        for (a, b) in zip(shown.dropFirst(), shown.dropFirst(2)) { #expect(b - a >= 1 / 60 - 1e-9, "\(a) → \(b)") }
    }

    @Test func noRateMeansNoWaiting() {
        var pacer = PresentPacer(rate: nil)
        pacer.presented(at: 1)
        #expect(pacer.due <= 1)
        var zero = PresentPacer(rate: 0)
        zero.presented(at: 5)
        #expect(zero.due <= 5)
    }
}
