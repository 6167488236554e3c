/// Where a VNC server listens, parsed from the forms users type.
///
/// - `vnc://[user@]host[:port]` — the port is a TCP port (default 5900)
/// - `vncs://[user@]host[:port]` — the same, with TLS from the first byte (x11vnc -sslonly,
///   servers behind stunnel)
/// - `host:N` — display N, port 5900 + N (N below 100; larger N is taken as a port)
/// - `host::port` — an explicit TCP port
/// - `host` — display 0
/// IPv6 literals go in brackets: `[::1]:1`, `vnc://[::1]:5901`.
public struct VNCEndpoint: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var username: String?
    /// TLS starts with the connection, before the RFB banner (`vncs://`, `--tls-first`).
    public var tlsFirst: Bool
    /// A URL port below 100 (`vnc://host:31`): a TCP port, though the user may have meant a
    /// display; connection errors mention it.
    public var portMayBeDisplay: Bool

    public init(host: String, port: Int = 5900, username: String? = nil, tlsFirst: Bool = false) {
        self.host = host
        self.port = port
        self.username = username
        self.tlsFirst = tlsFirst
        portMayBeDisplay = false
    }

    public enum ParseError: Error, Equatable, CustomStringConvertible {
        case invalid(String, reason: String)
        public var description: String {
            switch self {
            case .invalid(let text, let reason):
                return "cannot read '\(text)' as a VNC address (\(reason)); use vnc://host:port, host:display or host::port"
            }
        }
    }

    public init(parsing text: String) throws(ParseError) {
        var rest = text.drop(while: { $0 == " " || $0 == "\t" })
        while rest.last == " " || rest.last == "\t" { rest = rest.dropLast() }
        var username: String?
        var isURL = false
        var tlsFirst = false
        let lower = rest.lowercased()
        if lower.hasPrefix("vnc://") || lower.hasPrefix("vncs://") {
            isURL = true
            tlsFirst = lower.hasPrefix("vncs://")
            rest = rest.dropFirst(tlsFirst ? 7 : 6)
            if rest.hasSuffix("/") { rest = rest.dropLast() }
            if let at = rest.lastIndex(of: "@") {
                username = String(rest[..<at]).removingPercentEncodingSimple()
                rest = rest[rest.index(after: at)...]
            }
        }
        if !isURL, let scheme = rest.range(of: "://") {
            throw .invalid(text, reason: "\(rest[..<scheme.lowerBound]):// is not a VNC address scheme; VNC servers are vnc://host:port (vncs:// for TLS from the first byte)")
        }
        guard !rest.isEmpty else { throw .invalid(text, reason: "no host") }
        if !rest.hasPrefix("["), rest.filter({ $0 == ":" }).count >= 2 {
            // Two colons are fine only as host::port; anything else is a bare IPv6 address.
            // (Searched by hand: split(separator: "::") would pull in _StringProcessing's searcher.)
            let colon = rest.firstIndex(of: ":")!
            let afterColon = rest.index(after: colon)
            let port = afterColon < rest.endIndex && rest[afterColon] == ":" ? rest[rest.index(after: afterColon)...] : ""
            let hostPort = colon > rest.startIndex && !port.isEmpty && port.allSatisfy(\.isNumber)
            if !hostPort {
                throw .invalid(text, reason: "an IPv6 address goes in brackets: [\(rest)] for display 0, [ADDRESS]:1 for display 1, vnc://[ADDRESS]:5901 for a port")
            }
        }
        var host: Substring
        var tail: Substring
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw .invalid(text, reason: "unclosed '['") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            tail = rest[rest.index(after: close)...]
        } else if let colon = rest.firstIndex(of: ":") {
            host = rest[..<colon]
            tail = rest[colon...]
        } else {
            host = rest
            tail = ""
        }
        guard !host.isEmpty else { throw .invalid(text, reason: "no host") }
        var port = 5900
        var mayBeDisplay = false
        if tail.hasPrefix("::") {
            guard !isURL else { throw .invalid(text, reason: "'::port' is not URL syntax") }
            guard let p = Int(tail.dropFirst(2)), (1...65535).contains(p) else { throw .invalid(text, reason: "bad port") }
            port = p
        } else if tail.hasPrefix(":") {
            guard let n = Int(tail.dropFirst()), n >= 0 else { throw .invalid(text, reason: "bad display or port number") }
            if isURL || n >= 100 {
                guard (1...65535).contains(n) else { throw .invalid(text, reason: "port out of range") }
                port = n
                mayBeDisplay = isURL && n < 100
            } else {
                port = 5900 + n
            }
        } else if !tail.isEmpty {
            throw .invalid(text, reason: "unexpected '\(tail)'")
        }
        self.init(host: String(host), port: port, username: username, tlsFirst: tlsFirst)
        portMayBeDisplay = mayBeDisplay
    }

    /// For connection errors: the display the user may have meant by a small URL port.
    public var displayHint: String? {
        guard portMayBeDisplay else { return nil }
        return "vnc:// URLs take a TCP port; for display \(port) use \(host.contains(":") ? "[\(host)]" : host):\(port) or vnc://\(host.contains(":") ? "[\(host)]" : host):\(5900 + port)"
    }

    /// The key under which a TLS pin for this server is kept.
    public var pinKey: String { "\(host.contains(":") ? "[\(host)]" : host):\(port)" }

    public var description: String { "\(tlsFirst ? "vncs://" : "")\(host.contains(":") ? "[\(host)]" : host)\(tlsFirst ? ":" : "::")\(port)" }
}

extension StringProtocol {
    /// Decodes %XX escapes (user names in URLs) without Foundation.
    func removingPercentEncodingSimple() -> String {
        var bytes: [UInt8] = []
        var it = Array(utf8)[...]
        while let b = it.popFirst() {
            if b == 0x25, it.count >= 2, let v = UInt8(String(decoding: it.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(v)
                it = it.dropFirst(2)
            } else {
                bytes.append(b)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
