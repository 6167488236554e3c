#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a device could not be created, adopted, configured, read or written. Each case reads as
/// one sentence for a person, naming the operation and the system's reason.
public enum TunnelError: Error, Equatable, Sendable, CustomStringConvertible {
    /// `/dev/net/tun` does not exist (no `tun` module, or a container without the device).
    case deviceMissing(path: String)
    /// The operation needs CAP_NET_ADMIN (root, or a network namespace this process owns).
    case notPermitted(operation: String, errno: Int32)
    /// The device file's permissions do not let this user open it (a matter of its mode, not
    /// of capabilities: a namespace of one's own does not help).
    case deviceNotAccessible(path: String)
    /// A device name the kernel would refuse.
    case invalidName(String, reason: String)
    /// A configuration that cannot work (offload with packet information, zero queues…).
    case invalidConfiguration(String)
    /// What this platform cannot do.
    case unsupported(String)
    /// A system call failed.
    case system(operation: String, errno: Int32)
    /// A read was interrupted by `interrupt()` or `close()`.
    case interrupted
    /// The queue or device was closed.
    case closed
    /// A packet larger than the device or buffer takes.
    case packetTooLarge(Int, limit: Int)
    /// The kernel refused a configuration request.
    case netlink(NetlinkError)

    public var description: String {
        switch self {
        case .deviceMissing(let path):
            return "\(path) does not exist: load the tun kernel module (modprobe tun) or, in a container, pass the device in (--device /dev/net/tun)"
        case .deviceNotAccessible(let path):
            return "\(path): permission denied by the file's mode (not a missing capability): run as root, or let this user open the file (most distributions ship it as mode 0666; check with `ls -l \(path)`)"
        case .notPermitted(let operation, let code):
            return "\(operation): \(Self.reason(code)) (needs CAP_NET_ADMIN: run as root or in a network namespace you own)"
        case .invalidName(let name, let reason):
            return "invalid device name '\(name)': \(reason)"
        case .invalidConfiguration(let text):
            return text
        case .unsupported(let text):
            return text
        case .system(let operation, let code):
            return "\(operation): \(Self.reason(code))"
        case .interrupted:
            return "interrupted"
        case .closed:
            return "the device is closed"
        case .packetTooLarge(let size, let limit):
            return "a \(size)-byte packet exceeds the \(limit)-byte limit"
        case .netlink(let error):
            return error.description
        }
    }

    /// The system's text for an errno value.
    static func reason(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "error \(code)" }
        return String(cString: text)
    }

    /// An error for a failed call, permission failures told apart.
    static func failed(_ operation: String, _ code: Int32) -> TunnelError {
        code == EPERM || code == EACCES ? .notPermitted(operation: operation, errno: code) : .system(operation: operation, errno: code)
    }
}
