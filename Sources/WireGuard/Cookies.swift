import Crypto
import FarcastSupport

/// MAC1 and MAC2 on handshake messages, and the cookies MAC2 is keyed with.
///
/// MAC1 (keyed BLAKE2s-128 with HASH("mac1----" ‖ receiver's public key)) covers the message up
/// to itself: only someone who knows the receiver's public key can make a handshake message it
/// will spend a Diffie-Hellman on. MAC2 (keyed with a cookie) covers the message up to itself and
/// is checked only under load: a responder that is busy answers an initiation with a cookie
/// reply instead, and the initiator retries with MAC2 keyed by that cookie, proving it owns
/// its source address.
public enum MessageMACs {
    /// Bytes of the message MAC1 covers: everything before the 32 bytes of MAC1 and MAC2.
    static func mac1(_ message: [UInt8], key: [UInt8]) -> [UInt8] {
        BLAKE2s.hash(Array(message[0..<(message.count - 32)]), digestLength: 16, key: key)
    }

    static func mac2(_ message: [UInt8], cookie: [UInt8]) -> [UInt8] {
        BLAKE2s.hash(Array(message[0..<(message.count - 16)]), digestLength: 16, key: cookie)
    }

    /// Whether the MAC1 of a message sent to `local` is right.
    public static func verifyMAC1(_ message: [UInt8], local: LocalIdentity) -> Bool {
        constantTimeEqual(mac1(message, key: local.mac1Key), Array(message[(message.count - 32)..<(message.count - 16)]))
    }
}

/// The initiator's side of cookies, one per peer: stamps outgoing handshake messages with MAC1
/// (always) and MAC2 (while a cookie from the peer is fresh), and takes in cookie replies.
public struct CookieJar: Sendable {
    /// How long a cookie from a cookie reply stays usable (wireguard-go: two minutes).
    public static let cookieLifetime: Int64 = 120_000_000_000

    let remote: RemoteIdentity
    private var cookie: (value: [UInt8], received: MonotonicInstant)?
    /// MAC1 of the last message we stamped: a cookie reply must be bound to it.
    private var lastMAC1: [UInt8]?

    public init(remote: RemoteIdentity) { self.remote = remote }

    public mutating func stamp(_ message: HandshakeInitiation, now: MonotonicInstant) -> [UInt8] {
        stamp(message.bytes, now: now)
    }

    public mutating func stamp(_ message: HandshakeResponse, now: MonotonicInstant) -> [UInt8] {
        stamp(message.bytes, now: now)
    }

    private mutating func stamp(_ unstamped: [UInt8], now: MonotonicInstant) -> [UInt8] {
        var bytes = unstamped
        let n = bytes.count
        let mac1 = MessageMACs.mac1(bytes, key: remote.mac1Key)
        bytes.replaceSubrange((n - 32)..<(n - 16), with: mac1)
        lastMAC1 = mac1
        if let cookie, now.nanoseconds(since: cookie.received) < Self.cookieLifetime {
            bytes.replaceSubrange((n - 16)..<n, with: MessageMACs.mac2(bytes, cookie: cookie.value))
        }
        return bytes
    }

    /// Takes the cookie from a reply to the last message we stamped.
    public mutating func consume(_ reply: CookieReply, now: MonotonicInstant) throws(WireGuardError) {
        guard let lastMAC1 else { throw .unexpectedReceiver(reply.receiverIndex) }
        do {
            let value = try XChaCha20Poly1305.open(reply.encryptedCookie, key: remote.cookieKey, nonce: reply.nonce, authenticating: lastMAC1)
            cookie = (value, now)
        } catch {
            throw .decryptionFailed(field: "cookie of the cookie reply")
        }
    }

    public var hasFreshCookie: Bool { cookie != nil }
}

/// The responder's side of cookies, one per interface: checks MAC2 and makes cookie replies.
/// The cookie for a source is MAC(secret, source address bytes) with a secret that changes every
/// two minutes, so a cookie proves the sender received our reply at that address recently.
public struct CookieChecker: Sendable {
    public static let secretLifetime: Int64 = 120_000_000_000

    let local: LocalIdentity
    private var secret: [UInt8]
    private var secretMade: MonotonicInstant

    public init(local: LocalIdentity, now: MonotonicInstant) {
        self.local = local
        secret = Self.randomBytes(32)
        secretMade = now
    }

    /// A checker with a fixed secret (for known-answer tests).
    init(local: LocalIdentity, secret: [UInt8], now: MonotonicInstant) {
        self.local = local
        self.secret = secret
        secretMade = now
    }

    private mutating func currentSecret(now: MonotonicInstant) -> [UInt8] {
        if now.nanoseconds(since: secretMade) >= Self.secretLifetime {
            secret = Self.randomBytes(32)
            secretMade = now
        }
        return secret
    }

    func cookie(for source: [UInt8], now: MonotonicInstant) -> [UInt8]? {
        guard now.nanoseconds(since: secretMade) < Self.secretLifetime else { return nil }
        return BLAKE2s.hash(source, digestLength: 16, key: secret)
    }

    /// Whether `message` (an initiation or response, MAC1 already checked) carries the MAC2 of
    /// the cookie `source` would have now. `source` is the sender's address and port in bytes.
    public func verifyMAC2(_ message: [UInt8], source: [UInt8], now: MonotonicInstant) -> Bool {
        guard let cookie = cookie(for: source, now: now) else { return false }
        return constantTimeEqual(MessageMACs.mac2(message, cookie: cookie), Array(message.suffix(16)))
    }

    /// The cookie reply to `message` from `source`, addressed to the message's sender index.
    public mutating func reply(to message: [UInt8], senderIndex: UInt32, source: [UInt8], now: MonotonicInstant,
                               nonce: [UInt8] = CookieChecker.randomBytes(24)) -> CookieReply {
        let cookie = BLAKE2s.hash(source, digestLength: 16, key: currentSecret(now: now))
        let mac1 = Array(message[(message.count - 32)..<(message.count - 16)])
        // Sealing with a 32-byte key and a 24-byte nonce cannot fail.
        let sealed = try! XChaCha20Poly1305.seal(cookie, key: local.cookieKey, nonce: nonce, authenticating: mac1)
        return CookieReply(receiverIndex: senderIndex, nonce: nonce, encryptedCookie: sealed)
    }

    public static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
    }
}

func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in 0..<a.count { difference |= a[i] ^ b[i] }
    return difference == 0
}
