import Sendspin
import Testing

/// The supervision rule with a manual clock (µs): what ends a session and when the
/// once-a-second work is due.
struct PlayerSupervisorTests {
    private func run(_ supervisor: inout PlayerSupervisor, from: Int64, to: Int64, openingStep: (Int64) -> String? = { _ in nil },
                     stopAt: Int64? = nil, reporting: Bool = true) -> [(Int64, PlayerSupervisor.Action)] {
        var seen: [(Int64, PlayerSupervisor.Action)] = []
        var now = from
        while now <= to {
            let stop = stopAt.flatMap { now >= $0 ? "user_request" : nil }
            for action in supervisor.check(now: now, openingStep: openingStep(now), stopRequest: stop, outputFailed: false, reporting: reporting) {
                seen.append((now, action))
            }
            now += 50_000
        }
        return seen
    }

    @Test func theDurationCountsFromTheOpeningForOneSession() {
        // Opens 3 s after the start; 5 s of playing end at 8 s, not at 5 s.
        var supervisor = PlayerSupervisor(started: 0, duration: .seconds(5), openDeadline: 10_000_000, countsDurationFromOpen: true)
        let seen = run(&supervisor, from: 0, to: 20_000_000, openingStep: { $0 < 3_000_000 ? "server/hello" : nil })
        let ends = seen.filter { if case .end = $0.1 { true } else { false } }
        #expect(ends.map(\.0) == [8_000_000])
        #expect(ends.first?.1 == .end(.durationReached))
        #expect(seen.last?.0 == 8_000_000, "nothing after the end")
    }

    @Test func aListenersDurationCountsFromTheStart() {
        var supervisor = PlayerSupervisor(started: 1_000_000, duration: .milliseconds(2500), countsDurationFromOpen: false)
        let seen = run(&supervisor, from: 1_000_000, to: 10_000_000)
        #expect(seen.last.map { [$0.0] } == [3_500_000])
        #expect(seen.last?.1 == .end(.durationReached))
    }

    @Test func anOpeningThatTakesTooLongTimesOutNamingTheStep() {
        var supervisor = PlayerSupervisor(started: 0, duration: nil, openDeadline: 2_000_000, countsDurationFromOpen: true)
        let seen = run(&supervisor, from: 0, to: 5_000_000, openingStep: { _ in "the Noise handshake" })
        #expect(seen.last.map { [$0.0] } == [2_000_000])
        #expect(seen.last?.1 == .end(.timedOut(waitingFor: "the Noise handshake")))
        #expect(!seen.contains { $0.1 == .reportTelemetry }, "no telemetry before the session is open")
    }

    @Test func aStopRequestAndAFailedOutputEndAtOnce() {
        var supervisor = PlayerSupervisor(started: 0, duration: .seconds(60), countsDurationFromOpen: true)
        let seen = run(&supervisor, from: 0, to: 5_000_000, stopAt: 1_230_000)
        #expect(seen.last.map { [$0.0] } == [1_250_000])
        #expect(seen.last?.1 == .end(.stopped(reason: "user_request")))

        var failing = PlayerSupervisor(started: 0, duration: nil, countsDurationFromOpen: false)
        #expect(failing.check(now: 10, openingStep: nil, stopRequest: nil, outputFailed: true, reporting: true) == [.end(.stopped(reason: "shutdown"))])
        #expect(failing.check(now: 20, openingStep: nil, stopRequest: nil, outputFailed: true, reporting: true) == [])
    }

    @Test func onceASecondTelemetryAndOffsetSamplesAfterTenSeconds() {
        var supervisor = PlayerSupervisor(started: 0, duration: nil, countsDurationFromOpen: true)
        let seen = run(&supervisor, from: 0, to: 12_000_000)
        let telemetry = seen.filter { $0.1 == .reportTelemetry }.map(\.0)
        #expect(telemetry == (1...12).map { Int64($0) * 1_000_000 })
        let samples = seen.filter { $0.1 == .sampleOffset }.map(\.0)
        #expect(samples == [10_000_000, 11_000_000, 12_000_000])

        var quiet = PlayerSupervisor(started: 0, duration: nil, countsDurationFromOpen: true)
        #expect(!run(&quiet, from: 0, to: 3_000_000, reporting: false).contains { $0.1 == .reportTelemetry })
    }

    @Test func itSleepsUntilTheNextThingDueOnceOpen() {
        var supervisor = PlayerSupervisor(started: 0, duration: .milliseconds(1_100), openDeadline: 10_000_000, countsDurationFromOpen: true)
        // Opening: polled, since what the session waits for is not announced.
        _ = supervisor.check(now: 0, openingStep: "server/hello", stopRequest: nil, outputFailed: false, reporting: true)
        #expect(supervisor.nextCheck(after: 0) == 50_000)
        // Open at 0.2 s: the next check is the once-a-second work at 1 s (nothing sooner: a stop
        // request or a failing output wakes the supervisor), then the duration's end at 1.3 s.
        _ = supervisor.check(now: 200_000, openingStep: nil, stopRequest: nil, outputFailed: false, reporting: true)
        #expect(supervisor.nextCheck(after: 200_000) == 1_000_000)
        #expect(supervisor.nextCheck(after: 900_000) == 1_000_000)
        #expect(supervisor.check(now: 1_000_000, openingStep: nil, stopRequest: nil, outputFailed: false, reporting: true) == [.reportTelemetry])
        #expect(supervisor.nextCheck(after: 1_200_000) == 1_300_000)
        #expect(supervisor.check(now: 1_300_000, openingStep: nil, stopRequest: nil, outputFailed: false, reporting: true) == [.end(.durationReached)])
        // Never in the past.
        #expect(supervisor.nextCheck(after: 5_000_000) >= 5_000_000)
    }
}
