import Foundation
import Testing

/// artwork@v1 against aiosendspin 10.2.1's server (scripts/lib/sendspin_artwork_server.py, on
/// its artwork API): `farcast sendspin play --artwork DIR` keeps each channel's current picture
/// in DIR, byte for byte what the server encoded for that channel, removes it when the server
/// clears the channel, shows a picture scheduled ahead only when its time comes, and leaves
/// nothing behind when it stops.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct SendspinArtworkTests {
    @Test func picturesArriveWholeOnTimeAndAreClearedAsTheServerSays() throws {
        let folder = try TemporaryFolder()
        let record = folder.path + "/sent", shown = folder.path + "/shown"
        let port = SendspinServer.reservePort()
        let server = try SendspinServer.script("sendspin_artwork_server.py", port: port, ["--record", record, "--settle", "2", "--step", "2.5", "--lead", "2.5"],
                                               logName: "sendspin-artwork-server")
        defer { server.stop() }
        let player = try BackgroundProcess(try farcastBinary(), ["sendspin", "play", "ws://127.0.0.1:\(port)/sendspin", "--output", "null", "--duration", "14",
                                                                 "--artwork", shown, "--artwork-channel", "album:jpeg:64x32", "--artwork-channel", "none",
                                                                 "--artwork-channel", "artist:png:16x16", "-v"],
                                           environment: ["XDG_STATE_HOME": folder.path + "/state"].merging(ProcessInfo.processInfo.environment) { a, _ in a },
                                           logName: "farcast-artwork")
        defer { player.stop() }
        func contents(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map(Array.init) }
        /// The pictures the server handed to channel `channel`, in order (empty: a clear).
        func sent(_ channel: Int) -> [[UInt8]] {
            let names = ((try? FileManager.default.contentsOfDirectory(atPath: record)) ?? []).filter { $0.contains("-channel\(channel).") }
            return names.sorted { Int($0.split(separator: "-")[1])! < Int($1.split(separator: "-")[1])! }.compactMap { contents(record + "/" + $0) }
        }
        let logs = { "\(player.log)\n\(server.log.suffix(2000))" }

        // Step 1: album A on channel 0 (JPEG 64×32), artist B on channel 2 (PNG 16×16).
        try waitUntil("channel-0.jpg and channel-2.png", timeout: 20) {
            contents(shown + "/channel-0.jpg") != nil && contents(shown + "/channel-2.png") != nil
        }
        let album = try #require(sent(0).last { !$0.isEmpty }, "the server sent channel 0 a picture")
        let artist = try #require(sent(2).last { !$0.isEmpty }, "the server sent channel 2 a picture")
        #expect(contents(shown + "/channel-0.jpg") == album, "channel 0 is byte for byte what the server encoded")
        #expect(contents(shown + "/channel-2.png") == artist)
        #expect(!FileManager.default.fileExists(atPath: shown + "/channel-1.jpg"), "channel 1 asked for none")
        #expect(player.log.contains("artwork channel 0: 64×32 jpeg") && player.log.contains("artwork channel 2: 16×16 png"), "\(logs())")

        // Step 2: the album is cleared; the artist stays.
        try waitUntil("channel 0 cleared", timeout: 10) { contents(shown + "/channel-0.jpg") == nil }
        #expect(contents(shown + "/channel-2.png") == artist)

        // Step 3: album C due 2.5 s after the server set it: not shown before its time.
        try waitUntil("the scheduled picture was set", timeout: 10) { FileManager.default.fileExists(atPath: record + "/done") }
        let set = Date()
        #expect(contents(shown + "/channel-0.jpg") == nil, "a scheduled picture waits for its time")
        try waitUntil("the scheduled picture shown", timeout: 10) { contents(shown + "/channel-0.jpg") != nil }
        let waited = Date().timeIntervalSince(set)
        #expect(waited > 1.8 && waited < 4, "shown \(waited) s after it was set, due at 2.5 s")
        #expect(contents(shown + "/channel-0.jpg") == sent(0).last, "the scheduled picture, byte for byte")

        // The player stops: nothing is current any more.
        #expect(player.waitForExit(timeout: 20) && player.terminationStatus == 0, "\(logs())")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: shown)) ?? []
        #expect(left.isEmpty, "left behind: \(left)")
    }
}
