import Foundation
import Testing

/// `farcast sendspin play --tui` in a terminal, driven from the outside through tmux
/// (`send-keys` types, `capture-pane` reads the screen), against aiosendspin 10.2.1's server
/// (scripts/lib/sendspin_nowplaying_server.py: a track's metadata, every controller command
/// offered, each command the player sends logged as aiosendspin's group reports it).
@Suite(.serialized, .timeLimit(.minutes(2)))
struct SendspinNowPlayingTests {
    @Test func theTerminalShowsTheTrackAndItsKeysReachTheServerAsControllerCommands() throws {
        let tmux = try requireExecutable("tmux", package: "tmux")
        let folder = try TemporaryFolder()
        let port = SendspinServer.reservePort()
        let commands = folder.path + "/commands"
        let server = try SendspinServer.script("sendspin_nowplaying_server.py", port: port, ["--log", commands], logName: "sendspin-nowplaying-server")
        defer { server.stop() }

        let socket = folder.path + "/tmux.sock"
        func tmuxRun(_ arguments: [String]) throws -> String {
            let result = try run(tmux, ["-S", socket, "-f", "/dev/null"] + arguments, environment: ["PATH": "/usr/bin:/bin", "TERM": "xterm-256color"], timeout: 10)
            guard result.status == 0 else { throw PeerFailed(name: "tmux \(arguments.first ?? "")", log: result.stderr) }
            return result.stdout
        }
        let player = "XDG_STATE_HOME=\(folder.path)/state \(try farcastBinary()) sendspin play ws://127.0.0.1:\(port)/sendspin --output null --tui --duration 25 2>\(folder.path)/stderr; echo exited $?; sleep 60"
        _ = try tmuxRun(["new-session", "-d", "-x", "100", "-y", "20", "-s", "np", player])
        defer { _ = try? tmuxRun(["kill-server"]) }
        func screen() -> String { (try? tmuxRun(["capture-pane", "-p", "-t", "np"])) ?? "" }
        func sent() -> [[String: Any]] {
            ((try? String(contentsOfFile: commands, encoding: .utf8)) ?? "").split(separator: "\n")
                .compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.filter { $0["command"] != nil }
        }
        let logs = { "screen:\n\(screen())\nstderr:\n\((try? String(contentsOfFile: folder.path + "/stderr", encoding: .utf8)) ?? "")\nserver:\n\(server.log.suffix(1500))" }

        // The track, as the server set it, and its progress moving on from 0:12.
        try waitUntil("the track on the screen", timeout: 20) { screen().contains("Farcast Test Song") && screen().contains("/ 3:00") }
        let shown = screen()
        #expect(shown.contains("The Loopbacks — Private Namespace"), "\(logs())")
        #expect(shown.contains("in sync") || shown.contains("syncing"), "\(logs())")
        func position(_ text: String) -> Int? {
            guard let range = text.range(of: #"\d+:\d\d / 3:00"#, options: .regularExpression) else { return nil }
            let parts = text[range].split(separator: " ")[0].split(separator: ":").compactMap { Int($0) }
            return parts.count == 2 ? parts[0] * 60 + parts[1] : nil
        }
        let first = try #require(position(shown), "\(logs())")
        #expect(first >= 12 && first < 40, "progress \(first) s: \(logs())")
        try waitUntil("the progress moving", timeout: 5) { (position(screen()) ?? 0) >= first + 2 }

        // Keys → controller commands, in the order typed, as the server's group reports them.
        try waitUntil("the controller state", timeout: 10) { screen().contains("volume ") }
        for key in ["n", "p", "-", "m", "s"] {
            let count = sent().count
            _ = try tmuxRun(["send-keys", "-t", "np", key])
            try waitUntil("the command for '\(key)'", timeout: 5) { sent().count > count }
            usleep(300_000)
        }
        let got = sent()
        let names = got.compactMap { $0["command"] as? String }
        #expect(names == ["next", "previous", "volume", "mute", "shuffle"], "\(got)\n\(logs())")
        #expect((got.count > 2 ? got[2]["volume"] as? Int : nil) == 95, "volume 5 below the server's 100: \(got)")
        #expect((got.count > 3 ? got[3]["mute"] as? Bool : nil) == true, "\(got)")
        // The server's new controller state on the screen, then q ends the run and gives the terminal back.
        try waitUntil("the mute shown", timeout: 5) { screen().contains("(muted)") }
        _ = try tmuxRun(["send-keys", "-t", "np", "q"])
        try waitUntil("farcast exited", timeout: 10) { screen().contains("exited") }
        #expect(screen().contains("exited 0") && screen().contains("played "), "the summary after the terminal was restored: \(logs())")
    }
}
