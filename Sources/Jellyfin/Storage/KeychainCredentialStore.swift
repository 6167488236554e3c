#if canImport(Security)
internal import Foundation
import Security

/// The credential store in the Keychain (Apple platforms): the same JSON as the file store, as
/// one generic-password item, so tokens never touch the file system.
public struct KeychainCredentialStore: CredentialStore {
    public let service: String
    public let account: String

    public init(service: String = "farcast.jellyfin", account: String = "servers") {
        self.service = service
        self.account = account
    }

    private var query: [String: Any] {
        [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: account]
    }

    public func load() throws -> RememberedServers {
        var lookup = query
        lookup[kSecReturnData as String] = true
        lookup[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(lookup as CFDictionary, &result)
        if status == errSecItemNotFound { return RememberedServers() }
        guard status == errSecSuccess, let data = result as? Data else {
            throw JellyfinError.credentialStore("cannot read the Keychain item \(service)/\(account) (OSStatus \(status))")
        }
        return try JSONDecoder().decode(RememberedServers.self, from: data)
    }

    public func save(_ servers: RememberedServers) throws {
        let data = try JSONEncoder().encode(servers)
        let status = SecItemUpdate(query as CFDictionary, [kSecValueData as String: data] as CFDictionary)
        if status == errSecItemNotFound {
            var item = query
            item[kSecValueData as String] = data
            item[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlock
            let added = SecItemAdd(item as CFDictionary, nil)
            guard added == errSecSuccess else { throw JellyfinError.credentialStore("cannot add the Keychain item (OSStatus \(added))") }
        } else if status != errSecSuccess {
            throw JellyfinError.credentialStore("cannot update the Keychain item (OSStatus \(status))")
        }
    }
}
#endif
