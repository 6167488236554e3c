import Foundation
import Testing

/// The desktop's media controls: `farcast sendspin play` as an MPRIS player on a private session
/// bus (a dbus-daemon of the test's own), read and driven by `playerctl` as media keys and
/// now-playing panels do, against aiosendspin 10.2.1's server
/// (scripts/lib/sendspin_nowplaying_server.py: a track's metadata, every controller command
/// offered, each command the player sends logged as aiosendspin's group reports it).
@Suite(.serialized, .timeLimit(.minutes(2)))
struct SendspinMPRISTests {
    @Test func playerctlReadsTheTrackAndItsRequestsReachTheServer() throws {
        let playerctl = try requireExecutable("playerctl", package: "playerctl")
        let dbusDaemon = try requireExecutable("dbus-daemon", package: "dbus-daemon")
        let folder = try TemporaryFolder()
        let address = "unix:path=\(folder.path)/bus"
        let bus = try BackgroundProcess(dbusDaemon, ["--session", "--nofork", "--address=\(address)"], logName: "dbus-session")
        defer { bus.stop() }
        try waitUntil("the session bus", timeout: 10) { FileManager.default.fileExists(atPath: folder.path + "/bus") }

        let port = SendspinServer.reservePort()
        let commands = folder.path + "/commands"
        let server = try SendspinServer.script("sendspin_nowplaying_server.py", port: port, ["--log", commands], logName: "sendspin-nowplaying-server")
        defer { server.stop() }
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = address
        environment["XDG_STATE_HOME"] = folder.path + "/state"
        let player = try BackgroundProcess(try farcastBinary(), ["sendspin", "play", "ws://127.0.0.1:\(port)/sendspin", "--output", "null", "--duration", "30",
                                                                 "--name", "Test Kitchen", "-v"],
                                           environment: environment, logName: "farcast-mpris")
        defer { player.stop() }

        func ctl(_ arguments: String...) throws -> String { try ctlArguments(arguments) }
        func ctlArguments(_ arguments: [String]) throws -> String {
            let result = try run(playerctl, ["--player=farcast_Test_Kitchen"] + arguments, environment: ["DBUS_SESSION_BUS_ADDRESS": address, "PATH": "/usr/bin:/bin"], timeout: 10)
            guard result.status == 0 else { throw PeerFailed(name: "playerctl \(arguments.joined(separator: " "))", log: result.stderr + result.stdout) }
            return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        func sent() -> [[String: Any]] {
            ((try? String(contentsOfFile: commands, encoding: .utf8)) ?? "").split(separator: "\n")
                .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.filter { $0["command"] != nil }
        }
        let logs = { "player:\n\(player.log.suffix(2000))\nserver:\n\(server.log.suffix(1500))" }

        // The player on the bus under its name, with the track the server set.
        try waitUntil("the track on the bus", timeout: 20) { (try? ctl("metadata", "xesam:title")) == "Farcast Test Song" }
        #expect(try ctl("metadata", "--format", "{{artist}}|{{album}}|{{mpris:length}}") == "The Loopbacks|Private Namespace|180000000", "\(logs())")
        #expect(player.log.contains("media controls on the session bus as org.mpris.MediaPlayer2.farcast_Test_Kitchen"), "\(logs())")
        // The position moves on from the server's 12 s at normal speed.
        let first = try #require(Double(try ctl("position")), "\(logs())")
        #expect(first >= 12 && first < 40, "position \(first) s")
        try waitUntil("the position moving", timeout: 5) { (Double((try? ctl("position")) ?? "") ?? 0) >= first + 1.5 }
        // The controller state: the server's volume 100, every command offered.
        try waitUntil("the volume", timeout: 10) { (try? ctl("volume")) == "1.000000" }
        #expect(try ctl("status") == "Paused", "a stopped group with a track shows as paused")
        #expect(try ctl("loop") == "None", "the server's repeat off shows as LoopStatus None")

        // Requests → controller commands, in order, as the server's group reports them.
        let requests: [[String]] = [["play-pause"], ["next"], ["previous"], ["volume", "0.4"], ["shuffle", "On"], ["loop", "Track"]]
        for request in requests {
            let count = sent().count
            _ = try ctlArguments(request)
            try waitUntil("the command for \(request)", timeout: 5) { sent().count > count }
        }
        let got = sent()
        #expect(got.compactMap { $0["command"] as? String } == ["play", "next", "previous", "volume", "shuffle", "repeat_one"], "\(got)\n\(logs())")
        #expect((got.count > 3 ? got[3]["volume"] as? Int : nil) == 40, "\(got)")

        // The server's answer comes back to the desktop: PropertiesChanged updates playerctl's view.
        try waitUntil("the new volume shown", timeout: 5) { (try? ctl("volume")) == "0.400000" }
        try waitUntil("shuffle and loop shown", timeout: 5) { (try? ctl("shuffle")) == "On" && (try? ctl("loop")) == "Track" }

        player.stop()
        try waitUntil("the player gone from the bus", timeout: 10) {
            let list = try? run(playerctl, ["--list-all"], environment: ["DBUS_SESSION_BUS_ADDRESS": address, "PATH": "/usr/bin:/bin"], timeout: 10)
            return list.map { !$0.stdout.contains("farcast_Test_Kitchen") } ?? false
        }
    }

    @Test func withoutASessionBusThePlayerPlaysOn() throws {
        let folder = try TemporaryFolder()
        let port = SendspinServer.reservePort()
        let server = try SendspinServer.script("sendspin_nowplaying_server.py", port: port, ["--log", folder.path + "/commands"], logName: "sendspin-nowplaying-server")
        defer { server.stop() }
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = "unix:path=\(folder.path)/no-bus-here"
        environment["XDG_STATE_HOME"] = folder.path + "/state"
        let player = try BackgroundProcess(try farcastBinary(), ["sendspin", "play", "ws://127.0.0.1:\(port)/sendspin", "--output", "null", "--duration", "3", "-v"],
                                           environment: environment, logName: "farcast-no-bus")
        defer { player.stop() }
        #expect(player.waitForExit(timeout: 30) && player.terminationStatus == 0, "\(player.log.suffix(2000))")
        #expect(player.log.contains("media controls (MPRIS) not offered: no D-Bus session bus: cannot reach the bus at \(folder.path)/no-bus-here"), "\(player.log.suffix(2000))")
    }
}
