import Foundation
import FarcastStore
import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The saved hosts: an SQLite file (`$XDG_DATA_HOME/farcast/hosts.sqlite`) opened as every local
/// database is (`LocalDatabase`: WAL, 0600, migrated by `HostBook.migrator` on open).
///
/// Invariant: no secret is ever written here (see `SecretStore`).
public final class HostBook: Sendable {
    public let path: String
    let pool: DatabasePool

    public init(path: String) throws(HostBookError) {
        self.path = path
        do { pool = try LocalDatabase.open(path: path, label: "farcast.hosts", migrator: Self.migrator) } catch { throw .storage(error.reason) }
    }

    /// `$XDG_DATA_HOME/farcast/hosts.sqlite`, else `~/.local/share/farcast/hosts.sqlite`.
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        LocalDatabase.dataPath("hosts.sqlite", environment: environment)
    }

    /// Every schema version since the first. Append new migrations; never edit a shipped one.
    public static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        // v1: where each host is and how to reach it.
        migrator.registerMigration("v1-hosts") { db in
            try db.create(table: "host") { table in
                table.column("name", .text).primaryKey().collate(.nocase)
                table.column("protocol", .text).notNull()
                table.column("address", .text).notNull()
                table.column("port", .integer).notNull()
                table.column("user", .text)
                table.column("tls", .boolean).notNull().defaults(to: false)
                table.column("path", .text)
                table.column("ssh_route", .text)
                table.column("notes", .text)
                table.column("created_at", .datetime).notNull()
            }
        }
        // v2: per-host preferences (one JSON object) and when the host was last used.
        migrator.registerMigration("v2-preferences") { db in
            try db.alter(table: "host") { table in
                table.add(column: "preferences", .text).notNull().defaults(to: "{}")
                table.add(column: "last_connected", .datetime)
            }
        }
        return migrator
    }

    /// The migrations applied to the file, oldest first.
    public func appliedMigrations() throws(HostBookError) -> [String] {
        try read { db in try Self.migrator.appliedMigrations(db) }
    }

    public func all() throws(HostBookError) -> [SavedHost] {
        try read { db in try SavedHost.order(Column("name").collating(.nocase)).fetchAll(db) }
    }

    public func host(named name: String) throws(HostBookError) -> SavedHost? {
        try read { db in try SavedHost.fetchOne(db, key: name) }
    }

    /// Adds a new host; an existing name (case-insensitively) is refused.
    public func add(_ host: SavedHost) throws(HostBookError) {
        try SavedHost.validate(name: host.name)
        try write { db in
            if try SavedHost.exists(db, key: host.name) { throw HostBookError.exists(host.name) }
            try host.insert(db)
        }
    }

    /// Changes a saved host inside one transaction (another process's change is never lost).
    @discardableResult
    public func update(named name: String, _ change: (inout SavedHost) throws -> Void) throws(HostBookError) -> SavedHost {
        try write { db in
            guard var host = try SavedHost.fetchOne(db, key: name) else { throw HostBookError.notFound(name) }
            let old = host.name
            try change(&host)
            try SavedHost.validate(name: host.name)
            if host.name.lowercased() != old.lowercased() {
                if try SavedHost.exists(db, key: host.name) { throw HostBookError.exists(host.name) }
                _ = try SavedHost.deleteOne(db, key: old)
                try host.insert(db)
            } else {
                _ = try SavedHost.deleteOne(db, key: old)
                try host.insert(db)
            }
            return host
        }
    }

    @discardableResult
    public func remove(named name: String) throws(HostBookError) -> Bool {
        try write { db in try SavedHost.deleteOne(db, key: name) }
    }

    /// Records a successful connection.
    public func markConnected(named name: String, at date: Date = Date()) throws(HostBookError) {
        try write { db in
            try db.execute(sql: "UPDATE host SET last_connected = ? WHERE name = ?", arguments: [date, name])
        }
    }

    /// Adds the hosts (all or none); with `replace`, a host of the same name is overwritten,
    /// otherwise an existing name fails the whole import.
    public func importHosts(_ hosts: [SavedHost], replace: Bool) throws(HostBookError) {
        for host in hosts { try SavedHost.validate(name: host.name) }
        try write { db in
            for host in hosts {
                if try SavedHost.exists(db, key: host.name) {
                    guard replace else { throw HostBookError.exists(host.name) }
                    _ = try SavedHost.deleteOne(db, key: host.name)
                }
                try host.insert(db)
            }
        }
    }

    private func read<T>(_ body: (Database) throws -> T) throws(HostBookError) -> T {
        do { return try pool.read(body) } catch let error as HostBookError { throw error } catch { throw .storage(Self.reason(error)) }
    }

    private func write<T>(_ body: (Database) throws -> T) throws(HostBookError) -> T {
        do { return try pool.write(body) } catch let error as HostBookError { throw error } catch { throw .storage(Self.reason(error)) }
    }

    static func reason(_ error: any Error) -> String { LocalDatabase.reason(error) }
}
