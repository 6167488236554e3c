import Foundation

/// The parts of `~/.ssh/config` farcast honours for a host: HostName, User, Port, IdentityFile,
/// ProxyJump (the first hop), UserKnownHostsFile and StrictHostKeyChecking.
///
/// Rules as OpenSSH applies them: `Host` blocks match the name typed (wildcards, `!negation`);
/// for each keyword the first value found wins, except IdentityFile, which accumulates;
/// `Match` blocks are skipped (their conditions need OpenSSH's runtime). `%h`, `%p`, `%r`,
/// `%u`, `%d` and `~` are expanded in file names.
public struct SSHConfig: Sendable {
    struct Block: Sendable {
        var patterns: [String]
        var isMatch: Bool
        var options: [(key: String, value: String)]
    }

    var blocks: [Block]

    /// The settings that apply to one host alias.
    public struct HostSettings: Sendable, Equatable {
        public var hostName: String?
        public var user: String?
        public var port: Int?
        public var identityFiles: [String] = []
        public var proxyJump: String?
        public var userKnownHostsFile: String?
        public var strictHostKeyChecking: String?
    }

    public init(text: String) {
        var blocks = [Block(patterns: ["*"], isMatch: false, options: [])]
        for rawLine in text.split(whereSeparator: \.isNewline) {
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            // "Key value", "Key=value" or "Key = value".
            let keyEnd = line.firstIndex(where: { $0 == " " || $0 == "\t" || $0 == "=" }) ?? line.endIndex
            let key = line[..<keyEnd].lowercased()
            var value = line[keyEnd...].trimmingCharacters(in: .whitespaces)
            if value.hasPrefix("=") { value = value.dropFirst().trimmingCharacters(in: .whitespaces) }
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            switch key {
            case "host":
                blocks.append(Block(patterns: value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init), isMatch: false, options: []))
            case "match":
                blocks.append(Block(patterns: [], isMatch: true, options: []))
            default:
                blocks[blocks.count - 1].options.append((key, value))
            }
        }
        self.blocks = blocks
    }

    /// `~/.ssh/config` of the user running farcast; empty when there is none.
    public static func load(path: String? = nil) -> SSHConfig {
        let file = path ?? SSHPaths.home + "/.ssh/config"
        guard let data = FileManager.default.contents(atPath: file) else { return SSHConfig(text: "") }
        return SSHConfig(text: String(decoding: data, as: UTF8.self))
    }

    public func settings(for alias: String) -> HostSettings {
        var settings = HostSettings()
        let name = alias.lowercased()
        for block in blocks where !block.isMatch && Self.blockMatches(block.patterns, name) {
            for (key, value) in block.options {
                switch key {
                case "hostname": if settings.hostName == nil { settings.hostName = value }
                case "user": if settings.user == nil { settings.user = value }
                case "port": if settings.port == nil, let port = Int(value), (1...65535).contains(port) { settings.port = port }
                case "identityfile": settings.identityFiles.append(value)
                case "proxyjump":
                    if settings.proxyJump == nil {
                        // One hop is supported: the first of a comma list; "none" clears it.
                        let first = value.split(separator: ",").first.map(String.init) ?? value
                        settings.proxyJump = first.lowercased() == "none" ? "" : first
                    }
                case "userknownhostsfile":
                    if settings.userKnownHostsFile == nil { settings.userKnownHostsFile = value.split(separator: " ").first.map(String.init) }
                case "stricthostkeychecking":
                    if settings.strictHostKeyChecking == nil { settings.strictHostKeyChecking = value.lowercased() }
                default: break
                }
            }
        }
        if settings.proxyJump == "" { settings.proxyJump = nil }
        return settings
    }

    static func blockMatches(_ patterns: [String], _ name: String) -> Bool {
        var positive = false
        for pattern in patterns {
            if pattern.hasPrefix("!") {
                if KnownHosts.wildcardMatch(String(pattern.dropFirst()).lowercased(), name) { return false }
            } else if KnownHosts.wildcardMatch(pattern.lowercased(), name) {
                positive = true
            }
        }
        return positive
    }

    /// Expands `~` and the `%` tokens OpenSSH allows in IdentityFile and UserKnownHostsFile.
    public static func expand(_ path: String, host: String, port: Int, user: String, alias: String) -> String {
        var result = ""
        var characters = path.makeIterator()
        while let character = characters.next() {
            guard character == "%" else {
                result.append(character)
                continue
            }
            switch characters.next() {
            case "h": result += host
            case "n": result += alias
            case "p": result += String(port)
            case "r": result += user
            case "u": result += SSHPaths.localUser
            case "d": result += SSHPaths.home
            case "%": result += "%"
            case let other?: result += "%" + String(other)
            case nil: result += "%"
            }
        }
        if result == "~" { return SSHPaths.home }
        if result.hasPrefix("~/") { return SSHPaths.home + result.dropFirst() }
        return result
    }
}

/// Where the user's SSH files are.
public enum SSHPaths {
    public static var home: String {
        ProcessInfo.processInfo.environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
    }

    public static var localUser: String {
        ProcessInfo.processInfo.environment["USER"].flatMap { $0.isEmpty ? nil : $0 } ?? NSUserName()
    }

    public static var knownHosts: String { home + "/.ssh/known_hosts" }

    /// The identities OpenSSH tries when none is configured, in its order (RSA and DSA files are
    /// skipped: swift-nio-ssh 0.15 cannot sign with them).
    public static var defaultIdentities: [String] {
        ["id_ecdsa", "id_ed25519"].map { home + "/.ssh/" + $0 }
    }
}
