import ArgumentParser
import Foundation
import Tunnel
import WireGuard

#if canImport(Glibc)
import Glibc
#endif

/// `farcast wg`: a WireGuard interface from a wg-quick file (`up`), and keys as `wg genkey`,
/// `wg pubkey` and `wg genpsk` make them (same formats, so either tool reads the other's files).
struct WireGuardCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wg",
        abstract: "WireGuard: bring an interface up from a wg-quick file; make keys as Debian's wg does.",
        discussion: """
            Keys are 32 bytes written as 44 characters of base64. Private and preshared keys are \
            secrets: write them to files only you can read (umask 077), never to a command line.

            Example: umask 077; farcast wg genkey | tee private.key | farcast wg pubkey > public.key
            """,
        subcommands: [UpCommand.self, ShowCommand.self, GenerateKey.self, PublicKeyCommand.self, GeneratePresharedKey.self]
    )

    #if os(Linux)
    typealias UpCommand = WireGuardUpCommand
    typealias ShowCommand = WireGuardShowCommand
    #else
    struct UpCommand: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "up", abstract: "Bring an interface up (Linux builds only).")
    }
    struct ShowCommand: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Show running interfaces (Linux builds only).")
    }
    #endif

    struct GenerateKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "genkey",
            abstract: "Print a new private key (base64) on stdout.")

        func run() throws {
            warnIfStdoutIsReadableByOthers()
            print(PrivateKey().base64)
        }
    }

    struct PublicKeyCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pubkey",
            abstract: "Read a private key (base64) on stdin; print its public key.")

        func run() throws {
            let input = FileHandle.standardInput.readData(ofLength: 4096)
            let text = String(decoding: input, as: UTF8.self)
            do {
                print(try PrivateKey(base64: text).publicKey.base64)
            } catch {
                throw CommandFailure(message: "\(error) on stdin (give it a key from `farcast wg genkey` or `wg genkey`)")
            }
        }
    }

    struct GeneratePresharedKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "genpsk",
            abstract: "Print a new preshared key (base64) on stdout.")

        func run() throws {
            warnIfStdoutIsReadableByOthers()
            print(PresharedKey.random().base64)
        }
    }
}

/// A secret about to be written to a regular file others may read gets a note on stderr (the
/// key is still written: the user chose the file).
private func warnIfStdoutIsReadableByOthers() {
    var status = stat()
    guard fstat(STDOUT_FILENO, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_mode & 0o077 != 0 else { return }
    FileHandle.standardError.write(Data("farcast: note: writing a secret key to a file others can read; set `umask 077` first\n".utf8))
}

#if os(Linux)
struct WireGuardUpCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "up",
        abstract: "Bring a WireGuard interface up from a wg-quick configuration file and run it until stopped.",
        discussion: """
            CONFIG is a file path, or a NAME for /etc/wireguard/NAME.conf (as wg-quick takes it). The \
            interface is named after the file (wg0.conf: wg0) unless --name says otherwise. It runs in \
            the foreground; SIGINT or SIGTERM (or --duration) takes it down and removes the device.

            Read from the file: [Interface] PrivateKey, Address, ListenPort, MTU (default 1420); \
            [Peer] PublicKey, PresharedKey, AllowedIPs (each routed into the interface), Endpoint, \
            PersistentKeepalive. DNS, Table, FwMark and the Pre/Post Up/Down hooks are not applied \
            (a note says so). The file holds a private key: it is refused if others can read it.

            Needs CAP_NET_ADMIN (root, or a network namespace you own) and /dev/net/tun.

            Example:
              farcast wg up wg0                 # /etc/wireguard/wg0.conf
              farcast wg up ./office.conf --name office0
            """
    )

    @Argument(help: ArgumentHelp("A wg-quick file, or NAME for /etc/wireguard/NAME.conf.", valueName: "config"))
    var config: String

    @Option(help: ArgumentHelp("The interface name (default: the file's name without .conf), at most 15 bytes.", valueName: "ifname"))
    var name: String?

    @Option(help: ArgumentHelp("Take the interface down after this many seconds (default: run until SIGINT or SIGTERM).", valueName: "seconds"))
    var duration: Double?

    @Flag(name: .customLong("no-offload"),
          help: "Move packets one per system call: no TUN super-packets, no UDP GSO/GRO (slower; for comparison, or a kernel that misbehaves with them).")
    var noOffload = false

    @Option(help: ArgumentHelp("TUN queues, each read by a thread of its own, so what leaves is encrypted on that many cores (1–16).", valueName: "n"))
    var queues: Int = 1

    /// Tests only: every protocol timer divided by this (rekeying after 120 s / N…), so timer
    /// rules can be watched against a real peer in seconds. Never for a real tunnel.
    @Option(name: .customLong("test-timer-scale"), help: ArgumentHelp(visibility: .private))
    var testTimerScale: Int = 1

    /// Tests only: handshake messages a second beyond which a cookie is required (0: always),
    /// to watch a real peer answer our cookie replies. Never for a real tunnel.
    @Option(name: .customLong("test-load-threshold"), help: ArgumentHelp(visibility: .private))
    var testLoadThreshold: Int = 1000

    @OptionGroup var global: GlobalOptions

    /// The file CONFIG names.
    var path: String {
        if config.contains("/") || config.hasSuffix(".conf") || FileManager.default.fileExists(atPath: config) { return config }
        return "/etc/wireguard/\(config).conf"
    }

    var interfaceName: String {
        name ?? String(URL(fileURLWithPath: path).lastPathComponent.dropLast(path.hasSuffix(".conf") ? 5 : 0))
    }

    func validate() throws {
        if let duration, !(duration > 0 && duration <= 100_000_000) { throw ValidationError("--duration must be a positive number of seconds") }
        guard (1...1000).contains(testTimerScale) else { throw ValidationError("--test-timer-scale must be 1–1000") }
        guard (1...16).contains(queues) else { throw ValidationError("--queues must be 1–16") }
        guard testLoadThreshold >= 0 else { throw ValidationError("--test-load-threshold must be 0 or more") }
        do { try TunDevice.validate(name: interfaceName) } catch {
            throw ValidationError("the interface name: \(describe(error)); choose one with --name")
        }
    }

    struct Report: Codable {
        var interface: String
        var publicKey: String
        var listenPort: UInt16
        var peers: [WireGuardPeerReport]
    }

    func run() async throws {
        try await reportingFailures {
            let latch = StopLatch()
            let signals = SignalWatcher { _ in latch.stop(signalled: true) }
            defer { signals.cancel() }
            let configuration = try readConfiguration()
            let quiet = global.quiet
            for setting in configuration.ignored where !quiet {
                FileHandleOutput.stderr("farcast: note: \(path): \(setting) is not applied by farcast wg up\n")
            }
            let interface: WireGuardInterface
            do {
                interface = try WireGuardInterface(configuration: configuration, name: interfaceName,
                                                   timers: WireGuardTimers.standard.scaled(by: testTimerScale), offload: !noOffload,
                                                   queues: queues, loadThreshold: testLoadThreshold) { line in
                    if !quiet { FileHandleOutput.stderr("farcast: \(line)\n") }
                }
            } catch {
                throw CommandFailure(message: "\(interfaceName): \(describe(error))")
            }
            defer { interface.close() }
            if !quiet {
                FileHandleOutput.stderr("\(interface.name) is up: public key \(interface.publicKey), UDP port \(interface.listenPort), \(configuration.peers.count) peer(s), offload \(interface.offload ? "on" : "off"), \(queues) queue(s); SIGINT or SIGTERM takes it down\n")
            }
            await latch.wait(duration: duration)
            let peers = interface.peers
            interface.close()
            if let failure = interface.failed { throw CommandFailure(message: failure) }
            let report = Report(interface: interface.name, publicKey: interface.publicKey.base64, listenPort: interface.listenPort,
                                peers: peers.map { WireGuardPeerReport($0.status, lastHandshake: $0.lastHandshakeDate) })
            if global.json {
                try printJSON(report)
            } else if !quiet {
                for peer in report.peers {
                    print("peer \(peer.publicKey): received \(peer.receivedBytes) bytes, sent \(peer.sentBytes)"
                          + (peer.latestHandshake == nil ? ", no handshake" : ""))
                }
            }
        }
    }

    /// Reads and parses the file; refuses one others can read (it holds a private key).
    private func readConfiguration() throws -> WireGuardConfiguration {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw CommandFailure(message: "\(path): \(String(cString: strerror(errno)))", exitCode: 2)
        }
        if status.st_mode & 0o077 != 0 {
            throw CommandFailure(message: "\(path) can be read by others and holds a private key: chmod 600 \(path)", exitCode: 1)
        }
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw CommandFailure(message: "\(path): \(describe(error))", exitCode: 2)
        }
        do {
            return try WireGuardConfiguration(parsing: text)
        } catch {
            throw CommandFailure(message: "\(path): \(error)", exitCode: 2)
        }
    }
}
#endif

#if os(Linux)
/// A peer as `wg up --json` and `wg show --json` report it (never a key but the public one).
struct WireGuardPeerReport: Codable {
    var publicKey: String
    var presharedKey: Bool
    var endpoint: String?
    var allowedIps: [String]
    /// ISO 8601, UTC; absent when no handshake completed.
    var latestHandshake: String?
    var receivedBytes: UInt64
    var sentBytes: UInt64
    var persistentKeepalive: Int?

    init(_ status: PeerStatus, lastHandshake: Date?) {
        publicKey = status.publicKey.base64
        presharedKey = status.hasPresharedKey
        endpoint = status.endpoint?.description
        allowedIps = status.allowedIPs.map(\.description)
        latestHandshake = lastHandshake.map { $0.formatted(.iso8601) }
        receivedBytes = status.receivedBytes
        sentBytes = status.sentBytes
        persistentKeepalive = status.persistentKeepalive.map { Int($0.components.seconds) }
    }

    init(_ peer: UAPIInterfaceState.Peer) {
        publicKey = peer.publicKey.base64
        presharedKey = peer.hasPresharedKey
        endpoint = peer.endpoint
        allowedIps = peer.allowedIPs
        latestHandshake = peer.lastHandshake.map { Date(timeIntervalSince1970: $0).formatted(.iso8601) }
        receivedBytes = peer.receivedBytes
        sentBytes = peer.sentBytes
        persistentKeepalive = peer.persistentKeepalive == 0 ? nil : peer.persistentKeepalive
    }
}

struct WireGuardShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show running WireGuard interfaces (farcast's or wireguard-go's): peers, endpoints, handshakes, transfer.",
        discussion: """
            Asks each interface over its socket in /var/run/wireguard, as `wg show` does for userspace \
            interfaces (kernel WireGuard interfaces have none and are not listed). Private and preshared \
            keys are never shown.

            Example: farcast wg show wg0 --json
            """
    )

    @Argument(help: ArgumentHelp("The interface (default: every one running).", valueName: "name"))
    var name: String?

    @OptionGroup var global: GlobalOptions

    struct Report: Codable {
        var interface: String
        var publicKey: String?
        var listenPort: UInt16
        var peers: [WireGuardPeerReport]
    }

    func run() throws {
        let names = name.map { [$0] } ?? UAPIClient.interfaces()
        var reports: [Report] = []
        for interface in names {
            let state: UAPIInterfaceState
            do { state = try UAPIClient.get(interface) } catch {
                // With no name given, a stale socket is skipped; a named interface must answer.
                if name == nil { continue }
                throw CommandFailure(message: "\(error.reason)")
            }
            reports.append(Report(
                interface: interface, publicKey: state.publicKey?.base64, listenPort: state.listenPort,
                peers: state.peers.map(WireGuardPeerReport.init)))
        }
        if global.json {
            try printJSONList(reports)
            return
        }
        if reports.isEmpty && !global.quiet {
            FileHandleOutput.stderr("no userspace WireGuard interface is running (none has a socket in \(UAPIClient.directory))\n")
        }
        for (i, report) in reports.enumerated() {
            if i > 0 { print("") }
            print("interface: \(report.interface)")
            if let key = report.publicKey { print("  public key: \(key)") }
            print("  private key: (hidden)")
            print("  listening port: \(report.listenPort)")
            for peer in report.peers {
                print("")
                print("peer: \(peer.publicKey)")
                if peer.presharedKey { print("  preshared key: (hidden)") }
                if let endpoint = peer.endpoint { print("  endpoint: \(endpoint)") }
                print("  allowed ips: \(peer.allowedIps.isEmpty ? "(none)" : peer.allowedIps.joined(separator: ", "))")
                if let handshake = peer.latestHandshake { print("  latest handshake: \(handshake)") }
                if peer.receivedBytes > 0 || peer.sentBytes > 0 {
                    print("  transfer: \(Self.bytes(peer.receivedBytes)) received, \(Self.bytes(peer.sentBytes)) sent")
                }
                if let seconds = peer.persistentKeepalive { print("  persistent keepalive: every \(seconds) seconds") }
            }
        }
    }

    static func bytes(_ count: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count), unit = 0
        while value >= 1024 && unit < units.count - 1 { value /= 1024; unit += 1 }
        return unit == 0 ? "\(count) B" : String(format: "%.2f %@", value, units[unit])
    }
}
#endif
