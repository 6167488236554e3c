/// Why mDNS discovery or advertising failed, worded so a person knows what to do next.
public enum DiscoveryError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The mDNS responder (avahi-daemon on Linux, mDNSResponder on Apple platforms) cannot be reached.
    case unavailable(code: Int32)
    /// An argument the DNS-SD rules forbid (a service type without `_x._tcp`, an oversized TXT entry).
    case invalidArgument(String)
    /// The responder refused or failed an operation.
    case failed(operation: String, code: Int32)
    /// The advertisement was cancelled before the responder confirmed it.
    case cancelled
    /// The DNS-SD library could not be loaded; `detail` is the loader's reason.
    case libraryMissing(String)

    public var description: String {
        switch self {
        case .unavailable(let code):
            #if os(Linux)
            return "mDNS is unavailable: avahi-daemon is not running or not reachable on the D-Bus system bus (DNS-SD error \(code)); "
                + "start it (e.g. `systemctl start avahi-daemon`) or connect with a URL"
            #else
            return "mDNS is unavailable: the system's mDNS responder did not answer (DNS-SD error \(code)); connect with a URL"
            #endif
        case .invalidArgument(let detail):
            return "invalid mDNS request: \(detail)"
        case .failed(let operation, let code):
            return "mDNS \(operation) failed: \(Self.explain(code)) (DNS-SD error \(code))"
        case .cancelled:
            return "the mDNS advertisement was withdrawn before it was confirmed"
        case .libraryMissing(let detail):
            return "mDNS is unavailable: Avahi's dns_sd library could not be loaded (\(detail)); "
                + "install it (apt install libavahi-compat-libdnssd1) or connect with a URL"
        }
    }

    /// The dns_sd error codes a user can meet, in words.
    static func explain(_ code: Int32) -> String {
        switch code {
        case -65538: return "no such name"
        case -65539: return "out of memory"
        case -65540: return "bad parameter"
        case -65541: return "bad reference"
        case -65542: return "bad state"
        case -65543: return "bad flags"
        case -65544: return "unsupported by this mDNS responder"
        case -65545: return "not initialized"
        case -65547: return "already registered"
        case -65548: return "the name is in use by another host"
        case -65549: return "invalid"
        case -65551: return "incompatible mDNS responder version"
        case -65552: return "bad interface"
        case -65555: return "refused"
        case -65563: return "the mDNS responder is not running"
        default: return "unknown error"
        }
    }

    /// Maps a dns_sd error code from starting an operation: on Linux, Avahi's compatibility
    /// library reports an unreachable daemon as kDNSServiceErr_Unknown; Apple's as ServiceNotRunning.
    static func starting(_ operation: String, code: Int32) -> DiscoveryError {
        code == -65537 || code == -65563 ? .unavailable(code: code) : .failed(operation: operation, code: code)
    }
}
