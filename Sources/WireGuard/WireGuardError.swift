/// Everything that can go wrong in WireGuard's protocol core, typed. A datagram that fails any
/// check is dropped by the caller without effect on any state; the error says why, for a log
/// line (rate-limited by the caller: a hostile sender can produce one per datagram).
public enum WireGuardError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A key in a configuration or on the command line is not 32 bytes of base64 (44 characters).
    case invalidKey(what: String, reason: String)
    /// The datagram is not a WireGuard message: unknown type, wrong length for its type.
    case malformedMessage(String)
    /// MAC1 does not match: the sender does not know our public key (or the bytes were altered).
    case invalidMAC1
    /// We are under load and the message carries no valid MAC2 (a cookie reply is due).
    case cookieRequired
    /// A handshake field did not decrypt: wrong keys, a wrong preshared key, or altered bytes.
    case decryptionFailed(field: String)
    /// The initiation's static key belongs to no configured peer.
    case unknownPeer(PublicKey)
    /// The initiation's timestamp is not newer than the last one accepted from this peer.
    case replayedInitiation
    /// A Diffie-Hellman result was all zeros: the peer sent a low-order point.
    case weakPublicKey
    /// A response or cookie reply names a handshake we are not waiting for.
    case unexpectedReceiver(UInt32)
    /// A transport message's counter was seen before or is too old for the replay window.
    case replayedCounter(UInt64)
    /// The session's counters are used up (REJECT_AFTER_MESSAGES): a new handshake is needed.
    case sessionExhausted

    public var description: String {
        switch self {
        case .invalidKey(let what, let reason): return "invalid \(what): \(reason)"
        case .malformedMessage(let reason): return "not a WireGuard message: \(reason)"
        case .invalidMAC1: return "handshake message with an invalid MAC1 (the sender does not have our public key)"
        case .cookieRequired: return "handshake message without a valid cookie while under load"
        case .decryptionFailed(let field): return "the handshake's \(field) did not decrypt (wrong keys or preshared key)"
        case .unknownPeer(let key): return "handshake from a public key that is no configured peer: \(key)"
        case .replayedInitiation: return "handshake initiation replayed (its timestamp is not newer than the last one)"
        case .weakPublicKey: return "the peer's key gave an all-zero shared secret (a low-order point)"
        case .unexpectedReceiver(let index): return "message for handshake or session \(index), which we do not have"
        case .replayedCounter(let counter): return "transport message \(counter) replayed or outside the replay window"
        case .sessionExhausted: return "the session's message counter is used up; a new handshake is needed"
        }
    }
}
