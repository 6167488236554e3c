public import Foundation

/// A Jellyfin server's base URL, normalised from what a person types.
///
/// - No scheme: `http`, except for port 8920 (Jellyfin's HTTPS port), which means `https`.
/// - No port: 8096 when no scheme was typed (Jellyfin's default); with a scheme, that scheme's
///   own port (80/443: a server behind a reverse proxy).
/// - The base path is kept (servers set one, e.g. `/jellyfin`); a trailing `/`, a pasted web
///   UI path (`/web`, `/web/index.html`, `/web/#/home`) and any query or fragment are dropped.
/// - Only `http` and `https`. The stored form has no trailing slash, so `url + "/Items"` is
///   always right.
public struct ServerAddress: Sendable, Hashable, CustomStringConvertible {
    public let scheme: String
    public let host: String
    public let port: Int
    /// "" or a path starting with "/" and not ending with one.
    public let basePath: String

    public static let defaultHTTPPort = 8096
    public static let defaultHTTPSPort = 8920

    public init(parsing text: String) throws(JellyfinError) {
        let input = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !input.isEmpty else { throw .invalidAddress(text, reason: "it is empty") }
        var rest = Substring(input)
        var scheme: String?
        if let range = rest.range(of: "://") {
            scheme = rest[..<range.lowerBound].lowercased()
            rest = rest[range.upperBound...]
            guard scheme == "http" || scheme == "https" else {
                throw .invalidAddress(text, reason: "the scheme must be http or https")
            }
        }
        // Drop query and fragment first (a fragment may hold a web UI route).
        if let cut = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) { rest = rest[..<cut] }
        let authority: Substring
        var path: Substring
        if let slash = rest.firstIndex(of: "/") {
            authority = rest[..<slash]
            path = rest[slash...]
        } else {
            authority = rest
            path = ""
        }
        guard !authority.isEmpty else { throw .invalidAddress(text, reason: "there is no host name") }
        guard !authority.contains("@") else { throw .invalidAddress(text, reason: "user names belong in --user, not in the address") }
        var host: String
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw .invalidAddress(text, reason: "an IPv6 address lacks its ']'") }
            host = String(authority[authority.index(after: authority.startIndex)..<close])
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .invalidAddress(text, reason: "unexpected text after the IPv6 address") }
                portText = after.dropFirst()
            }
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." || $0 == "%" }) else {
                throw .invalidAddress(text, reason: "'\(host)' is not an IPv6 address")
            }
        } else {
            let parts = authority.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { throw .invalidAddress(text, reason: "IPv6 addresses go in brackets, e.g. http://[::1]:8096") }
            host = String(parts[0])
            if parts.count == 2 { portText = parts[1] }
            guard !host.isEmpty, host.utf8.allSatisfy({ c in
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x2E || c == 0x5F || c >= 0x80
            }) else { throw .invalidAddress(text, reason: "'\(host)' is not a host name") }
            host = host.lowercased()
        }
        var port: Int?
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else {
                throw .invalidAddress(text, reason: "'\(portText)' is not a port (1–65535)")
            }
            port = value
        }
        let resolvedScheme = scheme ?? (port == Self.defaultHTTPSPort ? "https" : "http")
        let resolvedPort = port ?? (scheme == nil ? Self.defaultHTTPPort : (resolvedScheme == "https" ? 443 : 80))

        // The web UI's path is not part of the API's base.
        while path.hasSuffix("/") { path.removeLast() }
        for suffix in ["/web/index.html", "/web"] where path.lowercased().hasSuffix(suffix) {
            path.removeLast(suffix.count)
            break
        }
        while path.hasSuffix("/") { path.removeLast() }
        guard !path.contains("//"), !path.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) else {
            throw .invalidAddress(text, reason: "the path '\(path)' has empty or dot segments")
        }
        self.scheme = resolvedScheme
        self.host = host
        self.port = resolvedPort
        self.basePath = String(path)
    }

    /// Builds from a URL the server redirected to (its path is the base path).
    public init(url: URL) throws(JellyfinError) {
        try self.init(parsing: url.absoluteString)
    }

    /// `http://host:port/base`, with the port left out when it is the scheme's own.
    public var description: String {
        let hostPart = host.contains(":") ? "[\(host)]" : host
        let standard = (scheme == "http" && port == 80) || (scheme == "https" && port == 443)
        return "\(scheme)://\(hostPart)\(standard ? "" : ":\(port)")\(basePath)"
    }

    public var url: URL {
        // The description is built from validated parts, so it always parses.
        URL(string: description) ?? URL(fileURLWithPath: "/")
    }

    /// The WebSocket form of the base (`ws`/`wss`).
    public var webSocketBase: String {
        (scheme == "https" ? "wss" : "ws") + description.dropFirst(scheme.count)
    }
}
