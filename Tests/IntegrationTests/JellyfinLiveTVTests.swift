import Foundation
import Testing

/// `farcast jellyfin tv` against the stand-in's Live TV (no real Jellyfin server or tuner runs
/// on these machines): two channels ffmpeg makes live, a guide of 6-second programmes (so a
/// recording completes within the test), timers the stand-in records for real while their
/// programme airs. mpv plays without a window or sound.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct JellyfinLiveTVTests {
    typealias User = JellyfinCLITests.User
    static let slot = 6.0

    static func server() throws -> JellyfinStandInServer {
        try JellyfinStandInServer(extra: ["--programme-seconds", "\(Int(slot))"])
    }

    static func date(_ value: Any?) -> Date? {
        guard let text = value as? String else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }

    @Test func channelsAndTheGuideShowWhatIsOnAndWhatFollows() throws {
        let server = try Self.server()
        let user = try User()
        try user.login(server)
        let channels = try jsonItems(try user.farcast(["tv", "channels", "--json"]).stdout)
        #expect(channels.map { $0["number"] as? String } == ["1", "2"])
        #expect(channels.map { $0["name"] as? String } == ["Farcast One", "Test Card"])
        for channel in channels {
            let onNow = channel["on_now"] as? [String: Any]
            #expect(onNow?["airing"] as? Bool == true, "\(channel)")
        }
        let guide = try jsonItems(try user.farcast(["tv", "guide", "Farcast One", "--hours", "0.02", "--json"]).stdout)
        #expect(guide.count >= 12 && guide.count <= 14, "\(guide.count) programmes of 6 s in 72 s")
        #expect(Set(guide.compactMap { $0["channel"] as? String }) == ["Farcast One"])
        #expect(guide.first?["airing"] as? Bool == true)
        let starts = guide.compactMap { Self.date($0["start"]) }, ends = guide.compactMap { Self.date($0["end"]) }
        #expect(starts.count == guide.count && ends.count == guide.count)
        #expect(zip(ends, starts.dropFirst()).allSatisfy { $0 == $1 }, "each programme starts as the one before ends")
        let unknown = try user.farcast(["tv", "guide", "Channel 9"])
        #expect(unknown.status == 1 && unknown.stderr.contains("no channel is called Channel 9") && unknown.stderr.contains("Farcast One"), "\(unknown.stderr)")
    }

    @Test func aChannelPlaysLiveAndItsStreamIsClosedAfterwards() throws {
        let server = try Self.server()
        let user = try User()
        try user.login(server)
        _ = try requireExecutable("mpv", package: "mpv")
        let result = try user.farcast(["tv", "play", "2", "--duration", "2", "--json"] + JellyfinPlaybackTests.headless, timeout: 60)
        #expect(result.status == 0, "\(result.stderr)")
        let played = try #require(try jsonItems(result.stdout).first)
        #expect(played["name"] as? String == "Test Card" && played["method"] as? String == "DirectStream" && played["container"] as? String == "ts")
        #expect(played["end"] as? String == "stopped")
        let at = (played["position_seconds"] as? NSNumber)?.doubleValue ?? 0
        #expect(at >= 1 && at <= 3, "the live picture played for \(at) s of --duration 2")
        let live = try #require(played["live_stream_id"] as? String)
        let session = try #require(played["play_session_id"] as? String)
        let reports = try JellyfinPlaybackTests.reports(server)
        #expect(reports.filter { $0.playSessionId == session }.map(\.kind) == ["decision", "start", "stopped"])
        #expect(reports.contains { $0.kind == "close-live" && $0.playSessionId == live }, "the live stream was closed")
        #expect(try server.get("/StandIn/LiveStreams").body == "[]", "no live stream left open")
    }

    @Test func aProgrammeIsRecordedAsItAirsAndPlaysAfterwards() throws {
        let server = try Self.server()
        let user = try User()
        try user.login(server)
        // The next programme on channel 1, recorded when it airs.
        let guide = try jsonItems(try user.farcast(["tv", "guide", "1", "--hours", "0.01", "--json"]).stdout)
        let next = try #require(guide.first { ($0["airing"] as? Bool) == false })
        let id = try #require(next["id"] as? String)
        let set = try user.farcast(["tv", "record", id, "--json"])
        #expect(set.status == 0, "\(set.stderr)")
        let timer = try JSONSerialization.jsonObject(with: Data(set.stdout.utf8)) as? [String: Any]
        #expect(timer?["programme_id"] as? String == id && timer?["status"] as? String == "New", "\(set.stdout)")
        #expect(try jsonItems(try user.farcast(["tv", "timers", "--json"]).stdout).contains { $0["programme_id"] as? String == id })

        // Another, cancelled: it is no longer set.
        let later = try #require(guide.last { ($0["airing"] as? Bool) == false && $0["id"] as? String != id })
        let second = try JSONSerialization.jsonObject(with: Data(try user.farcast(["tv", "record", later["id"] as? String ?? "", "--json"]).stdout.utf8)) as? [String: Any]
        let cancelled = try user.farcast(["tv", "cancel", second?["id"] as? String ?? ""])
        #expect(cancelled.status == 0, "\(cancelled.stderr)")
        #expect(try !jsonItems(try user.farcast(["tv", "timers", "--json"]).stdout).contains { $0["programme_id"] as? String == later["id"] as? String })
        let unknown = try user.farcast(["tv", "cancel", "0123456789abcdef0123456789abcdef"])
        #expect(unknown.status == 1 && unknown.stderr.contains("not found"), "\(unknown.stderr)")

        // Recorded once the programme has aired (it starts within one slot and lasts one).
        var recordings: [[String: Any]] = []
        let deadline = Date().addingTimeInterval(4 * Self.slot)
        while Date() < deadline {
            recordings = try jsonItems(try user.farcast(["tv", "recordings", "--json"]).stdout)
            if !recordings.isEmpty { break }
            Thread.sleep(forTimeInterval: 0.5)
        }
        let recording = try #require(recordings.first, "no recording after \(4 * Self.slot) s")
        #expect(recording["name"] as? String == next["name"] as? String)
        let length = (recording["runtime_seconds"] as? NSNumber)?.doubleValue ?? 0
        // From when the recorder started (a moment after the programme did, longer on a loaded
        // machine) to the programme's end.
        #expect(length > Self.slot / 2 && length < Self.slot + 0.5, "a \(length) s recording of a \(Self.slot) s programme")
        #expect(try !jsonItems(try user.farcast(["tv", "timers", "--json"]).stdout).contains { $0["programme_id"] as? String == id },
                "a timer that has recorded is done")
        let played = try JellyfinPlaybackTests.play(user, [recording["id"] as? String ?? "", "--start", "0"])
        #expect(played["end"] as? String == "finished" && played["method"] as? String == "DirectPlay", "\(played)")

        let nothing = try user.farcast(["tv", "record", "Nothing Like It"])
        #expect(nothing.status == 1 && nothing.stderr.contains("nothing called Nothing Like It airs"), "\(nothing.stderr)")
    }
}
