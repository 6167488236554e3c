#if os(Linux)
import Foundation
import Glibc

/// Secrets in the desktop's Secret Service (GNOME Keyring, KWallet, KeePassXC) through libsecret.
///
/// libsecret is loaded at run time (`dlopen`), not linked: farcast must start on a server that
/// has no desktop libraries, and the Secret Service is only wanted when a session provides it.
/// Only libsecret's non-variadic `…v_sync` calls are used (Swift cannot call C variadics).
/// Items carry the schema `org.farcast.Secret` with one attribute, `account`.
public final class SecretServiceStore: SecretStore, @unchecked Sendable {
    // @unchecked: every field is set once in init and only read afterwards; libsecret's sync
    // calls are safe to make from any thread (they run their own D-Bus main context).
    public var name: String { "Secret Service" }

    private typealias HashTableNew = @convention(c) (UnsafeRawPointer?, UnsafeRawPointer?) -> OpaquePointer?
    private typealias HashTableInsert = @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Int32
    private typealias HashTableUnref = @convention(c) (OpaquePointer?) -> Void
    private typealias ErrorFree = @convention(c) (UnsafeMutableRawPointer?) -> Void
    private typealias Store = @convention(c) (UnsafeRawPointer?, OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
                                               UnsafePointer<CChar>?, UnsafeRawPointer?, UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> Int32
    private typealias Lookup = @convention(c) (UnsafeRawPointer?, OpaquePointer?, UnsafeRawPointer?,
                                                UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> UnsafeMutablePointer<CChar>?
    private typealias Clear = @convention(c) (UnsafeRawPointer?, OpaquePointer?, UnsafeRawPointer?,
                                               UnsafeMutablePointer<UnsafeMutableRawPointer?>?) -> Int32
    private typealias PasswordFree = @convention(c) (UnsafeMutablePointer<CChar>?) -> Void

    private let hashTableNew: HashTableNew
    private let hashTableInsert: HashTableInsert
    private let hashTableUnref: HashTableUnref
    private let errorFree: ErrorFree
    private let strHash: UnsafeRawPointer
    private let strEqual: UnsafeRawPointer
    private let store: Store
    private let lookup: Lookup
    private let clear: Clear
    private let passwordFree: PasswordFree
    /// SecretSchema, laid out as libsecret's header declares it (name, flags, 32 attributes,
    /// reserved fields), allocated once and never freed (it must outlive every call).
    private let schema: UnsafeMutableRawPointer

    public init() throws {
        guard let secret = dlopen("libsecret-1.so.0", RTLD_NOW | RTLD_LOCAL) else {
            throw SecretStoreError("the Secret Service needs libsecret (apt install libsecret-1-0)")
        }
        guard let glib = dlopen("libglib-2.0.so.0", RTLD_NOW | RTLD_LOCAL) else {
            throw SecretStoreError("the Secret Service needs GLib (libglib-2.0-0)")
        }
        func symbol<T>(_ library: UnsafeMutableRawPointer, _ name: String, as type: T.Type) throws -> T {
            guard let pointer = dlsym(library, name) else { throw SecretStoreError("libsecret lacks \(name)") }
            return unsafeBitCast(pointer, to: type)
        }
        hashTableNew = try symbol(glib, "g_hash_table_new", as: HashTableNew.self)
        hashTableInsert = try symbol(glib, "g_hash_table_insert", as: HashTableInsert.self)
        hashTableUnref = try symbol(glib, "g_hash_table_unref", as: HashTableUnref.self)
        errorFree = try symbol(glib, "g_error_free", as: ErrorFree.self)
        guard let hash = dlsym(glib, "g_str_hash"), let equal = dlsym(glib, "g_str_equal") else {
            throw SecretStoreError("GLib lacks g_str_hash")
        }
        strHash = UnsafeRawPointer(hash)
        strEqual = UnsafeRawPointer(equal)
        store = try symbol(secret, "secret_password_storev_sync", as: Store.self)
        lookup = try symbol(secret, "secret_password_lookupv_sync", as: Lookup.self)
        clear = try symbol(secret, "secret_password_clearv_sync", as: Clear.self)
        passwordFree = try symbol(secret, "secret_password_free", as: PasswordFree.self)

        // struct SecretSchema { const gchar *name; SecretSchemaFlags flags;
        //   SecretSchemaAttribute attributes[32]; gint reserved; gpointer reserved1…reserved7; }
        // struct SecretSchemaAttribute { const gchar *name; SecretSchemaAttributeType type; }
        let attributeSize = MemoryLayout<UnsafeRawPointer>.size * 2  // pointer + enum, padded
        let size = MemoryLayout<UnsafeRawPointer>.size * 2 + 32 * attributeSize + MemoryLayout<UnsafeRawPointer>.size * 8
        schema = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        schema.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        schema.storeBytes(of: UnsafeRawPointer(strdup("org.farcast.Secret")), as: UnsafeRawPointer?.self)
        // flags = SECRET_SCHEMA_NONE (0); attribute 0 = { "account", SECRET_SCHEMA_ATTRIBUTE_STRING (0) }.
        let firstAttribute = MemoryLayout<UnsafeRawPointer>.size * 2
        schema.storeBytes(of: UnsafeRawPointer(strdup("account")), toByteOffset: firstAttribute, as: UnsafeRawPointer?.self)
    }

    /// Whether a Secret Service answers (a lookup of an absent item succeeds with nothing).
    public func isReachable() -> Bool {
        do {
            _ = try secret(for: "farcast-probe")
            return true
        } catch {
            return false
        }
    }

    private func withAttributes<T>(_ account: String, _ body: (OpaquePointer?) throws -> T) rethrows -> T {
        let table = hashTableNew(strHash, strEqual)
        let key = strdup("account"), value = strdup(account)
        _ = hashTableInsert(table, key, value)
        defer {
            hashTableUnref(table)
            free(key)
            free(value)
        }
        return try body(table)
    }

    private func check(_ error: UnsafeMutableRawPointer?, _ what: String) throws {
        guard let error else { return }
        // GError { GQuark domain; gint code; gchar *message; }
        let message = error.load(fromByteOffset: 8, as: UnsafePointer<CChar>?.self).map { String(cString: $0) } ?? "unknown error"
        errorFree(error)
        throw SecretStoreError("the Secret Service could not \(what): \(message)")
    }

    public func secret(for account: String) throws -> String? {
        var error: UnsafeMutableRawPointer?
        let result = withAttributes(account) { lookup(schema, $0, nil, &error) }
        try check(error, "look up \(account)")
        guard let result else { return nil }
        defer { passwordFree(result) }
        return String(cString: result)
    }

    public func setSecret(_ value: String, for account: String) throws {
        var error: UnsafeMutableRawPointer?
        let ok = withAttributes(account) { table in
            store(schema, table, nil, "farcast \(account)", value, nil, &error)
        }
        try check(error, "store \(account)")
        if ok == 0 { throw SecretStoreError("the Secret Service did not store \(account)") }
    }

    public func removeSecret(for account: String) throws {
        var error: UnsafeMutableRawPointer?
        _ = withAttributes(account) { clear(schema, $0, nil, &error) }
        try check(error, "remove \(account)")
    }
}
#endif
