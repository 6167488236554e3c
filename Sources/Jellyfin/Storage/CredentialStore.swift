import FarcastSupport
internal import Foundation

/// Where remembered servers, users and their access tokens live. The file store below keeps
/// them in the state directory (0600); an Apple app supplies the Keychain store instead.
public protocol CredentialStore: Sendable {
    func load() throws -> RememberedServers
    func save(_ servers: RememberedServers) throws
}

/// Every server signed in to, newest use first in `servers`.
public struct RememberedServers: Sendable, Codable, Equatable {
    public var servers: [RememberedServer] = []
    /// The id of the server used last (the default for commands that name none).
    public var current: String?

    public init(servers: [RememberedServer] = [], current: String? = nil) {
        self.servers = servers
        self.current = current
    }

    /// The server whose id, name (case-insensitive) or URL is `key`; the current one for nil.
    public func server(matching key: String?) -> RememberedServer? {
        guard let key else { return servers.first { $0.id == current } ?? servers.first }
        return servers.first { $0.id == key }
            ?? servers.first { $0.name.caseInsensitiveCompare(key) == .orderedSame }
            ?? servers.first { $0.url == key || $0.url == key.trimmingTrailingSlash }
    }

    /// Adds or replaces a signed-in user on a server and makes both current.
    public mutating func remember(server: RememberedServer.Info, user: RememberedUser) {
        var entry = servers.first { $0.id == server.id } ?? RememberedServer(id: server.id, name: server.name, url: server.url)
        entry.name = server.name
        entry.url = server.url
        entry.ssh = server.ssh
        entry.users.removeAll { $0.id == user.id }
        entry.users.insert(user, at: 0)
        entry.currentUser = user.id
        servers.removeAll { $0.id == server.id }
        servers.insert(entry, at: 0)
        current = server.id
    }

    /// Drops a user's token (and the server when no user is left). Returns whether it was there.
    @discardableResult
    public mutating func forget(serverId: String, userId: String) -> Bool {
        guard let index = servers.firstIndex(where: { $0.id == serverId }) else { return false }
        let before = servers[index].users.count
        servers[index].users.removeAll { $0.id == userId }
        let removed = servers[index].users.count != before
        if servers[index].currentUser == userId { servers[index].currentUser = servers[index].users.first?.id }
        if servers[index].users.isEmpty {
            servers.remove(at: index)
            if current == serverId { current = servers.first?.id }
        }
        return removed
    }
}

/// A server signed in to, with the users remembered on it.
public struct RememberedServer: Sendable, Codable, Equatable {
    public var id: String
    public var name: String
    /// The normalised base URL (after redirects).
    public var url: String
    public var users: [RememberedUser] = []
    public var currentUser: String?
    /// The SSH route the server is reached through (`user@bastion[:port]`), nil for direct.
    public var ssh: String?

    public struct Info: Sendable, Equatable {
        public var id: String
        public var name: String
        public var url: String
        public var ssh: String?
        public init(id: String, name: String, url: String, ssh: String? = nil) {
            self.id = id
            self.name = name
            self.url = url
            self.ssh = ssh
        }
    }

    public init(id: String, name: String, url: String, users: [RememberedUser] = [], currentUser: String? = nil, ssh: String? = nil) {
        self.id = id
        self.name = name
        self.url = url
        self.users = users
        self.currentUser = currentUser
        self.ssh = ssh
    }

    /// The user named by id or name (case-insensitive), else the current one.
    public func user(matching key: String?) -> RememberedUser? {
        guard let key else { return users.first { $0.id == currentUser } ?? users.first }
        return users.first { $0.id == key } ?? users.first { $0.name.caseInsensitiveCompare(key) == .orderedSame }
    }
}

/// A signed-in user and the access token the server issued.
public struct RememberedUser: Sendable, Codable, Equatable {
    public var id: String
    public var name: String
    public var token: String

    public init(id: String, name: String, token: String) {
        self.id = id
        self.name = name
        self.token = token
    }
}

/// The credential store as one JSON file in Farcast's state directory, written atomically with
/// mode 0600 (the directory is 0700). A missing file is an empty store; an unreadable one is an
/// error that names the file, never silently reset.
public struct FileCredentialStore: CredentialStore {
    public let directory: StateDirectory
    public let name: String

    public init(directory: StateDirectory, name: String = "jellyfin/servers.json") {
        self.directory = directory
        self.name = name
    }

    public func load() throws -> RememberedServers {
        guard let bytes = try directory.read(name) else { return RememberedServers() }
        do {
            return try JSONDecoder().decode(RememberedServers.self, from: Data(bytes))
        } catch {
            throw JellyfinError.credentialStore("\((try? directory.filePath(name)) ?? name) is not a Farcast server list (\(LiveMessage.reason(error))); move it away to start afresh")
        }
    }

    public func save(_ servers: RememberedServers) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try directory.write(Array(try encoder.encode(servers)), to: name)
    }
}

extension String {
    var trimmingTrailingSlash: String {
        var s = self
        while s.hasSuffix("/") { s.removeLast() }
        return s
    }
}
