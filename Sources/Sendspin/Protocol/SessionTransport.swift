import Crypto

/// An established encrypted session's record layer: the two Noise cipher states, the
/// fragment reassembler, and what a re-handshake needs. Everything after the handshake is
/// opened and sealed here; it exists only once the handshake has finished, so its ciphers are
/// never missing.
struct SessionTransport: Sendable {
    private var receiver: NoiseCipherState
    private var sender: NoiseCipherState
    private var reassembler = FragmentReassembler()
    /// The server's static key, for a re-handshake.
    let serverKey: Curve25519.KeyAgreement.PublicKey
    /// The latest handshake's hash: the next re-handshake's prologue, and what binds a CPace
    /// exchange to this session.
    private(set) var handshakeHash: [UInt8]
    /// The category of the PSK keying the messages now.
    private(set) var category: PSKCategory

    /// Keys from a re-handshake we answered: they take over with the server's first message
    /// under them (until then the old ones still open and seal).
    private struct Rekey: Sendable {
        var receiver: NoiseCipherState
        var sender: NoiseCipherState
        var category: PSKCategory
    }
    private var rekey: Rekey?

    /// After message 2: `handshake` is split into the transport's ciphers.
    init(handshake: NoiseKKpsk2Responder, serverKey: Curve25519.KeyAgreement.PublicKey, category: PSKCategory) {
        (receiver, sender) = handshake.split()
        handshakeHash = handshake.handshakeHash
        self.serverKey = serverKey
        self.category = category
    }

    /// Between our re-handshake answer and the server's first message under the new keys.
    var isRekeying: Bool { rekey != nil }

    /// A re-handshake answered (message 2 already sealed under the current keys): the new keys
    /// wait for the server; its hash is the one that counts from now on.
    mutating func beginRekey(_ handshake: NoiseKKpsk2Responder, category: PSKCategory) {
        let (receiver, sender) = handshake.split()
        rekey = Rekey(receiver: receiver, sender: sender, category: category)
        handshakeHash = handshake.handshakeHash
    }

    /// Decrypts one transport message; `rekeyed` when it was the server's first under the keys
    /// of a re-handshake, which are now the session's.
    mutating func open(_ ciphertext: [UInt8]) throws(SendspinError) -> (plaintext: [UInt8], rekeyed: Bool) {
        guard ciphertext.count <= 65_535 else { throw .protocolViolation("a transport message over 65,535 bytes") }
        var current = receiver
        if let plaintext = try? current.decrypt(ciphertext) {
            receiver = current
            return (plaintext, false)
        }
        guard var next = rekey, let plaintext = try? next.receiver.decrypt(ciphertext) else { throw .decryptionFailed }
        receiver = next.receiver
        sender = next.sender
        category = next.category
        rekey = nil
        return (plaintext, true)
    }

    /// Takes one decrypted plaintext; returns a message once it is complete.
    mutating func reassemble(_ plaintext: [UInt8]) throws(SendspinError) -> (type: UInt8, body: [UInt8])? {
        try reassembler.accept(plaintext)
    }

    /// One JSON message, framed (fragmented if large) and encrypted, in sending order.
    mutating func seal(json text: String) throws(SendspinError) -> [[UInt8]] {
        try seal(type: SendspinFraming.json, body: Array(text.utf8))
    }

    /// One message of `type`, framed (fragmented if large) and encrypted, in sending order.
    mutating func seal(type: UInt8, body: [UInt8]) throws(SendspinError) -> [[UInt8]] {
        var frames: [[UInt8]] = []
        for plaintext in SendspinFraming.plaintexts(type: type, body: body) {
            do { frames.append(try sender.encrypt(plaintext)) } catch { throw .protocolViolation("\(error)") }
        }
        return frames
    }
}
