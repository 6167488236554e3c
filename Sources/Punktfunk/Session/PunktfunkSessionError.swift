import Foundation

/// Why a punktfunk/1 session (QUIC, handshake, control, pairing) failed, worded for a person.
public enum PunktfunkSessionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A name or address could not be resolved or a socket call failed; `reason` is the OS text.
    case network(operation: String, reason: String)
    /// The QUIC/TLS handshake did not complete in time.
    case handshakeTimeout(host: String, seconds: Double)
    /// TLS failed (ALPN refused, certificate rejected, bad signature); `detail` is GnuTLS's text.
    case tls(String)
    /// The QUIC and TLS libraries could not be loaded; `detail` says which and how to install them.
    case libraryMissing(String)
    /// The host's certificate is not the pinned one.
    case fingerprintChanged(host: String, pinned: String, presented: String)
    /// The host is unknown and trust on first use is not allowed toward it.
    case untrustedHost(host: String, fingerprint: String)
    /// The peer closed the connection with an application code.
    case closedByHost(code: UInt64, reason: String)
    /// Nothing arrived within the idle timeout.
    case idleTimeout(seconds: Double)
    /// A wait for a specific answer ran out.
    case timeout(waitingFor: String, seconds: Double)
    /// The peer broke the wire format.
    case malformed(String)
    /// The host speaks another wire version.
    case wireVersionMismatch(ours: UInt32, theirs: UInt32)
    /// The host demands pairing before streaming.
    case pairingRequired
    /// Pairing failed: the confirmation MAC did not match.
    case wrongPIN
    /// The PIN is not four ASCII digits.
    case invalidPIN
    /// The host refused pairing (no armed PIN, bound to another device…).
    case pairingRefused(String)
    /// QUIC itself failed (internal library error code and text).
    case quic(code: Int32, detail: String)
    /// The host's pin could not be saved in the trust store (the OS reason).
    case trustStore(String)
    /// The session was closed by us.
    case closed

    public var description: String {
        switch self {
        case .network(let operation, let reason):
            return "cannot \(operation): \(reason)"
        case .handshakeTimeout(let host, let seconds):
            return "no QUIC answer from \(host) within \(Self.format(seconds)) s; is a punktfunk host listening on that UDP port?"
        case .tls(let detail):
            return "TLS handshake failed: \(detail)"
        case .libraryMissing(let detail):
            return detail
        case .fingerprintChanged(let host, let pinned, let presented):
            return "host \(host) presented certificate \(presented) but \(pinned) is pinned; if the host was reinstalled, re-trust it with --trust"
        case .untrustedHost(let host, let fingerprint):
            return "host \(host) is not trusted (certificate \(fingerprint)); pair with it first (farcast punktfunk pair) or accept it with --trust"
        case .closedByHost(let code, let reason):
            let what: String
            switch code {
            case 0x51: what = "the session was ended on purpose"
            case 0x52: what = "the host's game or desktop exited"
            default: what = "the host closed the connection (code 0x\(String(code, radix: 16)))"
            }
            return reason.isEmpty ? what : "\(what): \(reason)"
        case .idleTimeout(let seconds):
            return "the host stopped answering (nothing received for \(Self.format(seconds)) s)"
        case .timeout(let what, let seconds):
            return "no \(what) from the host within \(Self.format(seconds)) s"
        case .malformed(let detail):
            return "the host sent a malformed message: \(detail)"
        case .wireVersionMismatch(let ours, let theirs):
            return "the host speaks punktfunk wire version \(theirs), this client \(ours); update the older side"
        case .pairingRequired:
            return "the host requires pairing: run farcast punktfunk pair HOST and enter the PIN the host shows"
        case .wrongPIN:
            return "wrong PIN: the host did not confirm the pairing; arm a new PIN on the host and try again"
        case .invalidPIN:
            return "a punktfunk PIN is exactly 4 digits"
        case .pairingRefused(let reason):
            return "the host refused pairing: \(reason)"
        case .quic(let code, let detail):
            return "QUIC error \(code): \(detail)"
        case .trustStore(let reason):
            return "cannot save the host's certificate pin: \(reason)"
        case .closed:
            return "the session is closed"
        }
    }

    static func format(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? String(Int(seconds)) : String(format: "%.1f", seconds)
    }
}
