import NIOSSH

/// Why an SSH tunnel could not be set up or carried on, worded for the person who typed the
/// command: which host, what the server said, and what to do about it.
public enum SSHTunnelError: Error, Sendable, Equatable, CustomStringConvertible {
    /// TCP to the SSH server failed (the OS reason included).
    case connectFailed(host: String, reason: String)
    /// The host is not in known_hosts and the user did not accept it (or could not be asked).
    case hostKeyUnknown(host: String, keyType: String, fingerprint: String, knownHosts: String)
    /// The host presented a key different from the one known_hosts lists.
    case hostKeyChanged(host: String, keyType: String, fingerprint: String, knownHosts: String, lines: [Int])
    /// The presented key is marked @revoked.
    case hostKeyRevoked(host: String, keyType: String, fingerprint: String, knownHosts: String, line: Int)
    /// Every method farcast could offer was refused.
    case authenticationFailed(user: String, host: String, offered: [String], tried: [String], notes: [String])
    /// A key file could not be used.
    case keyUnusable(path: String, reason: String)
    /// The server refused the direct-tcpip channel: forwarding disabled or not permitted.
    case forwardingRefused(bastion: String, target: String, reason: String)
    /// The bastion could not reach the target.
    case targetUnreachable(bastion: String, target: String, reason: String)
    /// The SSH connection ended or broke.
    case connectionLost(host: String, reason: String)
    /// Nothing happened within the time allowed.
    case timedOut(host: String, what: String, seconds: Int)
    /// A malformed route (`user@host:port`).
    case invalidRoute(String, reason: String)
    /// Something other than an SSH server answered (`what` names it by its greeting).
    case notSSH(host: String, what: String)
    /// The OpenSSH client failed: `said` is its own words (stderr), `hint` what to do.
    case sshFailed(host: String, said: String, hint: String)

    public var description: String {
        switch self {
        case .connectFailed(let host, let reason):
            return "cannot connect to the SSH server \(host): \(reason)"
        case .hostKeyUnknown(let host, let keyType, let fingerprint, let knownHosts):
            return "the authenticity of SSH host \(host) can't be established: its \(keyType) key fingerprint is \(fingerprint) and it is not in \(knownHosts); "
                + "check the fingerprint with the host's owner, then connect once with --accept-new (or answer yes at the prompt)"
        case .hostKeyChanged(let host, let keyType, let fingerprint, let knownHosts, let lines):
            return "WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED for \(host): it now presents the \(keyType) key \(fingerprint), not the one in \(knownHosts) "
                + "(line\(lines.count == 1 ? "" : "s") \(lines.map(String.init).joined(separator: ", "))); someone could be eavesdropping (a man-in-the-middle attack), "
                + "or the host key was replaced; farcast refuses to connect. If the change is expected, remove the old key with `ssh-keygen -R \(host)` and connect again"
        case .hostKeyRevoked(let host, let keyType, let fingerprint, let knownHosts, let line):
            return "the \(keyType) key \(fingerprint) of SSH host \(host) is marked @revoked in \(knownHosts) (line \(line)); farcast refuses to connect"
        case .authenticationFailed(let user, let host, let offered, let tried, let notes):
            // `host` is the route as shown ("user@host:port"), which may name the user already.
            var text = "SSH authentication as \(host.hasPrefix(user + "@") ? host : "\(user)@\(host)") failed"
            text += offered.isEmpty ? "" : "; the server accepts: \(offered.joined(separator: ", "))"
            text += tried.isEmpty ? (notes.isEmpty ? "; farcast had nothing to offer" : "; farcast had nothing it could offer")
                                  : "; farcast tried: \(tried.joined(separator: ", "))"
            if !notes.isEmpty { text += " (\(notes.joined(separator: "; ")))" }
            return text
        case .keyUnusable(let path, let reason):
            return "cannot use the SSH key \(path): \(reason)"
        case .forwardingRefused(let bastion, let target, let reason):
            return "the SSH server \(bastion) refused to forward to \(target) (\(reason)): TCP forwarding is disabled or not permitted for this user there (AllowTcpForwarding / PermitOpen in its sshd_config)"
        case .targetUnreachable(let bastion, let target, let reason):
            return "the SSH server \(bastion) cannot reach \(target): \(reason) (the address is resolved and connected from \(bastion)'s side)"
        case .connectionLost(let host, let reason):
            return "the SSH connection to \(host) ended: \(reason)"
        case .timedOut(let host, let what, let seconds):
            return "no \(what) from the SSH server \(host) within \(seconds) s"
        case .invalidRoute(let text, let reason):
            return "cannot read '\(text)' as an SSH route (\(reason)); use user@host or user@host:port"
        case .notSSH(let host, let what):
            return "\(host) is not an SSH server: it is \(what); check the --ssh port"
        case .sshFailed(let host, let said, let hint):
            return "ssh to \(host) failed: \(said) — \(hint)"
        }
    }

    /// Maps swift-nio-ssh's channel-open rejection to what it means (RFC 4254 §5.1 reason codes).
    static func channelRejection(_ error: any Error, bastion: String, target: String) -> SSHTunnelError? {
        guard let ssh = error as? NIOSSHError, ssh.type == .channelSetupRejected else { return nil }
        // The description carries "Reason: <code> <text>".
        let text = String(describing: ssh)
        var code = 0
        var reason = "refused"
        if let range = text.range(of: "Reason: ") {
            let rest = text[range.upperBound...]
            let parts = rest.split(separator: " ", maxSplits: 1)
            code = parts.first.flatMap { Int($0) } ?? 0
            if parts.count > 1 { reason = String(parts[1]) }
        }
        switch code {
        case 1: return .forwardingRefused(bastion: bastion, target: target, reason: "administratively prohibited: \(reason)")
        case 2: return .targetUnreachable(bastion: bastion, target: target, reason: reason)
        case 3: return .forwardingRefused(bastion: bastion, target: target, reason: "direct-tcpip channels are not supported: \(reason)")
        default: return .forwardingRefused(bastion: bastion, target: target, reason: reason)
        }
    }
}
