import Crypto
import Foundation
@testable import Hosts
import Testing

/// OpenSSH private-key files written by ssh-keygen 9.2, plain and passphrase-protected
/// (bcrypt-pbkdf + aes256-ctr), and bcrypt-pbkdf itself against PyPI bcrypt 5.0.0's answers
/// (scripts/vectors/make_ssh_key_vectors.sh makes both).
struct SSHPrivateKeyTests {
    static let folder = Bundle.module.resourceURL!.appendingPathComponent("Fixtures/ssh")
    static let passphrase = Array("correct horse battery staple".utf8)

    static func text(_ name: String) throws -> String {
        try String(contentsOf: folder.appendingPathComponent(name), encoding: .utf8)
    }

    struct Vector: Decodable {
        var password: String
        var salt: String
        var rounds: Int
        var key: String
    }

    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    @Test func bcryptPBKDFMatchesPyPIBcrypt() throws {
        let data = try Data(contentsOf: Bundle.module.resourceURL!.appendingPathComponent("Fixtures/bcrypt_pbkdf.json"))
        let vectors = try JSONDecoder().decode([Vector].self, from: data)
        #expect(vectors.count == 7)
        for vector in vectors {
            let expected = Self.bytes(vector.key)
            let key = try BCryptPBKDF.derive(passphrase: Self.bytes(vector.password), salt: Self.bytes(vector.salt), rounds: vector.rounds,
                                             count: expected.count)
            #expect(key == expected, "rounds \(vector.rounds), \(expected.count) bytes")
        }
    }

    @Test func bcryptPBKDFRefusesParametersOpenSSHRefuses() {
        #expect(throws: BCryptPBKDF.Failure.self) { try BCryptPBKDF.derive(passphrase: [1], salt: [1], rounds: 0, count: 32) }
        #expect(throws: BCryptPBKDF.Failure.self) { try BCryptPBKDF.derive(passphrase: [1], salt: [1], rounds: 1, count: 2000) }
        #expect(throws: BCryptPBKDF.Failure.self) { try BCryptPBKDF.derive(passphrase: [1], salt: [], rounds: 1, count: 16) }
    }

    @Test(arguments: ["ed25519", "ecdsa-256", "ecdsa-384", "ecdsa-521", "rsa-2048"])
    func plainAndEncryptedKeysLoadWithSSHKeygensFingerprint(name: String) throws {
        for file in [name, name + "-encrypted"] {
            let encrypted = file.hasSuffix("-encrypted")
            let text = try Self.text(file)
            #expect(try SSHPrivateKey.isEncrypted(pem: text) == encrypted)
            let key = try SSHPrivateKey(pem: text, passphrase: encrypted ? Self.passphrase : nil)
            let fingerprint = try Self.text(file + ".fingerprint").trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(key.fingerprint == fingerprint, "\(file)")
            #expect(key.comment == "farcast-test-\(name)")
            // swift-nio-ssh 0.15 signs with Ed25519 and ECDSA only.
            #expect((key.nioKey != nil) == !name.hasPrefix("rsa"))
        }
    }

    @Test func aKeySignsWhatItsPublicKeyVerifies() throws {
        let key = try SSHPrivateKey(pem: try Self.text("ed25519-encrypted"), passphrase: Self.passphrase)
        let line = try Self.text("ed25519-encrypted.pub")
        let blob = [UInt8](Data(base64Encoded: String(line.split(separator: " ")[1]))!)
        #expect(key.publicKeyBlob == blob)
    }

    @Test func encryptedKeysNeedTheRightPassphrase() throws {
        let text = try Self.text("ecdsa-256-encrypted")
        #expect(throws: SSHPrivateKey.LoadError.passphraseNeeded) { try SSHPrivateKey(pem: text) }
        #expect(throws: SSHPrivateKey.LoadError.wrongPassphrase) { try SSHPrivateKey(pem: text, passphrase: Array("wrong".utf8)) }
    }

    @Test func notAKeyIsSaidSo() {
        #expect(throws: SSHPrivateKey.LoadError.self) { try SSHPrivateKey(pem: "hello") }
        #expect(throws: SSHPrivateKey.LoadError.self) {
            try SSHPrivateKey(pem: "-----BEGIN OPENSSH PRIVATE KEY-----\n!!!!\n-----END OPENSSH PRIVATE KEY-----\n")
        }
    }

    /// Truncated, bit-flipped and length-inflated key files fail with a LoadError, never a crash,
    /// a hang or a huge allocation.
    @Test func mutatedKeyFilesFailCleanly() throws {
        var generator = SystemRandomNumberGenerator()
        for name in ["ed25519", "ecdsa-384-encrypted", "rsa-2048"] {
            let text = try Self.text(name)
            let lines = text.split(separator: "\n").map(String.init)
            let body = [UInt8](Data(base64Encoded: lines.dropFirst().dropLast().joined())!)
            // The encrypted file pays a real bcrypt-pbkdf derivation per attempt (slow in a debug
            // build), so it gets fewer rounds, and its header up to the KDF's rounds count is kept:
            // a garbled header could ask for up to 2^20 rounds, a cost the file may legitimately
            // choose (the bound itself is `bcryptPBKDFRefusesParametersOpenSSHRefuses`'s), which
            // would make this test's time a lottery. The plain files fuzz the header.
            let encrypted = name.hasSuffix("-encrypted")
            let roundsField = encrypted ? Self.kdfRoundsOffset(body) : nil
            for round in 0..<(encrypted ? 12 : 150) {
                var mutated = body
                switch round % 3 {
                case 0: mutated = Array(mutated.prefix(Int.random(in: 0..<mutated.count, using: &generator)))
                case 1:
                    for _ in 0..<3 { mutated[Int.random(in: 0..<mutated.count, using: &generator)] ^= UInt8.random(in: 1...255, using: &generator) }
                default:
                    let at = Int.random(in: 15..<(mutated.count - 4), using: &generator)
                    mutated[at] = 0xFF
                    mutated[at + 1] = 0xFF
                }
                if let roundsField, mutated.count >= roundsField + 4 {
                    mutated.replaceSubrange(0..<roundsField + 4, with: body[0..<roundsField + 4])
                }
                let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\n" + Data(mutated).base64EncodedString(options: [.lineLength64Characters])
                    + "\n-----END OPENSSH PRIVATE KEY-----\n"
                _ = try? SSHPrivateKey(pem: pem, passphrase: Self.passphrase)
            }
        }
    }

    /// Where the KDF's rounds count sits in an openssh-key-v1 body: after the magic, the cipher
    /// and KDF names, the options' length and the salt.
    static func kdfRoundsOffset(_ body: [UInt8]) -> Int {
        func length(at offset: Int) -> Int { body[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) } }
        var offset = 15
        offset += 4 + length(at: offset)  // cipher name
        offset += 4 + length(at: offset)  // KDF name
        offset += 4                        // KDF options' length
        offset += 4 + length(at: offset)  // salt
        return offset
    }
}
