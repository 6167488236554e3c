import ArgumentParser
import FarcastSupport
import Foundation
import Synchronization
import Tunnel

#if canImport(Glibc)
import Glibc
#endif

struct TunCommand: AsyncParsableCommand {
    #if os(Linux)
    static let configuration = CommandConfiguration(
        commandName: "tun",
        abstract: "TUN/TAP devices: hold one up, answer pings through one, or pipe one over UDP.",
        discussion: "Needs CAP_NET_ADMIN (root, or a network namespace you own) and /dev/net/tun. Devices are configured over rtnetlink and removed when the command ends.",
        subcommands: [TunUpCommand.self, TunEchoCommand.self, TunPipeCommand.self]
    )
    #else
    // The Tunnel library's Apple side (utun) is for apps; the command line's verbs use rtnetlink
    // and Linux UDP offloads.
    static let configuration = CommandConfiguration(
        commandName: "tun",
        abstract: "TUN/TAP devices (the tun verbs exist in Linux builds only)."
    )
    #endif
}

#if os(Linux)
/// What every `tun` verb takes: the device and how to configure it.
struct TunDeviceOptions: ParsableArguments {
    @Argument(help: ArgumentHelp("The interface name, at most 15 bytes (a %d is numbered by the kernel).", valueName: "name"))
    var name: String

    @Option(name: .customLong("address"), help: ArgumentHelp("An address with its prefix length, e.g. 10.0.0.1/24 or fd00::1/64; repeat for more. The kernel routes the prefix into the device.", valueName: "cidr"))
    var addresses: [String] = []

    @Option(name: .customLong("route"), help: ArgumentHelp("A further prefix to route into the device, e.g. 10.9.0.0/16; repeatable.", valueName: "cidr"))
    var routes: [String] = []

    @Option(help: ArgumentHelp("The device MTU (68–65535; at least 1280 with an IPv6 address).", valueName: "bytes"))
    var mtu: Int?

    @Option(help: ArgumentHelp("Descriptors (queues) for the device; more than 1 makes it multi-queue, one reader per queue.", valueName: "n"))
    var queues: Int = 1

    @Flag(help: "Offload: virtio-net header with checksum, TSO and USO, so the kernel hands over 64 KiB super-packets (split here) and takes coalesced ones.")
    var offload = false

    @Option(help: ArgumentHelp("Stop after this many seconds (default: run until SIGINT or SIGTERM).", valueName: "seconds"))
    var duration: Double?

    @Option(name: .customLong("netlink-timeout"), help: ArgumentHelp("How long to wait for the kernel to answer each configuration request.", valueName: "seconds"))
    var netlinkTimeout: Double = 5

    /// Checks everything that needs no kernel (exit code 2 on a mistake).
    func parsed(tap: Bool = false) throws -> (TunDevice.Configuration, [IPPrefix], [IPPrefix]) {
        do { try TunDevice.validate(name: name) } catch { throw ValidationError("\(describe(error))") }
        var prefixes: [IPPrefix] = []
        for text in addresses {
            // Without a prefix the kernel would take a /32 (or /128) and route nothing into the
            // device: every ping to a neighbour would fail with "Network is unreachable".
            guard text.contains("/") else {
                let example = text.contains(":") ? "\(text)/64" : "\(text)/24"
                throw ValidationError("--address \(text) needs a prefix length, e.g. \(example): the kernel routes that prefix into the device")
            }
            do { prefixes.append(try IPPrefix(text)) } catch { throw ValidationError("--address: \(describe(error))") }
        }
        var extra: [IPPrefix] = []
        for text in routes {
            do { extra.append(try IPPrefix(text)) } catch { throw ValidationError("--route: \(describe(error))") }
        }
        if let mtu {
            guard (68...65535).contains(mtu) else { throw ValidationError("--mtu must be 68–65535, not \(mtu)") }
            if mtu < 1280 && prefixes.contains(where: { !$0.address.isIPv4 }) {
                throw ValidationError("--mtu \(mtu) is below IPv6's minimum of 1280 but an IPv6 address was given")
            }
        }
        guard (1...64).contains(queues) else { throw ValidationError("--queues must be 1–64, not \(queues)") }
        // Upper bounds keep the conversions to whole milliseconds finite.
        if let duration, !(duration > 0 && duration <= 100_000_000) { throw ValidationError("--duration must be a positive number of seconds") }
        guard netlinkTimeout > 0 && netlinkTimeout <= 3600 else { throw ValidationError("--netlink-timeout must be within 0…3600 seconds") }
        let configuration = TunDevice.Configuration(name: name, layer: tap ? .tap : .tun, queues: queues, offload: offload)
        return (configuration, prefixes, extra)
    }

    /// Creates and configures the device over rtnetlink.
    func open(tap: Bool = false) throws -> TunDevice {
        let (configuration, prefixes, extra) = try parsed(tap: tap)
        let device: TunDevice
        do { device = try TunDevice(configuration) } catch { throw CommandFailure(message: "\(describe(error))") }
        do {
            let netlink = try RouteNetlink(timeout: .milliseconds(Int(netlinkTimeout * 1000)))
            let index = device.interfaceIndex
            if let mtu { try netlink.setMTU(mtu, interface: index, interfaceName: device.name) }
            for prefix in prefixes { try netlink.addAddress(prefix, interface: index, interfaceName: device.name) }
            try netlink.setUp(true, interface: index, interfaceName: device.name)
            for route in extra { try netlink.addRoute(route, interface: index, interfaceName: device.name) }
        } catch {
            device.close()
            throw CommandFailure(message: "\(describe(error))")
        }
        return device
    }
}

/// Waits for the first of: SIGINT/SIGTERM, the duration, or a failure reported by a worker.
final class StopLatch: Sendable {
    private struct State {
        var waiter: CheckedContinuation<Void, Never>?
        var stopped = false
        var failure: String?
        var signalled = false
    }
    private let state = Mutex(State())

    /// Stops everything; `failure` (the first one wins) makes the command fail.
    func stop(failure: String? = nil, signalled: Bool = false) {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if s.failure == nil, let failure { s.failure = failure }
            if signalled { s.signalled = true }
            guard !s.stopped else { return nil }
            s.stopped = true
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    var failure: String? { state.withLock { $0.failure } }

    func wait(duration: Double?) async {
        let timer = duration.map { seconds in
            Task { [self] in
                try? await Task.sleep(for: .milliseconds(Int(seconds * 1000)))
                stop()
            }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { s -> Bool in
                if s.stopped { return true }
                s.waiter = continuation
                return false
            }
            if resumeNow { continuation.resume() }
        }
        timer?.cancel()
    }
}

struct TunDeviceSummary: Codable {
    var name: String
    var index: Int32
    var layer: String
    var queues: Int
    var mtu: Int?
    var addresses: [String]
    var offload: [String]
}

extension TunDevice {
    func summary(_ options: TunDeviceOptions) -> TunDeviceSummary {
        TunDeviceSummary(name: name, index: interfaceIndex, layer: layer.rawValue, queues: queues.count, mtu: options.mtu,
                         addresses: options.addresses, offload: offload.names)
    }
}

// MARK: - up

struct TunUpCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "up",
        abstract: "Create a TUN (or TAP) device, configure it, and hold it up until stopped.",
        discussion: """
            The device is removed when the command ends (SIGINT or SIGTERM, or --duration). Nothing reads its packets; use it to test configuration, or (made with --queues 2 or more) to attach further queues from another program.

            Example:
              farcast tun up tun7 --address 10.7.0.1/24 --address fd07::1/64 --mtu 1420
            """
    )

    @OptionGroup var device: TunDeviceOptions
    @Flag(help: "A TAP (Ethernet) device instead of TUN.")
    var tap = false
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            // Watch for SIGINT/SIGTERM before the device exists: a signal during its
            // configuration then ends the command the graceful way (exit 0) as soon as it is up.
            let latch = StopLatch()
            let signals = SignalWatcher { _ in latch.stop(signalled: true) }
            defer { signals.cancel() }
            let tun = try device.open(tap: tap)
            defer { tun.close() }
            if !global.quiet {
                FileHandleOutput.stderr("\(tun.name) is up (\(device.addresses.joined(separator: ", "))); SIGINT or SIGTERM removes it\n")
            }
            await latch.wait(duration: device.duration)
            // The device under `device`, as echo and pipe report it.
            if global.json { try printJSON(Report(device: tun.summary(device))) }
        }
    }

    struct Report: Codable {
        var device: TunDeviceSummary
    }
}

// MARK: - echo

struct TunEchoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "echo",
        abstract: "Create a TUN device and answer ICMP and ICMPv6 echo requests for every address routed into it.",
        discussion: """
            A ping to any address the device's prefixes route into it (other than the device's own addresses, which the kernel answers itself) is answered here, in userspace. Other packets are counted and dropped.

            Example:
              farcast tun echo tun8 --address 10.8.0.1/24 --address fd08::1/64 &
              ping -c 3 10.8.0.2 && ping -c 3 fd08::2
            """
    )

    @OptionGroup var device: TunDeviceOptions
    @OptionGroup var global: GlobalOptions

    struct Report: Codable {
        var device: TunDeviceSummary
        var echoRequestsAnswered: Int
        var otherPacketsIgnored: Int
    }

    func run() async throws {
        try await reportingFailures {
            // Watch for SIGINT/SIGTERM before the device exists: a signal during its
            // configuration then ends the command the graceful way (exit 0) as soon as it is up.
            let latch = StopLatch()
            let signals = SignalWatcher { _ in latch.stop(signalled: true) }
            defer { signals.cancel() }
            let tun = try device.open()
            defer { tun.close() }
            let answered = Atomic<Int>(0), ignored = Atomic<Int>(0)
            let workers = WorkerThreads()
            for (i, queue) in tun.queues.enumerated() {
                workers.start("tun-echo-\(i)") { [device] in
                    let slot = max(device.mtu ?? 1500, 1500)
                    let requests = PacketBatch(capacity: 64, slotSize: slot)
                    let replies = PacketBatch(capacity: 64, slotSize: slot)
                    do {
                        while true {
                            requests.removeAll()
                            replies.removeAll()
                            _ = try queue.readPackets(into: requests, timeout: nil)
                            for k in 0..<requests.count {
                                let length = requests.length(at: k)
                                if let n = EchoResponder.answer(requests[k]) {
                                    replies.append(copying: UnsafeRawBufferPointer(rebasing: requests[k][0..<min(n, length)]))
                                } else {
                                    ignored.add(1, ordering: .relaxed)
                                }
                            }
                            if !replies.isEmpty {
                                let outcome = try queue.writePackets(replies)
                                answered.add(outcome.written, ordering: .relaxed)
                            }
                        }
                    } catch TunnelError.interrupted {
                    } catch TunnelError.closed {
                    } catch {
                        latch.stop(failure: "\(tun.name) queue \(i): \(describe(error))")
                    }
                }
            }
            if !global.quiet {
                FileHandleOutput.stderr("\(tun.name) answers pings for \(device.addresses.joined(separator: ", ")); SIGINT or SIGTERM stops\n")
            }
            await latch.wait(duration: device.duration)
            tun.interrupt()
            workers.join()
            if let failure = latch.failure { throw CommandFailure(message: failure) }
            let report = Report(device: tun.summary(device), echoRequestsAnswered: answered.load(ordering: .relaxed),
                                otherPacketsIgnored: ignored.load(ordering: .relaxed))
            if global.json {
                try printJSON(report)
            } else if !global.quiet {
                print("answered \(report.echoRequestsAnswered) echo requests; ignored \(report.otherPacketsIgnored) other packets")
            }
        }
    }
}

// MARK: - pipe

struct TunPipeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pipe",
        abstract: "Create a TUN device and carry its packets over plain, UNENCRYPTED UDP to a peer running the same.",
        discussion: """
            For testing and benchmarks: every packet crosses the network in clear text, unauthenticated. Anyone on the path can read and inject traffic. (WireGuard on top of the same device code comes later.)

            Each queue i uses local UDP port LISTEN+i and sends to the peer's PORT+i, so both ends must use the same --queues. With --offload, super-packets from the kernel are split into MTU-sized packets (sent as UDP GSO runs), and packets from the peer are coalesced before they go to the device (--no-gro turns that off). With --tap the devices are TAP (Ethernet frames, ARP included, cross the pipe) on both ends.

            Example (two machines, or two network namespaces):
              farcast tun pipe tp0 --address 10.9.0.1/24 --listen 7000 --peer 192.0.2.2:7000
              farcast tun pipe tp0 --address 10.9.0.2/24 --listen 7000 --peer 192.0.2.1:7000
            """
    )

    @OptionGroup var device: TunDeviceOptions

    @Option(help: ArgumentHelp("The peer's UDP endpoint: ADDRESS:PORT, [IPv6]:PORT or HOSTNAME:PORT.", valueName: "host:port"))
    var peer: String

    @Option(help: ArgumentHelp("The local UDP port (queue i listens on PORT+i).", valueName: "port"))
    var listen: Int

    @Flag(name: .customLong("no-gro"), help: "Write packets from the peer one by one instead of coalescing them (needs --offload to matter).")
    var noGRO = false

    @Flag(help: "TAP (Ethernet) devices instead of TUN: frames cross the pipe, the peer must use --tap too.")
    var tap = false

    @Flag(name: .customLong("no-udp-offload"), help: "Send and receive one datagram per packet instead of UDP GSO/GRO runs.")
    var noUDPOffload = false

    @Option(help: ArgumentHelp("Packets per read or write call.", valueName: "n"))
    var batch: Int = 128

    @OptionGroup var global: GlobalOptions

    struct Report: Codable {
        var device: TunDeviceSummary
        var peer: String
        var listenPort: Int
        var encrypted: Bool
        var gro: Bool
        var udpSegmentationOffload: Bool
        var udpReceiveOffload: Bool
        var seconds: Double
        var packetsFromDevice: Int
        var superPacketsSplit: Int
        var packetsToDevice: Int
        var superPacketsWritten: Int
        var malformedDropped: Int
        var deviceWriteDropped: Int
        var datagramsSent: Int
        var datagramsReceived: Int
        var sendCalls: Int
        var receiveCalls: Int
        var udpDropped: Int
        /// Packets over the path's size answered with ICMP "fragmentation needed" / "packet too big".
        var tooBigAnswered: Int
        /// The same per queue, in queue order (the totals above are their sums).
        var perQueue: [QueueReport]

        struct QueueReport: Codable {
            var packetsFromDevice: Int
            var packetsToDevice: Int
            var datagramsSent: Int
            var datagramsReceived: Int
        }
    }

    func run() async throws {
        try await reportingFailures {
            let (_, prefixes, _) = try device.parsed(tap: tap)
            guard (1...65535).contains(listen), listen + device.queues - 1 <= 65535 else {
                throw ValidationError("--listen must be a UDP port within 1–65535, with queue i using PORT+i (\(device.queues) queue\(device.queues == 1 ? "" : "s"))")
            }
            guard (1...1024).contains(batch) else { throw ValidationError("--batch must be 1–1024") }
            // Each packet crosses in one UDP datagram, whose payload is at most 65,507 bytes; a
            // TAP frame adds its Ethernet header and up to two VLAN tags to the MTU.
            let frameOverhead = tap ? 22 : 0
            if let mtu = device.mtu, mtu + frameOverhead > 65507 {
                throw ValidationError("--mtu \(mtu) is too large for tun pipe: each packet travels in one UDP datagram of at most 65507 bytes, so the MTU can be at most \(65507 - frameOverhead)\(tap ? " with --tap" : "")")
            }
            let remote: UDPEndpoint
            do throws(UDPEndpoint.ResolveError) {
                remote = try UDPEndpoint.resolve(peer)
            } catch {
                guard case .unresolved = error else { throw ValidationError("--peer must be HOST:PORT ([IPv6]:PORT), not '\(peer)'") }
                throw CommandFailure(message: error.description)
            }
            guard Int(remote.port) + device.queues - 1 <= 65535 else {
                throw ValidationError("--peer's port plus \(device.queues - 1) (one port per queue) exceeds 65535")
            }
            FileHandleOutput.stderr("farcast: WARNING: tun pipe is UNENCRYPTED and UNAUTHENTICATED: packets cross the network in clear text and anyone on the path can read or inject them. Use it for tests and benchmarks only.\n")

            // The MTU that fits the path, as wg-quick derives WireGuard's: the MTU of the route to
            // the peer less what each packet gains on the way (outer IP and UDP headers, and the
            // Ethernet header of a TAP frame). A larger --mtu is kept, and packets over the path's
            // size get the "fragmentation needed" / "packet too big" answer (PacketTooBig) so the
            // sender's path MTU discovery finds the size, instead of a silent drop.
            let gained = (remote.address.isIPv4 ? 28 : 48) + (tap ? 14 : 0)
            let pathMTU = remote.pathMTU()
            let fits = pathMTU.map { $0 - gained }
            var options = device
            if options.mtu == nil, let fits {
                let floor = prefixes.contains { !$0.address.isIPv4 } ? 1280 : 576
                options.mtu = max(fits, floor)
            }
            if let fits, let pathMTU, let mtu = options.mtu, mtu > fits {
                FileHandleOutput.stderr("farcast: warning: the path to \(remote) carries \(pathMTU)-byte packets, so the device's MTU \(mtu) is more than fits (\(fits)); \(tap ? "larger frames are sent in fragments" : "larger packets get ICMP \"too big\" answers (IPv4 ones that allow fragmentation are sent in fragments)")\n")
            }

            // Watch for SIGINT/SIGTERM before the device exists: a signal during its
            // configuration then ends the command the graceful way (exit 0) as soon as it is up.
            let latch = StopLatch()
            let signals = SignalWatcher { _ in latch.stop(signalled: true) }
            defer { signals.cancel() }
            let tun = try options.open(tap: tap)
            defer { tun.close() }
            // A TAP frame is the MTU plus an Ethernet header and up to two VLAN tags.
            var pipeOptions = UDPPipe.Options(listenPort: UInt16(listen), peer: remote)
            pipeOptions.batch = batch
            pipeOptions.slotSize = max(options.mtu ?? 1500, 576) + frameOverhead
            pipeOptions.coalesce = device.offload && !noGRO
            pipeOptions.udpOffload = !noUDPOffload
            // Only a TUN device whose MTU is over what fits can hand over packets too big.
            pipeOptions.tooBigOver = fits.flatMap { fits in !tap && (options.mtu ?? 1500) > fits ? fits : nil }
            let pipe: UDPPipe
            do {
                pipe = try UDPPipe(device: tun, options: pipeOptions) { failure in
                    latch.stop(failure: failure.description)
                }
            } catch {
                throw CommandFailure(message: "\(describe(error))")
            }
            let sockets = pipe.sockets
            let useGRO = pipeOptions.coalesce
            let start = ContinuousClock.now
            if !global.quiet {
                let mtuNote = options.mtu.map { mtu in device.mtu == nil && pathMTU != nil ? "MTU \(mtu) (the path's \(pathMTU!) less \(gained))" : "MTU \(mtu)" } ?? "MTU 1500"
                FileHandleOutput.stderr("\(tun.name) piped to \(remote) from UDP port \(listen) (\(mtuNote), \(tun.queues.count) queue\(tun.queues.count == 1 ? "" : "s"), offload \(tun.offload), GRO \(useGRO ? "on" : "off"), UDP GSO \(sockets[0].segmentationOffload ? "on" : "off"), UDP GRO \(sockets[0].receiveOffload ? "on" : "off"))\n")
            }
            await latch.wait(duration: device.duration)
            let seconds = (ContinuousClock.now - start).inSeconds
            pipe.stop()
            if let failure = latch.failure { throw CommandFailure(message: failure) }
            let q = tun.queues.map(\.statistics)
            let u = sockets.map(\.statistics)
            let report = Report(
                device: tun.summary(options), peer: "\(remote)", listenPort: listen, encrypted: false, gro: useGRO,
                udpSegmentationOffload: sockets[0].segmentationOffload, udpReceiveOffload: sockets[0].receiveOffload,
                seconds: seconds,
                packetsFromDevice: q.map(\.packetsRead).reduce(0, +), superPacketsSplit: q.map(\.superPacketsRead).reduce(0, +),
                packetsToDevice: q.map(\.packetsWritten).reduce(0, +), superPacketsWritten: q.map(\.superPacketsWritten).reduce(0, +),
                malformedDropped: q.map(\.malformedDropped).reduce(0, +), deviceWriteDropped: q.map(\.writeDropped).reduce(0, +),
                datagramsSent: u.map(\.datagramsSent).reduce(0, +), datagramsReceived: u.map(\.datagramsReceived).reduce(0, +),
                sendCalls: u.map(\.sendCalls).reduce(0, +), receiveCalls: u.map(\.receiveCalls).reduce(0, +),
                udpDropped: u.map(\.dropped).reduce(0, +), tooBigAnswered: pipe.tooBigAnswered,
                perQueue: zip(q, u).map { Report.QueueReport(packetsFromDevice: $0.packetsRead, packetsToDevice: $0.packetsWritten,
                                                             datagramsSent: $1.datagramsSent, datagramsReceived: $1.datagramsReceived) })
            if global.json {
                try printJSON(report)
            } else if !global.quiet {
                print("\(report.packetsFromDevice) packets to the peer in \(report.datagramsSent) datagrams (\(report.superPacketsSplit) super-packets split); \(report.packetsToDevice) packets from the peer (\(report.superPacketsWritten) coalesced writes); dropped: \(report.malformedDropped) malformed, \(report.deviceWriteDropped) refused by the device, \(report.udpDropped) by UDP; \(report.tooBigAnswered) too big for the path answered with ICMP")
            }
        }
    }
}
#endif
