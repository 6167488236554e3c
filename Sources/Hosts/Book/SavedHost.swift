import Foundation
import GRDB

/// Per-host preferences the protocol commands apply when a saved host is used. Every field is
/// optional: nil means the command's own default. Stored as one JSON column, so adding a field
/// needs no migration.
public struct HostPreferences: Codable, Sendable, Equatable {
    /// VNC: encodings to ask for, most preferred first.
    public var encodings: [String]?
    /// VNC: JPEG quality 0–9.
    public var quality: Int?
    /// VNC viewer: "fit", "fill", "none" or a factor.
    public var scaling: String?
    /// VNC: the monitor to show or capture (0 is the first).
    public var monitor: Int?
    /// VNC: never send input.
    public var viewOnly: Bool?
    /// Sendspin: the ALSA output device.
    public var outputDevice: String?
    /// punktfunk / Jellyfin: bitrate in kbit/s.
    public var bitrateKbps: Int?
    /// Which SSH client carries the route: "openssh" or "builtin" (nil: the command's choice).
    public var sshVia: String?

    public init(encodings: [String]? = nil, quality: Int? = nil, scaling: String? = nil, monitor: Int? = nil, viewOnly: Bool? = nil,
                outputDevice: String? = nil, bitrateKbps: Int? = nil, sshVia: String? = nil) {
        self.encodings = encodings
        self.quality = quality
        self.scaling = scaling
        self.monitor = monitor
        self.viewOnly = viewOnly
        self.outputDevice = outputDevice
        self.bitrateKbps = bitrateKbps
        self.sshVia = sshVia
    }

    public var isEmpty: Bool { self == HostPreferences() }
}

/// One entry of the host book: where a machine is, how to reach it, what to prefer. Secrets are
/// never fields here (they live in a `SecretStore`, keyed by `secretAccount`).
///
/// Invariants: `name` is 1…64 characters without "/", "://" or whitespace at either end (it is
/// typed where a URL could be); `port` is 1…65535; `sshRoute` parses as an `SSHRoute`.
public struct SavedHost: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "host"

    public var name: String
    public var kind: HostProtocol
    public var address: String
    public var port: Int
    public var user: String?
    public var tls: Bool
    public var path: String?
    /// `user@bastion[:port]`: carry connections through this SSH server.
    public var sshRoute: String?
    public var preferences: HostPreferences
    public var lastConnected: Date?
    public var notes: String?
    public var createdAt: Date

    enum CodingKeys: String, CodingKey {
        case name
        case kind = "protocol"
        case address, port, user, tls, path
        case sshRoute = "ssh_route"
        case preferences
        case lastConnected = "last_connected"
        case notes
        case createdAt = "created_at"
    }

    public init(name: String, address: HostAddress, preferences: HostPreferences = HostPreferences(), notes: String? = nil,
                createdAt: Date = Date()) {
        self.name = name
        kind = address.kind
        self.address = address.host
        port = address.port
        user = address.user
        tls = address.tls
        path = address.path
        sshRoute = address.ssh?.description
        self.preferences = preferences
        lastConnected = nil
        self.notes = notes
        self.createdAt = createdAt
    }

    /// The host as a URL-form address (with its SSH route).
    public var hostAddress: HostAddress {
        HostAddress(kind: kind, host: address, port: port, user: user, tls: tls, path: path, ssh: sshRoute.flatMap { try? SSHRoute(parsing: $0) })
    }

    /// The account under which this host's password (if any) is kept in a `SecretStore`.
    public var secretAccount: String { "host:\(name.lowercased())" }

    /// Checks the name: it is typed in place of a URL or an address, so it must not look like one.
    public static func validate(name: String) throws(HostBookError) {
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed == name else { throw .invalidName(name, "it is empty or starts or ends with a space") }
        guard name.count <= 64 else { throw .invalidName(name, "it is longer than 64 characters") }
        guard !name.contains("/"), !name.contains(":"), !name.contains("@") else {
            throw .invalidName(name, "it contains '/', ':' or '@', which would make it look like an address")
        }
    }
}

/// What the host book refuses, in words.
public enum HostBookError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidName(String, String)
    case exists(String)
    case notFound(String)
    case storage(String)
    case invalidImport(String)

    public var description: String {
        switch self {
        case .invalidName(let name, let why): return "'\(name)' cannot name a host: \(why)"
        case .exists(let name): return "a host named '\(name)' is already saved; use `farcast hosts edit` or remove it first"
        case .notFound(let name): return "no saved host is named '\(name)' (`farcast hosts ls` lists them)"
        case .storage(let detail): return "the host book: \(detail)"
        case .invalidImport(let detail): return "cannot import: \(detail)"
        }
    }
}
