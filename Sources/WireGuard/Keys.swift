import Crypto
import Foundation

/// A Curve25519 public key as WireGuard writes it: 32 bytes, 44 characters of base64.
public struct PublicKey: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(WireGuardError) {
        guard bytes.count == 32 else { throw .invalidKey(what: "public key", reason: "\(bytes.count) bytes, not 32") }
        self.bytes = bytes
    }

    public init(base64 text: String) throws(WireGuardError) {
        self.bytes = try decodeKey(text, what: "public key")
    }

    public var base64: String { Data(bytes).base64EncodedString() }
    public var description: String { base64 }
}

/// A Curve25519 private key. Its description never shows the key; `base64` does, for writing
/// a key file (`farcast wg genkey`), and nothing else should print it.
public struct PrivateKey: Sendable, CustomStringConvertible {
    let agreement: Curve25519.KeyAgreement.PrivateKey
    public let publicKey: PublicKey

    /// A fresh random key.
    public init() {
        self.init(agreement: Curve25519.KeyAgreement.PrivateKey())
    }

    public init(bytes: [UInt8]) throws(WireGuardError) {
        guard bytes.count == 32 else { throw .invalidKey(what: "private key", reason: "\(bytes.count) bytes, not 32") }
        do {
            self.init(agreement: try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: bytes))
        } catch {
            throw .invalidKey(what: "private key", reason: "\(error)")
        }
    }

    public init(base64 text: String) throws(WireGuardError) {
        try self.init(bytes: try decodeKey(text, what: "private key"))
    }

    init(agreement: Curve25519.KeyAgreement.PrivateKey) {
        self.agreement = agreement
        // swift-crypto's public key is always 32 bytes.
        publicKey = try! PublicKey(bytes: Array(agreement.publicKey.rawRepresentation))
    }

    /// The key's 32 bytes, clamped as Curve25519 uses them (what `wg genkey` writes: bits 0–2
    /// of the first byte cleared, bit 7 of the last cleared and bit 6 set).
    public var clampedBytes: [UInt8] {
        var bytes = Array(agreement.rawRepresentation)
        bytes[0] &= 248
        bytes[31] = (bytes[31] & 127) | 64
        return bytes
    }

    /// The clamped key in base64: secret, for a key file only.
    public var base64: String { Data(clampedBytes).base64EncodedString() }

    public var description: String { "(private key of \(publicKey))" }

    /// X25519 with `peer`; an all-zero result (a low-order point) is refused.
    func sharedSecret(with peer: PublicKey) throws(WireGuardError) -> [UInt8] {
        let secret: [UInt8]
        do {
            let theirs = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: peer.bytes)
            secret = try agreement.sharedSecretFromKeyAgreement(with: theirs).withUnsafeBytes { Array($0) }
        } catch {
            throw .weakPublicKey
        }
        guard secret.contains(where: { $0 != 0 }) else { throw .weakPublicKey }
        return secret
    }
}

/// The optional symmetric key mixed into the handshake (all zeros when the peers set none).
public struct PresharedKey: Sendable, Equatable {
    public let bytes: [UInt8]
    public static let none = PresharedKey(unchecked: [UInt8](repeating: 0, count: 32))

    public init(bytes: [UInt8]) throws(WireGuardError) {
        guard bytes.count == 32 else { throw .invalidKey(what: "preshared key", reason: "\(bytes.count) bytes, not 32") }
        self.bytes = bytes
    }

    public init(base64 text: String) throws(WireGuardError) {
        bytes = try decodeKey(text, what: "preshared key")
    }

    /// 32 random bytes (`farcast wg genpsk`).
    public static func random() -> PresharedKey {
        PresharedKey(unchecked: SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
    }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    public var base64: String { Data(bytes).base64EncodedString() }
}

private func decodeKey(_ text: String, what: String) throws(WireGuardError) -> [UInt8] {
    let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
    guard trimmed.count == 44, let data = Data(base64Encoded: trimmed), data.count == 32 else {
        throw .invalidKey(what: what, reason: "expected 44 characters of base64 encoding 32 bytes (as `wg genkey` writes), got \(trimmed.count) characters")
    }
    return Array(data)
}
