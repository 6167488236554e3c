import Foundation
@testable import Hosts
import Testing

/// known_hosts as OpenSSH reads it: the fixture was written and hashed by ssh-keygen 9.2
/// (scripts/vectors/make_ssh_key_vectors.sh).
struct KnownHostsTests {
    static let folder = Bundle.module.resourceURL!.appendingPathComponent("Fixtures/ssh")

    static func blob(_ name: String) throws -> [UInt8] {
        let line = try String(contentsOf: folder.appendingPathComponent(name + ".pub"), encoding: .utf8)
        return [UInt8](Data(base64Encoded: String(line.split(separator: " ")[1]))!)
    }

    static func file() throws -> KnownHosts { try KnownHosts(path: folder.appendingPathComponent("known_hosts").path) }

    @Test func hashedEntriesWrittenBySSHKeygenMatch() throws {
        let file = try Self.file()
        #expect(file.verdict(host: "plain.example", port: 22, keyBlob: try Self.blob("ed25519")) == .known(line: 2))
        #expect(file.verdict(host: "hashed.example", port: 22, keyBlob: try Self.blob("ecdsa-256")) == .known(line: 5))
        #expect(file.verdict(host: "hashed-port.example", port: 2022, keyBlob: try Self.blob("ed25519")) == .known(line: 6))
        // The same name on another port is another host.
        #expect(file.verdict(host: "hashed-port.example", port: 22, keyBlob: try Self.blob("ed25519")) == .unknown)
        #expect(file.verdict(host: "ported.example", port: 2222, keyBlob: try Self.blob("ed25519")) == .known(line: 4))
    }

    @Test func wildcardsAndNegationsApply() throws {
        let file = try Self.file()
        #expect(file.verdict(host: "a.wild.example", port: 22, keyBlob: try Self.blob("ecdsa-256")) == .known(line: 3))
        #expect(file.verdict(host: "bad.wild.example", port: 22, keyBlob: try Self.blob("ecdsa-256")) == .unknown)
        #expect(KnownHosts.wildcardMatch("h?st*.example", "host12.example"))
        #expect(!KnownHosts.wildcardMatch("h?st", "hst"))
    }

    @Test func aDifferentKeyOfTheSameTypeIsAChange() throws {
        let file = try Self.file()
        let other = try Self.blob("ecdsa-521")  // type nistp521: no entry of that type for the host
        #expect(file.verdict(host: "hashed.example", port: 22, keyBlob: other) == .unknown)
        let forged = try Self.blob("ed25519-encrypted")  // another Ed25519 key
        guard case .changed(let lines, let fingerprints) = file.verdict(host: "plain.example", port: 22, keyBlob: forged) else {
            Issue.record("a different Ed25519 key was not a change")
            return
        }
        #expect(lines == [2])
        let expected = try String(contentsOf: Self.folder.appendingPathComponent("ed25519.fingerprint"), encoding: .utf8)
        #expect(fingerprints == [expected.trimmingCharacters(in: .whitespacesAndNewlines)])
    }

    @Test func revokedKeysAreRefusedWhateverElseMatches() throws {
        let file = try Self.file()
        #expect(file.verdict(host: "anything", port: 22, keyBlob: try Self.blob("ecdsa-384")) == .revoked(line: 7))
    }

    @Test func certAuthorityAndGarbageLinesAreNotHostKeys() throws {
        let file = try Self.file()
        #expect(file.verdict(host: "x.ca.example", port: 22, keyBlob: try Self.blob("ecdsa-256")) == .unknown)
        #expect(file.entries.count == 7)
    }

    @Test func addedEntriesAreHashedAndFoundAgain() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("farcast-kh-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent(".ssh/known_hosts").path
        var file = try KnownHosts(path: path)
        #expect(file.entries.isEmpty)
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try "existing.example ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJS2hFPVLK4/hPDNQShJleFkGbLS8hcciuP7tvnqfK8o".write(toFile: path, atomically: false, encoding: .utf8)
        try file.add(host: "New.Example", port: 2200, keyBlob: try Self.blob("ecdsa-256"))
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(!text.contains("new.example"))
        #expect(text.hasPrefix("existing.example ssh-ed25519 "))
        #expect(text.split(separator: "\n").count == 2)
        let reread = try KnownHosts(path: path)
        #expect(reread.verdict(host: "new.example", port: 2200, keyBlob: try Self.blob("ecdsa-256")) == .known(line: 2))
        // A file farcast creates is private, in a private folder.
        let fresh = folder.appendingPathComponent("new/.ssh/known_hosts").path
        var created = try KnownHosts(path: fresh)
        try created.add(host: "h", port: 22, keyBlob: try Self.blob("ed25519"))
        #expect(try FileManager.default.attributesOfItem(atPath: fresh)[.posixPermissions] as? Int == 0o600)
        #expect(try FileManager.default.attributesOfItem(atPath: (fresh as NSString).deletingLastPathComponent)[.posixPermissions] as? Int == 0o700)
    }

    @Test func fingerprintsMatchSSHKeygen() throws {
        for name in ["ed25519", "ecdsa-256", "ecdsa-384", "ecdsa-521", "rsa-2048"] {
            let expected = try String(contentsOf: Self.folder.appendingPathComponent(name + ".fingerprint"), encoding: .utf8)
            #expect(SSHFingerprint.sha256(try Self.blob(name)) == expected.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }
}
