@testable import Punktfunk
import Testing

/// The opening of a session as bytes in, actions out: no socket, no clock but the one passed in.
struct SessionHandshakeTests {
    static let hello = Hello(mode: StreamMode(width: 1280, height: 720, refreshHz: 60), name: "t")
    static let welcome = HandshakeMessageTests.fullWelcome()

    @Test func helloWelcomeStartAndEightClockRounds() throws {
        var h = SessionHandshake(hello: Self.hello, welcomeTimeoutNs: 5_000_000_000)
        #expect(h.start(now: 0) == [.send(Self.hello.encoded()), .wait(untilNs: 5_000_000_000)])
        #expect(try h.receive(Self.welcome.encoded(), now: 10, realtime: 1000) == [.bindDataSocket(Self.welcome)])
        var actions = h.dataSocketBound(port: 4242, now: 20, realtime: 2000)
        #expect(actions.first == .send(StartMessage(clientUDPPort: 4242).encoded()))
        #expect(actions[1] == .send(ControlMessage.clockProbe(t1: 2000).encoded()))
        // The host is 1 ms ahead; each round trip takes 100 µs.
        var realtime: UInt64 = 2000
        for round in 0..<8 {
            let echo = ControlMessage.clockEcho(t1: realtime, t2: realtime + 1_050_000, t3: realtime + 1_050_000).encoded()
            realtime += 100_000
            actions = try h.receive(echo, now: 30, realtime: realtime)
            if round < 7 {
                #expect(actions == [.send(ControlMessage.clockProbe(t1: realtime).encoded()), .wait(untilNs: 30 + ClockOffsetEstimator.roundTimeoutNs)])
            }
        }
        guard case .established(let w, let samples) = actions.first else { Issue.record("not established: \(actions)"); return }
        #expect(w == Self.welcome)
        #expect(samples.count == 8)
        #expect(samples.allSatisfy { $0.offsetNs == 1_000_000 && $0.rttNs == 100_000 })
        #expect(h.isEstablished)
    }

    @Test func messagesDuringTheClockBatchAreHandedBackAndStaleEchoesIgnored() throws {
        var h = SessionHandshake(hello: Self.hello)
        _ = h.start(now: 0)
        _ = try h.receive(Self.welcome.encoded(), now: 0, realtime: 0)
        _ = h.dataSocketBound(port: 1, now: 0, realtime: 500)
        let other = ControlMessage.bitrateChanged(kbps: 9).encoded()
        #expect(try h.receive(other, now: 1, realtime: 600) == [.unhandled(other), .wait(untilNs: ClockOffsetEstimator.roundTimeoutNs)])
        // An echo for a probe we never sent (or one that already timed out) changes nothing.
        #expect(try h.receive(ControlMessage.clockEcho(t1: 7, t2: 8, t3: 9).encoded(), now: 2, realtime: 700)
                == [.wait(untilNs: ClockOffsetEstimator.roundTimeoutNs)])
    }

    @Test func aSilentHostMeansASharedClockAfterEveryRoundTimesOut() throws {
        var h = SessionHandshake(hello: Self.hello)
        _ = h.start(now: 0)
        _ = try h.receive(Self.welcome.encoded(), now: 0, realtime: 0)
        _ = h.dataSocketBound(port: 1, now: 0, realtime: 0)
        var now: Int64 = 0
        var actions: [SessionHandshake.Action] = []
        for _ in 0..<8 {
            now += ClockOffsetEstimator.roundTimeoutNs
            actions = try h.timedOut(now: now, realtime: UInt64(now))
        }
        #expect(actions == [.established(Self.welcome, [])])
    }

    @Test func noWelcomeOrTheWrongMessageFails() {
        var h = SessionHandshake(hello: Self.hello, welcomeTimeoutNs: 1_000)
        _ = h.start(now: 0)
        #expect(throws: PunktfunkSessionError.timeout(waitingFor: "Welcome", seconds: 1e-6)) { try h.timedOut(now: 2_000, realtime: 0) }
        var g = SessionHandshake(hello: Self.hello)
        _ = g.start(now: 0)
        #expect(throws: PunktfunkSessionError.self) { try g.receive(ControlMessage.requestKeyframe.encoded(), now: 0, realtime: 0) }
        var v = SessionHandshake(hello: Self.hello)
        _ = v.start(now: 0)
        var wrongVersion = Self.welcome.encoded()
        wrongVersion[4] = 9
        #expect(throws: PunktfunkSessionError.wireVersionMismatch(ours: 2, theirs: 9)) { try v.receive(wrongVersion, now: 0, realtime: 0) }
    }
}
