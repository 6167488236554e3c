import FarcastSupport
import Foundation
import Testing
@testable import Jellyfin

struct StorageTests {
    func temporaryFolder() throws -> String {
        let path = NSTemporaryDirectory() + "farcast-jellyfin-test-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func credentialsRoundTripPrivately() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let state = StateDirectory(path: folder + "/state")
        let store = FileCredentialStore(directory: state)
        #expect(try store.load() == RememberedServers())
        var servers = RememberedServers()
        servers.remember(server: .init(id: "s1", name: "Home", url: "http://home:8096"), user: RememberedUser(id: "u1", name: "alice", token: "t1"))
        servers.remember(server: .init(id: "s2", name: "Cabin", url: "https://cabin.example.org/jf"), user: RememberedUser(id: "u2", name: "bob", token: "t2"))
        servers.remember(server: .init(id: "s1", name: "Home", url: "http://home:8096"), user: RememberedUser(id: "u3", name: "carol", token: "t3"))
        try store.save(servers)
        #expect(try state.permissions(of: "jellyfin/servers.json") == 0o600)
        let loaded = try store.load()
        #expect(loaded == servers)
        #expect(loaded.server(matching: nil)?.id == "s1")
        #expect(loaded.server(matching: "cabin")?.id == "s2")
        #expect(loaded.server(matching: "https://cabin.example.org/jf/")?.id == "s2")
        #expect(loaded.server(matching: "s1")?.user(matching: nil)?.name == "carol")
        #expect(loaded.server(matching: "s1")?.user(matching: "ALICE")?.token == "t1")
    }

    @Test func forgettingTheLastUserForgetsTheServer() {
        var servers = RememberedServers()
        servers.remember(server: .init(id: "s1", name: "Home", url: "u"), user: RememberedUser(id: "u1", name: "a", token: "t"))
        servers.remember(server: .init(id: "s2", name: "Cabin", url: "v"), user: RememberedUser(id: "u2", name: "b", token: "t"))
        let forgotten = servers.forget(serverId: "s2", userId: "u2")
        #expect(forgotten)
        #expect(servers.servers.map(\.id) == ["s1"])
        #expect(servers.current == "s1")
        let again = servers.forget(serverId: "s2", userId: "u2")
        #expect(!again)
    }

    @Test func aDamagedFileIsAnErrorThatNamesIt() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let state = StateDirectory(path: folder)
        try state.write(Array("{not json".utf8), to: "jellyfin/servers.json")
        do {
            _ = try FileCredentialStore(directory: state).load()
            Issue.record("expected an error")
        } catch let error as JellyfinError {
            #expect(error.description.contains("servers.json"))
        }
    }

    @Test func theImageCacheStaysWithinItsBoundAndEvictsTheLeastRecentlyUsed() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let cache = try ImageCache(directory: folder + "/images", maxBytes: 10_000)
        let keys = (0..<6).map { ImageCache.Key(itemId: String(format: "%032x", $0), imageType: "Primary", tag: "tag\($0)") }
        for (i, key) in keys.prefix(4).enumerated() {
            try cache.store([UInt8](repeating: UInt8(i), count: 2_000), for: key)
            usleep(20_000)
        }
        #expect(cache.bytes(for: keys[0]) == [UInt8](repeating: 0, count: 2_000), "read: now the most recent")
        usleep(20_000)
        try cache.store([UInt8](repeating: 4, count: 2_000), for: keys[4])
        try cache.store([UInt8](repeating: 5, count: 2_000), for: keys[5])   // 12 000 > 10 000: trim to ≤ 9 000
        #expect(cache.totalBytes <= 9_000)
        #expect(cache.bytes(for: keys[0]) != nil, "recently read survives")
        #expect(cache.bytes(for: keys[5]) != nil, "newest survives")
        #expect(cache.bytes(for: keys[1]) == nil, "least recently used goes first")
        // An image larger than the whole cache is not stored.
        try cache.store([UInt8](repeating: 9, count: 20_000), for: ImageCache.Key(itemId: "big", imageType: "Primary", tag: "t"))
        #expect(cache.totalBytes <= 10_000)
    }

    @Test func imageKeysWithOddCharactersBecomeSafeFileNames() {
        let key = ImageCache.Key(itemId: "../../etc/passwd", imageType: "Primary", tag: "x y")
        #expect(!key.fileName.contains("/"))
        #expect(key.fileName.hasPrefix("h"))
    }
}
