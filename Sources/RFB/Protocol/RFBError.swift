import FarcastSupport

/// Everything that can end an RFB session, worded so a person can act on it.
///
/// The engine never traps on bad input: a malformed, truncated or hostile stream surfaces as one
/// of these and the connection is closed.
public enum RFBError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The peer did not start with an RFB banner; its first bytes.
    case notAnRFBServer(greeting: [UInt8])
    /// The server's protocol version is older than 3.3.
    case unsupportedVersion(String)
    /// The server refused the connection before authentication, with its reason.
    case serverRefused(reason: String)
    /// None of the server's security types is in the client's preference list.
    case noCommonSecurityType(offered: [String], accepted: [String], hint: String?)
    /// VeNCrypt offered no subtype this client can complete, but the server's top-level list has
    /// a type it can: the client should connect again without VeNCrypt.
    case veNCryptUnusable(subtypes: [String], fallback: [String])
    /// The server rejected the credentials (or another security failure), with its reason.
    case authenticationFailed(reason: String)
    /// The server asked for a password or user name and none is available.
    case credentialsRequired(String)
    /// A TLS certificate does not match the pin recorded on first use.
    case certificateChanged(host: String, pinned: String, presented: String)
    /// The server's RSA-AES key differs from the one pinned for it.
    case serverKeyChanged(host: String, pinned: String, presented: String)
    /// TLS could not be set up or failed.
    case tlsFailed(String)
    /// The server violated the protocol.
    case protocolViolation(String)
    /// The server announced dimensions beyond what the engine accepts.
    case framebufferTooLarge(width: Int, height: Int)
    /// A rectangle lies (partly) outside the framebuffer.
    case rectangleOutOfBounds(encoding: String, x: Int, y: Int, width: Int, height: Int, framebufferWidth: Int, framebufferHeight: Int)
    /// The server used an encoding the client never offered or does not know.
    case unsupportedEncoding(Int32)
    /// Encoded data was inconsistent with its rectangle.
    case malformedRectangle(encoding: String, detail: String)
    /// zlib reported corrupt data, or the data inflated past the rectangle.
    case compressionError(encoding: String, detail: String)
    /// A JPEG image in a Tight rectangle could not be decoded.
    case jpegError(String)
    /// The server sent a message type the client does not know (its length is unknowable).
    case unknownMessageType(UInt8)
    /// The connection closed, with the context in which it happened.
    case connectionClosed(String)
    /// Connecting failed (resolution, refusal, timeout).
    case connectFailed(String)
    /// An operation waited too long.
    case timedOut(String)
    /// The operation needs a connected session.
    case notConnected
    /// Input was attempted on a view-only session.
    case viewOnly
    /// A request the server cannot satisfy (it lacks the extension, or refused).
    case unsupported(String)
    /// The connection was abandoned on request before the session was ready.
    case cancelled

    public var description: String {
        switch self {
        case .notAnRFBServer(let greeting):
            let server = ForeignGreeting.describe(greeting) ?? "a server that sent nothing"
            return "this is not a VNC server but \(server); check the host and port (VNC servers listen on 5900 + the display number)"
        case .unsupportedVersion(let version):
            return "the server speaks RFB \(version), older than 3.3, which Farcast does not support"
        case .serverRefused(let reason):
            if reason.lowercased().contains("too many security failures") {
                return "the server refused the connection: \(reason) — TigerVNC refuses an address for a while after repeated failed logins (its BlacklistTimeout, 10 s at first and doubling); wait, then connect with the right password"
            }
            return "the server refused the connection: \(reason)"
        case .noCommonSecurityType(let offered, let accepted, let hint):
            var text = "no common security type: the server offers \(offered.joined(separator: ", ")); this client accepts \(accepted.joined(separator: ", "))"
            if let hint { text += "; \(hint)" }
            return text
        case .veNCryptUnusable(let subtypes, let fallback):
            return "VeNCrypt offered only \(subtypes.joined(separator: ", ")), none of which this client can complete; connect again choosing \(fallback.joined(separator: " or "))"
        case .authenticationFailed(let reason):
            if reason.lowercased().contains("too many security failures") {
                return "authentication failed: \(reason) — TigerVNC refuses an address for a while after repeated failed logins (its BlacklistTimeout, 10 s at first and doubling); wait, then connect with the right password"
            }
            return "authentication failed: \(reason)"
        case .credentialsRequired(let what):
            if what.hasPrefix("a user name") {
                return "the server requires \(what); give it with --username, in the address (vnc://USER@HOST) or FARCAST_VNC_USERNAME"
            }
            return "the server requires \(what); give it with --password-file, FARCAST_VNC_PASSWORD or the prompt on a terminal"
        case .certificateChanged(let host, let pinned, let presented):
            return "the TLS certificate of \(host) changed: pinned SHA-256 \(pinned), presented \(presented); if you trust the new certificate, connect once with --trust"
        case .serverKeyChanged(let host, let pinned, let presented):
            return "the RSA-AES key of \(host) changed: pinned SHA-256 \(pinned), presented \(presented); if you trust the new key, connect once with --trust"
        case .tlsFailed(let detail):
            return "TLS failed: \(detail)"
        case .protocolViolation(let detail):
            return "protocol violation by the server: \(detail)"
        case .framebufferTooLarge(let w, let h):
            return "the server announced a \(w)×\(h) framebuffer, larger than the 16384×16384 limit"
        case .rectangleOutOfBounds(let encoding, let x, let y, let w, let h, let fw, let fh):
            return "\(encoding) rectangle \(w)×\(h) at (\(x),\(y)) lies outside the \(fw)×\(fh) framebuffer"
        case .unsupportedEncoding(let value):
            return "the server used encoding \(value), which this client did not offer"
        case .malformedRectangle(let encoding, let detail):
            return "malformed \(encoding) rectangle: \(detail)"
        case .compressionError(let encoding, let detail):
            return "corrupt \(encoding) compressed data: \(detail)"
        case .jpegError(let detail):
            return "JPEG decoding failed: \(detail)"
        case .unknownMessageType(let type):
            return "the server sent unknown message type \(type); the stream cannot be followed past it"
        case .connectionClosed(let context):
            return "the connection closed \(context)"
        case .connectFailed(let detail):
            return "cannot connect: \(detail)"
        case .timedOut(let what):
            return "timed out \(what)"
        case .notConnected:
            return "not connected"
        case .viewOnly:
            return "this session is view-only: no input is sent"
        case .unsupported(let what):
            return what
        case .cancelled:
            return "stopped before the session was ready"
        }
    }
}
