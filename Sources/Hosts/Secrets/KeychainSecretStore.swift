#if canImport(Security)
import Foundation
import Security

/// Secrets in the user's Keychain on Apple platforms (generic passwords, service "farcast").
public struct KeychainSecretStore: SecretStore {
    public var name: String { "Keychain" }
    public init() {}

    private func query(_ account: String) -> [String: Any] {
        [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "farcast", kSecAttrAccount as String: account]
    }

    public func secret(for account: String) throws -> String? {
        var item: CFTypeRef?
        var search = query(account)
        search[kSecReturnData as String] = true
        let status = SecItemCopyMatching(search as CFDictionary, &item)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess, let data = item as? Data else { throw SecretStoreError("the Keychain refused (status \(status))") }
        return String(decoding: data, as: UTF8.self)
    }

    public func setSecret(_ value: String, for account: String) throws {
        try removeSecret(for: account)
        var item = query(account)
        item[kSecValueData as String] = Data(value.utf8)
        let status = SecItemAdd(item as CFDictionary, nil)
        guard status == errSecSuccess else { throw SecretStoreError("the Keychain refused (status \(status))") }
    }

    public func removeSecret(for account: String) throws {
        let status = SecItemDelete(query(account) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else { throw SecretStoreError("the Keychain refused (status \(status))") }
    }
}
#endif
