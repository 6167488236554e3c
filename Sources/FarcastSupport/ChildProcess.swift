#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// One program farcast started (`ssh`, `mpv`, …): spawned directly (no shell), its standard
/// input and output descriptors of the caller's (or /dev/null), its standard error kept (the
/// last 16 KiB) for the error message.
///
/// Each child has a thread of its own that spawns it, drains its stderr and reaps it. Exit is
/// observed with `waitpid`, never by stderr reaching EOF: a grandchild (an ssh ControlPersist
/// master) may inherit that stderr and hold it open for minutes. On Linux the child is started
/// through `setpriv --pdeathsig TERM`, so it gets SIGTERM when the thread that started it ends —
/// which is when the child has exited, or when farcast has died (SIGKILL included): no `ssh` is
/// left behind in any path. (The thread is what Linux means by "parent" for PR_SET_PDEATHSIG,
/// which is why the spawning thread lives exactly as long as the child.)
public final class ChildProcess: Sendable {
    public let pid: pid_t
    public let arguments: [String]
    public let ownGroup: Bool
    private let shared: Shared

    private struct State {
        var stderr: [UInt8] = []
        /// Bytes written to stderr in all, kept or not.
        var written = 0
        var status: Int32?
        var waiters: [CheckedContinuation<Int32, Never>] = []
    }

    /// What the child's thread and its owner share (made before the child exists).
    private final class Shared: Sendable {
        let state = Mutex(State())
    }

    public static let stderrLimit = 16 * 1024

    private init(pid: pid_t, arguments: [String], ownGroup: Bool, shared: Shared) {
        self.pid = pid
        self.arguments = arguments
        self.ownGroup = ownGroup
        self.shared = shared
    }

    /// `setpriv` from util-linux, looked up once (Linux only): it sets the parent-death signal
    /// and execs the command, so no code runs between fork and exec in this process.
    static let setpriv: String? = {
        #if os(Linux)
        return ["/usr/bin/setpriv", "/bin/setpriv"].first { FileManager.default.isExecutableFile(atPath: $0) }
        #else
        return nil
        #endif
    }()

    /// Starts `arguments` (the program's absolute path first). `stdin`, `stdout`: the
    /// descriptors to give it (they stay open here; the caller closes its copies), else /dev/null.
    /// `ownGroup`: a process group of its own (signals for farcast's terminal do not reach it).
    /// `environment`: variables set for the child beyond farcast's own.
    public static func spawn(_ arguments: [String], stdin: Int32? = nil, stdout: Int32? = nil, ownGroup: Bool,
                             environment: [String: String] = [:]) async throws(ChildProcessError) -> ChildProcess {
        let shared = Shared()
        let started: Result<pid_t, ChildProcessError> = await withCheckedContinuation { continuation in
            let thread = Thread {
                let errorPipe = makePipe()
                guard let errorPipe else {
                    continuation.resume(returning: .failure(.cannotStart(program: arguments[0], reason: "cannot make a pipe: \(String(cString: strerror(errno)))")))
                    return
                }
                var launched = arguments
                if let setpriv { launched = [setpriv, "--pdeathsig", "TERM", "--"] + arguments }
                let spawned = posixSpawn(launched, stdin: stdin, stdout: stdout, stderr: errorPipe.write, ownGroup: ownGroup, environment: environment)
                close(errorPipe.write)
                switch spawned {
                case .failure(let error):
                    close(errorPipe.read)
                    continuation.resume(returning: .failure(error))
                case .success(let pid):
                    continuation.resume(returning: .success(pid))
                    watch(pid: pid, stderr: errorPipe.read, shared: shared)
                }
            }
            thread.name = "farcast child \(arguments[0].split(separator: "/").last ?? "")"
            thread.start()
        }
        switch started {
        case .success(let pid): return ChildProcess(pid: pid, arguments: arguments, ownGroup: ownGroup, shared: shared)
        case .failure(let error): throw error
        }
    }

    /// The child's thread after the spawn: keeps its stderr (bounded) until it exits, reaps it,
    /// wakes whoever waits.
    private static func watch(pid: pid_t, stderr fd: Int32, shared: Shared) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var open = true
        var raw: Int32 = 0
        func drain() {
            while open {
                let count = read(fd, &buffer, buffer.count)
                if count > 0 {
                    shared.state.withLock { s in
                        s.stderr += buffer[0..<count]
                        s.written += count
                        if s.stderr.count > stderrLimit { s.stderr.removeFirst(s.stderr.count - stderrLimit) }
                    }
                } else if count == 0 || (errno != EINTR && errno != EAGAIN) {
                    open = false
                } else if errno == EAGAIN {
                    return
                }
            }
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        while true {
            if open {
                var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                _ = poll(&poller, 1, 100)
                drain()
            } else {
                usleep(20_000)
            }
            let reaped = waitpid(pid, &raw, WNOHANG)
            if reaped == pid || (reaped < 0 && errno == ECHILD) {
                drain()   // what it wrote just before exiting
                break
            }
        }
        close(fd)
        // WIFEXITED: the low 7 bits are 0 and the code is in bits 8–15; else the signal number + 128.
        let status: Int32 = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
        let waiters = shared.state.withLock { s in
            s.status = status
            defer { s.waiters = [] }
            return s.waiters
        }
        for waiter in waiters { waiter.resume(returning: status) }
    }

    /// What the child wrote on stderr so far (the last 16 KiB), as text.
    public var stderr: String { shared.state.withLock { String(decoding: $0.stderr, as: UTF8.self) } }

    /// How many bytes the child has written to stderr so far: a mark for `stderr(since:)`.
    public var stderrWritten: Int { shared.state.withLock { $0.written } }

    /// What the child wrote on stderr after `mark` (as far as the kept 16 KiB reach back).
    public func stderr(since mark: Int) -> String {
        shared.state.withLock { s in String(decoding: s.stderr.suffix(max(0, min(s.written - mark, s.stderr.count))), as: UTF8.self) }
    }

    /// The exit code (128 + the signal when a signal ended it); nil while it runs.
    public var exitStatus: Int32? { shared.state.withLock { $0.status } }

    /// Waits for the child to exit; returns its exit status.
    public func waitForExit() async -> Int32 {
        await withCheckedContinuation { continuation in
            let done: Int32? = shared.state.withLock { s in
                if let status = s.status { return status }
                s.waiters.append(continuation)
                return nil
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    /// Sends `signal` to the child (and its group when it has one of its own).
    public func signal(_ number: Int32) {
        guard exitStatus == nil else { return }
        _ = kill(ownGroup ? -pid : pid, number)
    }

    /// SIGTERM, up to `grace` for it to exit, then SIGKILL; returns once it is reaped.
    public func terminate(grace: Duration = .seconds(2)) async {
        guard exitStatus == nil else { return }
        signal(SIGTERM)
        let exited = await withTaskGroup(of: Bool.self) { group in
            group.addTask { _ = await self.waitForExit(); return true }
            group.addTask { try? await Task.sleep(for: grace); return false }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        if !exited {
            signal(SIGKILL)
            _ = await waitForExit()
        }
    }

    public static func makePipe() -> (read: Int32, write: Int32)? {
        var fds: [Int32] = [-1, -1]
        // pipe2 is not imported from Glibc; the descriptors are marked at once (a child spawned
        // by another thread in between could inherit them, and would only hold them open).
        guard pipe(&fds) == 0 else { return nil }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (fds[0], fds[1])
    }

    private static func posixSpawn(_ arguments: [String], stdin: Int32?, stdout: Int32?, stderr: Int32, ownGroup: Bool,
                                   environment extra: [String: String]) -> Result<pid_t, ChildProcessError> {
        #if os(Linux)
        var actions = posix_spawn_file_actions_t()
        var attributes = posix_spawnattr_t()
        #else
        var actions: posix_spawn_file_actions_t?
        var attributes: posix_spawnattr_t?
        #endif
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let stdin { posix_spawn_file_actions_adddup2(&actions, stdin, 0) } else { posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0) }
        if let stdout { posix_spawn_file_actions_adddup2(&actions, stdout, 1) } else { posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0) }
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // farcast blocks or ignores some signals for itself (its signal watcher, SIGPIPE): the
        // child starts with none blocked and these at their defaults, so SIGTERM ends it.
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for number in [SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD, SIGQUIT] { sigaddset(&defaults, number) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        if ownGroup {
            flags |= Int32(POSIX_SPAWN_SETPGROUP)
            posix_spawnattr_setpgroup(&attributes, 0)
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        let environment = ProcessInfo.processInfo.environment.merging(extra) { $1 }.map { "\($0.key)=\($0.value)" }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
        guard result == 0 else {
            return .failure(.cannotStart(program: arguments[0], reason: String(cString: strerror(result))))
        }
        return .success(pid)
    }
}

/// Why a program could not be started.
public enum ChildProcessError: Error, Sendable, Equatable, CustomStringConvertible {
    case cannotStart(program: String, reason: String)

    public var description: String {
        switch self {
        case .cannotStart(let program, let reason): return "cannot start \(program): \(reason)"
        }
    }
}
