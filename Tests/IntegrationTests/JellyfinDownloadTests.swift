import Foundation
import Testing

/// `farcast jellyfin download` against the stand-in server (no real Jellyfin server runs on
/// these machines; JellyfinStandInServer), whose /Items/{id}/Download serves the media files with
/// byte ranges and, on request, breaks: cut after half the file, or a Content-Length that lies.
/// Every file is compared byte for byte with the stand-in's own.
@Suite(.tags(.groupC), .serialized, .timeLimit(.minutes(5)))
struct JellyfinDownloadTests {
    typealias User = JellyfinCLITests.User

    static func media(_ server: JellyfinStandInServer, _ file: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: server.dataDirectory + "/media/" + file))
    }

    @Test func aSeriesAndAnAlbumArriveWholeInTheirFoldersAndASecondRunSkipsThem() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        let out = user.folder.path + "/downloads"
        let series = try user.items(["download", "Signal Tests", "-o", out, "--parallel", "3"]) ?? []
        #expect(series.map { $0["state"] as? String ?? "" } == Array(repeating: "downloaded", count: 5))
        let expected = [("Season 1", "S01E01 - Pilot Tone", "s1e1"), ("Season 1", "S01E02 - Carrier Wave", "s1e2"), ("Season 1", "S01E03 - Phase Shift", "s1e3"),
                        ("Season 2", "S02E01 - Return Path", "s2e1"), ("Season 2", "S02E02 - Dead Air", "s2e2")]
        for (season, name, file) in expected {
            let path = "\(out)/Signal Tests/\(season)/Signal Tests - \(name).mkv"
            #expect(FileManager.default.contents(atPath: path) == (try Self.media(server, file + ".mkv")), "\(path)")
        }
        let album = try user.items(["download", "Test Tones", "-o", out]) ?? []
        #expect(album.compactMap { $0["path"] as? String } == ["01 - A 220", "02 - E 330", "03 - A 440"].map { "\(out)/Farcast Test Orchestra/Test Tones/\($0).flac" })
        for (n, row) in album.enumerated() {
            #expect(FileManager.default.contents(atPath: row["path"] as? String ?? "") == (try Self.media(server, "track\(n + 1).flac")))
        }
        let again = try user.items(["download", "Signal Tests", "-o", out]) ?? []
        #expect(again.map { $0["state"] as? String ?? "" } == Array(repeating: "present", count: 5))
        let leftovers = try FileManager.default.subpathsOfDirectory(atPath: out).filter { $0.hasSuffix(".part") }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test func aDownloadCutMidFileResumesToTheExactFile() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        let out = user.folder.path + "/downloads"
        let id = try #require(try user.items(["ls", "Movies"])?.first { $0["name"] as? String == "Colour Bars" }?["id"] as? String)
        let original = try Self.media(server, "movie2.mp4")
        let target = out + "/Colour Bars (2019).mp4"

        try server.hook("/StandIn/Fault?path=/Items/\(id)/Download&mode=cut-half")
        let cut = try user.farcast(["download", "Colour Bars", "-o", out])
        #expect(cut.status == 1)
        #expect(cut.stderr.contains("Colour Bars: the download stopped after \(original.count / 2) of \(original.count) bytes; run it again to resume from there"), "\(cut.stderr)")
        #expect(!FileManager.default.fileExists(atPath: target), "a cut file must not look complete")
        #expect(FileManager.default.contents(atPath: target + ".part") == original.prefix(original.count / 2))

        try server.hook("/StandIn/Fault?path=/Items/\(id)/Download&mode=clear")
        let resumed = try user.items(["download", "Colour Bars", "-o", out])?.first
        #expect(resumed?["state"] as? String == "resumed")
        #expect((resumed?["resumed_from"] as? NSNumber)?.intValue == original.count / 2)
        #expect(FileManager.default.contents(atPath: target) == original)
        #expect(!FileManager.default.fileExists(atPath: target + ".part"))
    }

    @Test func aServerThatLiesAboutTheSizeNeverLeavesAFileThatLooksWhole() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        let out = user.folder.path + "/downloads"
        let id = try #require(try user.items(["ls", "Movies"])?.first { $0["name"] as? String == "Test Pattern" }?["id"] as? String)
        let original = try Self.media(server, "movie1.mp4")
        let target = out + "/Test Pattern (2021).mp4"

        // Content-Length 1000 bytes longer than what comes, and longer than the item's size.
        try server.hook("/StandIn/Fault?path=/Items/\(id)/Download&mode=lie-size")
        let lied = try user.farcast(["download", "Test Pattern", "-o", out])
        #expect(lied.status == 1)
        #expect(lied.stderr.contains("Test Pattern:"), "\(lied.stderr)")
        #expect(!FileManager.default.fileExists(atPath: target))
        // Told the truth again, the kept bytes are checked (a Range past them answers 416) and kept.
        try server.hook("/StandIn/Fault?path=/Items/\(id)/Download&mode=clear")
        let fixed = try user.items(["download", "Test Pattern", "-o", out])?.first
        #expect(fixed?["state"] as? String == "resumed" || fixed?["state"] as? String == "downloaded", "\(fixed ?? [:])")
        #expect(FileManager.default.contents(atPath: target) == original)
    }

    /// `--transcode`: the server's transcode (the stand-in's ffmpeg: H.264 and AAC in a
    /// fragmented MP4, sent chunked with no length) saved beside the originals as NAME - SIZE.mp4,
    /// never taller than asked; one cut mid-way is never renamed into place and starts over.
    @Test func aTranscodeIsSavedWholeOrNotAtAll() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        let out = user.folder.path + "/downloads"
        let id = try #require(try user.items(["ls", "Movies"])?.first { $0["name"] as? String == "Colour Bars" }?["id"] as? String)
        let target = out + "/Colour Bars (2019) - 360p.mp4"

        try server.hook("/StandIn/Fault?path=/Videos/\(id)/stream.mp4&mode=cut-half")
        let cut = try user.farcast(["download", "Colour Bars", "-o", out, "--transcode", "360p"])
        #expect(cut.status == 1 && cut.stderr.contains("Colour Bars: the transcode broke off after"), "\(cut.stderr)")
        #expect(!FileManager.default.fileExists(atPath: target), "a cut transcode must not look complete")

        try server.hook("/StandIn/Fault?path=/Videos/\(id)/stream.mp4&mode=clear")
        let row = try #require(try user.items(["download", "Colour Bars", "-o", out, "--transcode", "360p"])?.first)
        #expect(row["state"] as? String == "downloaded" && row["path"] as? String == target, "\(row)")
        #expect(!FileManager.default.fileExists(atPath: target + ".part"))
        let probe = try run(try requireExecutable("ffprobe", package: "ffmpeg"),
                            ["-v", "error", "-show_entries", "stream=codec_name,height", "-of", "csv=p=0", target])
        let streams = probe.stdout.split(separator: "\n").map(String.init)
        #expect(streams.contains { $0.hasPrefix("h264,") && (Int($0.dropFirst(5)) ?? 9999) <= 360 } && streams.contains { $0.hasPrefix("aac") },
                "\(probe.stdout) \(probe.stderr)")
        // Recorded for offline play like any download; a second run finds it there.
        #expect(try user.items(["offline", "ls", "Colour Bars"])?.first?["path"] as? String == target)
        #expect(try user.items(["download", "Colour Bars", "-o", out, "--transcode", "360p"])?.first?["state"] as? String == "present")
        let audio = try user.farcast(["download", "A 220", "-o", out, "--transcode", "720p"])
        #expect(audio.status == 1 && audio.stderr.contains("a transcoded download is for video"), "\(audio.stderr)")
    }

    @Test func capsAndTheDiskGuardRefuseBeforeWriting() throws {
        let server = try JellyfinStandInServer(privateData: true)
        let user = try User()
        try user.login(server)
        let out = user.folder.path + "/downloads"
        let capped = try user.farcast(["download", "Test Pattern", "-o", out, "--max-size", "0.01"])
        #expect(capped.status == 1 && capped.stderr.contains("over the 10.2 KiB cap (raise --max-size to fetch it)"), "\(capped.stderr)")
        let full = try user.farcast(["download", "Test Pattern", "-o", out, "--reserve", "1000000000"])
        #expect(full.status == 1 && full.stderr.contains("not enough free space in \(out) for Test Pattern"), "\(full.stderr)")
        #expect((try? FileManager.default.contentsOfDirectory(atPath: out)) ?? [] == [], "nothing may be written when a download is refused")
        let blocked = user.folder.path + "/a-file"
        try "not a folder".write(toFile: blocked, atomically: true, encoding: .utf8)
        let notAFolder = try user.farcast(["download", "Test Pattern", "-o", blocked + "/sub"])
        #expect(notAFolder.status == 2 && notAFolder.stderr.contains("cannot make the download folder \(blocked)/sub: \(blocked) is not a folder"),
                "\(notAFolder.stderr)")
        let folder = try user.farcast(["download", "Movies", "-o", out])
        #expect(folder.status == 1 && folder.stderr.contains("name a film, episode, season, series, album or track"), "\(folder.stderr)")
    }
}
