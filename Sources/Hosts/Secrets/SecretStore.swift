import FarcastSupport
import Foundation

/// Where passwords for saved hosts live: never in the host book, never on argv. Backends: the
/// desktop's Secret Service (`SecretServiceStore`, through libsecret, when a session provides
/// one), a 0600 file in the state directory (`FileSecretStore`), the Keychain on Apple platforms.
///
/// Accounts are short strings such as `host:office` (`SavedHost.secretAccount`).
public protocol SecretStore: Sendable {
    /// A short name for messages: "file ~/.local/state/farcast/secrets.json", "Secret Service".
    var name: String { get }
    func secret(for account: String) throws -> String?
    func setSecret(_ value: String, for account: String) throws
    func removeSecret(for account: String) throws
}

/// Why a secret could not be read or written.
public struct SecretStoreError: Error, Equatable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Secrets in one JSON object in a 0600 file of the state directory (`secrets.json`), written
/// atomically. The fallback when no Secret Service is reachable (servers, containers, tests).
public struct FileSecretStore: SecretStore {
    public let directory: StateDirectory
    public let fileName: String

    public init(directory: StateDirectory, fileName: String = "secrets.json") {
        self.directory = directory
        self.fileName = fileName
    }

    public var name: String { "file " + ((try? directory.filePath(fileName)) ?? fileName) }

    public func secret(for account: String) throws -> String? {
        try load()[account]
    }

    public func setSecret(_ value: String, for account: String) throws {
        var all = try load()
        all[account] = value
        try save(all)
    }

    public func removeSecret(for account: String) throws {
        var all = try load()
        if all.removeValue(forKey: account) != nil { try save(all) }
    }

    private func load() throws -> [String: String] {
        guard let bytes = try directory.read(fileName) else { return [:] }
        do {
            return try JSONDecoder().decode([String: String].self, from: Data(bytes))
        } catch {
            throw SecretStoreError("\(name) is not a JSON object of strings; fix or remove it")
        }
    }

    private func save(_ all: [String: String]) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
        try directory.write([UInt8](try encoder.encode(all)), to: fileName)
    }
}

/// Picks the store a command should use: the Secret Service when a desktop session provides one
/// (`DBUS_SESSION_BUS_ADDRESS` set and libsecret answering), else the file in the state directory.
/// `FARCAST_SECRET_STORE=file` or `=secret-service` forces one.
public enum SecretStores {
    public static func preferred(stateDirectory: StateDirectory,
                                 environment: [String: String] = ProcessInfo.processInfo.environment) throws -> any SecretStore {
        switch environment["FARCAST_SECRET_STORE"]?.lowercased() {
        case "file":
            return FileSecretStore(directory: stateDirectory)
        case "secret-service":
            return try SecretServiceStore()
        case nil, "":
            break
        case let other?:
            throw SecretStoreError("FARCAST_SECRET_STORE=\(other) is not file or secret-service")
        }
        #if canImport(Security)
        return KeychainSecretStore()
        #else
        if environment["DBUS_SESSION_BUS_ADDRESS"].map({ !$0.isEmpty }) ?? false, let store = try? SecretServiceStore(), store.isReachable() {
            return store
        }
        return FileSecretStore(directory: stateDirectory)
        #endif
    }
}
