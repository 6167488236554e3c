/// The SSH server a connection is carried through: `user@host[:port]`, `ssh://user@host[:port]`,
/// IPv6 in brackets (`user@[fe80::1]:2222`). User and port may be absent; `~/.ssh/config` and
/// then the local user name and port 22 fill them in when the tunnel opens.
public struct SSHRoute: Sendable, Hashable, Codable, CustomStringConvertible {
    public var user: String?
    public var host: String
    public var port: Int?

    public init(user: String? = nil, host: String, port: Int? = nil) {
        self.user = user
        self.host = host
        self.port = port
    }

    public init(parsing text: String) throws(SSHTunnelError) {
        var rest = Substring(text.trimmingCharacters(in: .whitespaces))
        if rest.lowercased().hasPrefix("ssh://") { rest = rest.dropFirst(6) }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty else { throw .invalidRoute(text, reason: "empty") }
        guard !rest.contains("/"), !rest.contains("?") else { throw .invalidRoute(text, reason: "a route has no path or query") }
        var user: String?
        if let at = rest.lastIndex(of: "@") {
            user = String(rest[..<at]).removingPercentEncoding()
            rest = rest[rest.index(after: at)...]
            guard let user, !user.isEmpty else { throw .invalidRoute(text, reason: "empty user name") }
        }
        let (host, port) = try Self.hostAndPort(rest, original: text)
        // Either would be read as an option by an ssh program (`-oProxyCommand=…`).
        if host.hasPrefix("-") { throw .invalidRoute(text, reason: "a host name cannot begin with '-'") }
        if let user, user.hasPrefix("-") { throw .invalidRoute(text, reason: "a user name cannot begin with '-'") }
        self.init(user: user, host: host, port: port)
    }

    static func hostAndPort(_ text: Substring, original: String) throws(SSHTunnelError) -> (String, Int?) {
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw .invalidRoute(original, reason: "unclosed '['") }
            let host = String(text[text.index(after: text.startIndex)..<close])
            let tail = text[text.index(after: close)...]
            guard !host.isEmpty else { throw .invalidRoute(original, reason: "no host") }
            if tail.isEmpty { return (host, nil) }
            guard tail.hasPrefix(":"), let port = Int(tail.dropFirst()), (1...65535).contains(port) else {
                throw .invalidRoute(original, reason: "bad port")
            }
            return (host, port)
        }
        let colons = text.filter { $0 == ":" }.count
        if colons > 1 { throw .invalidRoute(original, reason: "an IPv6 address goes in brackets: [ADDRESS]:22") }
        if colons == 1, let colon = text.firstIndex(of: ":") {
            let host = String(text[..<colon])
            guard !host.isEmpty else { throw .invalidRoute(original, reason: "no host") }
            guard let port = Int(text[text.index(after: colon)...]), (1...65535).contains(port) else {
                throw .invalidRoute(original, reason: "bad port")
            }
            return (host, port)
        }
        guard !text.isEmpty else { throw .invalidRoute(original, reason: "no host") }
        return (String(text), nil)
    }

    public var description: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return (user.map { $0 + "@" } ?? "") + name + (port.map { ":\($0)" } ?? "")
    }
}

extension StringProtocol {
    /// Decodes %XX escapes (user names and values in URLs).
    func removingPercentEncoding() -> String {
        var bytes: [UInt8] = []
        var rest = Array(utf8)[...]
        while let byte = rest.popFirst() {
            if byte == 0x25, rest.count >= 2, let value = UInt8(String(decoding: rest.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(value)
                rest = rest.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
