import Foundation
import Synchronization

/// What the stand-in remembers: its identity, the demo user, access tokens (kept in
/// DIR/state.json so they survive a restart, as a real server's database does), Quick Connect
/// requests, and each user's per-item data.
final class StandInState: Sendable {
    struct User: Codable, Sendable {
        var id: String
        var name: String
        var password: String
        var isAdministrator: Bool
    }

    struct Token: Codable, Sendable {
        var token: String
        var userId: String
        var deviceId: String
        var client: String
        var device: String
        var version: String
        var created: Date
        var lastActivity: Date
        var capabilities: Bool = false
    }

    struct QuickConnect: Sendable {
        var secret: String
        var code: String
        var deviceId: String
        var client: String
        var device: String
        var version: String
        var created: Date
        var userId: String?
    }

    struct ItemData: Codable, Sendable {
        var played = false
        var favorite = false
        var positionTicks: Int64 = 0
        var playCount = 0
        var lastPlayed: Date?
    }

    struct Persisted: Codable {
        var serverId: String
        var users: [User]
        var tokens: [String: Token]
        var userData: [String: [String: ItemData]]  // userId → itemId → data
    }

    private struct Storage {
        var persisted: Persisted
        var quickConnect: [String: QuickConnect] = [:]  // secret → request
    }

    let dataDirectory: String
    private let storage: Mutex<Storage>

    init(dataDirectory: String) throws {
        self.dataDirectory = dataDirectory
        let path = dataDirectory + "/state.json"
        var persisted: Persisted
        if let data = FileManager.default.contents(atPath: path), let loaded = try? JSONDecoder().decode(Persisted.self, from: data) {
            persisted = loaded
        } else {
            let password = Self.randomHex(8)
            persisted = Persisted(serverId: Self.randomHex(16),
                                  users: [User(id: Self.randomHex(16), name: "demo", password: password, isAdministrator: true)],
                                  tokens: [:], userData: [:])
        }
        storage = Mutex(Storage(persisted: persisted))
        try save()
        let passwordPath = dataDirectory + "/password"
        try (persisted.users[0].password + "\n").write(toFile: passwordPath, atomically: true, encoding: .utf8)
        chmod(passwordPath, 0o600)
    }

    static func randomHex(_ bytes: Int) -> String {
        (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    var serverId: String { storage.withLock { $0.persisted.serverId } }
    var users: [User] { storage.withLock { $0.persisted.users } }
    func user(id: String) -> User? { storage.withLock { s in s.persisted.users.first { $0.id == id } } }

    func save() throws {
        let data = try storage.withLock { try JSONEncoder().encode($0.persisted) }
        try data.write(to: URL(fileURLWithPath: dataDirectory + "/state.json"), options: .atomic)
    }

    // MARK: tokens

    func authenticate(name: String, password: String) -> User? {
        storage.withLock { s in s.persisted.users.first { $0.name.caseInsensitiveCompare(name) == .orderedSame && $0.password == password } }
    }

    func issueToken(userId: String, caller: Caller) -> Token {
        let token = Token(token: Self.randomHex(16), userId: userId, deviceId: caller.deviceId, client: caller.client, device: caller.device,
                          version: caller.version, created: Date(), lastActivity: Date())
        storage.withLock { s in
            // One token per device and user, as the server keeps it: signing in again replaces it.
            s.persisted.tokens = s.persisted.tokens.filter { !($0.value.deviceId == caller.deviceId && $0.value.userId == userId) }
            s.persisted.tokens[token.token] = token
        }
        try? save()
        return token
    }

    func token(_ value: String) -> Token? {
        storage.withLock { s in
            guard var token = s.persisted.tokens[value] else { return nil }
            token.lastActivity = Date()
            s.persisted.tokens[value] = token
            return token
        }
    }

    @discardableResult
    func revoke(_ value: String) -> Bool {
        let removed = storage.withLock { $0.persisted.tokens.removeValue(forKey: value) != nil }
        try? save()
        return removed
    }

    /// Revokes every token of a user; returns the revoked values.
    func revokeAll(userId: String) -> [String] {
        let values = storage.withLock { s in
            let values = s.persisted.tokens.values.filter { $0.userId == userId }.map(\.token)
            for value in values { s.persisted.tokens.removeValue(forKey: value) }
            return values
        }
        try? save()
        return values
    }

    func setCapabilities(token: String) {
        storage.withLock { s in s.persisted.tokens[token]?.capabilities = true }
    }

    var tokens: [Token] { storage.withLock { Array($0.persisted.tokens.values) } }

    // MARK: Quick Connect

    func initiateQuickConnect(caller: Caller) -> QuickConnect {
        let request = QuickConnect(secret: Self.randomHex(32), code: String(format: "%06d", Int.random(in: 0...999_999)), deviceId: caller.deviceId,
                                   client: caller.client, device: caller.device, version: caller.version, created: Date(), userId: nil)
        storage.withLock { s in
            // Requests expire after 10 minutes.
            s.quickConnect = s.quickConnect.filter { Date().timeIntervalSince($0.value.created) < 600 }
            s.quickConnect[request.secret] = request
        }
        return request
    }

    func quickConnect(secret: String) -> QuickConnect? {
        storage.withLock { s in
            guard let request = s.quickConnect[secret], Date().timeIntervalSince(request.created) < 600 else { return nil }
            return request
        }
    }

    /// Approves the pending request with `code` for `userId`; false when no such code.
    func approveQuickConnect(code: String, userId: String) -> Bool {
        storage.withLock { s in
            guard let secret = s.quickConnect.first(where: { $0.value.code == code })?.key else { return false }
            s.quickConnect[secret]?.userId = userId
            return true
        }
    }

    func consumeQuickConnect(secret: String) -> QuickConnect? {
        storage.withLock { s in
            guard let request = s.quickConnect[secret], request.userId != nil else { return nil }
            s.quickConnect.removeValue(forKey: secret)
            return request
        }
    }

    // MARK: user data

    func itemData(userId: String, itemId: String) -> ItemData {
        storage.withLock { $0.persisted.userData[userId]?[itemId] ?? ItemData() }
    }

    func allItemData(userId: String) -> [String: ItemData] {
        storage.withLock { $0.persisted.userData[userId] ?? [:] }
    }

    func updateItemData(userId: String, itemId: String, _ change: (inout ItemData) -> Void) -> ItemData {
        let data = storage.withLock { s in
            var data = s.persisted.userData[userId]?[itemId] ?? ItemData()
            change(&data)
            s.persisted.userData[userId, default: [:]][itemId] = data
            return data
        }
        try? save()
        return data
    }
}

/// Who is calling: the `Authorization` header's fields (or `ApiKey=`), and the token's user.
struct Caller: Sendable {
    var client: String
    var device: String
    var deviceId: String
    var version: String
    var token: StandInState.Token?

    @TaskLocal static var current: Caller?
}
