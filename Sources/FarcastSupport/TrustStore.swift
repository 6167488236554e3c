import Foundation

/// Trust-on-first-use pins for peer certificates or keys, kept in the state directory.
///
/// The first time a peer is seen its SHA-256 fingerprint is recorded; later connections must
/// present the same one. A changed fingerprint is refused unless the caller explicitly accepts
/// it (the user passed `--trust`), which replaces the pin.
public struct TrustStore: Sendable {
    /// What `check` concluded.
    public enum Verdict: Equatable, Sendable {
        /// The fingerprint matches the pin.
        case matchesPin
        /// No pin existed; this fingerprint is now pinned.
        case pinnedOnFirstUse
        /// The pin was replaced because the caller accepted a change.
        case replacedPin(previous: String)
        /// The fingerprint differs from the pin and was not accepted.
        case mismatch(pinned: String)
    }

    struct Pin: Codable, Equatable {
        var sha256: String
        var firstSeen: String
    }

    public let directory: StateDirectory
    /// File name inside the state directory, e.g. "vnc/pins.json".
    public let fileName: String

    public init(directory: StateDirectory, fileName: String) {
        self.directory = directory
        self.fileName = fileName
    }

    /// The pinned fingerprint for a peer, if any.
    public func pin(for peer: String) throws -> String? {
        try load()[peer]?.sha256
    }

    /// Compares a presented fingerprint (lowercase hex SHA-256) with the pin for `peer`, pinning
    /// it on first use or when `acceptChange` is set.
    public func check(peer: String, fingerprint: String, acceptChange: Bool) throws -> Verdict {
        let verdict = try evaluate(peer: peer, fingerprint: fingerprint, acceptChange: acceptChange)
        switch verdict {
        case .pinnedOnFirstUse, .replacedPin: try record(peer: peer, fingerprint: fingerprint)
        case .matchesPin, .mismatch: break
        }
        return verdict
    }

    /// What `check` would conclude, without pinning anything: for a caller that pins only once
    /// the connection proved good (`record`), so a handshake that failed leaves no pin behind.
    public func evaluate(peer: String, fingerprint: String, acceptChange: Bool) throws -> Verdict {
        let presented = fingerprint.lowercased()
        guard let existing = try load()[peer] else { return .pinnedOnFirstUse }
        if existing.sha256 == presented { return .matchesPin }
        return acceptChange ? .replacedPin(previous: existing.sha256) : .mismatch(pinned: existing.sha256)
    }

    /// Pins `fingerprint` for `peer` (after `evaluate` said it may be).
    public func record(peer: String, fingerprint: String) throws {
        var pins = try load()
        let presented = fingerprint.lowercased()
        if pins[peer]?.sha256 == presented { return }
        pins[peer] = Pin(sha256: presented, firstSeen: Self.now())
        try save(pins)
    }

    /// Forgets a peer's pin.
    public func remove(peer: String) throws {
        var pins = try load()
        if pins.removeValue(forKey: peer) != nil { try save(pins) }
    }

    private func load() throws -> [String: Pin] {
        guard let bytes = try directory.read(fileName), !bytes.isEmpty else { return [:] }
        do {
            return try JSONDecoder().decode([String: Pin].self, from: Data(bytes))
        } catch {
            throw StateDirectoryError.io(operation: "parse", path: (try? directory.filePath(fileName)) ?? fileName,
                                         reason: "not a valid pin file (\(error)); move it away to start fresh")
        }
    }

    private func save(_ pins: [String: Pin]) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try directory.write(Array(try encoder.encode(pins)), to: fileName)
    }

    private static func now() -> String {
        ISO8601DateFormatter().string(from: Date())
    }
}

/// Lowercase hex of bytes, for fingerprints.
public func hexString<S: Sequence>(_ bytes: S) -> String where S.Element == UInt8 {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    for b in bytes {
        out.append(digits[Int(b >> 4)])
        out.append(digits[Int(b & 15)])
    }
    return String(decoding: out, as: UTF8.self)
}
