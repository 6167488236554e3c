import Foundation
import Testing

/// `farcast jellyfin play` against the stand-in server (no real Jellyfin server runs on these
/// machines; JellyfinStandInServer) with Debian's mpv as the player, without a window or sound
/// (`vo=null`, `ao=null`: mpv still plays in real time). The stand-in keeps every playback
/// report it receives (`/StandIn/PlaybackReports`), so the tests read what a real server would
/// have been told, in order. A private data folder: these tests move the demo user's resume points.
@Suite(.tags(.groupA), .serialized, .timeLimit(.minutes(5)))
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
        var itemId: String?
        var volume: Int?
        var audioStreamIndex: Int?
        var subtitleStreamIndex: Int?
        var deviceId: String?
        var at: Double

        init(_ object: [String: Any]) {
            kind = object["kind"] as? String ?? ""
            positionSeconds = (object["positionTicks"] as? NSNumber).map { $0.doubleValue / 10_000_000 }
            isPaused = object["isPaused"] as? Bool
            playMethod = object["playMethod"] as? String
            playSessionId = object["playSessionId"] as? String
            reasons = object["reasons"] as? [String]
            itemId = object["itemId"] as? String
            volume = (object["volume"] as? NSNumber)?.intValue
            audioStreamIndex = (object["audioStreamIndex"] as? NSNumber)?.intValue
            subtitleStreamIndex = (object["subtitleStreamIndex"] as? NSNumber)?.intValue
            deviceId = object["deviceId"] as? String
            at = (object["at"] as? NSNumber)?.doubleValue ?? 0
        }
    }

    static func reports(_ server: JellyfinStandInServer, session: String? = nil) throws -> [Report] {
        let (status, body) = try server.get("/StandIn/PlaybackReports")
        #expect(status == 200)
        let all = (try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [[String: Any]] ?? []).map(Report.init)
        return session.map { id in all.filter { $0.playSessionId == id } } ?? all
    }

    /// Runs `play … --json`: one entry per item played.
    static func playAll(_ user: User, _ arguments: [String]) throws -> [[String: Any]] {
        _ = try requireExecutable("mpv", package: "mpv")
        let result = try user.farcast(["play"] + arguments + headless + ["--json"], timeout: 60)
        #expect(result.status == 0, "farcast jellyfin play \(arguments.joined(separator: " ")): \(result.stderr)")
        return try jsonItems(result.stdout)
    }

    static func play(_ user: User, _ arguments: [String]) throws -> [String: Any] {
        let played = try playAll(user, arguments)
        #expect(played.count == 1, "\(played.count) items played")
        return played.first ?? [:]
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

        // mpv's decoder lists are kept, keyed by the mpv binary; a list kept for another mpv is
        // not used (here it would refuse H.264, and the server would find no stream).
        let decoderCache = user.folder.path + "/cache/farcast/mpv-decoders.json"
        let kept = try String(contentsOfFile: decoderCache, encoding: .utf8)
        #expect(kept.contains("/mpv ") && kept.contains(#""h264""#), "\(kept)")
        try #"{"key":"another mpv","video":["nothing"],"audio":["nothing"]}"#.write(toFile: decoderCache, atomically: true, encoding: .utf8)

        // The server keeps the resume point; the next play starts there without being told.
        let listed = try Self.movie(user, "Colour Bars")
        #expect(abs(((listed?["position_seconds"] as? NSNumber)?.doubleValue ?? -1) - stoppedAt) < 0.001, "\(listed ?? [:])")
        let second = try Self.play(user, ["Colour Bars", "--duration", "0.3"])
        #expect(abs(((second["start_seconds"] as? NSNumber)?.doubleValue ?? -1) - stoppedAt) < 0.001)
        #expect(try String(contentsOfFile: decoderCache, encoding: .utf8).contains(#""h264""#), "the stale list was not replaced")
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
        // A server that can deliver it neither as it is nor transcoded says so in ErrorCode.
        let id = try #require(try Self.movie(user, "Mandelbrot Zoom")?["id"] as? String)
        try server.hook("/StandIn/Fault?path=/Items/\(id)/PlaybackInfo&mode=no-compatible-stream")
        let result = try user.farcast(["play", "Mandelbrot Zoom"] + Self.headless)
        #expect(result.status == 1)
        #expect(result.stderr.contains("cannot play Mandelbrot Zoom: the server has no stream this player can play (NoCompatibleStream)"), "\(result.stderr)")
        #expect(!(try Self.reports(server)).contains { $0.kind == "start" })
        try server.hook("/StandIn/Fault?path=/Items/\(id)/PlaybackInfo&mode=clear")

        let missing = try user.farcast(["play", "Mandelbrot Zoom", "--mpv", "/nonexistent/mpv"])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("/nonexistent/mpv is not installed") && missing.stderr.contains("apt install mpv"), "\(missing.stderr)")

        let folder = try user.farcast(["play", "Signal Tests"] + Self.headless)
        #expect(folder.status == 1 && folder.stderr.contains("not something to play"), "\(folder.stderr)")
    }

    /// Under a bitrate the file exceeds, the server transcodes: HLS with fMP4 segments made by
    /// ffmpeg in the stand-in, which mpv plays to its end; the reports say Transcode, pings keep
    /// the transcode alive, and stopping the encoding at the end removes it.
    @Test func whatCannotPlayAsItIsIsTranscodedAndTheEncodingStoppedAtTheEnd() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        let played = try Self.play(user, ["Mandelbrot Zoom", "--start", "0", "--max-bitrate", "0.3", "--audio", "ger",
                                          "--test-progress-interval", "0.4"])
        #expect(played["method"] as? String == "Transcode" && played["end"] as? String == "finished", "\(played)")
        #expect(played["container"] as? String == "mp4")
        #expect((played["audio"] as? [String: Any])?["codec"] as? String == "aac", "mpv played the transcode's sound: \(played)")
        let session = played["play_session_id"] as? String
        let all = try Self.reports(server)
        let decision = all.last { $0.kind == "decision" && $0.playSessionId == session }
        #expect(decision?.playMethod == "Transcode" && decision?.reasons == ["ContainerBitrateExceedsLimit"], "\(decision?.reasons ?? [])")
        let reports = try Self.reports(server, session: session)
        #expect(reports.first { $0.kind == "start" }?.playMethod == "Transcode")
        #expect(reports.first { $0.kind == "start" }?.audioStreamIndex == 2, "the German audio was asked for")
        #expect(reports.contains { $0.kind == "ping" }, "a transcode is kept alive: \(reports.map(\.kind))")
        let kinds = reports.map(\.kind)
        #expect(kinds.last == "stop-encoding" && kinds.dropLast().last == "stopped", "\(kinds)")
        let (status, active) = try server.get("/StandIn/Transcodes")
        #expect(status == 200 && active == "[]", "the encoding is gone: \(active)")
        // A FLAC track over 100 kbit/s arrives as an AAC stream.
        let track = try Self.play(user, ["A 220", "--start", "0", "--max-bitrate", "0.1", "--no-next"])
        #expect(track["method"] as? String == "Transcode" && track["container"] as? String == "aac" && track["end"] as? String == "finished", "\(track)")
        #expect((track["audio"] as? [String: Any])?["codec"] as? String == "aac")
    }

    /// The stand-in's episodes have an intro (0–0.5 s) and credits; its tracks synced lyrics.
    /// `--skip intro` jumps over the intro as playback reaches it (the seek is reported), and
    /// every segment is listed in the result whether skipped or not.
    @Test func segmentsAreSkippedOnRequestAndLyricsShown() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        let played = try Self.play(user, ["Pilot Tone", "--no-next", "--start", "0", "--skip", "intro", "--test-progress-interval", "5"])
        #expect(played["skipped"] as? [String] == ["Intro"], "\(played)")
        let segments = (played["segments"] as? [[String: Any]] ?? []).map { ($0["type"] as? String ?? "", ($0["end_seconds"] as? NSNumber)?.doubleValue ?? 0) }
        #expect(segments.map(\.0) == ["Intro", "Outro"] && segments.first?.1 == 0.5, "\(segments)")
        let reports = try Self.reports(server, session: played["play_session_id"] as? String)
        let seek = reports.first { $0.kind == "progress" }
        #expect(seek.map { ($0.positionSeconds ?? 0) >= 0.49 && ($0.positionSeconds ?? 0) < 0.8 } == true,
                "the jump over the intro is reported: \(reports.map { "\($0.kind) \($0.positionSeconds ?? -1)" })")
        let bad = try user.farcast(["play", "Pilot Tone", "--skip", "intro,adverts"])
        #expect(bad.status == 2 && bad.stderr.contains("--skip takes intro, outro, credits, recap, preview or commercial, not 'adverts'"), "\(bad.stderr)")

        let lyrics = try user.farcast(["lyrics", "A 220"])
        #expect(lyrics.status == 0 && lyrics.stdout == "[0:00.00] A 220, steady\n[0:01.00] held for a second more\n", "\(lyrics.stdout)\(lyrics.stderr)")
        let none = try user.farcast(["lyrics", "Pilot Tone"])
        #expect(none.status == 1 && none.stderr.contains("Pilot Tone has no lyrics on the server"), "\(none.stderr)")
    }

    /// Mandelbrot Zoom has English and German audio, English subtitles in the file and French
    /// ones beside it (an External stream fetched from its DeliveryUrl). What mpv says it plays
    /// (`audio`, `subtitle` in the result) must be what was asked, by language or by index.
    @Test func audioAndSubtitlesAreChosenByLanguageOrIndex() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        func track(_ played: [String: Any], _ key: String) -> (String?, Bool?)? {
            (played[key] as? [String: Any]).map { ($0["language"] as? String, $0["external"] as? Bool) }
        }
        let plain = try Self.play(user, ["Mandelbrot Zoom", "--start", "0", "--duration", "1"])
        #expect(track(plain, "audio")?.0 == "eng" && plain["subtitle"] == nil, "the server's default: English, no subtitles: \(plain)")

        let german = try Self.play(user, ["Mandelbrot Zoom", "--start", "0", "--duration", "1", "--audio", "de", "--subtitle", "fre"])
        #expect(track(german, "audio")?.0 == "ger", "\(german)")
        #expect(track(german, "subtitle")?.0 == "fre" && track(german, "subtitle")?.1 == true, "the file beside the media: \(german)")
        let started = try Self.reports(server, session: german["play_session_id"] as? String).first { $0.kind == "start" }
        #expect(started?.audioStreamIndex == 2 && started?.subtitleStreamIndex == 4, "the server is told which streams play")

        let byIndex = try Self.play(user, ["Mandelbrot Zoom", "--start", "0", "--duration", "1", "--audio", "2", "--subtitle", "3"])
        #expect(track(byIndex, "audio")?.0 == "ger" && track(byIndex, "subtitle")?.0 == "eng" && track(byIndex, "subtitle")?.1 == false, "\(byIndex)")
        let none = try Self.play(user, ["Mandelbrot Zoom", "--start", "0", "--duration", "1", "--subtitle", "none"])
        #expect(none["subtitle"] == nil, "\(none)")

        let missing = try user.farcast(["play", "Mandelbrot Zoom", "--audio", "jpn"] + Self.headless)
        #expect(missing.status == 1 && missing.stderr.contains("Mandelbrot Zoom has no audio stream 'jpn' (it has 1 eng English, 2 ger Deutsch"),
                "\(missing.stderr)")
        // A subtitle file the server fails to give is left out with a note; playback goes on.
        let id = try #require(try Self.movie(user, "Mandelbrot Zoom")?["id"] as? String)
        try server.hook("/StandIn/Fault?path=/Videos/\(id)/\(id)/Subtitles/4/0/Stream.srt&mode=status-500")
        let result = try user.farcast(["play", "Mandelbrot Zoom", "--start", "0", "--duration", "1", "--subtitle", "fre", "--json"] + Self.headless)
        #expect(result.status == 0 && result.stderr.contains("farcast: note: subtitles fre not loaded"), "\(result.stderr)")
        #expect(try jsonItems(result.stdout).first?["subtitle"] == nil)
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

    @Test func anEpisodeIsFollowedByTheNextOnesAndAnAlbumPlaysItsTracks() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        // Season 1's last episode, then season 2's two (1 s each), each its own play session.
        let episodes = try Self.playAll(user, ["Phase Shift", "--start", "0"])
        #expect(episodes.map { $0["name"] as? String ?? "" } == ["Phase Shift", "Return Path", "Dead Air"])
        #expect(episodes.allSatisfy { $0["end"] as? String == "finished" })
        #expect(Set(episodes.compactMap { $0["play_session_id"] as? String }).count == 3)
        let single = try Self.playAll(user, ["Phase Shift", "--start", "0", "--no-next"])
        #expect(single.map { $0["name"] as? String ?? "" } == ["Phase Shift"])
        // An album: its FLAC tracks in order, through /Audio/{id}/universal.
        let tracks = try Self.playAll(user, ["Test Tones"])
        #expect(tracks.map { $0["name"] as? String ?? "" } == ["A 220", "E 330", "A 440"])
        #expect(tracks.allSatisfy { $0["end"] as? String == "finished" && $0["method"] as? String == "DirectPlay" && $0["container"] as? String == "flac" })
        let kinds = try Self.reports(server).filter { $0.kind == "start" || $0.kind == "stopped" }.map(\.kind)
        #expect(kinds == Array(repeating: ["start", "stopped"], count: 7).flatMap { $0 }, "\(kinds)")
    }

    /// An album plays gapless: every track through the universal endpoint, all on one mpv (each
    /// queued while the one before plays), each its own play session reported in order; a
    /// track whose media lives elsewhere is reached through the endpoint's 302. `--no-gapless`
    /// starts an mpv per track. mpv is run through a wrapper that notes each start and then
    /// runs the real mpv: the count is what tells one mpv from three.
    @Test func anAlbumPlaysGaplessOnOneMPVThroughTheUniversalEndpoint() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        let mpv = try requireExecutable("mpv", package: "mpv")
        let tracks = try #require(try user.items(["ls", "Test Tones"]))
        let ids = tracks.compactMap { $0["id"] as? String }
        try #require(ids.count == 3)
        _ = try server.hook("/StandIn/Remote?item=\(ids[2])")
        let starts = user.folder.path + "/mpv-starts"
        let wrapper = user.folder.path + "/mpv"
        try "#!/bin/sh\ncase \"$*\" in *--input-ipc-server*) echo started >> '\(starts)';; esac\nexec '\(mpv)' \"$@\"\n"
            .write(toFile: wrapper, atomically: true, encoding: .utf8)
        chmod(wrapper, 0o755)
        func mpvStarts() -> Int { ((try? String(contentsOfFile: starts, encoding: .utf8)) ?? "").split(separator: "\n").count }

        let played = try Self.playAll(user, ["Test Tones", "--start", "0", "--mpv", wrapper])
        #expect(played.map { $0["name"] as? String ?? "" } == ["A 220", "E 330", "A 440"])
        for track in played {
            #expect(track["end"] as? String == "finished" && track["method"] as? String == "DirectPlay", "\(track)")
            let at = (track["position_seconds"] as? NSNumber)?.doubleValue ?? 0
            #expect(abs(at - 2) < 0.1, "\(track["name"] ?? "") ended at \(at) s of 2")
        }
        #expect(mpvStarts() == 1, "\(mpvStarts()) mpv processes for one album")
        let reports = try Self.reports(server)
        let universal = reports.filter { $0.kind == "universal" }
        #expect(universal.map { $0.itemId ?? "" } == ids, "each track once through /Audio/{id}/universal")
        #expect(universal.map { $0.playMethod ?? "" } == ["DirectPlay", "DirectPlay", "Redirect"])
        #expect(reports.contains { $0.kind == "remote-fetch" && $0.itemId == ids[2] }, "the redirect was followed to the remote media")
        // Each track's session: Playing, then Stopped at its end, before the next one's Playing.
        let sessions = reports.filter { $0.kind == "start" || $0.kind == "stopped" }
        #expect(sessions.map(\.kind) == ["start", "stopped", "start", "stopped", "start", "stopped"], "\(sessions.map(\.kind))")
        #expect(sessions.map { $0.itemId ?? "" } == [ids[0], ids[0], ids[1], ids[1], ids[2], ids[2]])
        #expect(Set(played.compactMap { $0["play_session_id"] as? String }).count == 3)

        let separate = try Self.playAll(user, ["Test Tones", "--start", "0", "--mpv", wrapper, "--no-gapless"])
        #expect(separate.count == 3 && separate.allSatisfy { $0["end"] as? String == "finished" })
        #expect(mpvStarts() == 4, "--no-gapless: one mpv per track")
    }

    /// The universal endpoint encodes what the asked containers cannot hold (here FLAC for an
    /// MP3/AAC player) into the transcoding container, refuses an anonymous caller, and says
    /// why it transcoded.
    @Test func theUniversalEndpointTranscodesWhatThePlayerCannotTake() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        let id = try #require(try user.items(["ls", "Test Tones"])?.first?["id"] as? String)
        let state = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: user.folder.path + "/state/farcast/jellyfin/servers.json")))
        let token = try #require(((state as? [String: Any])?["servers"] as? [[String: Any]])?.first.flatMap { ($0["users"] as? [[String: Any]])?.first?["token"] as? String })
        let curl = try requireExecutable("curl", package: "curl")
        let ffprobe = try requireExecutable("ffprobe", package: "ffmpeg")
        let base = "http://127.0.0.1:\(server.port)/Audio/\(id)/universal?Container=mp3,m4a%7Caac&TranscodingContainer=aac&AudioCodec=aac&TranscodingProtocol=http"
        let out = user.folder.path + "/universal.aac"
        let answer = try run(curl, ["-sS", "-o", out, "-w", "%{http_code} %{content_type}", base + "&ApiKey=\(token)"], timeout: 30)
        #expect(answer.stdout == "200 audio/aac", "\(answer.stdout) \(answer.stderr)")
        let probe = try run(ffprobe, ["-v", "error", "-show_entries", "stream=codec_name", "-of", "csv=p=0", out], timeout: 20)
        #expect(probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "aac", "the answer is \(probe.stdout) \(probe.stderr)")
        let decision = try #require(try Self.reports(server).last { $0.kind == "universal" })
        #expect(decision.playMethod == "Transcode" && decision.reasons == ["ContainerNotSupported"], "\(decision)")
        let direct = try run(curl, ["-sS", "-o", "/dev/null", "-w", "%{http_code} %{content_type}", "http://127.0.0.1:\(server.port)/Audio/\(id)/universal?Container=flac&ApiKey=\(token)"], timeout: 20)
        #expect(direct.stdout == "200 audio/flac")
        let anonymous = try run(curl, ["-sS", "-o", "/dev/null", "-w", "%{http_code}", base], timeout: 20)
        #expect(anonymous.stdout == "401")
    }

    /// Another client's remote control reaches the cast target through the server's live
    /// session: here the stand-in's Send hook pushes the messages a real server relays
    /// (Play, Playstate, GeneralCommand), shaped as a 10.11 server sends them.
    @Test func theCastTargetFollowsAnotherClientsCommands() throws {
        _ = try requireExecutable("mpv", package: "mpv")
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        let cast = try BackgroundProcess(try farcastBinary(), ["jellyfin", "cast-target", "--duration", "60", "--test-progress-interval", "0.5", "--json"] + Self.headless,
                                         environment: user.environment, logName: "cast-target")
        defer { cast.stop() }
        func waitFor(_ what: String, timeout: Double = 10, _ done: () throws -> Bool) throws {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if try done() { return }
                Thread.sleep(forTimeInterval: 0.05)
            }
            Issue.record("waited \(timeout) s for \(what); cast-target said:\n\(cast.log.suffix(2000))\nreports: \(try Self.reports(server).map { "\($0.kind) \($0.positionSeconds ?? -1) \($0.isPaused ?? false)" })")
            throw PeerFailed(name: "cast-target", log: cast.log)
        }
        func send(_ json: String) throws { _ = try server.hook("/StandIn/Send", body: json) }
        try waitFor("the live session") { try server.get("/StandIn/Sockets").body == "1" }
        let pattern = try #require(try Self.movie(user, "Test Pattern")?["id"] as? String)
        let bars = try #require(try Self.movie(user, "Colour Bars")?["id"] as? String)
        func starts(_ id: String) throws -> Int { try Self.reports(server).filter { $0.kind == "start" && $0.itemId == id }.count }

        try send(#"{"MessageType":"Play","MessageId":"m1","Data":{"ItemIds":["\#(pattern)","\#(bars)"],"PlayCommand":"PlayNow","StartPositionTicks":0,"ControllingUserId":"x"}}"#)
        try waitFor("Test Pattern to start") { try starts(pattern) == 1 }
        try send(#"{"MessageType":"Playstate","MessageId":"m2","Data":{"Command":"Pause","ControllingUserId":"x"}}"#)
        try waitFor("the pause") { try Self.reports(server).contains { $0.kind == "progress" && $0.isPaused == true } }
        try send(#"{"MessageType":"GeneralCommand","MessageId":"m3","Data":{"Name":"SetVolume","Arguments":{"Volume":"40"},"ControllingUserId":"x"}}"#)
        try waitFor("the volume") { try Self.reports(server).contains { $0.kind == "progress" && $0.volume == 40 } }
        try send(#"{"MessageType":"Playstate","MessageId":"m4","Data":{"Command":"Seek","SeekPositionTicks":3000000,"ControllingUserId":"x"}}"#)
        try waitFor("the seek") { try Self.reports(server).contains { $0.kind == "progress" && $0.isPaused == true && abs(($0.positionSeconds ?? 0) - 0.3) < 0.05 } }
        try send(#"{"MessageType":"Playstate","MessageId":"m5","Data":{"Command":"Unpause","ControllingUserId":"x"}}"#)
        try waitFor("playing again") { try Self.reports(server).last { $0.kind == "progress" }?.isPaused == false }
        try send(#"{"MessageType":"Playstate","MessageId":"m6","Data":{"Command":"NextTrack","ControllingUserId":"x"}}"#)
        try waitFor("Colour Bars to start") { try starts(bars) == 1 }
        // Colour Bars plays to its end; then a new Play, stopped by the remote.
        try waitFor("Colour Bars to finish") { try Self.reports(server).contains { $0.kind == "stopped" && $0.itemId == bars } }
        try send(#"{"MessageType":"Play","MessageId":"m7","Data":{"ItemIds":["\#(pattern)"],"PlayCommand":"PlayNow","StartPositionTicks":5000000}}"#)
        try waitFor("Test Pattern again") { try starts(pattern) == 2 }
        try send(#"{"MessageType":"Playstate","MessageId":"m8","Data":{"Command":"Stop"}}"#)
        try waitFor("the stop") { try Self.reports(server).filter { $0.kind == "stopped" && $0.itemId == pattern }.count == 2 }
        cast.signal(SIGINT)
        #expect(cast.waitForExit(timeout: 15), "cast-target did not end on Ctrl-C:\n\(cast.log.suffix(2000))")
        #expect(cast.terminationStatus == 0, "\(cast.log.suffix(2000))")

        let line = cast.log.split(separator: "\n").last { $0.hasPrefix(#"{"items""#) }.map(String.init) ?? ""
        let played = try jsonItems(line)
        #expect(played.map { "\($0["name"] as? String ?? "") \($0["end"] as? String ?? "")" } == ["Test Pattern stopped", "Colour Bars finished", "Test Pattern stopped"],
                "\(cast.log.suffix(2000))")
        let first = try Self.reports(server).filter { $0.itemId == pattern }
        // The first Test Pattern: stopped by NextTrack, after the seek to 0.3 s and a little play.
        let firstStop = first.first { $0.kind == "stopped" }?.positionSeconds ?? -1
        #expect(firstStop > 0.3 && firstStop < 2, "stopped at \(firstStop)")
        // The second: started where the Play said (0.5 s).
        let secondStart = first.filter { $0.kind == "start" }.last?.positionSeconds ?? -1
        #expect(abs(secondStart - 0.5) < 0.05, "started at \(secondStart)")
    }
}
