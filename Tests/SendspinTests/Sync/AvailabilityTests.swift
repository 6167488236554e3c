import Sendspin
import Testing

/// When the player says it can play: never before the filter converges (spec §9), and not
/// withdrawn for a transient error once it has (the jitter drop-out).
struct AvailabilityTests {
    @Test func notAvailableBeforeTheFilterConverges() {
        var a = Availability()
        var changed = a.update(synchronized: false, errorUs: nil)
        #expect(!changed)
        changed = a.update(synchronized: true, errorUs: 12_000)
        #expect(!changed && !a.available)
        changed = a.update(synchronized: true, errorUs: 4_000)
        #expect(changed && a.available)
    }

    @Test func aTransientErrorAfterConvergenceKeepsThePlayerAvailable() {
        var a = Availability()
        _ = a.update(synchronized: true, errorUs: 800)
        // 20 ± 10 ms of jitter: the error swings far past the threshold and back.
        for error in [6_000, 14_000, 9_000, 3_000, 22_000, 1_000] as [Int64] {
            let changed = a.update(synchronized: true, errorUs: error)
            #expect(!changed && a.available)
        }
        #expect(a.withdrawals == 0)
    }

    @Test func aFilterThatLosesSynchronisationWithdrawsAndCountsIt() {
        var a = Availability()
        _ = a.update(synchronized: true, errorUs: 800)
        var changed = a.update(synchronized: false, errorUs: nil)
        #expect(changed && !a.available && a.withdrawals == 1)
        // It comes back only once converged again.
        changed = a.update(synchronized: true, errorUs: 7_000)
        #expect(!changed)
        changed = a.update(synchronized: true, errorUs: 2_000)
        #expect(changed && a.available)
    }
}
