import Foundation
@testable import Hosts
import Testing

/// One lookup of a command's server argument for every protocol: a saved name, a URL, or the
/// protocol's own form; and `host[:port]` for the protocols whose own form is just that.
struct HostArgumentTests {
    @Test func savedNamesURLsAndOtherFormsAreToldApart() throws {
        let path = HostBookTests.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        // No book yet: a name is nothing saved, and nothing is created by looking.
        #expect(try HostArgument.lookUp("gamebox", as: .punktfunk, bookPath: path) == .other)
        #expect(!FileManager.default.fileExists(atPath: path))

        let book = try HostBook(path: path)
        let saved = SavedHost(name: "gamebox", address: try HostAddress(parsing: "punktfunk://127.0.0.1:9800"))
        try book.add(saved)
        try book.add(SavedHost(name: "office", address: try HostAddress(parsing: "vnc://10.0.0.5:5901")))

        let found = try HostArgument.lookUp("GameBox", as: .punktfunk, bookPath: path)
        #expect(found.savedHost?.name == "gamebox")
        #expect(found.address == HostAddress(kind: .punktfunk, host: "127.0.0.1", port: 9800))
        let url = try HostArgument.lookUp("punktfunk://[::1]:9001", as: .punktfunk, bookPath: path)
        #expect(url == .url(HostAddress(kind: .punktfunk, host: "::1", port: 9001)) && url.savedHost == nil)
        // Forms that are not names are never looked up in the book.
        for other in ["gamebox:9777", "[::1]:9777", "desk:1", "127.0.0.1::5901", "unknown-name"] {
            #expect(try HostArgument.lookUp(other, as: .punktfunk, bookPath: path) == .other, "\(other)")
        }

        #expect(throws: HostLookupError.savedForAnotherProtocol(name: "office", saved: .vnc, wanted: .punktfunk)) {
            try HostArgument.lookUp("office", as: .punktfunk, bookPath: path)
        }
        #expect(throws: HostLookupError.urlOfAnotherProtocol("jellyfin://media", address: .jellyfin, wanted: .punktfunk)) {
            try HostArgument.lookUp("jellyfin://media", as: .punktfunk, bookPath: path)
        }
        do {
            _ = try HostArgument.lookUp("vnc://host:0", as: .vnc, bookPath: path)
            Issue.record("a URL with port 0 was accepted")
        } catch {
            #expect(error.description.contains("outside 1…65535"), "\(error)")
        }
    }

    @Test func aConnectionIsMarkedOnlyForASavedName() throws {
        let path = HostBookTests.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        HostArgument.markConnected("gamebox", bookPath: path)
        #expect(!FileManager.default.fileExists(atPath: path), "marking never creates a book")
        let book = try HostBook(path: path)
        try book.add(SavedHost(name: "gamebox", address: try HostAddress(parsing: "punktfunk://127.0.0.1")))
        HostArgument.markConnected("127.0.0.1:9777", bookPath: path)
        #expect(try book.host(named: "gamebox")?.lastConnected == nil)
        HostArgument.markConnected("gamebox", bookPath: path)
        #expect(try book.host(named: "gamebox")?.lastConnected != nil)
    }

    @Test func hostAndPortAloneTakeTheProtocolsDefaultPort() throws {
        let cases: [(String, String, Int)] = [
            ("gamebox", "gamebox", 9777), ("gamebox:9800", "gamebox", 9800), ("10.0.0.7:1", "10.0.0.7", 1),
            ("[fe80::1]:9800", "fe80::1", 9800), ("[::1]", "::1", 9777), ("::1", "::1", 9777), (" gamebox ", "gamebox", 9777),
        ]
        for (text, host, port) in cases {
            #expect(try HostAddress(hostPort: text, kind: .punktfunk) == HostAddress(kind: .punktfunk, host: host, port: port), "\(text)")
        }
        let refused: [(String, String)] = [
            ("", "no host"), (":9777", "no host"), ("gamebox:0", "outside 1…65535"), ("gamebox:x", "bad port"),
            ("[::1", "unclosed"), ("[::1]x", "bad port"), ("me@gamebox", "'@'"), ("gamebox/x", "'/'"),
        ]
        for (text, reason) in refused {
            do {
                _ = try HostAddress(hostPort: text, kind: .punktfunk)
                Issue.record("\(text) parsed")
            } catch {
                #expect(error.description.contains(reason) && error.description.contains("punktfunk host"), "\(text): \(error.description)")
            }
        }
    }
}
