import Crypto
import FarcastSupport
import Foundation

/// The player's persistent X25519 identity (its client_id) and remembered settings, kept in
/// the state directory with mode 0600: `sendspin/identity.key`, `sendspin/player.json`.
public struct PlayerStore: Sendable {
    public let directory: StateDirectory

    public init(directory: StateDirectory) { self.directory = directory }

    /// Loads the identity, creating and saving a fresh one on first use.
    public func identity() throws -> Curve25519.KeyAgreement.PrivateKey {
        if let bytes = try directory.read("sendspin/identity.key") {
            do { return try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: bytes) } catch {
                throw StateDirectoryError.io(operation: "load", path: (try? directory.filePath("sendspin/identity.key")) ?? "identity.key",
                                             reason: "not a 32-byte X25519 key; move it away to get a new identity")
            }
        }
        let key = Curve25519.KeyAgreement.PrivateKey()
        try directory.write(Array(key.rawRepresentation), to: "sendspin/identity.key")
        return key
    }

    /// Settings the server may change and the player must remember across restarts.
    public struct Settings: Codable, Sendable, Equatable {
        public var volume = 100
        public var muted = false
        public var outputDelayMs = 0
        /// The server that last played through this player (listening mode prefers it).
        public var lastPlaybackServerID: String?
        /// URLs and server ids that spoke the encrypted protocol here: never offered the legacy wire.
        public var encryptedServers: [String]?
        public init() {}
        enum CodingKeys: String, CodingKey {
            case volume, muted, outputDelayMs = "output_delay_ms", lastPlaybackServerID = "last_playback_server_id"
            case encryptedServers = "encrypted_servers"
        }

        /// Remembers that `names` (a URL, a server id) spoke the encrypted protocol.
        public mutating func rememberEncrypted(_ names: [String]) {
            var known = encryptedServers ?? []
            for name in names where !known.contains(name) { known.append(name) }
            encryptedServers = Array(known.suffix(256))
        }

        public func isKnownEncrypted(_ name: String) -> Bool { encryptedServers?.contains(name) ?? false }
    }

    public func settings() -> Settings {
        guard let bytes = try? directory.read("sendspin/player.json"),
              let settings = try? JSONDecoder().decode(Settings.self, from: Data(bytes)) else { return Settings() }
        return settings
    }

    public func save(_ settings: Settings) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        try directory.write(Array(try encoder.encode(settings)), to: "sendspin/player.json")
    }
}
