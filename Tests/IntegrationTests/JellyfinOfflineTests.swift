import Foundation
import Testing

/// Downloads played with no server, and their progress reaching the server when it is back:
/// `farcast jellyfin download`, `offline ls|rm|sync` and `play --offline` against the stand-in
/// server (no real Jellyfin server runs on these machines; JellyfinStandInServer), stopped and
/// restarted on its own data as a real server going away and coming back would be, with
/// Debian's mpv playing headless (`vo=null`, `ao=null`: still in real time).
@Suite(.serialized, .timeLimit(.minutes(5)))
struct JellyfinOfflineTests {
    typealias User = JellyfinCLITests.User
    static let headless = JellyfinPlaybackTests.headless

    static func seconds(_ value: Any?) -> Double? { (value as? NSNumber)?.doubleValue }

    static func date(_ value: Any?) -> Date? {
        let parser = ISO8601DateFormatter()
        parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return (value as? String).flatMap(parser.date(from:))
    }

    static func playOffline(_ user: User, _ arguments: [String]) throws -> [[String: Any]] {
        _ = try requireExecutable("mpv", package: "mpv")
        let result = try user.farcast(["play", "--offline"] + arguments + headless + ["--json"], timeout: 60)
        #expect(result.status == 0, "farcast jellyfin play --offline \(arguments.joined(separator: " ")): \(result.stderr)")
        return try jsonItems(result.stdout)
    }

    static func entry(_ user: User, _ name: String) throws -> [String: Any]? {
        try user.items(["offline", "ls"])?.first { $0["name"] as? String == name }
    }

    @Test func downloadsPlayWithNoServerAndTheirProgressReachesItWhenItIsBack() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        let out = user.folder.path + "/downloads"
        #expect(try user.farcast(["download", "Test Pattern", "-o", out]).status == 0)
        #expect(try user.farcast(["download", "Signal Tests", "-o", out]).status == 0)

        // The index lists the six files (films and series in library order), each where it is,
        // the film with its picture.
        let listed = try user.items(["offline", "ls"]) ?? []
        #expect(listed.compactMap { $0["name"] as? String } == ["Pilot Tone", "Carrier Wave", "Phase Shift", "Return Path", "Dead Air", "Test Pattern"])
        for row in listed {
            let path = row["path"] as? String ?? ""
            #expect(row["file_present"] as? Bool == true && FileManager.default.fileExists(atPath: path), "\(path)")
            #expect(row["server"] as? String == "Farcast Stand-in" && row["user"] as? String == "demo")
            #expect(row["pending"] == nil)
        }
        let film = try #require(listed.last)
        let image = try #require(FileManager.default.contents(atPath: film["image"] as? String ?? ""), "the film's image is kept")
        #expect(image.starts(with: [0xFF, 0xD8, 0xFF]), "a JPEG")
        #expect(try user.items(["offline", "ls", "Signal Tests"])?.count == 5, "a series names its episodes")

        // The server goes away: the downloads still play, and where they stop is kept.
        server.stop()
        let stopped = try #require(try Self.playOffline(user, ["Test Pattern", "--start", "0", "--duration", "1"]).first)
        #expect(stopped["end"] as? String == "stopped" && stopped["method"] as? String == "DirectPlay")
        let position = try #require(Self.seconds(stopped["position_seconds"]))
        #expect(position > 0.3 && position < 1.9, "\(position)")
        let kept = try #require(try Self.entry(user, "Test Pattern"))
        let pending = try #require(kept["pending"] as? [String: Any])
        #expect(abs((Self.seconds(pending["position_seconds"]) ?? -1) - position) < 0.01)
        #expect(abs((Self.seconds(kept["resume_seconds"]) ?? -1) - position) < 0.01, "offline playback resumes where it stopped")
        let playedAt = try #require(pending["played_at"] as? String)

        // An episode played to its end (and only it: --no-next) counts as played.
        let finished = try Self.playOffline(user, ["Pilot Tone", "--no-next"])
        #expect(finished.map { $0["end"] as? String } == ["finished"])
        #expect(try Self.entry(user, "Pilot Tone")?["played"] as? Bool == true)
        // Without --offline, a downloaded item still plays while the server is away (saying so);
        // one not downloaded needs the server and says so.
        let fallback = try user.farcast(["play", "Pilot Tone", "--no-next", "--start", "0", "--json"] + Self.headless, timeout: 60)
        #expect(fallback.status == 0 && fallback.stderr.contains("connection refused; playing the download instead"), "\(fallback.stderr)")
        #expect(try jsonItems(fallback.stdout).first?["end"] as? String == "finished")
        let online = try user.farcast(["play", "Mandelbrot Zoom"] + Self.headless, timeout: 60)
        #expect(online.status == 1 && online.stderr.contains("cannot reach"), "\(online.stderr)")

        // The server is back: the next command that reaches it (here, the resume list) sends
        // both positions first, and notes it.
        try server.restart()
        let resume = try user.farcast(["resume", "--json"])
        #expect(resume.status == 0, "\(resume.stderr)")
        #expect(resume.stderr.contains("farcast: note: Test Pattern: played offline to 0:0"), "\(resume.stderr)")
        #expect(resume.stderr.contains("farcast: note: Pilot Tone: played offline to 0:01, now marked played on the server"), "\(resume.stderr)")
        let resumable = try jsonItems(resume.stdout).first { $0["name"] as? String == "Test Pattern" }
        #expect(abs((Self.seconds(resumable?["position_seconds"]) ?? -1) - position) < 0.001, "the server resumes where offline playback stopped")
        let info = try user.json(["info", "Test Pattern"]) as? [String: Any]
        let lastPlayed = try #require(Self.date(info?["last_played"]))
        #expect(abs(lastPlayed.timeIntervalSince(try #require(Self.date(playedAt)))) < 0.002, "the server keeps the offline playback's own date")
        #expect((try user.json(["info", "Pilot Tone"]) as? [String: Any])?["played"] as? Bool == true)
        // The server was told as a player tells it: a Stopped report at each position.
        let stops = try JellyfinPlaybackTests.reports(server).filter { $0.kind == "stopped" }
        #expect(stops.contains { $0.itemId == film["id"] as? String && abs(($0.positionSeconds ?? -1) - position) < 0.001 }, "\(stops.map(\.itemId))")
        // Nothing waits any more.
        #expect(try user.items(["offline", "ls"])?.allSatisfy { $0["pending"] == nil } == true)
        #expect(try user.items(["offline", "sync"])?.isEmpty == true)
    }

    @Test func theLaterPlaybackWinsWhenTheServerAndTheDownloadDisagree() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        let out = user.folder.path + "/downloads"
        #expect(try user.farcast(["download", "Colour Bars", "-o", out]).status == 0)
        #expect(try user.farcast(["download", "Test Pattern", "-o", out]).status == 0)
        let bars = try #require(try Self.entry(user, "Colour Bars")?["id"] as? String)
        let pattern = try #require(try Self.entry(user, "Test Pattern")?["id"] as? String)

        // Colour Bars: played offline first, then on another device (the hook stands for it).
        _ = try Self.playOffline(user, ["Colour Bars", "--start", "0", "--duration", "1"])
        Thread.sleep(forTimeInterval: 0.05)
        _ = try server.hook("/StandIn/Position?user=demo&item=\(bars)&ticks=5000000")
        // Test Pattern: played elsewhere first, then offline.
        _ = try server.hook("/StandIn/Position?user=demo&item=\(pattern)&ticks=15000000")
        Thread.sleep(forTimeInterval: 0.05)
        let offline = try #require(try Self.playOffline(user, ["Test Pattern", "--start", "0", "--duration", "1"]).first)
        let position = try #require(Self.seconds(offline["position_seconds"]))

        let synced = try user.items(["offline", "sync"]) ?? []
        let byName = Dictionary(uniqueKeysWithValues: synced.map { ($0["name"] as? String ?? "", $0) })
        #expect(byName["Colour Bars"]?["outcome"] as? String == "server-newer", "\(synced)")
        #expect(Self.seconds(byName["Colour Bars"]?["server_position_seconds"]) == 0.5, "the server's later position stays")
        #expect(byName["Test Pattern"]?["outcome"] as? String == "sent", "\(synced)")
        #expect(abs((Self.seconds(byName["Test Pattern"]?["server_position_seconds"]) ?? -1) - position) < 0.001)
        // Both are settled; offline playback of Colour Bars now resumes at the server's point.
        #expect(Self.seconds(try Self.entry(user, "Colour Bars")?["resume_seconds"]) == 0.5)
        #expect(try user.items(["offline", "ls"])?.allSatisfy { $0["pending"] == nil } == true)
    }

    @Test func removedAndMissingDownloadsAreSaidSo() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        let empty = try user.farcast(["offline", "ls"])
        #expect(empty.status == 0 && empty.stdout.contains("Nothing downloaded yet"), "\(empty.stdout)")
        let nothing = try user.farcast(["play", "--offline", "Test Pattern"] + Self.headless)
        #expect(nothing.status == 1 && nothing.stderr.contains("nothing called 'Test Pattern' is downloaded"), "\(nothing.stderr)")
        let badOption = try user.farcast(["play", "--offline", "Test Pattern", "--quality", "low"])
        #expect(badOption.status == 2 && badOption.stderr.contains("a download plays as it is"), "\(badOption.stderr)")

        try user.login(server)
        let out = user.folder.path + "/downloads"
        #expect(try user.farcast(["download", "Test Tones", "-o", out]).status == 0)
        let tracks = try user.items(["offline", "ls", "Test Tones"]) ?? []
        #expect(tracks.compactMap { $0["name"] as? String } == ["A 220", "E 330", "A 440"])
        // A file moved away: listed as missing, and playing it says what to do.
        let moved = try #require(tracks.first?["path"] as? String)
        try FileManager.default.moveItem(atPath: moved, toPath: moved + ".moved")
        #expect(try Self.entry(user, "A 220")?["file_present"] as? Bool == false)
        let missing = try user.farcast(["play", "--offline", "A 220"] + Self.headless)
        #expect(missing.status == 1 && missing.stderr.contains("the download is missing or changed"), "\(missing.stderr)")
        // rm forgets (and deletes) one track; --keep-files leaves the file.
        let removed = try user.items(["offline", "rm", "E 330"]) ?? []
        #expect(removed.count == 1 && !FileManager.default.fileExists(atPath: removed[0]["path"] as? String ?? "/"))
        let forgotten = try user.items(["offline", "rm", "A 440", "--keep-files"]) ?? []
        #expect(forgotten.count == 1 && FileManager.default.fileExists(atPath: forgotten[0]["path"] as? String ?? ""))
        #expect(try user.items(["offline", "ls"])?.compactMap { $0["name"] as? String } == ["A 220"])
    }
}
