/// The protocols a saved or typed host can speak.
public enum HostProtocol: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
    case vnc, sendspin, punktfunk, jellyfin

    /// The port a URL without one means.
    public var defaultPort: Int {
        switch self {
        case .vnc: return 5900
        case .sendspin: return 8927
        case .punktfunk: return 9777
        case .jellyfin: return 8096
        }
    }

    /// Whether the protocol runs over TCP, so an SSH tunnel can carry it.
    public var isTCP: Bool { self != .punktfunk }

    public var description: String { rawValue }
}

/// A host in URL form, parsed in one place for every protocol (docs/hosts.md):
///
/// - `vnc://[user@]host[:port]`, `vncs://…` (TLS from the first byte); the port is a TCP port
/// - `sendspin://host[:port][/path]` (a Sendspin server, `ws://host:8927/sendspin`); `ws://…` too
/// - `punktfunk://host[:port]` (QUIC over UDP, default port 9777)
/// - `jellyfin://host[:port][/base]` (HTTP, default 8096), `jellyfins://…` (HTTPS, default 8920)
/// - any of them with `?ssh=user@bastion[:port]`: carried through an SSH tunnel (TCP protocols only)
///
/// Invariants: `host` is non-empty and unbracketed; `port` is 1…65535; `path` starts with "/"
/// when present; `ssh` is nil for punktfunk (an SSH tunnel carries TCP only).
public struct HostAddress: Sendable, Hashable, Codable, CustomStringConvertible {
    public var kind: HostProtocol
    public var host: String
    public var port: Int
    public var user: String?
    /// vncs:// or jellyfins://: TLS from the first byte.
    public var tls: Bool
    public var path: String?
    /// Carry the connection through this SSH server.
    public var ssh: SSHRoute?

    public init(kind: HostProtocol, host: String, port: Int? = nil, user: String? = nil, tls: Bool = false, path: String? = nil,
                ssh: SSHRoute? = nil) {
        self.kind = kind
        self.host = host
        self.port = port ?? (kind == .jellyfin && tls ? 8920 : kind.defaultPort)
        self.user = user
        self.tls = tls
        self.path = path
        self.ssh = ssh
    }

    /// Why a URL was refused.
    public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        case invalid(String, reason: String)
        /// Not a URL, and not `host[:port]` either.
        case invalidHostPort(String, reason: String, kind: HostProtocol)
        public var description: String {
            switch self {
            case .invalid(let text, let reason):
                return "cannot read '\(text)' as a host URL (\(reason)); use vnc://, vncs://, sendspin://, punktfunk://, jellyfin:// or jellyfins://host[:port], optionally with ?ssh=user@bastion"
            case .invalidHostPort(let text, let reason, let kind):
                return "cannot read '\(text)' as a \(kind) host (\(reason)); use HOST, HOST:PORT, [IPv6]:PORT, \(kind)://HOST[:PORT] or a saved host's name"
            }
        }
    }

    /// The schemes this parser knows, mapped to protocol and TLS.
    static let schemes: [String: (HostProtocol, Bool)] = [
        "vnc": (.vnc, false), "vncs": (.vnc, true),
        "sendspin": (.sendspin, false), "ws": (.sendspin, false),
        "punktfunk": (.punktfunk, false),
        "jellyfin": (.jellyfin, false), "jellyfins": (.jellyfin, true),
        "http": (.jellyfin, false), "https": (.jellyfin, true),
    ]

    /// True when `text` starts with a scheme this parser handles.
    public static func looksLikeURL(_ text: String) -> Bool {
        guard let range = text.range(of: "://") else { return false }
        return schemes[text[..<range.lowerBound].lowercased()] != nil
    }

    public init(parsing text: String) throws(ParseError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard let schemeEnd = trimmed.range(of: "://") else { throw .invalid(text, reason: "no scheme") }
        let scheme = trimmed[..<schemeEnd.lowerBound].lowercased()
        guard let (kind, tls) = Self.schemes[scheme] else { throw .invalid(text, reason: "unknown scheme \(scheme)://") }
        var rest = trimmed[schemeEnd.upperBound...]
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        if let hash = query.firstIndex(of: "#") { query = query[..<hash] }
        if let hash = rest.firstIndex(of: "#") { rest = rest[..<hash] }
        var path: String?
        if let slash = rest.firstIndex(of: "/") {
            let raw = String(rest[slash...])
            if raw != "/" { path = raw.hasSuffix("/") ? String(raw.dropLast()) : raw }
            rest = rest[..<slash]
        }
        var user: String?
        if let at = rest.lastIndex(of: "@") {
            user = String(rest[..<at]).removingPercentEncoding()
            rest = rest[rest.index(after: at)...]
        }
        let (host, port) = try Self.authority(rest, of: text)
        if kind == .vnc, path != nil { throw .invalid(text, reason: "a VNC URL has no path") }
        var ssh: SSHRoute?
        for item in query.split(separator: "&") where !item.isEmpty {
            let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = pair[0].lowercased()
            let value = pair.count > 1 ? String(pair[1]).removingPercentEncoding() : ""
            switch key {
            case "ssh":
                do { ssh = try SSHRoute(parsing: value) } catch { throw .invalid(text, reason: error.description) }
            default:
                throw .invalid(text, reason: "unknown parameter '\(key)' (only ssh= is understood)")
            }
        }
        if ssh != nil, !kind.isTCP { throw .invalid(text, reason: "\(kind) runs over UDP, which an SSH tunnel cannot carry") }
        if kind == .sendspin, path == nil { path = "/sendspin" }
        self.init(kind: kind, host: host, port: port, user: user, tls: tls, path: path, ssh: ssh)
    }

    /// `host[:port]` or `[v6]:port` alone, for a protocol whose own address form is just that
    /// (punktfunk's `gamebox:9777`): the port defaults to the protocol's. VNC's `host:display`
    /// means something else and stays with `VNCEndpoint`.
    public init(hostPort text: String, kind: HostProtocol) throws(ParseError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        for character in ["/", "@", "?", "#"] where trimmed.contains(character) {
            throw .invalidHostPort(text, reason: "'\(character)' has no place in HOST:PORT", kind: kind)
        }
        // A bare IPv6 address (two colons or more, no brackets) is a host on the default port.
        if !trimmed.hasPrefix("["), trimmed.filter({ $0 == ":" }).count > 1 {
            self.init(kind: kind, host: trimmed)
            return
        }
        do {
            let (host, port) = try Self.authority(trimmed[...], of: text)
            self.init(kind: kind, host: host, port: port)
        } catch .invalid(_, let reason) {
            throw .invalidHostPort(text, reason: reason, kind: kind)
        }
    }

    /// Splits `host[:port]` or `[v6][:port]`: the host non-empty and unbracketed, the port 1…65535.
    static func authority(_ rest: Substring, of text: String) throws(ParseError) -> (host: String, port: Int?) {
        guard !rest.isEmpty else { throw .invalid(text, reason: "no host") }
        let host: String
        var port: Int?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw .invalid(text, reason: "unclosed '['") }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let tail = rest[rest.index(after: close)...]
            if !tail.isEmpty {
                guard tail.hasPrefix(":"), let value = Int(tail.dropFirst()) else { throw .invalid(text, reason: "bad port") }
                port = value
            }
        } else {
            let colons = rest.filter { $0 == ":" }.count
            guard colons <= 1 else { throw .invalid(text, reason: "an IPv6 address goes in brackets: [ADDRESS]") }
            if let colon = rest.firstIndex(of: ":") {
                host = String(rest[..<colon])
                guard let value = Int(rest[rest.index(after: colon)...]) else { throw .invalid(text, reason: "bad port") }
                port = value
            } else {
                host = String(rest)
            }
        }
        guard !host.isEmpty else { throw .invalid(text, reason: "no host") }
        if let port, !(1...65535).contains(port) { throw .invalid(text, reason: "port \(port) is outside 1…65535") }
        return (host, port)
    }

    /// The canonical URL (what `farcast hosts` stores and prints).
    public var url: String {
        let scheme: String
        switch kind {
        case .vnc: scheme = tls ? "vncs" : "vnc"
        case .sendspin: scheme = "sendspin"
        case .punktfunk: scheme = "punktfunk"
        case .jellyfin: scheme = tls ? "jellyfins" : "jellyfin"
        }
        var text = scheme + "://" + (user.map { Self.escape($0) + "@" } ?? "") + bracketed(host) + ":\(port)"
        if let path, !(kind == .sendspin && path == "/sendspin") { text += path }
        if let ssh { text += "?ssh=" + Self.escape(ssh.description) }
        return text
    }

    /// The URL a protocol client dials for `host:port` (the local end of a tunnel, or the host itself).
    public func protocolURL(host: String? = nil, port: Int? = nil) -> String {
        let name = bracketed(host ?? self.host)
        let number = port ?? self.port
        switch kind {
        case .vnc: return (tls ? "vncs://" : "vnc://") + (user.map { Self.escape($0) + "@" } ?? "") + "\(name):\(number)"
        case .sendspin: return "ws://\(name):\(number)\(path ?? "/sendspin")"
        case .punktfunk: return "punktfunk://\(name):\(number)"
        case .jellyfin: return (tls ? "https://" : "http://") + "\(name):\(number)\(path ?? "")"
        }
    }

    public var description: String { url }

    func bracketed(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }

    static func escape(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            let c = Character(Unicode.Scalar(byte))
            // Unreserved characters, and the ones a route needs (user@[v6]:port), stay as they are.
            if byte < 0x80, c.isLetter || c.isNumber || "-._~:@[]".contains(c) {
                out.append(c)
            } else {
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }
}

extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
