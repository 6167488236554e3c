#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A configuration request the kernel refused or that never got an answer, with the kernel's
/// own reason: the errno and, where the kernel gives one (extended acknowledgements), its
/// sentence ("Invalid prefix for given prefix length", "Nexthop device is not up"…).
public struct NetlinkError: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Reason: Error, Equatable, Sendable {
        /// The kernel answered with an error.
        case kernel(errno: Int32, message: String?)
        /// The netlink socket itself failed.
        case system(errno: Int32)
        /// No answer within the time limit.
        case timedOut(milliseconds: Int)
        /// The answer did not parse.
        case malformedReply(String)
    }

    /// What was asked, for a person: "add address 10.0.0.1/24 to tun0".
    public let operation: String
    public let reason: Reason

    public init(operation: String, reason: Reason) {
        self.operation = operation
        self.reason = reason
    }

    /// The errno, for kernel and socket failures.
    public var errno: Int32? {
        switch reason {
        case .kernel(let code, _), .system(let code): code
        case .timedOut, .malformedReply: nil
        }
    }

    /// The kernel's extended-acknowledgement text, when it gave one.
    public var kernelMessage: String? {
        if case .kernel(_, let message) = reason { return message }
        return nil
    }

    public var description: String {
        switch reason {
        case .kernel(let code, let message):
            let text = TunnelError.reason(code)
            let hint = code == EPERM || code == EACCES ? " (needs CAP_NET_ADMIN)" : ""
            if let message, !message.isEmpty { return "\(operation): \(text): \(message)\(hint)" }
            return "\(operation): \(text)\(hint)"
        case .system(let code):
            return "\(operation): netlink socket: \(TunnelError.reason(code))"
        case .timedOut(let ms):
            return "\(operation): the kernel did not answer within \(ms) ms"
        case .malformedReply(let what):
            return "\(operation): malformed netlink reply (\(what))"
        }
    }
}
