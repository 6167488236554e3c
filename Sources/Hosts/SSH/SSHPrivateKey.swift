import Crypto
import CryptoExtras
import FarcastSupport
import Foundation
import NIOSSH

/// A user key read from an OpenSSH private-key file (`-----BEGIN OPENSSH PRIVATE KEY-----`, as
/// `ssh-keygen` writes since 7.8), plain or passphrase-protected (bcrypt-pbkdf with aes256-ctr,
/// the default, or aes128/192-ctr, aes256-cbc, aes256-gcm@openssh.com), or a PEM EC/PKCS#8 key.
///
/// Invariants: a value only exists for a key whose private part decrypted and whose check words
/// matched; `nioKey` is nil for key types swift-nio-ssh 0.15 cannot sign with (RSA), which the
/// authenticator reports by name instead of offering.
public struct SSHPrivateKey: Sendable {
    public enum Kind: String, Sendable {
        case ed25519 = "ssh-ed25519"
        case ecdsaP256 = "ecdsa-sha2-nistp256"
        case ecdsaP384 = "ecdsa-sha2-nistp384"
        case ecdsaP521 = "ecdsa-sha2-nistp521"
        case rsa = "ssh-rsa"

        /// The name OpenSSH prints in fingerprints ("ED25519", "ECDSA", "RSA").
        public var displayName: String {
            switch self {
            case .ed25519: return "ED25519"
            case .ecdsaP256, .ecdsaP384, .ecdsaP521: return "ECDSA"
            case .rsa: return "RSA"
            }
        }
    }

    public let kind: Kind
    public let comment: String
    /// The public key blob (wire encoding), for fingerprints and agent-style identification.
    public let publicKeyBlob: [UInt8]
    /// The key in swift-nio-ssh's form; nil for RSA.
    public let nioKey: NIOSSHPrivateKey?

    /// `SHA256:` + unpadded base64 of the public blob, as `ssh-keygen -l` prints it.
    public var fingerprint: String { SSHFingerprint.sha256(publicKeyBlob) }

    /// Why a key file could not be used, in words.
    public enum LoadError: Error, Equatable, Sendable, CustomStringConvertible {
        case notAKey(String)
        case malformed(String)
        case passphraseNeeded
        case wrongPassphrase
        case unsupported(String)

        public var description: String {
            switch self {
            case .notAKey(let detail): return "not an SSH private key (\(detail))"
            case .malformed(let detail): return "malformed OpenSSH private key: \(detail)"
            case .passphraseNeeded: return "the key is protected by a passphrase"
            case .wrongPassphrase: return "wrong passphrase for the key"
            case .unsupported(let detail): return "unsupported key: \(detail)"
            }
        }
    }

    /// Whether the file's key needs a passphrase (without asking for one).
    public static func isEncrypted(pem text: String) throws(LoadError) -> Bool {
        if text.contains("BEGIN OPENSSH PRIVATE KEY") {
            var reader = SSHWireReader(try openSSHBody(text))
            do {
                return try reader.text() != "none"
            } catch { throw .malformed("truncated header") }
        }
        return text.contains("ENCRYPTED")
    }

    /// Parses a key file's text; `passphrase` is used only when the key is encrypted.
    public init(pem text: String, passphrase: [UInt8]? = nil) throws(LoadError) {
        if text.contains("BEGIN OPENSSH PRIVATE KEY") {
            self = try Self.parseOpenSSH(try Self.openSSHBody(text), passphrase: passphrase)
        } else if text.contains("BEGIN EC PRIVATE KEY") || text.contains("BEGIN PRIVATE KEY") {
            if text.contains("ENCRYPTED") || text.contains("Proc-Type: 4,ENCRYPTED") {
                throw .unsupported("encrypted PEM keys; convert with `ssh-keygen -p -f FILE` (it rewrites the key in OpenSSH's format)")
            }
            self = try Self.parsePEM(text)
        } else if text.contains("BEGIN RSA PRIVATE KEY") {
            throw .unsupported("RSA keys cannot sign with swift-nio-ssh 0.15; use an Ed25519 or ECDSA key (ssh-keygen -t ed25519)")
        } else {
            throw .notAKey("no BEGIN OPENSSH PRIVATE KEY line")
        }
    }

    private init(kind: Kind, comment: String, publicKeyBlob: [UInt8], nioKey: NIOSSHPrivateKey?) {
        self.kind = kind
        self.comment = comment
        self.publicKeyBlob = publicKeyBlob
        self.nioKey = nioKey
    }

    static let magic = Array("openssh-key-v1".utf8) + [0]

    static func openSSHBody(_ text: String) throws(LoadError) -> [UInt8] {
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
        guard let begin = lines.firstIndex(of: "-----BEGIN OPENSSH PRIVATE KEY-----"),
              let end = lines.firstIndex(of: "-----END OPENSSH PRIVATE KEY-----"), end > begin else {
            throw .malformed("missing BEGIN/END lines")
        }
        let base64 = lines[(begin + 1)..<end].joined()
        guard base64.utf8.count <= 1 << 20, let data = Data(base64Encoded: base64) else { throw .malformed("the body is not base64") }
        let bytes = [UInt8](data)
        guard bytes.count > magic.count, Array(bytes.prefix(magic.count)) == magic else { throw .malformed("no openssh-key-v1 magic") }
        return Array(bytes.dropFirst(magic.count))
    }

    struct CipherSpec {
        var keyLength: Int
        var ivLength: Int
        var blockSize: Int
        var tagLength: Int
    }

    static func cipherSpec(_ name: String) throws(LoadError) -> CipherSpec {
        switch name {
        case "none": return CipherSpec(keyLength: 0, ivLength: 0, blockSize: 8, tagLength: 0)
        case "aes128-ctr": return CipherSpec(keyLength: 16, ivLength: 16, blockSize: 16, tagLength: 0)
        case "aes192-ctr": return CipherSpec(keyLength: 24, ivLength: 16, blockSize: 16, tagLength: 0)
        case "aes256-ctr": return CipherSpec(keyLength: 32, ivLength: 16, blockSize: 16, tagLength: 0)
        case "aes128-cbc": return CipherSpec(keyLength: 16, ivLength: 16, blockSize: 16, tagLength: 0)
        case "aes256-cbc": return CipherSpec(keyLength: 32, ivLength: 16, blockSize: 16, tagLength: 0)
        case "aes256-gcm@openssh.com": return CipherSpec(keyLength: 32, ivLength: 12, blockSize: 16, tagLength: 16)
        default: throw .unsupported("cipher \(name); re-encrypt with `ssh-keygen -p -Z aes256-ctr -f FILE`")
        }
    }

    static func parseOpenSSH(_ body: [UInt8], passphrase: [UInt8]?) throws(LoadError) -> SSHPrivateKey {
        var reader = SSHWireReader(body)
        let cipherName: String, kdfName: String, kdfOptions: [UInt8], publicBlob: [UInt8], sealed: [UInt8]
        do {
            cipherName = try reader.text()
            kdfName = try reader.text()
            kdfOptions = try reader.string()
            let count = try reader.uint32()
            guard count == 1 else { throw LoadError.unsupported("files holding \(count) keys") }
            publicBlob = try reader.string()
            sealed = try reader.string()
        } catch let error as LoadError {
            throw error
        } catch {
            throw .malformed("truncated header")
        }
        let spec = try cipherSpec(cipherName)
        var plain: [UInt8]
        if cipherName == "none" {
            guard kdfName == "none" else { throw .malformed("kdf \(kdfName) without a cipher") }
            plain = sealed
        } else {
            guard kdfName == "bcrypt" else { throw .unsupported("key derivation \(kdfName)") }
            guard let passphrase else { throw .passphraseNeeded }
            var options = SSHWireReader(kdfOptions)
            let salt: [UInt8], rounds: UInt32
            do {
                salt = try options.string()
                rounds = try options.uint32()
            } catch { throw .malformed("truncated bcrypt options") }
            let material: [UInt8]
            do {
                material = try BCryptPBKDF.derive(passphrase: passphrase, salt: salt, rounds: Int(rounds), count: spec.keyLength + spec.ivLength)
            } catch { throw .malformed("bcrypt options: \(error)") }
            let key = SymmetricKey(data: material.prefix(spec.keyLength))
            let iv = Array(material.suffix(spec.ivLength))
            var tag: [UInt8] = []
            if spec.tagLength > 0 {
                // The GCM tag follows the sealed string, outside it.
                do { tag = try reader.bytes(spec.tagLength) } catch { throw .malformed("missing the GCM tag") }
            }
            guard sealed.count % spec.blockSize == 0 else { throw .malformed("the private section is not whole cipher blocks") }
            do {
                switch cipherName {
                case "aes256-gcm@openssh.com":
                    let box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: iv), ciphertext: sealed, tag: tag)
                    guard let opened = try? AES.GCM.open(box, using: key) else { throw LoadError.wrongPassphrase }
                    plain = Array(opened)
                case "aes128-cbc", "aes256-cbc":
                    plain = Array(try AES._CBC.decrypt(sealed, using: key, iv: AES._CBC.IV(ivBytes: iv), noPadding: true))
                default:
                    plain = Array(try AES._CTR.decrypt(sealed, using: key, nonce: AES._CTR.Nonce(nonceBytes: iv)))
                }
            } catch let error as LoadError {
                throw error
            } catch {
                throw .malformed("cannot decrypt the private section")
            }
        }
        var inner = SSHWireReader(plain)
        do {
            let check1 = try inner.uint32(), check2 = try inner.uint32()
            guard check1 == check2 else {
                throw cipherName == "none" ? LoadError.malformed("check words differ") : LoadError.wrongPassphrase
            }
            let typeName = try inner.text()
            guard let kind = Kind(rawValue: typeName) else { throw LoadError.unsupported("key type \(typeName)") }
            let nioKey: NIOSSHPrivateKey?
            switch kind {
            case .ed25519:
                let publicKey = try inner.string()
                let secret = try inner.string()
                guard publicKey.count == 32, secret.count == 64 else { throw LoadError.malformed("Ed25519 key sizes") }
                let key = try Curve25519.Signing.PrivateKey(rawRepresentation: secret.prefix(32))
                guard Array(key.publicKey.rawRepresentation) == publicKey else { throw LoadError.malformed("Ed25519 public key does not match") }
                nioKey = NIOSSHPrivateKey(ed25519Key: key)
            case .ecdsaP256, .ecdsaP384, .ecdsaP521:
                _ = try inner.text()
                let point = try inner.string()
                let scalar = try inner.mpint()
                let size = kind == .ecdsaP256 ? 32 : kind == .ecdsaP384 ? 48 : 66
                guard scalar.count <= size else { throw LoadError.malformed("ECDSA scalar too long") }
                let raw = [UInt8](repeating: 0, count: size - scalar.count) + scalar
                switch kind {
                case .ecdsaP256:
                    let key = try P256.Signing.PrivateKey(rawRepresentation: raw)
                    guard Array(key.publicKey.x963Representation) == point else { throw LoadError.malformed("ECDSA public point does not match") }
                    nioKey = NIOSSHPrivateKey(p256Key: key)
                case .ecdsaP384:
                    let key = try P384.Signing.PrivateKey(rawRepresentation: raw)
                    guard Array(key.publicKey.x963Representation) == point else { throw LoadError.malformed("ECDSA public point does not match") }
                    nioKey = NIOSSHPrivateKey(p384Key: key)
                default:
                    let key = try P521.Signing.PrivateKey(rawRepresentation: raw)
                    guard Array(key.publicKey.x963Representation) == point else { throw LoadError.malformed("ECDSA public point does not match") }
                    nioKey = NIOSSHPrivateKey(p521Key: key)
                }
            case .rsa:
                for _ in 0..<6 { _ = try inner.mpint() }
                nioKey = nil
            }
            let comment = try inner.text()
            // The padding is 1, 2, 3, … up to the block size.
            var expected: UInt8 = 1
            while !inner.isAtEnd {
                guard try inner.bytes(1)[0] == expected else { throw LoadError.malformed("bad padding") }
                expected &+= 1
            }
            return SSHPrivateKey(kind: kind, comment: comment, publicKeyBlob: publicBlob, nioKey: nioKey)
        } catch let error as LoadError {
            throw error
        } catch {
            throw cipherName == "none" ? .malformed("truncated private section") : .wrongPassphrase
        }
    }

    static func parsePEM(_ text: String) throws(LoadError) -> SSHPrivateKey {
        if let key = try? P256.Signing.PrivateKey(pemRepresentation: text) {
            return SSHPrivateKey(kind: .ecdsaP256, comment: "", publicKeyBlob: ecdsaBlob("nistp256", key.publicKey.x963Representation),
                                 nioKey: NIOSSHPrivateKey(p256Key: key))
        }
        if let key = try? P384.Signing.PrivateKey(pemRepresentation: text) {
            return SSHPrivateKey(kind: .ecdsaP384, comment: "", publicKeyBlob: ecdsaBlob("nistp384", key.publicKey.x963Representation),
                                 nioKey: NIOSSHPrivateKey(p384Key: key))
        }
        if let key = try? P521.Signing.PrivateKey(pemRepresentation: text) {
            return SSHPrivateKey(kind: .ecdsaP521, comment: "", publicKeyBlob: ecdsaBlob("nistp521", key.publicKey.x963Representation),
                                 nioKey: NIOSSHPrivateKey(p521Key: key))
        }
        if let key = try? Curve25519.Signing.PrivateKey(pemRepresentation: text) {
            var writer = SSHWireWriter()
            writer.string("ssh-ed25519")
            writer.string(key.publicKey.rawRepresentation)
            return SSHPrivateKey(kind: .ed25519, comment: "", publicKeyBlob: writer.bytes, nioKey: NIOSSHPrivateKey(ed25519Key: key))
        }
        throw .unsupported("a PEM key that is neither ECDSA nor Ed25519 (RSA cannot sign with swift-nio-ssh 0.15)")
    }

    static func ecdsaBlob(_ curve: String, _ point: Data) -> [UInt8] {
        var writer = SSHWireWriter()
        writer.string("ecdsa-sha2-" + curve)
        writer.string(curve)
        writer.string(point)
        return writer.bytes
    }
}

/// OpenSSH's fingerprint forms.
public enum SSHFingerprint {
    /// `SHA256:` + unpadded base64 of the SHA-256 of a public key blob.
    public static func sha256(_ blob: [UInt8]) -> String {
        var text = Data(SHA256.hash(data: blob)).base64EncodedString()
        while text.hasSuffix("=") { text.removeLast() }
        return "SHA256:" + text
    }

    /// The wire blob of a swift-nio-ssh public key.
    public static func blob(of key: NIOSSHPublicKey) -> [UInt8] {
        let text = String(openSSHPublicKey: key)
        let parts = text.split(separator: " ")
        guard parts.count >= 2, let data = Data(base64Encoded: String(parts[1])) else { return [] }
        return [UInt8](data)
    }

    /// "ED25519", "ECDSA" or "RSA" from a blob's type name, as OpenSSH names key types in prompts.
    public static func typeName(ofBlob blob: [UInt8]) -> String {
        var reader = SSHWireReader(blob)
        let name = (try? reader.text()) ?? "?"
        if name == "ssh-ed25519" { return "ED25519" }
        if name.hasPrefix("ecdsa-") { return "ECDSA" }
        if name.hasPrefix("ssh-rsa") || name.hasPrefix("rsa-") { return "RSA" }
        return name.uppercased()
    }
}
