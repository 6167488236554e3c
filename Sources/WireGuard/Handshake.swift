import Crypto
import Foundation

/// The Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s handshake as WireGuard runs it: one initiation, one
/// response, then two transport keys. Pure: keys, indices, ephemerals and timestamps come in as
/// arguments, so the same inputs give the same bytes (the vector tests depend on it).
///
/// The two sides: the initiator calls `InitiatorHandshake.start`, sends the initiation (after
/// `MessageMACs` stamps it), and `finish`es with the response. The responder calls
/// `ConsumedInitiation(consuming:local:)`, finds the peer by `peerPublicKey`, checks the
/// timestamp is newer than the last one it accepted from that peer, and `respond`s.

/// Our side of every handshake: the static key and what is derived from it once.
public struct LocalIdentity: Sendable {
    public let privateKey: PrivateKey
    public var publicKey: PublicKey { privateKey.publicKey }
    /// HASH("mac1----" ‖ our public key): checks MAC1 on messages sent to us.
    let mac1Key: [UInt8]
    /// HASH("cookie--" ‖ our public key): seals the cookies we send.
    let cookieKey: [UInt8]

    public init(privateKey: PrivateKey) {
        self.privateKey = privateKey
        mac1Key = BLAKE2s.hash(Array("mac1----".utf8), privateKey.publicKey.bytes)
        cookieKey = BLAKE2s.hash(Array("cookie--".utf8), privateKey.publicKey.bytes)
    }
}

/// A peer as the handshake needs it: its static key and the preshared key both sides set.
public struct RemoteIdentity: Sendable {
    public let publicKey: PublicKey
    public let presharedKey: PresharedKey
    /// HASH("mac1----" ‖ the peer's public key): stamps MAC1 on messages we send it.
    let mac1Key: [UInt8]
    /// HASH("cookie--" ‖ the peer's public key): opens the cookies it sends us.
    let cookieKey: [UInt8]

    public init(publicKey: PublicKey, presharedKey: PresharedKey = .none) {
        self.publicKey = publicKey
        self.presharedKey = presharedKey
        mac1Key = BLAKE2s.hash(Array("mac1----".utf8), publicKey.bytes)
        cookieKey = BLAKE2s.hash(Array("cookie--".utf8), publicKey.bytes)
    }
}

/// The two keys a completed handshake yields, and which session indices they belong to.
public struct SessionKeys: Sendable {
    public let sendingKey: SymmetricKey
    public let receivingKey: SymmetricKey
    /// The index the peer puts on messages to us (ours).
    public let localIndex: UInt32
    /// The index we put on messages to the peer (theirs).
    public let remoteIndex: UInt32
    /// Whether we initiated: the initiator may send at once, the responder only after the
    /// initiator's first transport message proves it has the keys.
    public let isInitiator: Bool
}

/// The chaining key and the transcript hash, and the Noise operations on them.
struct SymmetricState: Sendable {
    static let construction = Array("Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s".utf8)
    static let identifier = Array("WireGuard v1 zx2c4 Jason@zx2c4.com".utf8)
    static let initialChainingKey = BLAKE2s.hash(construction)
    static let initialHash = BLAKE2s.hash(initialChainingKey, identifier)

    var chainingKey: [UInt8]
    var hash: [UInt8]

    /// The state both sides start from: the protocol name, then the responder's static key.
    init(responderStatic: PublicKey) {
        chainingKey = Self.initialChainingKey
        hash = BLAKE2s.hash(Self.initialHash, responderStatic.bytes)
    }

    mutating func mixHash(_ data: [UInt8]) { hash = BLAKE2s.hash(hash, data) }

    mutating func mixKey(_ input: [UInt8]) { chainingKey = kdf(chainingKey, input, outputs: 1)[0] }

    /// KDF2: a new chaining key and a key for one AEAD operation.
    mutating func mixKeyForAEAD(_ input: [UInt8]) -> [UInt8] {
        let out = kdf(chainingKey, input, outputs: 2)
        chainingKey = out[0]
        return out[1]
    }

    mutating func encryptAndHash(_ plaintext: [UInt8], key: [UInt8]) -> [UInt8] {
        // Sealing with a 32-byte key and a fixed nonce cannot fail.
        let box = try! ChaChaPoly.seal(plaintext, using: SymmetricKey(data: key), nonce: zeroNonce, authenticating: hash)
        let sealed = Array(box.ciphertext) + Array(box.tag)
        mixHash(sealed)
        return sealed
    }

    mutating func decryptAndHash(_ sealed: [UInt8], key: [UInt8], field: String) throws(WireGuardError) -> [UInt8] {
        let plaintext: [UInt8]
        do {
            let box = try ChaChaPoly.SealedBox(nonce: zeroNonce, ciphertext: sealed.dropLast(16), tag: sealed.suffix(16))
            plaintext = Array(try ChaChaPoly.open(box, using: SymmetricKey(data: key), authenticating: hash))
        } catch {
            throw .decryptionFailed(field: field)
        }
        mixHash(sealed)
        return plaintext
    }

    /// The transport keys: (initiator→responder, responder→initiator).
    func split() -> ([UInt8], [UInt8]) {
        let out = kdf(chainingKey, [], outputs: 2)
        return (out[0], out[1])
    }
}

/// The handshake AEAD's nonce: always zero (each key is used once). 12 bytes, so it cannot fail.
private let zeroNonce = try! ChaChaPoly.Nonce(data: [UInt8](repeating: 0, count: 12))

/// WireGuard's KDF_n: HMAC-BLAKE2s extract, then n chained expansions.
func kdf(_ key: [UInt8], _ input: [UInt8], outputs: Int) -> [[UInt8]] {
    let secret = hmacBLAKE2s(key: key, input)
    var results: [[UInt8]] = []
    var previous: [UInt8] = []
    for i in 1...outputs {
        previous = hmacBLAKE2s(key: secret, previous, [UInt8(i)])
        results.append(previous)
    }
    return results
}

/// The initiator's half-finished handshake: what it needs to open the response.
public struct InitiatorHandshake: Sendable {
    public let senderIndex: UInt32
    public let remote: RemoteIdentity
    let state: SymmetricState
    let ephemeral: PrivateKey

    /// Builds the initiation to `remote` (MACs not yet stamped).
    public static func start(local: LocalIdentity, remote: RemoteIdentity, senderIndex: UInt32,
                             timestamp: TAI64N = .now, ephemeral: PrivateKey = PrivateKey())
        throws(WireGuardError) -> (InitiatorHandshake, HandshakeInitiation) {
        var state = SymmetricState(responderStatic: remote.publicKey)
        let ephemeralPublic = ephemeral.publicKey.bytes
        state.mixKey(ephemeralPublic)
        state.mixHash(ephemeralPublic)
        let staticKey = state.mixKeyForAEAD(try ephemeral.sharedSecret(with: remote.publicKey))
        let encryptedStatic = state.encryptAndHash(local.publicKey.bytes, key: staticKey)
        let timestampKey = state.mixKeyForAEAD(try local.privateKey.sharedSecret(with: remote.publicKey))
        let encryptedTimestamp = state.encryptAndHash(timestamp.bytes, key: timestampKey)
        let message = HandshakeInitiation(senderIndex: senderIndex, ephemeral: ephemeralPublic,
                                          encryptedStatic: encryptedStatic, encryptedTimestamp: encryptedTimestamp)
        return (InitiatorHandshake(senderIndex: senderIndex, remote: remote, state: state, ephemeral: ephemeral), message)
    }

    /// Opens the response and derives the session keys. Throws without changing anything when
    /// the response is not for this handshake or does not decrypt.
    public func finish(_ response: HandshakeResponse, local: LocalIdentity) throws(WireGuardError) -> SessionKeys {
        guard response.receiverIndex == senderIndex else { throw .unexpectedReceiver(response.receiverIndex) }
        var state = self.state
        let responderEphemeral = try PublicKey(bytes: response.ephemeral)
        state.mixKey(response.ephemeral)
        state.mixHash(response.ephemeral)
        state.mixKey(try ephemeral.sharedSecret(with: responderEphemeral))
        state.mixKey(try local.privateKey.sharedSecret(with: responderEphemeral))
        let out = kdf(state.chainingKey, remote.presharedKey.bytes, outputs: 3)
        state.chainingKey = out[0]
        state.mixHash(out[1])
        _ = try state.decryptAndHash(response.encryptedNothing, key: out[2], field: "empty payload of the response")
        let (toResponder, toInitiator) = state.split()
        return SessionKeys(sendingKey: SymmetricKey(data: toResponder), receivingKey: SymmetricKey(data: toInitiator),
                           localIndex: senderIndex, remoteIndex: response.senderIndex, isInitiator: true)
    }
}

/// An initiation the responder has opened: who sent it and when, and the state to answer it.
public struct ConsumedInitiation: Sendable {
    public let peerPublicKey: PublicKey
    public let timestamp: TAI64N
    /// The initiator's index (our response's receiver index).
    public let senderIndex: UInt32
    let state: SymmetricState
    let initiatorEphemeral: PublicKey

    /// Opens `initiation` with our static key. The caller checks MAC1 first (`MessageMACs`),
    /// then that `peerPublicKey` is a configured peer and `timestamp` is newer than its last.
    public init(consuming initiation: HandshakeInitiation, local: LocalIdentity) throws(WireGuardError) {
        var state = SymmetricState(responderStatic: local.publicKey)
        let ephemeral = try PublicKey(bytes: initiation.ephemeral)
        state.mixKey(initiation.ephemeral)
        state.mixHash(initiation.ephemeral)
        let staticKey = state.mixKeyForAEAD(try local.privateKey.sharedSecret(with: ephemeral))
        let peer = try PublicKey(bytes: try state.decryptAndHash(initiation.encryptedStatic, key: staticKey, field: "static key of the initiation"))
        let timestampKey = state.mixKeyForAEAD(try local.privateKey.sharedSecret(with: peer))
        let timestamp = try state.decryptAndHash(initiation.encryptedTimestamp, key: timestampKey, field: "timestamp of the initiation")
        self.peerPublicKey = peer
        self.timestamp = TAI64N(bytes: timestamp)
        self.senderIndex = initiation.senderIndex
        self.state = state
        self.initiatorEphemeral = ephemeral
    }

    /// The response (MACs not yet stamped) and the session keys.
    public func respond(remote: RemoteIdentity, senderIndex: UInt32, ephemeral: PrivateKey = PrivateKey())
        throws(WireGuardError) -> (HandshakeResponse, SessionKeys) {
        var state = self.state
        let ephemeralPublic = ephemeral.publicKey.bytes
        state.mixKey(ephemeralPublic)
        state.mixHash(ephemeralPublic)
        state.mixKey(try ephemeral.sharedSecret(with: initiatorEphemeral))
        state.mixKey(try ephemeral.sharedSecret(with: remote.publicKey))
        let out = kdf(state.chainingKey, remote.presharedKey.bytes, outputs: 3)
        state.chainingKey = out[0]
        state.mixHash(out[1])
        let encryptedNothing = state.encryptAndHash([], key: out[2])
        let (toResponder, toInitiator) = state.split()
        let response = HandshakeResponse(senderIndex: senderIndex, receiverIndex: self.senderIndex,
                                         ephemeral: ephemeralPublic, encryptedNothing: encryptedNothing)
        return (response, SessionKeys(sendingKey: SymmetricKey(data: toInitiator), receivingKey: SymmetricKey(data: toResponder),
                                      localIndex: senderIndex, remoteIndex: self.senderIndex, isInitiator: false))
    }
}
