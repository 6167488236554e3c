/// Everything that can end or disturb a Sendspin session, worded for a person.
public enum SendspinError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The server answered client/init with server/error.
    case serverRefused(reason: String)
    /// The server broke the protocol (bad JSON, a message in the wrong phase, bad framing).
    case protocolViolation(String)
    /// The Noise handshake failed (the server closes silently, so this is our side's finding).
    case handshakeFailed(String)
    /// A transport message failed to decrypt: the session cannot continue.
    case decryptionFailed
    /// The server's activation is not admissible for this client; the goodbye reason sent.
    case notAdmitted(goodbyeReason: String, detail: String)
    /// The connection closed.
    case connectionClosed(String)
    case connectFailed(String)
    case timedOut(String)
    /// The audio output failed (device missing, busy, or gone mid-stream).
    case audioDevice(String)
    /// A server URL that cannot be dialled as written, with the fix.
    case badURL(String)
    /// Stopped on request before the connection was open.
    case cancelled

    public var description: String {
        switch self {
        case .serverRefused(let reason): return "the server refused the connection: \(reason)"
        case .protocolViolation(let detail): return "protocol violation: \(detail)"
        case .handshakeFailed(let detail): return "the encrypted handshake failed: \(detail)"
        case .decryptionFailed: return "a message from the server failed to decrypt; the session was closed"
        case .notAdmitted(let reason, let detail): return "not admitted (\(reason)): \(detail)"
        case .connectionClosed(let context): return "the connection closed \(context)"
        case .connectFailed(let detail): return "cannot connect: \(detail)"
        case .timedOut(let what): return "timed out \(what)"
        case .audioDevice(let detail): return "audio output: \(detail)"
        case .badURL(let detail): return detail
        case .cancelled: return "stopped before the connection was open"
        }
    }
}
