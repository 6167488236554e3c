import Foundation
import Synchronization
import Testing

/// Where the package lives, from this file's path (Tests/IntegrationTests/Support/Peers.swift).
let packageRoot: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A peer binary or library the tests need is missing. The message says how to install it:
/// integration tests fail rather than skip, because `scripts/setup` installs every peer.
struct MissingPeer: Error, CustomStringConvertible {
    var what: String
    var description: String { "\(what) is not installed: run scripts/setup (it installs every test peer)" }
}

/// Finds an executable on PATH (or at an absolute path) or fails with an install hint.
func requireExecutable(_ name: String, package: String) throws -> String {
    if name.hasPrefix("/") {
        guard FileManager.default.isExecutableFile(atPath: name) else { throw MissingPeer(what: "\(name) (Debian package \(package))") }
        return name
    }
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
    for dir in path.split(separator: ":") + ["/usr/bin", "/usr/sbin", "/sbin"] {
        let candidate = "\(dir)/\(name)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    throw MissingPeer(what: "\(name) (Debian package \(package))")
}

/// The `farcast` binary under test: $FARCAST_BIN (set by scripts/test), else the debug build.
func farcastBinary() throws -> String {
    let path = ProcessInfo.processInfo.environment["FARCAST_BIN"]
        ?? packageRoot.appendingPathComponent(".build/debug/farcast").path
    guard FileManager.default.isExecutableFile(atPath: path) else {
        throw MissingPeer(what: "the farcast binary at \(path) (build it with `swift build`)")
    }
    return path
}

/// The result of running a program to completion.
struct ProcessResult {
    var status: Int32
    var stdout: String
    var stderr: String
    /// The most memory the program had allocated (RssAnon, sampled every 10 ms while it ran).
    var peakAnonMiB: Double = 0
}

/// RssAnon of a running process in MiB (0 when it has gone).
func anonymousMemoryMiB(pid: Int32) -> Double {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
          let kib = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap({ Double($0) })
    else { return 0 }
    return kib / 1024
}

/// Runs a program to completion with a time limit; a hung program is killed and reported.
func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
         stdin: Data? = nil, timeout: TimeInterval = 60) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let out = Pipe(), err = Pipe(), input = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = input
    try process.run()
    if let stdin { input.fileHandleForWriting.write(stdin) }
    try? input.fileHandleForWriting.close()
    // Drain both pipes concurrently so a chatty child never blocks on a full pipe.
    let outData = DataBox(), errData = DataBox()
    let group = DispatchGroup()
    for (pipe, sink) in [(out, outData), (err, errData)] {
        group.enter()
        DispatchQueue.global().async {
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            sink.value.withLock { $0 = data }
            group.leave()
        }
    }
    let deadline = Date().addingTimeInterval(timeout)
    var peakAnon = 0.0
    // Whether the program has exited is asked of the kernel too: Foundation's Process, which
    // learns of its children's exits on a monitoring thread, has been seen (in CI, under load)
    // still saying "running" a minute after the program had exited — a run that timed out with
    // no stderr and a process gdb could not attach to.
    var exited: Int32?
    while process.isRunning && Date() < deadline {
        if let status = exitStatusWithoutReaping(process.processIdentifier) {
            exited = status
            break
        }
        peakAnon = max(peakAnon, anonymousMemoryMiB(pid: process.processIdentifier))
        usleep(10_000)
    }
    if exited == nil && process.isRunning {
        // Where it hangs, for the report: every thread's stack, while it is still hung.
        let stacks = threadStacks(pid: process.processIdentifier)
        process.terminate()
        usleep(200_000)
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        _ = group.wait(timeout: .now() + 5)
        throw TimedOut(command: ([executable] + arguments).joined(separator: " "), seconds: timeout,
                       stderr: String(decoding: errData.value.withLock { $0 }, as: UTF8.self), stacks: stacks)
    }
    // A daemon the command left behind may hold the pipes open: the command has ended, so its
    // output is complete once a few seconds pass without EOF.
    if group.wait(timeout: .now() + 5) == .timedOut {
        throw PeerFailed(name: executable, log: "exited, but something it started still holds its output open")
    }
    // Foundation reaps the child (and only then stops saying "running"); when the kernel said
    // first that it had exited, its status came from there.
    if exited == nil { process.waitUntilExit() }
    return ProcessResult(status: exited ?? process.terminationStatus,
                         stdout: String(decoding: outData.value.withLock { $0 }, as: UTF8.self),
                         stderr: String(decoding: errData.value.withLock { $0 }, as: UTF8.self),
                         peakAnonMiB: peakAnon)
}

/// A child's exit status (the exit code, or the number of the signal that ended it) once it has
/// exited, read with WNOWAIT so the child is left for Foundation's Process to reap; nil while it
/// runs or once it has been reaped.
func exitStatusWithoutReaping(_ pid: pid_t) -> Int32? {
    var info = siginfo_t()
    guard waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0, info._sifields._sigchld.si_pid == pid else { return nil }
    return info._sifields._sigchld.si_status
}

final class DataBox: Sendable {
    let value = Mutex(Data())
}

struct TimedOut: Error, CustomStringConvertible {
    var command: String
    var seconds: TimeInterval
    var stderr = ""
    var stacks = ""
    var description: String {
        var text = "`\(command)` did not finish within \(Int(seconds)) s"
        if !stderr.isEmpty { text += "\n--- its stderr (last 4000 characters):\n" + String(stderr.suffix(4000)) }
        if !stacks.isEmpty { text += "\n--- its threads when it was stopped:\n" + stacks }
        return text
    }
}

/// Every thread's backtrace of a running process, through gdb when it is installed ("" otherwise);
/// bounded in time so a report never hangs on it.
func threadStacks(pid: Int32) -> String {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/gdb") else { return "" }
    let gdb = Process()
    gdb.executableURL = URL(fileURLWithPath: "/usr/bin/gdb")
    gdb.arguments = ["-p", "\(pid)", "-batch", "-nx", "-ex", "set pagination off", "-ex", "thread apply all bt 30"]
    let out = Pipe()
    gdb.standardOutput = out
    gdb.standardError = FileHandle.nullDevice
    guard (try? gdb.run()) != nil else { return "" }
    let text = DataBox()
    let done = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
        let data = out.fileHandleForReading.readDataToEndOfFile()
        text.value.withLock { $0 = data }
        done.signal()
    }
    if done.wait(timeout: .now() + 30) == .timedOut { gdb.terminate(); return "(gdb did not finish in 30 s)" }
    gdb.waitUntilExit()
    return String(decoding: text.value.withLock { $0 }, as: UTF8.self)
        .split(separator: "\n").filter { $0.hasPrefix("#") || $0.hasPrefix("Thread") }.joined(separator: "\n")
}

/// A long-running peer (a server) started for one test and stopped when the value goes away.
///
/// Spawned with posix_spawn and a clean signal state: Foundation's Process hands its children the
/// signal mask of whatever thread launched them, and test threads block SIGTERM and SIGINT, so a
/// peer (or a shell script's trap) started that way never saw `terminate()`. Here every child
/// starts with no signal blocked and the usual signals at their default actions.
final class BackgroundProcess: @unchecked Sendable {
    // @unchecked: `pid`, `logPath` and `name` are immutable; the exit status is behind a Mutex.
    let pid: pid_t
    let logPath: String
    let name: String
    private let exit = Mutex<Int32?>(nil)

    /// `newSession`: the process leads a session of its own, without a controlling terminal
    /// (as a program started from a desktop menu has none).
    init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, logName: String, newSession: Bool = false) throws {
        name = logName
        logPath = NSTemporaryDirectory() + "farcast-\(logName)-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        pid = try spawn(executable, arguments, environment: environment, stdin: "/dev/null", output: logPath, newSession: newSession)
    }

    /// True until the process has exited (it is reaped here the moment it has).
    var isRunning: Bool { reap(blocking: false) == nil }

    /// The exit code, or the number of the signal that ended it; waits for the exit.
    var terminationStatus: Int32 { reap(blocking: true) ?? -1 }

    /// Sends a signal (SIGINT for Ctrl-C, SIGTERM as systemd would).
    func signal(_ number: Int32) { if isRunning { kill(pid, number) } }

    /// Asks the process to end (SIGTERM) without waiting.
    func terminate() { signal(SIGTERM) }

    /// Waits up to `timeout` for the process to exit by itself; true if it did.
    func waitForExit(timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while isRunning {
            if Date() >= deadline { return false }
            usleep(10_000)
        }
        return true
    }

    /// The peer's output so far, for failure messages.
    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// SIGTERM, up to 2 s to exit, then SIGKILL.
    func stop() {
        guard isRunning else { return }
        kill(pid, SIGTERM)
        if !waitForExit(timeout: 2) {
            kill(pid, SIGKILL)
            _ = reap(blocking: true)
        }
    }

    private func reap(blocking: Bool) -> Int32? {
        exit.withLock { status in
            if let status { return status }
            var raw: Int32 = 0
            let result = waitpid(pid, &raw, blocking ? 0 : WNOHANG)
            guard result == pid else { return result < 0 ? -1 : nil }
            // WIFEXITED: the low 7 bits are 0, and the exit code is in bits 8–15.
            status = raw & 0x7F == 0 ? (raw >> 8) & 0xFF : raw & 0x7F
            return status
        }
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: logPath)
    }
}

/// Starts `executable` with stdin and stdout/stderr redirected, no signal blocked and SIGINT,
/// SIGTERM, SIGHUP, SIGCHLD, SIGQUIT at their default actions. SIGPIPE stays ignored, as the test
/// process has it and Foundation's Process passed it on: PulseAudio writes into its pipe sink
/// before the test's reader has opened it, and a default SIGPIPE would kill it.
func spawn(_ executable: String, _ arguments: [String], environment: [String: String]?, stdin: String, output: String, newSession: Bool = false) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_APPEND | O_CREAT, 0o600)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t()
    sigemptyset(&none)
    posix_spawnattr_setsigmask(&attributes, &none)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for number in [SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGQUIT] { sigaddset(&defaults, number) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    // POSIX_SPAWN_SETSID (glibc 2.26+, 0x80) is not imported into Swift; the value is glibc's.
    let setsid: Int32 = newSession ? 0x80 : 0
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | setsid))
    let env = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    let envp = env.map { strdup($0) } + [nil]
    defer {
        for pointer in argv { free(pointer) }
        for pointer in envp { free(pointer) }
    }
    var pid: pid_t = 0
    var result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
    // "Text file busy" is transient on Linux: exec refuses a file some process holds open for
    // writing, and a fork elsewhere in this many-threaded process can hold such a descriptor
    // for a moment (a CI run saw it once for the Jellyfin stand-in, which nothing writes).
    for _ in 0..<5 where result == ETXTBSY {
        usleep(100_000)
        result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
    }
    guard result == 0 else {
        let holders = result == ETXTBSY ? "; open for writing by: \(writers(of: executable).joined(separator: ", "))" : ""
        throw PeerFailed(name: executable, log: "posix_spawn failed: \(String(cString: strerror(result)))\(holders)")
    }
    return pid
}

/// The processes holding `path` open for writing ("PID (command) fd N"), from /proc: who makes
/// exec refuse it with "Text file busy".
func writers(of path: String) -> [String] {
    let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
    var found: [String] = []
    for pid in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where Int32(pid) != nil {
        for fd in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? [] {
            guard (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) == target,
                  let info = try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(fd)", encoding: .utf8),
                  let flags = info.split(separator: "\n").first(where: { $0.hasPrefix("flags:") })
                      .flatMap({ Int($0.dropFirst(6).trimmingCharacters(in: .whitespaces), radix: 8) }),
                  flags & Int(O_ACCMODE) != Int(O_RDONLY) else { continue }
            let command = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "?"
            found.append("\(pid) (\(command)) fd \(fd)")
        }
    }
    return found.isEmpty ? ["no process found (it may have closed it since)"] : found
}

/// Waits until something accepts TCP connections on 127.0.0.1:port.
func waitForTCPPort(_ port: Int, timeout: TimeInterval = 20, process: BackgroundProcess? = nil) throws {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if let process, !process.isRunning {
            throw PeerFailed(name: process.name, log: process.log)
        }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        close(fd)
        if ok { return }
        usleep(50_000)
    }
    throw PeerFailed(name: process?.name ?? "port \(port)", log: "nothing accepted connections on 127.0.0.1:\(port) within \(Int(timeout)) s\n" + (process?.log ?? ""))
}

/// Waits until a connection to 127.0.0.1:port receives an RFB banner ("RFB 003.xxx\n"); each
/// attempt waits up to 5 s for it. On failure the error carries the server's log and what listens.
func waitForRFBBanner(_ port: Int, timeout: TimeInterval, process: BackgroundProcess) throws {
    let deadline = Date().addingTimeInterval(timeout)
    var lastAttempt = "no attempt"
    while Date() < deadline {
        guard process.isRunning else { throw PeerFailed(name: process.name, log: process.log) }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var wait = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        if connected {
            var buffer = [UInt8](repeating: 0, count: 12)
            var got = 0
            while got < 12 {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, 12 - got) }
                if n <= 0 { break }
                got += n
            }
            if got == 12, buffer.starts(with: Array("RFB ".utf8)) { return }
            lastAttempt = got == 0 ? "connected, nothing received within 5 s or closed" : "received \(buffer.prefix(got))"
        } else {
            lastAttempt = "connect: \(String(cString: strerror(errno)))"
        }
        usleep(200_000)
    }
    let listeners = (try? run("/bin/sh", ["-c", "ss -ltnp 2>&1 || netstat -ltnp 2>&1"]))?.stdout ?? "(ss unavailable)"
    throw PeerFailed(name: process.name, log: "no RFB banner on 127.0.0.1:\(port) within \(Int(timeout)) s (last attempt: \(lastAttempt))\n"
                     + "--- its log ---\n\(process.log)\n--- listening sockets ---\n\(listeners)")
}

struct PeerFailed: Error, CustomStringConvertible {
    var name: String
    var log: String
    var description: String { "\(name) failed to start:\n\(log)" }
}

/// Hands out X display numbers unique within this test process, so tests can run in parallel.
/// X servers keep their lock files and sockets in the one /tmp every namespace shares, so test
/// processes running at once need disjoint numbers: `scripts/test` gives each of its concurrent
/// groups its own range through `FARCAST_DISPLAY_BASE`; without it the base is spread by PID so
/// two test processes on one machine rarely collide.
enum DisplayNumbers {
    private static let next = Mutex(
        ProcessInfo.processInfo.environment["FARCAST_DISPLAY_BASE"].flatMap { Int($0) } ?? 20 + Int(getpid() % 200) * 4)
    static func allocate() -> Int {
        next.withLock { n in
            while FileManager.default.fileExists(atPath: "/tmp/.X\(n)-lock") || FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(n)") { n += 1 }
            defer { n += 1 }
            return n
        }
    }
}

/// A private temporary folder removed when the value goes away.
final class TemporaryFolder: Sendable {
    let path: String
    init() throws {
        path = NSTemporaryDirectory() + "farcast-it-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}
