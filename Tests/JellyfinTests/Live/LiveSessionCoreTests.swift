import FarcastSupport
import Testing
@testable import Jellyfin

struct LiveSessionCoreTests {
    func at(_ seconds: Double) -> MonotonicInstant { MonotonicInstant(nanoseconds: Int64(seconds * 1e9)) }
    let keepAlive = LiveSessionCore.Action.send(LiveSessionCore.keepAliveMessage)

    @Test func subscribesToSessionsOnConnect() {
        var core = LiveSessionCore()
        #expect(core.connected(at: at(0)) == [.send(#"{"MessageType":"SessionsStart","Data":"0,1500"}"#)])
        var quiet = LiveSessionCore(options: .init(subscribeToSessions: false))
        #expect(quiet.connected(at: at(0)).isEmpty)
    }

    @Test func sendsNoKeepAliveUntilTheServerAsks() {
        var core = LiveSessionCore(options: .init(subscribeToSessions: false))
        _ = core.connected(at: at(0))
        #expect(core.tick(at: at(100)).isEmpty)
        #expect(core.nextDeadline == nil)
    }

    @Test func keepsAliveAtHalfTheForcedPeriod() {
        var core = LiveSessionCore(options: .init(subscribeToSessions: false))
        _ = core.connected(at: at(0))
        let actions = core.received(SocketMessageTests.forceKeepAlive, at: at(1))
        #expect(actions == [keepAlive, .deliver(.forceKeepAlive(seconds: 60))])
        #expect(core.nextDeadline == at(31))
        #expect(core.tick(at: at(30.9)).isEmpty)
        #expect(core.tick(at: at(31)) == [keepAlive])
        #expect(core.tick(at: at(31.5)).isEmpty)
        // The server answers each KeepAlive; hearing it keeps the connection fresh.
        #expect(core.received(#"{"MessageType":"KeepAlive"}"#, at: at(31.1)) == [.deliver(.keepAlive)])
        #expect(core.tick(at: at(61)) == [keepAlive])
    }

    @Test func aLongStallSendsOneKeepAliveNotABurst() {
        var core = LiveSessionCore(options: .init(subscribeToSessions: false))
        _ = core.connected(at: at(0))
        _ = core.received(SocketMessageTests.forceKeepAlive, at: at(0))
        _ = core.received(#"{"MessageType":"KeepAlive"}"#, at: at(100))
        #expect(core.tick(at: at(100)) == [keepAlive])
        #expect(core.tick(at: at(100)).isEmpty)
        #expect(core.nextDeadline == at(130))
    }

    @Test func aSilentConnectionIsDeclaredStale() {
        var core = LiveSessionCore(options: .init(subscribeToSessions: false))
        _ = core.connected(at: at(0))
        _ = core.received(#"{"MessageType":"ForceKeepAlive","Data":10}"#, at: at(0))
        #expect(core.tick(at: at(20)).contains(keepAlive))
        #expect(core.tick(at: at(25.1)) == [.closeStale])
    }

    @Test func aHostileTinyPeriodCannotSpin() {
        var core = LiveSessionCore(options: .init(subscribeToSessions: false))
        _ = core.connected(at: at(0))
        _ = core.received(#"{"MessageType":"ForceKeepAlive","Data":1}"#, at: at(0))
        #expect(core.keepAliveInterval == 1_000_000_000)
        _ = core.received(#"{"MessageType":"ForceKeepAlive","Data":0}"#, at: at(0))
        #expect(core.keepAliveInterval == 1_000_000_000)
    }

    @Test func backOffDoublesToTheCapAndResetsAfterAGoodConnection() {
        var core = LiveSessionCore(options: .init(initialBackoff: .seconds(1), maxBackoff: .seconds(30)))
        let delays = (0..<7).map { _ in core.disconnected() }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(30), .seconds(30)])
        _ = core.connected(at: at(0))
        #expect(core.disconnected() == .seconds(30), "a connection that heard nothing does not reset")
        _ = core.connected(at: at(0))
        _ = core.received(#"{"MessageType":"KeepAlive"}"#, at: at(1))
        #expect(core.disconnected() == .seconds(1))
    }

    @Test func badMessagesAreReportedAndTheRestDelivered() {
        var core = LiveSessionCore(options: .init(subscribeToSessions: false))
        _ = core.connected(at: at(0))
        let actions = core.received(#"{"MessageType":"Playstate","Data":{"Command":7}}{"MessageType":"ServerRestarting"}"#, at: at(0))
        #expect(actions.count == 2)
        guard case .report(.undecodable) = actions[0] else { Issue.record("expected a report, got \(actions)"); return }
        #expect(actions[1] == .deliver(.serverRestarting))
    }
}
