import Foundation
import Synchronization

/// A private mDNS responder for the discovery tests: a D-Bus system bus of our own and
/// avahi-daemon on it, serving only the loopback interface of the test namespace.
///
/// - The bus listens on a unix socket at a path fixed for this test process
///   (`DBUS_SYSTEM_BUS_ADDRESS`, set before the first dns_sd call): libdbus reads the variable
///   once per process, so every test uses the same address and starts its own bus there.
/// - avahi-daemon keeps its pid file and socket in /run/avahi-daemon, a path built into it. It
///   runs in a mount namespace of its own with a tmpfs over that folder, so it never meets a
///   system avahi-daemon's files. `unshare --kill-child` stays the child: it forks
///   avahi-daemon, waits for it, and takes it along if it is killed itself.
/// - mDNS on loopback: `lo` has no MULTICAST flag by default, and python-zeroconf (inside
///   aiosendspin) joins the group on the interface of the default route and advertises the
///   source address of the route to the internet. In the test namespace, which has nothing but
///   `lo`, the flag is set and a default route points at `lo`; outside one this refuses to run.
final class AvahiResponder: @unchecked Sendable {
    // @unchecked: the processes are set in init and only stopped afterwards.
    static let busFolder = NSTemporaryDirectory() + "farcast-mdns-\(getpid())"
    static let busAddress = "unix:path=\(busFolder)/system_bus_socket"
    private static let prepared = Mutex(false)

    private var dbus: BackgroundProcess?
    private var avahi: BackgroundProcess?

    /// Makes the namespace's loopback carry mDNS and points this process's dns_sd at the bus.
    static func prepareProcess() throws {
        try prepared.withLock { done in
            guard !done else { return }
            guard SendspinServer.onlyLoopback() else {
                throw PeerFailed(name: "mDNS test setup", log: "refusing to change the network outside a private network namespace; run the integration tests with scripts/test (it uses unshare -n)")
            }
            let ip = try requireExecutable("ip", package: "iproute2")
            for arguments in [["link", "set", "lo", "multicast", "on"], ["route", "replace", "default", "dev", "lo", "src", "127.0.0.1"]] {
                let result = try run(ip, arguments, timeout: 10)
                guard result.status == 0 else { throw PeerFailed(name: "ip \(arguments.joined(separator: " "))", log: result.stderr) }
            }
            setenv("DBUS_SYSTEM_BUS_ADDRESS", busAddress, 1)
            setenv("AVAHI_COMPAT_NOWARN", "1", 1)
            done = true
        }
    }

    /// The environment for avahi's command-line tools.
    static var toolEnvironment: [String: String] {
        ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": busAddress]
    }

    /// Starts the bus and, unless `daemon` is false, avahi-daemon on it.
    init(daemon: Bool = true) throws {
        let dbusDaemon = try requireExecutable("dbus-daemon", package: "dbus")
        let avahiDaemon = try requireExecutable("avahi-daemon", package: "avahi-daemon")
        _ = try requireExecutable("avahi-browse", package: "avahi-utils")
        let unshare = try requireExecutable("unshare", package: "util-linux")
        try Self.prepareProcess()

        let folder = Self.busFolder
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let socket = "\(folder)/system_bus_socket"
        try """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>system</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow user="*"/>
                <allow own="*"/>
                <allow send_destination="*"/>
                <allow receive_sender="*"/>
              </policy>
            </busconfig>
            """.write(toFile: "\(folder)/bus.conf", atomically: true, encoding: .utf8)
        try """
            [server]
            use-ipv4=yes
            use-ipv6=no
            allow-interfaces=lo
            enable-dbus=yes
            ratelimit-interval-usec=1000000
            ratelimit-burst=1000
            [wide-area]
            enable-wide-area=no
            [publish]
            publish-hinfo=no
            publish-workstation=no
            """.write(toFile: "\(folder)/avahi-daemon.conf", atomically: true, encoding: .utf8)

        dbus = try BackgroundProcess(dbusDaemon, ["--config-file=\(folder)/bus.conf", "--nofork", "--nopidfile"],
                                     environment: ["PATH": "/usr/bin:/bin"], logName: "dbus-daemon")
        try Self.waitUntil("the D-Bus socket \(socket) exists", process: dbus!) { FileManager.default.fileExists(atPath: socket) }
        guard daemon else { return }

        let inner = "mkdir -p /run/avahi-daemon && mount -t tmpfs -o mode=0755 tmpfs /run/avahi-daemon && exec \(avahiDaemon) -f \(folder)/avahi-daemon.conf --no-drop-root --no-chroot --no-rlimits --no-proc-title"
        avahi = try BackgroundProcess(unshare, ["--mount", "--kill-child", "/bin/sh", "-c", inner],
                                      environment: Self.toolEnvironment, logName: "avahi-daemon")
        try Self.waitUntil("avahi-daemon reports \"Server startup complete\"", process: avahi!) {
            self.avahi!.log.contains("Server startup complete")
        }
    }

    private static func waitUntil(_ what: String, process: BackgroundProcess, timeout: TimeInterval = 15, _ condition: () -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            guard process.isRunning else { throw PeerFailed(name: process.name, log: process.log) }
            guard Date() < deadline else { throw PeerFailed(name: process.name, log: "not ready within \(Int(timeout)) s: \(what)\n" + process.log) }
            usleep(20_000)
        }
    }

    var logs: String { "avahi-daemon:\n\(avahi?.log ?? "(not started)")\ndbus-daemon:\n\(dbus?.log ?? "")" }

    /// One resolved line of `avahi-browse -p`: `=;iface;proto;name;type;domain;host;address;port;txt`.
    struct BrowsedService: Equatable {
        var name: String
        var host: String
        var address: String
        var port: Int
        /// The TXT strings, e.g. `path=/sendspin`.
        var txt: [String]
    }

    /// What `avahi-browse -rpt TYPE` resolves (one pass through the cache and a query).
    func browse(_ type: String) throws -> [BrowsedService] {
        let avahiBrowse = try requireExecutable("avahi-browse", package: "avahi-utils")
        let result = try run(avahiBrowse, ["-rpt", type], environment: Self.toolEnvironment, timeout: 20)
        guard result.status == 0 else { throw PeerFailed(name: "avahi-browse -rpt \(type)", log: result.stderr + "\n" + logs) }
        return result.stdout.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: ";", omittingEmptySubsequences: false).map(String.init)
            guard fields.count >= 10, fields[0] == "=", let port = Int(fields[8]) else { return nil }
            // TXT strings come quoted and space-separated: "a=b" "c=d".
            let txt = fields[9...].joined(separator: ";").split(separator: "\" \"").map {
                $0.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            }
            return BrowsedService(name: fields[3], host: fields[6], address: fields[7], port: port, txt: txt)
        }
    }

    /// Browses again until `condition` holds for the result or `timeout` passes; returns the last result.
    func browse(_ type: String, timeout: TimeInterval = 10, until condition: ([BrowsedService]) -> Bool) throws -> [BrowsedService] {
        let deadline = Date().addingTimeInterval(timeout)
        var services = try browse(type)
        while !condition(services) && Date() < deadline {
            usleep(200_000)
            services = try browse(type)
        }
        return services
    }

    /// avahi-daemon gets SIGTERM directly (unshare --kill-child then exits with it); dbus-daemon
    /// has nothing to clean up.
    func stop() {
        if let avahi, avahi.isRunning {
            let parent = avahi.pid
            let children = (try? String(contentsOfFile: "/proc/\(parent)/task/\(parent)/children", encoding: .utf8)) ?? ""
            for child in children.split(separator: " ").compactMap({ Int32($0) }) { kill(child, SIGTERM) }
        }
        avahi?.stop()
        dbus?.stop()
        try? FileManager.default.removeItem(atPath: Self.busFolder)
    }

    deinit { stop() }
}
