import FarcastSupport
import Foundation
import GRDB
@testable import Hosts
import Testing

/// The host book: schema migrations, the record's round trip, names, and secrets kept out.
struct HostBookTests {
    static func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("farcast-book-\(UUID().uuidString)/farcast/hosts.sqlite").path
    }

    @Test func anEmptyFileGetsEveryMigrationAndPrivateModes() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let book = try HostBook(path: path)
        #expect(try book.appliedMigrations() == ["v1-hosts", "v2-preferences"])
        #expect(try book.all().isEmpty)
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o600)
        #expect(try FileManager.default.attributesOfItem(atPath: (path as NSString).deletingLastPathComponent)[.posixPermissions] as? Int == 0o700)
        // WAL, so two processes can share it.
        let mode = try DatabaseQueue(path: path).read { try String.fetchOne($0, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
    }

    @Test func aFileOfThePreviousSchemaIsUpgradedWithItsHosts() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        // What the first version wrote: schema v1 and one host.
        let old = try DatabaseQueue(path: path)
        try HostBook.migrator.migrate(old, upTo: "v1-hosts")
        try old.write { db in
            try db.execute(sql: """
                INSERT INTO host (name, protocol, address, port, user, tls, path, ssh_route, notes, created_at)
                VALUES ('office', 'vnc', '10.0.0.5', 5901, 'alice', 0, NULL, 'me@bastion:2222', 'desk', '2026-01-02 03:04:05.000')
                """)
        }
        try old.close()
        let book = try HostBook(path: path)
        #expect(try book.appliedMigrations() == ["v1-hosts", "v2-preferences"])
        let host = try #require(try book.host(named: "OFFICE"))
        #expect(host.hostAddress.url == "vnc://alice@10.0.0.5:5901?ssh=me@bastion:2222")
        #expect(host.preferences == HostPreferences())
        #expect(host.lastConnected == nil)
        #expect(host.notes == "desk")
    }

    @Test func hostsRoundTripAndNamesAreCaseInsensitive() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let book = try HostBook(path: path)
        var host = SavedHost(name: "Kitchen", address: try HostAddress(parsing: "sendspin://kitchen.local?ssh=pi@gateway"), notes: "upstairs")
        host.preferences = HostPreferences(outputDevice: "hw:1", bitrateKbps: 256)
        try book.add(host)
        #expect(throws: HostBookError.exists("kitchen")) { try book.add(SavedHost(name: "kitchen", address: try HostAddress(parsing: "vnc://x"))) }
        let loaded = try #require(try book.host(named: "kitchen"))
        #expect(loaded.preferences == host.preferences)
        #expect(loaded.hostAddress == host.hostAddress)
        try book.markConnected(named: "kitchen", at: Date(timeIntervalSince1970: 1_800_000_000))
        #expect(try book.host(named: "Kitchen")?.lastConnected == Date(timeIntervalSince1970: 1_800_000_000))
        try book.update(named: "kitchen") { $0.name = "Kitchen2"; $0.sshRoute = nil }
        #expect(try book.host(named: "Kitchen") == nil)
        #expect(try book.host(named: "kitchen2")?.sshRoute == nil)
        #expect(try book.remove(named: "KITCHEN2"))
        #expect(try book.all().isEmpty)
    }

    @Test func namesThatLookLikeAddressesAreRefused() {
        for name in ["", " x", "a/b", "host:1", "me@x", String(repeating: "n", count: 65)] {
            #expect(throws: HostBookError.self) { try SavedHost.validate(name: name) }
        }
    }

    @Test func anImportIsAllOrNothing() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let book = try HostBook(path: path)
        try book.add(SavedHost(name: "a", address: try HostAddress(parsing: "vnc://a")))
        let batch = [SavedHost(name: "b", address: try HostAddress(parsing: "vnc://b")), SavedHost(name: "a", address: try HostAddress(parsing: "vnc://other"))]
        #expect(throws: HostBookError.exists("a")) { try book.importHosts(batch, replace: false) }
        #expect(try book.all().map(\.name) == ["a"])
        try book.importHosts(batch, replace: true)
        #expect(try book.all().map(\.address) == ["other", "b"])
    }

    @Test func theFileSecretStoreIsPrivateAndKeepsSecretsOutOfTheBook() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("farcast-secrets-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let store = FileSecretStore(directory: StateDirectory(path: root + "/state"))
        let book = try HostBook(path: root + "/data/hosts.sqlite")
        let host = SavedHost(name: "office", address: try HostAddress(parsing: "vnc://office"))
        try book.add(host)
        let secret = "s3cret-\(UUID().uuidString)"
        try store.setSecret(secret, for: host.secretAccount)
        #expect(try store.secret(for: host.secretAccount) == secret)
        #expect(try StateDirectory(path: root + "/state").permissions(of: "secrets.json") == 0o600)
        for file in ["hosts.sqlite", "hosts.sqlite-wal"] {
            let bytes = FileManager.default.contents(atPath: root + "/data/" + file) ?? Data()
            #expect(bytes.range(of: Data(secret.utf8)) == nil)
        }
        try store.removeSecret(for: host.secretAccount)
        #expect(try store.secret(for: host.secretAccount) == nil)
    }
}
