import Foundation
import Testing

/// `farcast jellyfin syncplay` against the stand-in's SyncPlay (no real Jellyfin server runs
/// on these machines): two devices of the demo user follow one group in headless mpv, one of
/// them pauses, seeks and unpauses it, and the stand-in's log of what it sent and the playback
/// reports it received show both players doing each at the same position. The film is the
/// stand-in's 10-second "Large File" (`--large-file-mb 1`): its other films last 2 s.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct JellyfinSyncPlayTests {
    typealias User = JellyfinCLITests.User

    struct Sent: Decodable {
        var to: String
        var type: String
        var kind: String
        var positionTicks: Int64?
        var at: Double
    }

    static func sent(_ server: JellyfinStandInServer) throws -> [Sent] {
        try JSONDecoder().decode([Sent].self, from: Data(try server.get("/StandIn/SyncPlay").body.utf8))
    }

    static func deviceId(_ user: User) throws -> String {
        try String(contentsOfFile: user.folder.path + "/state/farcast/jellyfin/device-id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func waitFor(_ what: String, timeout: Double = 15, logs: () -> String, _ done: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try done() { return }
            Thread.sleep(forTimeInterval: 0.1)
        }
        throw PeerFailed(name: "waited \(timeout) s for \(what)", log: logs())
    }

    @Test func twoPlayersFollowTheGroupsPlayPauseAndSeek() throws {
        _ = try requireExecutable("mpv", package: "mpv")
        let server = try JellyfinStandInServer(extra: ["--large-file-mb", "1"])
        let alice = try User(), bob = try User()
        try alice.login(server)
        try bob.login(server)
        let (a, b) = (try Self.deviceId(alice), try Self.deviceId(bob))
        #expect(a != b)
        let follow = ["--test-progress-interval", "0.5"] + JellyfinPlaybackTests.headless
        let first = try BackgroundProcess(try farcastBinary(), ["jellyfin", "syncplay", "new", "Movie night", "Large File", "--duration", "20"] + follow,
                                          environment: alice.environment, logName: "syncplay-new")
        defer { first.stop() }
        var second: BackgroundProcess?
        defer { second?.stop() }
        let logs = { "new:\n\(first.log.suffix(1500))\njoin:\n\(second?.log.suffix(1500) ?? "")\nstand-in:\n\(server.process.log.suffix(800))" }

        // Alice's group plays once her mpv said Ready.
        try Self.waitFor("the group to play", logs: logs) { try Self.sent(server).contains { $0.to == a && $0.kind == "Unpause" } }
        let groups = try bob.items(["syncplay", "list"]) ?? []
        #expect(groups.map { $0["name"] as? String } == ["Movie night"] && groups.first?["state"] as? String == "Playing", "\(groups)")

        // Bob joins: the group waits for him (Alice paused), then both play from one moment.
        second = try BackgroundProcess(try farcastBinary(), ["jellyfin", "syncplay", "join", "Movie night", "--duration", "15"] + follow,
                                       environment: bob.environment, logName: "syncplay-join")
        try Self.waitFor("both to play", logs: logs) { try Self.sent(server).contains { $0.to == b && $0.kind == "Unpause" } }
        let together = try Self.sent(server).filter { $0.kind == "Unpause" }.suffix(2)
        #expect(Set(together.map(\.to)) == [a, b] && Set(together.map(\.positionTicks)).count == 1, "one Unpause for both, from one position")
        Thread.sleep(forTimeInterval: 1.5)

        // Pause: both players pause where the group is.
        #expect(try alice.farcast(["syncplay", "pause"]).status == 0)
        try Self.waitFor("both to pause", logs: logs) {
            let reports = try JellyfinPlaybackTests.reports(server)
            return [a, b].allSatisfy { device in reports.last { $0.deviceId == device && $0.kind == "progress" }?.isPaused == true }
        }
        let pause = try #require(try Self.sent(server).last { $0.kind == "Pause" && $0.to == a })
        let pausedAt = Double(pause.positionTicks ?? 0) / 10_000_000
        Thread.sleep(forTimeInterval: 0.6)
        let reports = try JellyfinPlaybackTests.reports(server)
        let positions: [Double] = [a, b].map { device in
            let last = reports.last { $0.deviceId == device && $0.kind == "progress" }
            return last?.positionSeconds ?? -1
        }
        #expect(positions.allSatisfy { abs($0 - pausedAt) < 0.3 }, "paused at \(positions), the group at \(pausedAt)")

        // Seek while paused: both move there and say Ready; the group stays paused.
        #expect(try alice.farcast(["syncplay", "seek", "6"]).status == 0)
        try Self.waitFor("both at 6 s", logs: logs) {
            let reports = try JellyfinPlaybackTests.reports(server)
            return [a, b].allSatisfy { device in
                let last = reports.last { $0.deviceId == device && $0.kind == "progress" }
                return last?.isPaused == true && abs((last?.positionSeconds ?? 0) - 6) < 0.3
            }
        }

        // Unpause: both play on from 6 s at the same moment.
        #expect(try alice.farcast(["syncplay", "unpause"]).status == 0)
        try Self.waitFor("both to play again", logs: logs) {
            let reports = try JellyfinPlaybackTests.reports(server)
            return [a, b].allSatisfy { device in reports.last { $0.deviceId == device && $0.kind == "progress" }?.isPaused == false }
        }
        let resumed = try Self.sent(server).filter { $0.kind == "Unpause" }.suffix(2)
        #expect(Set(resumed.map(\.to)) == [a, b] && resumed.allSatisfy { abs(Double($0.positionTicks ?? 0) / 10_000_000 - 6) < 0.01 })

        // Ctrl-C: each leaves the group, which goes with the last.
        second?.signal(SIGINT)
        first.signal(SIGINT)
        #expect(second?.waitForExit(timeout: 20) == true && first.waitForExit(timeout: 20), "\(logs())")
        let left = try Self.sent(server).filter { $0.kind == "GroupLeft" }.map(\.to)
        #expect(Set(left) == [a, b], "\(left)")
        #expect(try bob.items(["syncplay", "list"])?.isEmpty == true)
    }
}
