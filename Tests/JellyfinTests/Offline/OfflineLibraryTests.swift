import Foundation
import Testing
@testable import Jellyfin

/// The offline index on its own (an SQLite file in a temporary folder): ordering, lookup,
/// which position wins, and that a sync settles only what it sent. Downloads, playback and sync
/// against a server are IntegrationTests' JellyfinOfflineTests.
struct OfflineLibraryTests {
    let folder = NSTemporaryDirectory() + "farcast-offline-test-\(UUID().uuidString.prefix(8))"
    let home = OfflineAccount(serverId: "s1", serverName: "Home", userId: "u1", userName: "ann")
    let ticksPerSecond: Int64 = 10_000_000

    func library() throws -> OfflineLibrary { try OfflineLibrary(path: folder + "/data/jellyfin-offline.sqlite") }

    func episode(_ id: String, _ name: String, season: Int, number: Int, runtime: Int64 = 1000) -> JellyfinItem {
        JellyfinItem(id: id, name: name, kind: .episode, seriesName: "Signal Tests", seriesId: "series", seasonName: "Season \(season)",
                     indexNumber: number, parentIndexNumber: season, runTimeTicks: runtime * 10_000_000)
    }

    func file(_ name: String, bytes: Int = 10) throws -> String {
        try FileManager.default.createDirectory(atPath: folder + "/files", withIntermediateDirectories: true)
        let path = folder + "/files/" + name
        try Data(repeating: 7, count: bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test func entriesComeInLibraryOrderAndAreFoundByIdNameOrGroup() throws {
        let index = try library()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try index.record(episode("e3", "Return Path", season: 2, number: 1), account: home, filePath: try file("e3"), fileBytes: 10)
        try index.record(episode("e2", "Carrier Wave", season: 1, number: 2), account: home, filePath: try file("e2"), fileBytes: 10)
        try index.record(episode("e1", "Pilot Tone", season: 1, number: 1), account: home, filePath: try file("e1"), fileBytes: 10)
        try index.record(JellyfinItem(id: "0123456789abcdef0123456789abcdef", name: "Colour Bars", kind: .movie, productionYear: 2019),
                         account: home, filePath: try file("m"), fileBytes: 10, image: [0xFF, 0xD8, 0xFF, 0xE0, 1, 2])
        #expect(try index.entries().map(\.item.name) == ["Colour Bars", "Pilot Tone", "Carrier Wave", "Return Path"])

        #expect(try index.find("01234567-89ab-cdef-0123-456789abcdef").map(\.item.name) == ["Colour Bars"])
        #expect(try index.find("pilot tone").map(\.item.id) == ["e1"])
        #expect(try index.find("Signal Tests").map(\.item.id) == ["e1", "e2", "e3"])
        #expect(try index.find("Season 2").map(\.item.id) == ["e3"])
        #expect(throws: OfflineError.notDownloaded("Nope")) { try index.find("Nope") }
        #expect(try index.following(try #require(index.find("Carrier Wave").first)).map(\.item.id) == ["e3"])

        let film = try #require(try index.find("Colour Bars").first)
        #expect(film.item.productionYear == 2019 && film.fileIsPresent)
        #expect(film.imagePath?.hasSuffix("/data/jellyfin-offline-images/s1-0123456789abcdef0123456789abcdef.jpg") == true)
        #expect(FileManager.default.contents(atPath: film.imagePath ?? "") == Data([0xFF, 0xD8, 0xFF, 0xE0, 1, 2]))

        // The same item downloaded by a second user of the same server is a second entry; its
        // name alone is then ambiguous.
        let bob = OfflineAccount(serverId: "s1", serverName: "Home", userId: "u2", userName: "bob")
        try index.record(episode("e1", "Pilot Tone", season: 1, number: 1), account: bob, filePath: try file("e1b"), fileBytes: 10)
        #expect(throws: OfflineError.self) { try index.find("Pilot Tone") }
        #expect(try index.find("e1").count == 1, "an id picks one")
    }

    @Test func theLaterPositionIsWhereOfflinePlaybackResumes() throws {
        let index = try library()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        var item = episode("e1", "Pilot Tone", season: 1, number: 1)
        item.userData = UserItemData(playbackPositionTicks: 100 * ticksPerSecond, lastPlayedDate: t0)
        try index.record(item, account: home, filePath: try file("e1"), fileBytes: 10)
        func entry() throws -> OfflineEntry { try #require(try index.entry(itemId: "e1", serverId: "s1", userId: "u1")) }
        #expect(try entry().resumeSeconds == 100)

        try index.saveProgress(itemId: "e1", account: home, positionTicks: 300 * ticksPerSecond, finished: false, at: t0.addingTimeInterval(60))
        #expect(try entry().resumeSeconds == 300)
        #expect(try entry().isPlayed == false)
        // Older than the server's last playback: the server's position stands.
        try index.saveProgress(itemId: "e1", account: home, positionTicks: 300 * ticksPerSecond, finished: false, at: t0.addingTimeInterval(-60))
        #expect(try entry().resumeSeconds == 100)
        // The server's default thresholds: past 90 % is played (from the start), under 5 % from the start.
        try index.saveProgress(itemId: "e1", account: home, positionTicks: 960 * ticksPerSecond, finished: false, at: t0.addingTimeInterval(60))
        #expect(try entry().resumeSeconds == 0 && entry().isPlayed)
        try index.saveProgress(itemId: "e1", account: home, positionTicks: 20 * ticksPerSecond, finished: false, at: t0.addingTimeInterval(60))
        #expect(try entry().resumeSeconds == 0 && !entry().isPlayed)
        #expect(try index.pendingProgress(serverId: "s1", userId: "u1").count == 1, "each save replaces the last")
        #expect(try index.hasPendingProgress(serverId: "s1", userId: "u1"))
        #expect(try !index.hasPendingProgress(serverId: "s1", userId: "u2"))
    }

    @Test func aSyncSettlesOnlyWhatItSentAndRemovalKeepsProgress() throws {
        let index = try library()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = try file("e1")
        try index.record(episode("e1", "Pilot Tone", season: 1, number: 1), account: home, filePath: path, fileBytes: 10)
        let t1 = Date(timeIntervalSince1970: 1_800_000_000)
        try index.saveProgress(itemId: "e1", account: home, positionTicks: 5 * ticksPerSecond, finished: false, at: t1)
        let sent = try #require(try index.pendingProgress(serverId: "s1", userId: "u1").first)
        // Played again while the sync was on its way: that later position must stay pending.
        try index.saveProgress(itemId: "e1", account: home, positionTicks: 9 * ticksPerSecond, finished: false, at: t1.addingTimeInterval(5))
        let server = UserItemData(playbackPositionTicks: 5 * ticksPerSecond, lastPlayedDate: t1)
        try index.settle(sent, serverId: "s1", userId: "u1", server: server)
        #expect(try index.pendingProgress(serverId: "s1", userId: "u1").map(\.positionTicks) == [9 * ticksPerSecond])
        #expect(try index.entry(itemId: "e1", serverId: "s1", userId: "u1")?.serverData == server)

        let entry = try #require(try index.entry(itemId: "e1", serverId: "s1", userId: "u1"))
        try index.remove(entry)
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(try index.entries().isEmpty)
        #expect(try index.pendingProgress(serverId: "s1", userId: "u1").count == 1, "removing a download keeps its unsynced history")
    }

    @Test func theIndexIsPrivateAndReopens() throws {
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try library().record(episode("e1", "Pilot Tone", season: 1, number: 1), account: home, filePath: try file("e1"), fileBytes: 10)
        let reopened = try library()
        #expect(try reopened.entries().count == 1)
        let mode = (try FileManager.default.attributesOfItem(atPath: reopened.path)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600)
        // A file that changed size is no longer the download.
        try Data(count: 3).write(to: URL(fileURLWithPath: folder + "/files/e1"))
        #expect(try reopened.entries().first?.fileIsPresent == false)
        #expect(OfflineLibrary.imageExtension([0x89, 0x50, 0x4E, 0x47, 0x0D]) == ".png")
        #expect(OfflineLibrary.imageExtension(Array("RIFF\0\0\0\0WEBPVP8".utf8)) == ".webp")
        #expect(OfflineLibrary.imageExtension([1, 2, 3]) == ".img")
    }
}
