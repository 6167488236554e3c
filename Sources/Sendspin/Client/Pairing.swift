import Crypto
import FarcastSupport
import Foundation

/// A server this player is paired with: the long-term PSK both sides hold, named by its psk_id.
public struct PairedServer: Codable, Sendable, Equatable {
    public var pskID: String
    /// The long-term PSK, base64url.
    public var psk: String
    public var serverID: String
    public var createdAt: Date

    public init(psk: [UInt8], serverID: String, createdAt: Date = Date()) {
        self.psk = Base64URL.encode(psk)
        pskID = SendspinPSK.identifier(of: psk)
        self.serverID = serverID
        self.createdAt = createdAt
    }

    public var pskBytes: [UInt8]? { Base64URL.decode(psk) }

    enum CodingKeys: String, CodingKey { case pskID = "psk_id", psk, serverID = "server_id", createdAt = "created_at" }
}

/// The PSKs a session may answer a handshake with, besides the Sentinel: this device's Pairing
/// PSK (category `pr`, offered to servers through the pairing token) and the long-term PSKs of
/// paired servers (category `lt`).
public struct PairingCredentials: Sendable, Equatable {
    public var pairingPSK: [UInt8]?
    public var servers: [PairedServer]

    public init(pairingPSK: [UInt8]? = nil, servers: [PairedServer] = []) {
        self.pairingPSK = pairingPSK
        self.servers = servers
    }

    /// The PSK a message 1 reference names, if this client holds it (`lt` only for the server
    /// it was made with).
    func psk(category: PSKCategory, id: String, serverID: String?) -> [UInt8]? {
        switch category {
        case .pairing:
            guard let pairingPSK, SendspinPSK.identifier(of: pairingPSK) == id else { return nil }
            return pairingPSK
        case .longTerm:
            guard let record = servers.first(where: { $0.pskID == id }), record.serverID == serverID else { return nil }
            return record.pskBytes
        case .sentinel, .other:
            return nil
        }
    }

    /// Keeps one record per server (the newest) and at most `capacity`, oldest dropped first.
    mutating func add(_ record: PairedServer, capacity: Int = 16) {
        servers.removeAll { $0.serverID == record.serverID || $0.pskID == record.pskID }
        servers.append(record)
        if servers.count > capacity { servers.removeFirst(servers.count - capacity) }
    }
}

/// The pairing token an operator gives a server so it can pair with this player by the
/// Pairing-PSK method: `SP:0` and the RFC 4648 base32 of client key ‖ Pairing PSK, padding
/// dropped and every `2` written as `9` (so it cannot be misread as Z).
public enum PairingToken {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    public static func encode(clientKey: [UInt8], pairingPSK: [UInt8]) -> String {
        let bytes = clientKey + pairingPSK
        var out: [UInt8] = []
        var buffer = 0, bits = 0
        for byte in bytes {
            buffer = buffer << 8 | Int(byte)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[(buffer >> (bits - 5)) & 31])
                bits -= 5
            }
            buffer &= (1 << bits) - 1
        }
        if bits > 0 { out.append(alphabet[(buffer << (5 - bits)) & 31]) }
        return "SP:0" + String(decoding: out, as: UTF8.self).replacingOccurrences(of: "2", with: "9")
    }
}

extension PlayerStore {
    /// This device's Pairing PSK, created (32 random bytes) on first use and kept 0600.
    public func pairingPSK() throws -> [UInt8] {
        if let bytes = try directory.read("sendspin/pairing-psk"), bytes.count == 32 { return bytes }
        let psk = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        try directory.write(psk, to: "sendspin/pairing-psk")
        return psk
    }

    /// The token that lets a server pair with this player (see `PairingToken`).
    public func pairingToken() throws -> String {
        PairingToken.encode(clientKey: Array(try identity().publicKey.rawRepresentation), pairingPSK: try pairingPSK())
    }

    public func pairedServers() -> [PairedServer] {
        guard let bytes = try? directory.read("sendspin/paired-servers.json") else { return [] }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return (try? decoder.decode([PairedServer].self, from: Data(bytes))) ?? []
    }

    public func savePairedServers(_ servers: [PairedServer]) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        encoder.dateEncodingStrategy = .iso8601
        try directory.write(Array(try encoder.encode(servers)), to: "sendspin/paired-servers.json")
    }

    /// Everything a session needs to answer pairing and paired handshakes.
    public func credentials() throws -> PairingCredentials {
        PairingCredentials(pairingPSK: try pairingPSK(), servers: pairedServers())
    }

    /// Records a new pairing (replacing an older one with the same server).
    public func remember(_ record: PairedServer) throws {
        var credentials = PairingCredentials(servers: pairedServers())
        credentials.add(record)
        try savePairedServers(credentials.servers)
    }

    /// The static 8-digit pairing code, if one is set (`sendspin/pairing-code`, 0600).
    public func staticPairingCode() -> String? {
        guard let bytes = try? directory.read("sendspin/pairing-code") else { return nil }
        let code = String(decoding: bytes, as: UTF8.self)
        return Self.validPairingCode(code)
    }

    /// Sets (or with nil removes) the static pairing code: 8 digits; spaces and hyphens are
    /// ignored, as servers ignore them.
    public func setStaticPairingCode(_ code: String?) throws {
        guard let code else { return try directory.remove("sendspin/pairing-code") }
        guard let valid = Self.validPairingCode(code) else {
            throw StateDirectoryError.io(operation: "set", path: "sendspin/pairing-code", reason: "a pairing code is exactly 8 digits (spaces and hyphens ignored)")
        }
        try directory.write(Array(valid.utf8), to: "sendspin/pairing-code")
    }

    static func validPairingCode(_ text: String) -> String? {
        let digits = text.filter { $0 != " " && $0 != "-" && !$0.isNewline }
        guard digits.count == 8, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return digits
    }

    /// Forgets the pairing with `serverID`; returns whether there was one.
    @discardableResult
    public func forget(serverID: String) throws -> Bool {
        var servers = pairedServers()
        let before = servers.count
        servers.removeAll { $0.serverID == serverID }
        try savePairedServers(servers)
        return servers.count != before
    }
}
