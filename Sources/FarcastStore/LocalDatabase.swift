import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a local database could not be opened or used: a sentence for the user.
public struct LocalDatabaseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// The one way farcast keeps data in SQLite (the host book, the Jellyfin offline index): a file
/// in the user's data folder, opened through GRDB in WAL mode so several farcast processes can
/// read and write it at once (a writer waits for another up to `busyTimeout`).
///
/// Invariants: the file and its WAL are created 0600 in a 0700 folder; the schema is brought to
/// the newest version by the caller's migrator on open, one process at a time (migrations are
/// append-only: an old file is upgraded, never rebuilt).
public enum LocalDatabase {
    /// How long a writer waits for another process's write to finish.
    public static let busyTimeout: TimeInterval = 10

    /// Opens (creating it when missing) the database at `path` and migrates it.
    public static func open(path: String, label: String, migrator: DatabaseMigrator) throws(LocalDatabaseError) -> DatabasePool {
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty, let problem = makeFolders(folder) { throw LocalDatabaseError("cannot create \(folder): \(problem)") }
        // Create the file 0600 before SQLite does (it would use the umask, often 0644).
        let fd = posixOpen(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw LocalDatabaseError("cannot open \(path): \(lastError())") }
        close(fd)
        var configuration = Configuration()
        configuration.busyMode = .timeout(busyTimeout)
        configuration.label = label
        // GRDB reads which migrations are applied before it opens each one's transaction, so two
        // processes opening a new file at once would both create its tables: an exclusive flock
        // on a lock file beside it makes the migration one process's at a time. (Not on the
        // database file itself: closing any descriptor of that file drops SQLite's POSIX locks.)
        let lockPath = path + ".lock"
        let lock = posixOpen(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard lock >= 0 else { throw LocalDatabaseError("cannot open \(lockPath): \(lastError())") }
        defer { close(lock) }
        while flock(lock, LOCK_EX) != 0 {
            guard errno == EINTR else { throw LocalDatabaseError("cannot lock \(lockPath): \(lastError())") }
        }
        let pool: DatabasePool
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            try migrator.migrate(pool)
        } catch {
            throw LocalDatabaseError("cannot open \(path): \(reason(error))")
        }
        for suffix in ["-wal", "-shm"] { chmod(path + suffix, 0o600) }
        return pool
    }

    /// `$XDG_DATA_HOME/farcast/NAME`, else `~/.local/share/farcast/NAME`.
    public static func dataPath(_ name: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") { return data + "/farcast/" + name }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return home + "/.local/share/farcast/" + name
    }

    /// An SQLite or file error as a sentence.
    public static func reason(_ error: any Error) -> String {
        if let error = error as? LocalDatabaseError { return error.reason }
        if let database = error as? DatabaseError { return database.message ?? "SQLite error \(database.resultCode.rawValue)" }
        return String(describing: error)
    }

    /// `mkdir -p` with new folders 0700: nil when `path` is a folder now, else the reason.
    static func makeFolders(_ path: String) -> String? {
        var built = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            built += "/" + part
            if mkdir(built, 0o700) != 0 && errno != EEXIST { return lastError() }
            var info = stat()
            guard stat(built, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return "\(built) is not a folder" }
        }
        return nil
    }

    private static func lastError() -> String { String(cString: strerror(errno)).lowercased() }
}

/// open(2) (the enum's own `open` hides the C one).
private func posixOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    #if canImport(Glibc)
    Glibc.open(path, flags, mode)
    #else
    Darwin.open(path, flags, mode)
    #endif
}
