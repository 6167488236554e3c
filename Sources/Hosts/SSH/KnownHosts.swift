import Crypto
import Foundation

/// OpenSSH's `known_hosts` file: host patterns (plain, wildcards, negations, `[host]:port`,
/// hashed `|1|salt|hash` entries), `@revoked` keys and `@cert-authority` lines (read and left
/// alone: certificates are not used here). New keys are appended as hashed entries, as Debian's
/// default `HashKnownHosts yes` writes them.
///
/// Invariants: lines that do not parse are skipped (as OpenSSH does) but kept byte for byte when
/// the file is appended to; a `@revoked` match wins over any other entry.
public struct KnownHosts: Sendable {
    /// One usable line.
    public struct Entry: Sendable, Equatable {
        public enum Marker: Sendable, Equatable { case none, revoked, certificateAuthority }
        public var marker: Marker
        /// The comma-separated patterns, or one hashed `|1|…|…` field.
        public var patterns: [String]
        public var keyType: String
        public var keyBlob: [UInt8]
        /// 1-based line number in the file.
        public var line: Int
    }

    /// What the file says about a host's key.
    public enum Verdict: Sendable, Equatable {
        /// A line lists this very key for the host.
        case known(line: Int)
        /// The key is marked `@revoked`.
        case revoked(line: Int)
        /// The host is listed, but with other keys (of the same type when `sameType`).
        case changed(lines: [Int], expectedFingerprints: [String])
        /// The host is not listed.
        case unknown
    }

    public let path: String
    public private(set) var entries: [Entry] = []

    /// Reads `path`; a missing file is an empty list.
    public init(path: String) throws {
        self.path = path
        guard FileManager.default.fileExists(atPath: path) else { return }
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        entries = Self.parse(String(decoding: data, as: UTF8.self))
    }

    public init(path: String, text: String) {
        self.path = path
        entries = Self.parse(text)
    }

    static func parse(_ text: String) -> [Entry] {
        var entries: [Entry] = []
        var number = 0
        for rawLine in text.split(separator: "\n", omittingEmptySubsequences: false) {
            number += 1
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            var fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            var marker = Entry.Marker.none
            if let first = fields.first, first.hasPrefix("@") {
                switch first {
                case "@revoked": marker = .revoked
                case "@cert-authority": marker = .certificateAuthority
                default: continue
                }
                fields.removeFirst()
            }
            guard fields.count >= 3, let blob = Data(base64Encoded: fields[2]) else { continue }
            entries.append(Entry(marker: marker, patterns: fields[0].split(separator: ",").map(String.init), keyType: fields[1],
                                 keyBlob: [UInt8](blob), line: number))
        }
        return entries
    }

    /// The name under which OpenSSH files a host: `host`, or `[host]:port` when port ≠ 22.
    public static func hostKey(host: String, port: Int) -> String {
        port == 22 ? host.lowercased() : "[\(host.lowercased())]:\(port)"
    }

    /// Looks a presented key up for `host:port` (and, like OpenSSH's CheckHostIP, for the
    /// address it connected to when given and different).
    public func verdict(host: String, port: Int, keyBlob: [UInt8]) -> Verdict {
        let names = [Self.hostKey(host: host, port: port)]
        let matching = entries.filter { entry in names.contains { Self.matches(entry: entry, name: $0) } }
        if let revoked = entries.first(where: { $0.marker == .revoked && $0.keyBlob == keyBlob }) {
            return .revoked(line: revoked.line)
        }
        let plain = matching.filter { $0.marker == .none }
        if let exact = plain.first(where: { $0.keyBlob == keyBlob }) { return .known(line: exact.line) }
        let keyType = SSHWireReaderKeyType.name(of: keyBlob)
        let sameType = plain.filter { SSHWireReaderKeyType.name(of: $0.keyBlob) == keyType }
        // OpenSSH treats a host listed with only other key types as not yet known for this type
        // (it may add it); a different key of the same type is a change.
        if sameType.isEmpty { return .unknown }
        return .changed(lines: sameType.map(\.line), expectedFingerprints: sameType.map { SSHFingerprint.sha256($0.keyBlob) })
    }

    static func matches(entry: Entry, name: String) -> Bool {
        if entry.patterns.count == 1, entry.patterns[0].hasPrefix("|1|") {
            return hashedMatch(entry.patterns[0], name: name)
        }
        var positive = false
        for pattern in entry.patterns {
            if pattern.hasPrefix("!") {
                if wildcardMatch(String(pattern.dropFirst()).lowercased(), name) { return false }
            } else if wildcardMatch(pattern.lowercased(), name) {
                positive = true
            }
        }
        return positive
    }

    /// `|1|base64(salt)|base64(HMAC-SHA1(salt, name))`.
    static func hashedMatch(_ field: String, name: String) -> Bool {
        let parts = field.split(separator: "|", omittingEmptySubsequences: true)
        guard parts.count == 3, parts[0] == "1", let salt = Data(base64Encoded: String(parts[1])),
              let hash = Data(base64Encoded: String(parts[2])) else { return false }
        let code = HMAC<Insecure.SHA1>.authenticationCode(for: Array(name.utf8), using: SymmetricKey(data: salt))
        return Data(code) == hash
    }

    /// A name in OpenSSH's hashed form with a fresh random salt.
    public static func hashedName(_ name: String) -> String {
        var salt = [UInt8](repeating: 0, count: 20)
        var generator = SystemRandomNumberGenerator()
        for index in salt.indices { salt[index] = generator.next() }
        let code = HMAC<Insecure.SHA1>.authenticationCode(for: Array(name.utf8), using: SymmetricKey(data: salt))
        return "|1|\(Data(salt).base64EncodedString())|\(Data(code).base64EncodedString())"
    }

    /// `*` any run, `?` one character (OpenSSH's match_pattern).
    static func wildcardMatch(_ pattern: String, _ text: String) -> Bool {
        let p = Array(pattern.unicodeScalars), t = Array(text.unicodeScalars)
        var pi = 0, ti = 0, starP = -1, starT = 0
        while ti < t.count {
            if pi < p.count, p[pi] == "?" || p[pi] == t[ti] {
                pi += 1
                ti += 1
            } else if pi < p.count, p[pi] == "*" {
                starP = pi
                starT = ti
                pi += 1
            } else if starP >= 0 {
                pi = starP + 1
                starT += 1
                ti = starT
            } else {
                return false
            }
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }

    /// Appends a hashed line for `host:port`, creating the file (0600) and its folder (0700) if
    /// needed. The rest of the file is left as it was.
    public mutating func add(host: String, port: Int, keyBlob: [UInt8]) throws {
        let name = Self.hostKey(host: host, port: port)
        let line = "\(Self.hashedName(name)) \(SSHWireReaderKeyType.name(of: keyBlob)) \(Data(keyBlob).base64EncodedString())\n"
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty, !FileManager.default.fileExists(atPath: folder) {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        // A file that does not end in a newline would glue our line onto its last one.
        var prefix = ""
        if let data = FileManager.default.contents(atPath: path), let last = data.last, last != 0x0A { prefix = "\n" }
        let bytes = Array((prefix + line).utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        entries = Self.parse(String(decoding: FileManager.default.contents(atPath: path) ?? Data(), as: UTF8.self))
    }
}

/// The type name at the start of a key blob.
enum SSHWireReaderKeyType {
    static func name(of blob: [UInt8]) -> String {
        var reader = SSHWireReader(blob)
        return (try? reader.text()) ?? ""
    }
}
