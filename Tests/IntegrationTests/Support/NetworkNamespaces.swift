import Foundation
import Testing

/// What the tunnel tests need from the machine: /dev/net/tun, CAP_NET_ADMIN, and a network
/// namespace of their own (they create devices, addresses and routes; none may touch the host's
/// interfaces). A missing piece fails the test with what to do about it.
struct TunnelPrerequisiteMissing: Error, CustomStringConvertible {
    var description: String
}

func requireTunnelPrerequisites() throws {
    guard FileManager.default.fileExists(atPath: "/dev/net/tun") else {
        throw TunnelPrerequisiteMissing(description: "/dev/net/tun is missing: load the tun module (modprobe tun) or, in a container, pass the device in (--device /dev/net/tun)")
    }
    // The file's mode decides who may open it, whatever the capabilities (Debian ships 0666;
    // some systems make it root-only).
    let probe = open("/dev/net/tun", O_RDWR | O_CLOEXEC)
    guard probe >= 0 else {
        throw TunnelPrerequisiteMissing(description: "/dev/net/tun cannot be opened (\(String(cString: strerror(errno)))): run the integration tests as root inside `unshare -n` (scripts/test does)")
    }
    close(probe)
    // CapEff in /proc/self/status; CAP_NET_ADMIN is bit 12.
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let capEff = status.split(separator: "\n").first { $0.hasPrefix("CapEff:") }
        .flatMap { UInt64($0.split(separator: "\t").last.map(String.init) ?? "", radix: 16) } ?? 0
    guard capEff & (1 << 12) != 0 else {
        throw TunnelPrerequisiteMissing(description: "CAP_NET_ADMIN is missing: run the integration tests as root inside `unshare -n` (scripts/test does)")
    }
    guard isInPrivateNetworkNamespace() else {
        throw TunnelPrerequisiteMissing(description: "these tests create devices and routes and must run in a network namespace of their own: run them inside `unshare -n` (scripts/test does), never in the host's")
    }
}

/// Whether this process's network namespace differs from PID 1's (the host's).
func isInPrivateNetworkNamespace() -> Bool {
    guard let mine = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/net") else { return false }
    guard let host = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/1/ns/net") else {
        // PID 1's namespace is unreadable only from inside a PID namespace or without root;
        // then require the marker scripts/test sets.
        return ProcessInfo.processInfo.environment["FARCAST_REQUIRE_NETNS"] == "1"
    }
    return mine != host
}

/// A network namespace created for one test: a `sleep` holder started with `unshare -n` keeps it
/// alive; commands run in it through `nsenter`. Everything in it (veth ends, TUN devices)
/// disappears with the holder.
final class NetworkNamespace: @unchecked Sendable {
    // @unchecked: `holder` is only touched in init and deinit, which never overlap.
    private let holder: Process
    let name: String

    var pid: Int32 { holder.processIdentifier }

    init(_ name: String) throws {
        self.name = name
        holder = Process()
        holder.executableURL = URL(fileURLWithPath: try requireExecutable("unshare", package: "util-linux"))
        holder.arguments = ["-n", "--", "sleep", "3600"]
        holder.standardOutput = FileHandle.nullDevice
        holder.standardError = FileHandle.nullDevice
        try holder.run()
        // unshare execs sleep once the namespace exists; wait until the pid's namespace differs.
        let mine = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/ns/net")
        for _ in 0..<200 {
            if let theirs = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(holder.processIdentifier)/ns/net"),
               theirs != mine { break }
            usleep(10_000)
        }
        try check(["ip", "link", "set", "lo", "up"])
    }

    deinit {
        // SIGKILL: the test runner's children may inherit a blocked or ignored SIGTERM.
        kill(holder.processIdentifier, SIGKILL)
        holder.waitUntilExit()
    }

    /// The argument vector that runs `arguments` inside this namespace.
    func command(_ arguments: [String]) throws -> (String, [String]) {
        (try requireExecutable("nsenter", package: "util-linux"), ["-t", "\(pid)", "-n", "--"] + arguments)
    }

    /// Runs a command in the namespace to completion.
    @discardableResult
    func run(_ arguments: [String], timeout: TimeInterval = 60) throws -> ProcessResult {
        let (nsenter, args) = try command(arguments)
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = (environment["PATH"] ?? "/usr/bin:/bin") + ":/usr/sbin:/sbin"
        return try Tests.run(nsenter, args, environment: environment, timeout: timeout)
    }

    /// Runs a command that must succeed.
    @discardableResult
    func check(_ arguments: [String], timeout: TimeInterval = 60) throws -> String {
        let result = try run(arguments, timeout: timeout)
        guard result.status == 0 else {
            throw CommandFailed(command: arguments.joined(separator: " "), status: result.status, stderr: result.stderr)
        }
        return result.stdout
    }

    /// Starts a long-running command in the namespace.
    func start(_ arguments: [String], logName: String) throws -> BackgroundProcess {
        let (nsenter, args) = try command(arguments)
        return try BackgroundProcess(nsenter, args, logName: logName)
    }

    /// Joins two namespaces with a veth pair and addresses it.
    static func link(_ a: NetworkNamespace, _ aAddress: String, _ b: NetworkNamespace, _ bAddress: String, mtu: Int) throws {
        let ip = try requireExecutable("ip", package: "iproute2")
        let result = try Tests.run(ip, ["link", "add", "veth-a", "netns", "\(a.pid)", "mtu", "\(mtu)", "type", "veth",
                                        "peer", "name", "veth-b", "netns", "\(b.pid)", "mtu", "\(mtu)"])
        guard result.status == 0 else { throw CommandFailed(command: "ip link add veth", status: result.status, stderr: result.stderr) }
        try a.check(["ip", "addr", "add", aAddress, "dev", "veth-a"])
        try b.check(["ip", "addr", "add", bAddress, "dev", "veth-b"])
        try a.check(["ip", "link", "set", "veth-a", "up"])
        try b.check(["ip", "link", "set", "veth-b", "up"])
    }
}

/// `Tests.run` names the process runner unambiguously inside types that have a `run`.
enum Tests {
    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                    stdin: Data? = nil, timeout: TimeInterval = 60) throws -> ProcessResult {
        try IntegrationTests.run(executable, arguments, environment: environment, stdin: stdin, timeout: timeout)
    }
}

struct CommandFailed: Error, CustomStringConvertible {
    var command: String
    var status: Int32
    var stderr: String
    var description: String { "`\(command)` exited \(status): \(stderr)" }
}

/// Waits until `condition` holds, polling; false when `timeout` passed first.
func eventually(timeout: TimeInterval = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if try condition() { return true }
        usleep(50_000)
    }
    return try condition()
}

/// `ip -j` output for the current namespace, parsed.
func ipJSON(_ arguments: [String], in namespace: NetworkNamespace? = nil) throws -> [[String: Any]] {
    let result: ProcessResult
    if let namespace {
        result = try namespace.run(["ip", "-j"] + arguments)
    } else {
        result = try Tests.run(try requireExecutable("ip", package: "iproute2"), ["-j"] + arguments)
    }
    guard result.status == 0 else { throw CommandFailed(command: "ip -j " + arguments.joined(separator: " "), status: result.status, stderr: result.stderr) }
    let text = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    if text.isEmpty { return [] }
    return (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]]) ?? []
}
