import Crypto
import FarcastSupport
import Foundation

/// The two Noise cipher suites Sendspin defines. Servers support both; clients pick one.
public enum NoiseSuite: String, CaseIterable, Sendable, Codable {
    case chaChaPoly = "25519_ChaChaPoly_SHA256"
    case aesGCM = "25519_AESGCM_SHA256"

    /// The full Noise protocol name, e.g. `Noise_KKpsk2_25519_ChaChaPoly_SHA256`.
    public var protocolName: String { "Noise_KKpsk2_" + rawValue }
}

/// Why a Noise operation failed. Every handshake failure is silent on the wire (the caller just
/// closes), so these exist for logs and error messages.
public enum NoiseError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformedMessage(String)
    case decryptionFailed
    case invalidKey
    case nonceExhausted

    public var description: String {
        switch self {
        case .malformedMessage(let detail): return "malformed Noise message: \(detail)"
        case .decryptionFailed: return "a Noise message failed authentication (wrong key, PSK or tampered data)"
        case .invalidKey: return "a Noise public key is not a valid X25519 key"
        case .nonceExhausted: return "the Noise nonce counter is exhausted"
        }
    }
}

/// A Noise CipherState: an AEAD key and a 64-bit nonce counter. Nonces are 4 zero bytes and the
/// counter, little-endian for ChaChaPoly and big-endian for AES-GCM (as the Noise spec says).
public struct NoiseCipherState: Sendable {
    let suite: NoiseSuite
    /// The keyed cipher (nil before the handshake has a key: messages then pass in the clear).
    private var aead: NoiseAEAD?
    public private(set) var nonce: UInt64 = 0

    init(suite: NoiseSuite, key: SymmetricKey? = nil) {
        self.suite = suite
        aead = key.map { NoiseAEAD(suite: suite, key: $0) }
    }

    var hasKey: Bool { aead != nil }

    /// Encrypts with associated data; passes plaintext through before a key exists (Noise rule).
    public mutating func encrypt(_ plaintext: [UInt8], associatedData: [UInt8] = []) throws(NoiseError) -> [UInt8] {
        guard let aead else { return plaintext }
        guard nonce < UInt64.max else { throw .nonceExhausted }
        let sealed = try aead.seal(plaintext, nonce: nonce, associatedData: associatedData)
        nonce += 1
        return sealed
    }

    /// Decrypts and authenticates; a failure consumes no nonce.
    public mutating func decrypt(_ ciphertext: [UInt8], associatedData: [UInt8] = []) throws(NoiseError) -> [UInt8] {
        guard let aead else { return ciphertext }
        guard nonce < UInt64.max else { throw .nonceExhausted }
        let opened = try aead.open(ciphertext, nonce: nonce, associatedData: associatedData)
        nonce += 1
        return opened
    }
}

/// The Noise SymmetricState: chaining key, handshake hash and the current cipher.
struct NoiseSymmetricState: Sendable {
    var chainingKey: [UInt8]
    var hash: [UInt8]
    var cipher: NoiseCipherState

    init(suite: NoiseSuite) {
        let name = Array(suite.protocolName.utf8)
        // Names of at most 32 bytes are used as h directly, zero-padded; longer ones are hashed.
        // (Noise_KKpsk2_25519_AESGCM_SHA256 is exactly 32 bytes: not hashed.)
        hash = name.count <= 32 ? name + [UInt8](repeating: 0, count: 32 - name.count) : Array(SHA256.hash(data: name))
        chainingKey = hash
        cipher = NoiseCipherState(suite: suite)
    }

    mutating func mixHash(_ data: [UInt8]) {
        var hasher = SHA256()
        hasher.update(data: hash)
        hasher.update(data: data)
        hash = Array(hasher.finalize())
    }

    /// Noise's HKDF: HMAC-SHA256 with the chaining key as salt, two or three outputs.
    static func hkdf(_ chainingKey: [UInt8], _ input: [UInt8], outputs: Int) -> [[UInt8]] {
        let temp = SymmetricKey(data: HMAC<SHA256>.authenticationCode(for: input, using: SymmetricKey(data: chainingKey)))
        var results: [[UInt8]] = []
        var previous: [UInt8] = []
        for i in 1...outputs {
            previous = Array(HMAC<SHA256>.authenticationCode(for: previous + [UInt8(i)], using: temp))
            results.append(previous)
        }
        return results
    }

    mutating func mixKey(_ input: [UInt8]) {
        let out = Self.hkdf(chainingKey, input, outputs: 2)
        chainingKey = out[0]
        cipher = NoiseCipherState(suite: cipher.suite, key: SymmetricKey(data: out[1]))
    }

    mutating func mixKeyAndHash(_ input: [UInt8]) {
        let out = Self.hkdf(chainingKey, input, outputs: 3)
        chainingKey = out[0]
        mixHash(out[1])
        cipher = NoiseCipherState(suite: cipher.suite, key: SymmetricKey(data: out[2]))
    }

    mutating func encryptAndHash(_ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let c = try cipher.encrypt(plaintext, associatedData: hash)
        mixHash(c)
        return c
    }

    mutating func decryptAndHash(_ ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let p = try cipher.decrypt(ciphertext, associatedData: hash)
        mixHash(ciphertext)
        return p
    }

    func split() -> (NoiseCipherState, NoiseCipherState) {
        let out = Self.hkdf(chainingKey, [], outputs: 2)
        return (NoiseCipherState(suite: cipher.suite, key: SymmetricKey(data: out[0])),
                NoiseCipherState(suite: cipher.suite, key: SymmetricKey(data: out[1])))
    }
}

/// Noise_KKpsk2 from the responder's side — the Sendspin client, since the server always
/// initiates. Message 1 (server → client: e, es, ss) carries the PSK reference in clear-ish
/// form readable before the PSK is known; message 2 (client → server: e, ee, se, psk) mixes it.
public struct NoiseKKpsk2Responder: Sendable {
    public let suite: NoiseSuite
    private var state: NoiseSymmetricState
    private let localStatic: Curve25519.KeyAgreement.PrivateKey
    private let remoteStatic: Curve25519.KeyAgreement.PublicKey
    private let ephemeral: Curve25519.KeyAgreement.PrivateKey
    private var remoteEphemeral: Curve25519.KeyAgreement.PublicKey?
    private var step = 0

    /// - Parameters:
    ///   - localStatic: the client's identity key.
    ///   - remoteStatic: the server's static key (its `server_id`).
    ///   - prologue: the exact `client/init` text sent followed by the exact `server/init` text received.
    ///   - ephemeral: a fixed ephemeral key, for known-answer tests only; fresh otherwise.
    public init(suite: NoiseSuite, localStatic: Curve25519.KeyAgreement.PrivateKey, remoteStatic: Curve25519.KeyAgreement.PublicKey,
                prologue: [UInt8], ephemeral: Curve25519.KeyAgreement.PrivateKey? = nil) {
        self.suite = suite
        self.localStatic = localStatic
        self.remoteStatic = remoteStatic
        self.ephemeral = ephemeral ?? Curve25519.KeyAgreement.PrivateKey()
        state = NoiseSymmetricState(suite: suite)
        state.mixHash(prologue)
        // Pre-messages: -> s (initiator's static), then <- s (responder's static).
        state.mixHash(Array(remoteStatic.rawRepresentation))
        state.mixHash(Array(localStatic.publicKey.rawRepresentation))
    }

    private static func dh(_ priv: Curve25519.KeyAgreement.PrivateKey, _ pub: Curve25519.KeyAgreement.PublicKey) throws(NoiseError) -> [UInt8] {
        do {
            return try priv.sharedSecretFromKeyAgreement(with: pub).withUnsafeBytes { Array($0) }
        } catch {
            throw .invalidKey
        }
    }

    /// Reads message 1 and returns its decrypted payload (the PSK reference JSON).
    public mutating func readMessage1(_ message: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard step == 0 else { throw .malformedMessage("message 1 read twice") }
        guard message.count >= 32 + 16 else { throw .malformedMessage("message 1 is \(message.count) bytes, shorter than an ephemeral key and a tag") }
        let re: Curve25519.KeyAgreement.PublicKey
        do { re = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: message[0..<32]) } catch { throw .invalidKey }
        remoteEphemeral = re
        state.mixHash(Array(message[0..<32]))
        state.mixKey(Array(message[0..<32]))                 // psk modifier: e also mixes the key
        state.mixKey(try Self.dh(localStatic, re))            // es
        state.mixKey(try Self.dh(localStatic, remoteStatic))  // ss
        let payload = try state.decryptAndHash(Array(message[32...]))
        step = 1
        return payload
    }

    /// Writes message 2 with the PSK chosen from message 1's reference.
    public mutating func writeMessage2(payload: [UInt8], psk: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard step == 1, let re = remoteEphemeral else { throw .malformedMessage("message 2 before message 1") }
        guard psk.count == 32 else { throw .malformedMessage("a PSK must be 32 bytes") }
        let e = Array(ephemeral.publicKey.rawRepresentation)
        state.mixHash(e)
        state.mixKey(e)                                       // psk modifier
        state.mixKey(try Self.dh(ephemeral, re))              // ee
        state.mixKey(try Self.dh(ephemeral, remoteStatic))    // se
        state.mixKeyAndHash(psk)                              // psk
        let ciphertext = try state.encryptAndHash(payload)
        step = 2
        return e + ciphertext
    }

    /// The handshake hash (also the prologue of a later re-handshake).
    public var handshakeHash: [UInt8] { state.hash }

    /// The transport ciphers after message 2: receive = server→client, send = client→server.
    public func split() -> (receive: NoiseCipherState, send: NoiseCipherState) {
        let (initiatorToResponder, responderToInitiator) = state.split()
        return (initiatorToResponder, responderToInitiator)
    }
}

/// Pre-shared keys and their public references.
public enum SendspinPSK {
    /// The Sentinel PSK, SHA-256("sendspin-sentinel-psk-v1"), used by unpaired sessions.
    public static let sentinel: [UInt8] = Array(SHA256.hash(data: Array("sendspin-sentinel-psk-v1".utf8)))

    /// `psk_id` = base64url without padding of SHA-256("sendspin-psk-id-v1" ‖ PSK).
    public static func identifier(of psk: [UInt8]) -> String {
        Base64URL.encode(Array(SHA256.hash(data: Array("sendspin-psk-id-v1".utf8) + psk)))
    }
}

/// base64url without padding (ids, psk_id, handshake data) — Sendspin's identifier encoding.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i + 3 <= bytes.count {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [alphabet[Int(v >> 18)], alphabet[Int(v >> 12 & 63)], alphabet[Int(v >> 6 & 63)], alphabet[Int(v & 63)]]
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let v = UInt32(bytes[i]) << 16
            out += [alphabet[Int(v >> 18)], alphabet[Int(v >> 12 & 63)]]
        } else if rest == 2 {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out += [alphabet[Int(v >> 18)], alphabet[Int(v >> 12 & 63)], alphabet[Int(v >> 6 & 63)]]
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes strict base64url without padding; nil for any other character, padding, or a
    /// length that cannot occur.
    public static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        values.reserveCapacity(text.utf8.count)
        for c in text.utf8 {
            switch c {
            case 65...90: values.append(c - 65)
            case 97...122: values.append(c - 71)
            case 48...57: values.append(c + 4)
            case 45: values.append(62)
            case 95: values.append(63)
            default: return nil
            }
        }
        guard values.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(values.count * 3 / 4)
        var i = 0
        while i + 4 <= values.count {
            let v = UInt32(values[i]) << 18 | UInt32(values[i + 1]) << 12 | UInt32(values[i + 2]) << 6 | UInt32(values[i + 3])
            out += [UInt8(v >> 16), UInt8(v >> 8 & 255), UInt8(v & 255)]
            i += 4
        }
        let rest = values.count - i
        if rest == 2 {
            let v = UInt32(values[i]) << 18 | UInt32(values[i + 1]) << 12
            out.append(UInt8(v >> 16))
        } else if rest == 3 {
            let v = UInt32(values[i]) << 18 | UInt32(values[i + 1]) << 12 | UInt32(values[i + 2]) << 6
            out += [UInt8(v >> 16), UInt8(v >> 8 & 255)]
        }
        return out
    }
}
