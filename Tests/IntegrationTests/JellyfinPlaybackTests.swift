import Foundation
import Testing

/// `farcast jellyfin play` against the stand-in server (no real Jellyfin server runs on these
/// machines; JellyfinStandInServer) with Debian's mpv as the player, without a window or sound
/// (`vo=null`, `ao=null`: mpv still plays in real time). The stand-in keeps every playback
/// report it receives (`/StandIn/PlaybackReports`), so the tests read what a real server would
/// have been told, in order. A private data folder: these tests move the demo user's resume points.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct JellyfinPlaybackTests {
    typealias User = JellyfinCLITests.User
    static let headless = ["--mpv-option", "vo=null", "--mpv-option", "ao=null"]

    struct Report {
        var kind: String
        var positionSeconds: Double?
        var isPaused: Bool?
        var playMethod: String?
        var playSessionId: String?
        var reasons: [String]?
        var at: Double

        init(_ object: [String: Any]) {
            kind = object["kind"] as? String ?? ""
            positionSeconds = (object["positionTicks"] as? NSNumber).map { $0.doubleValue / 10_000_000 }
            isPaused = object["isPaused"] as? Bool
            playMethod = object["playMethod"] as? String
            playSessionId = object["playSessionId"] as? String
            reasons = object["reasons"] as? [String]
            at = (object["at"] as? NSNumber)?.doubleValue ?? 0
        }
    }

    static func reports(_ server: JellyfinStandInServer, session: String? = nil) throws -> [Report] {
        let (status, body) = try server.get("/StandIn/PlaybackReports")
        #expect(status == 200)
        let all = (try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [[String: Any]] ?? []).map(Report.init)
        return session.map { id in all.filter { $0.playSessionId == id } } ?? all
    }

    static func play(_ user: User, _ arguments: [String]) throws -> [String: Any] {
        _ = try requireExecutable("mpv", package: "mpv")
        let result = try user.farcast(["play"] + arguments + headless + ["--json"], timeout: 60)
        #expect(result.status == 0, "farcast jellyfin play \(arguments.joined(separator: " ")): \(result.stderr)")
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any] ?? [:]
    }

    static func movie(_ user: User, _ name: String) throws -> [String: Any]? {
        try user.items(["ls", "Movies"])?.first { $0["name"] as? String == name }
    }

    @Test func playReportsProgressAndResumesWhereItStopped() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)

        // Stopped after 1 s: Playing at 0, Stopped at ≈ 1 s, one play session, direct play.
        let first = try Self.play(user, ["Colour Bars", "--start", "0", "--duration", "1"])
        #expect(first["end"] as? String == "stopped")
        #expect(first["method"] as? String == "DirectPlay")
        let stoppedAt = (first["position_seconds"] as? NSNumber)?.doubleValue ?? -1
        #expect(stoppedAt >= 0.5 && stoppedAt <= 2, "stopped at \(stoppedAt) s after --duration 1")
        let session = try #require(first["play_session_id"] as? String)
        let reports = try Self.reports(server, session: session)
        #expect(reports.map(\.kind) == ["decision", "start", "stopped"], "\(reports.map(\.kind))")
        #expect(reports.first?.reasons == [] && reports.first?.playMethod == "DirectPlay")
        #expect(reports.dropFirst().first?.positionSeconds == 0)
        #expect(reports.dropFirst().first?.playMethod == "DirectPlay")
        #expect(abs((reports.last?.positionSeconds ?? -1) - stoppedAt) < 0.001)

        // The server keeps the resume point; the next play starts there without being told.
        let listed = try Self.movie(user, "Colour Bars")
        #expect(abs(((listed?["position_seconds"] as? NSNumber)?.doubleValue ?? -1) - stoppedAt) < 0.001, "\(listed ?? [:])")
        let second = try Self.play(user, ["Colour Bars", "--duration", "0.3"])
        #expect(abs(((second["start_seconds"] as? NSNumber)?.doubleValue ?? -1) - stoppedAt) < 0.001)
        let resumed = try Self.reports(server, session: second["play_session_id"] as? String)
        let resumedAt = resumed.first { $0.kind == "start" }?.positionSeconds ?? -1
        #expect(abs(resumedAt - stoppedAt) < 0.05, "the second play started at \(resumedAt) s, the first stopped at \(stoppedAt) s")
    }

    @Test func pausesAndSeeksInThePlayerAreReportedAndTheEndMarksItPlayed() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        // What a person does in the mpv window, done by an mpv script: pause at 0.5 s, then
        // 0.4 s later resume and seek back to 0.1 s.
        let script = user.folder.path + "/pause-and-seek.lua"
        try """
            local done = false
            mp.observe_property("time-pos", "number", function(_, t)
              if t and t >= 0.5 and not done then
                done = true
                mp.set_property_bool("pause", true)
                mp.add_timeout(0.4, function()
                  mp.set_property_bool("pause", false)
                  mp.commandv("seek", "0.1", "absolute")
                end)
              end
            end)
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let played = try Self.play(user, ["Test Pattern", "--start", "0", "--mpv-option", "script=\(script)", "--test-progress-interval", "0.6"])
        #expect(played["end"] as? String == "finished")
        let reports = try Self.reports(server, session: played["play_session_id"] as? String)
        let kinds = reports.map(\.kind)
        #expect(kinds.first == "decision" && kinds.dropFirst().first == "start" && kinds.last == "stopped", "\(kinds)")
        let progress = reports.filter { $0.kind == "progress" }
        let pause = progress.firstIndex { $0.isPaused == true }
        #expect(pause != nil, "no progress report said paused: \(progress.map { ($0.positionSeconds ?? -1, $0.isPaused ?? false) })")
        if let pause {
            let pausedAt = progress[pause].positionSeconds ?? 0
            #expect(pausedAt >= 0.45 && pausedAt < 1, "paused at \(pausedAt) (the script pauses at 0.5 s)")
            // After the pause (and any timed report while paused): playing again from the seek target.
            let after = progress[(pause + 1)...]
            #expect(after.contains { $0.isPaused == false && abs(($0.positionSeconds ?? 0) - 0.1) < 0.15 },
                    "no report from the seek to 0.1 s: \(after.map { ($0.positionSeconds ?? -1, $0.isPaused ?? true) })")
        }
        // Timed progress reports came too (every 0.6 s here), and positions only grow after the seek.
        #expect(progress.count >= 4, "\(progress.count) progress reports")
        #expect(abs((reports.last?.positionSeconds ?? 0) - 2) < 0.001, "stopped at \(reports.last?.positionSeconds ?? -1) (runtime 2 s)")
        // Played to the end: the server marks it played and keeps no resume point.
        let listed = try Self.movie(user, "Test Pattern")
        #expect(listed?["played"] as? Bool == true && listed?["position_seconds"] == nil, "\(listed ?? [:])")
    }

    @Test func whatCannotPlayIsRefusedWithTheServersReason() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        // 10 kbit/s: below the film's bitrate, so no direct play; the stand-in cannot transcode.
        let result = try user.farcast(["play", "Mandelbrot Zoom", "--max-bitrate", "0.01"] + Self.headless)
        #expect(result.status == 1)
        #expect(result.stderr.contains("cannot play Mandelbrot Zoom: the server has no stream this player can play (NoCompatibleStream)"), "\(result.stderr)")
        let decision = try Self.reports(server).last { $0.kind == "decision" }
        #expect(decision?.reasons == ["ContainerBitrateExceedsLimit"], "\(decision?.reasons ?? [])")
        #expect(!(try Self.reports(server)).contains { $0.kind == "start" })

        let missing = try user.farcast(["play", "Mandelbrot Zoom", "--mpv", "/nonexistent/mpv"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("/nonexistent/mpv is not installed") && missing.stderr.contains("apt install mpv"), "\(missing.stderr)")

        let folder = try user.farcast(["play", "Signal Tests"] + Self.headless)
        #expect(folder.status == 1 && folder.stderr.contains("not something to play"), "\(folder.stderr)")
    }

    @Test func theStreamServesByteRangesOfTheFile() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        let movie = try #require(try Self.movie(user, "Test Pattern"))
        let id = try #require(movie["id"] as? String)
        let state = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: user.folder.path + "/state/farcast/jellyfin/servers.json")))
        let token = try #require(((state as? [String: Any])?["servers"] as? [[String: Any]])?.first.flatMap { ($0["users"] as? [[String: Any]])?.first?["token"] as? String })
        let file = try Data(contentsOf: URL(fileURLWithPath: server.dataDirectory + "/media/movie1.mp4"))
        let curl = try requireExecutable("curl", package: "curl")
        let url = "http://127.0.0.1:\(server.port)/Videos/\(id)/stream?static=true&ApiKey=\(token)"
        let out = user.folder.path + "/part"
        let partial = try run(curl, ["-sS", "-o", out, "-w", "%{http_code} %header{content-range}", "-H", "Range: bytes=100-1123", url], timeout: 20)
        #expect(partial.stdout == "206 bytes 100-1123/\(file.count)", "\(partial.stdout) \(partial.stderr)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == file[100...1123])
        let whole = try run(curl, ["-sS", "-o", out, "-w", "%{http_code}", url], timeout: 20)
        #expect(whole.stdout == "200")
        #expect(try Data(contentsOf: URL(fileURLWithPath: out)) == file)
        let beyond = try run(curl, ["-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Range: bytes=\(file.count)-", url], timeout: 20)
        #expect(beyond.stdout == "416")
        let anonymous = try run(curl, ["-sS", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(server.port)/Videos/\(id)/stream?static=true"], timeout: 20)
        #expect(anonymous.stdout == "401")
    }
}
