#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a state-directory operation failed, in words a user can act on.
public enum StateDirectoryError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Neither XDG_STATE_HOME nor HOME is set to an absolute path.
    case noHomeDirectory
    /// A file name that would escape the directory or is empty.
    case invalidName(String)
    /// The path exists but is not a directory.
    case notADirectory(String)
    /// A system call failed.
    case io(operation: String, path: String, reason: String)

    public var description: String {
        switch self {
        case .noHomeDirectory:
            return "cannot find a state directory: set XDG_STATE_HOME or HOME to an absolute path"
        case .invalidName(let name):
            return "invalid state file name '\(name)': use relative names without '.', '..' or empty parts"
        case .notADirectory(let path):
            return "\(path) exists but is not a directory; move it away so Farcast can keep its state there"
        case .io(let operation, let path, let reason):
            return "cannot \(operation) \(path): \(reason)"
        }
    }
}

/// Farcast's per-user state folder: `$XDG_STATE_HOME/farcast`, else `~/.local/state/farcast`.
///
/// Holds identities and trust pins, so every folder it creates is 0700 and every file 0600
/// (whatever the umask), and writes are atomic (temporary file, fsync, rename): a crash leaves
/// the old file or the new one, never half of one.
public struct StateDirectory: Sendable, Equatable {
    /// Absolute path of the folder.
    public let path: String

    public init(path: String) { self.path = path }

    /// Resolves the folder from an environment (the process's own by default).
    public static func resolve(environment: [String: String] = currentEnvironment()) throws(StateDirectoryError) -> StateDirectory {
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") {
            return StateDirectory(path: join(xdg, "farcast"))
        }
        guard let home = environment["HOME"], home.hasPrefix("/") else { throw .noHomeDirectory }
        return StateDirectory(path: join(home, ".local/state/farcast"))
    }

    /// The absolute path a state file name maps to, after validating the name.
    public func filePath(_ name: String) throws(StateDirectoryError) -> String {
        let parts = name.split(separator: "/", omittingEmptySubsequences: false)
        guard !parts.isEmpty, parts.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." && !$0.contains("\0") }) else {
            throw .invalidName(name)
        }
        return Self.join(path, name)
    }

    /// Creates the folder (and missing parents) if needed.
    public func ensureExists() throws(StateDirectoryError) {
        try Self.makeDirectories(path)
    }

    /// Writes a file atomically with mode 0600, creating sub-folders (0700) as needed.
    public func write(_ bytes: [UInt8], to name: String) throws(StateDirectoryError) {
        let target = try filePath(name)
        let folder = String(target[..<target.lastIndex(of: "/")!])
        try Self.makeDirectories(folder)
        let temp = target + ".tmp-\(getpid())"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw Self.ioError("create", temp) }
        var ok = fchmod(fd, 0o600) == 0
        var written = 0
        bytes.withUnsafeBytes { raw in
            while ok, written < raw.count {
                let n = Glibc_write(fd, raw.baseAddress! + written, raw.count - written)
                if n > 0 { written += n } else if n < 0, errno == EINTR { continue } else { ok = false }
            }
        }
        if ok { ok = fsync(fd) == 0 }
        let failure = ok ? nil : Self.ioError("write", temp)
        close(fd)
        if let failure {
            unlink(temp)
            throw failure
        }
        guard rename(temp, target) == 0 else {
            let error = Self.ioError("replace", target)
            unlink(temp)
            throw error
        }
    }

    /// Reads a whole file, or returns nil when it does not exist.
    public func read(_ name: String) throws(StateDirectoryError) -> [UInt8]? {
        let target = try filePath(name)
        let fd = open(target, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw Self.ioError("open", target)
        }
        defer { close(fd) }
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc_read(fd, $0.baseAddress!, $0.count) }
            if n > 0 {
                result.append(contentsOf: chunk[0..<n])
                // State files are small; refuse to slurp something absurd planted there.
                if result.count > 64 << 20 { throw .io(operation: "read", path: target, reason: "file is larger than 64 MiB") }
            } else if n == 0 {
                return result
            } else if errno != EINTR {
                throw Self.ioError("read", target)
            }
        }
    }

    /// Removes a file; succeeds when it is already gone.
    public func remove(_ name: String) throws(StateDirectoryError) {
        let target = try filePath(name)
        if unlink(target) != 0, errno != ENOENT { throw Self.ioError("remove", target) }
    }

    /// The permission bits of a state file (for checks and diagnostics), nil when missing.
    public func permissions(of name: String) throws(StateDirectoryError) -> UInt32? {
        let target = try filePath(name)
        var st = stat()
        if stat(target, &st) != 0 {
            if errno == ENOENT { return nil }
            throw Self.ioError("inspect", target)
        }
        return UInt32(st.st_mode) & 0o7777
    }

    // MARK: - helpers

    public static func currentEnvironment() -> [String: String] {
        var env: [String: String] = [:]
        for key in ["XDG_STATE_HOME", "HOME"] {
            if let value = getenv(key) { env[key] = String(cString: value) }
        }
        return env
    }

    static func join(_ a: String, _ b: String) -> String {
        a.hasSuffix("/") ? a + b : a + "/" + b
    }

    static func ioError(_ operation: String, _ path: String) -> StateDirectoryError {
        .io(operation: operation, path: path, reason: String(cString: strerror(errno)))
    }

    static func makeDirectories(_ path: String) throws(StateDirectoryError) {
        var st = stat()
        if stat(path, &st) == 0 {
            guard (st.st_mode & S_IFMT) == S_IFDIR else { throw .notADirectory(path) }
            return
        }
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            try makeDirectories(String(path[..<slash]))
        }
        if mkdir(path, 0o700) != 0, errno != EEXIST { throw ioError("create folder", path) }
    }
}

// The module's own `write`/`read` methods shadow the C functions inside the type.
@inline(__always) private func Glibc_write(_ fd: Int32, _ p: UnsafeRawPointer, _ n: Int) -> Int { write(fd, p, n) }
@inline(__always) private func Glibc_read(_ fd: Int32, _ p: UnsafeMutableRawPointer, _ n: Int) -> Int { read(fd, p, n) }
