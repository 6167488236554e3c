#if os(Linux)
import FarcastSupport
import Foundation
import Glibc
import Synchronization
import Tunnel

/// A WireGuard interface on Linux: a TUN device configured over rtnetlink (addresses, MTU,
/// a route for every peer's allowed IPs), one UDP socket for every peer, and three threads
/// feeding a `WireGuardDevice` — packets from the device, datagrams from the socket, and the
/// timers. `close()` takes the device down and joins the threads.
public final class WireGuardInterface: Sendable {
    public let name: String
    public let listenPort: UInt16
    public let publicKey: PublicKey
    private let state: Mutex<WireGuardDevice>
    private let tun: TunDevice
    private let socket: UDPDatagramSocket
    private let clock = SystemClock()
    private let stopping = Atomic<Bool>(false)
    private let threads = WorkerThreads()
    private let note: @Sendable (String) -> Void
    /// The first failure of a worker (the interface then stops).
    private let failure = Mutex<String?>(nil)
    /// The UAPI socket (`wg show`/`wg set`), when /var/run/wireguard could take it.
    private let uapi: (descriptor: Int32, path: String)?
    /// Monotonic and wall clock read together, to show handshake times as dates.
    private let started: (monotonic: MonotonicInstant, wall: Date)
    /// The largest packet a batch slot takes: the device's MTU, at least 1500.
    private let slotSize: Int
    /// Whether the TUN device hands over and takes super-packets (virtio-net header, TSO) and
    /// the socket sends and receives UDP GSO/GRO runs.
    public let offload: Bool
    /// Packets per batch on each path.
    static let batchSize = 64

    /// Brings the interface up. `resolve` turns an endpoint's `host:port` into an address
    /// (IP literals need none); `note` receives log lines (handshakes, peers that went quiet).
    ///
    /// `offload`: super-packets from and to the TUN device (split and coalesced here) and UDP
    /// segmentation offload where the kernel has them, so a batch of packets costs one system
    /// call each way; false moves packets one per call (for comparison and odd kernels).
    ///
    /// `queues`: TUN queues, each read by a thread of its own (the kernel spreads flows over
    /// them), so sealing what leaves runs on that many cores; what arrives is opened on one
    /// thread, which keeps each flow's packets in order.
    ///
    /// `loadThreshold`: handshake messages a second beyond which MAC2 (a cookie) is required
    /// (0: always, which tests use to see a peer answer our cookie replies).
    public init(configuration: WireGuardConfiguration, name: String, timers: WireGuardTimers = .standard, offload: Bool = true,
                queues: Int = 1, loadThreshold: Int = 1000, note: @escaping @Sendable (String) -> Void = { _ in }) throws(WireGuardInterfaceError) {
        var peers: [PeerConfiguration] = []
        for peer in configuration.peers {
            var endpoint: UDPEndpoint?
            if let text = peer.endpoint { endpoint = try Self.resolve(text) }
            peers.append(PeerConfiguration(publicKey: peer.publicKey, presharedKey: peer.presharedKey, allowedIPs: peer.allowedIPs,
                                           endpoint: endpoint, persistentKeepalive: peer.persistentKeepalive))
        }
        do {
            socket = try UDPDatagramSocket(port: configuration.listenPort ?? 0, offload: offload)
        } catch {
            throw .socket("\(error)")
        }
        do {
            tun = try TunDevice(TunDevice.Configuration(name: name, layer: .tun, queues: max(1, queues), offload: offload))
        } catch {
            socket.close()
            throw .device("\(error)")
        }
        do {
            let netlink = try RouteNetlink()
            let index = tun.interfaceIndex
            try netlink.setMTU(configuration.mtu ?? 1420, interface: index, interfaceName: tun.name)
            for address in configuration.addresses { try netlink.addAddress(address, interface: index, interfaceName: tun.name) }
            try netlink.setUp(true, interface: index, interfaceName: tun.name)
            for prefix in Set(peers.flatMap(\.allowedIPs).map(\.network)) {
                do {
                    try netlink.addRoute(prefix, interface: index, interfaceName: tun.name)
                } catch let error where error.errno == EEXIST {
                    // The prefix of one of the interface's own addresses: the kernel routed it already.
                }
            }
        } catch {
            tun.close()
            socket.close()
            throw .configuration("\(error)")
        }
        do {
            uapi = try Self.listenUAPI(name: tun.name)
        } catch {
            tun.close()
            socket.close()
            throw error
        }
        if uapi == nil { note("no UAPI socket (cannot write /var/run/wireguard): `wg show \(tun.name)` will not see this interface") }
        self.name = tun.name
        self.offload = !tun.offload.isEmpty
        slotSize = max(configuration.mtu ?? 1420, 1500)
        listenPort = socket.localPort
        publicKey = configuration.privateKey.publicKey
        started = (clock.now(), Date())
        state = Mutex(WireGuardDevice(privateKey: configuration.privateKey, peers: peers, timers: timers,
                                       loadThreshold: loadThreshold, now: started.monotonic, wallClock: started.wall))
        self.note = note
        startThreads()
    }

    private static func resolve(_ text: String) throws(WireGuardInterfaceError) -> UDPEndpoint {
        do throws(UDPEndpoint.ResolveError) {
            return try UDPEndpoint.resolve(text)
        } catch {
            switch error {
            case .malformed: throw .endpoint(text, "not HOST:PORT")
            case .unresolved(_, let reason): throw .endpoint(text, reason)
            }
        }
    }

    /// The UAPI socket at /var/run/wireguard/NAME.sock (0600: `get` shows the private key); nil
    /// when the directory cannot be made or written (not root). A live socket of another
    /// process under the same name is an error; a stale one is replaced.
    private static func listenUAPI(name: String) throws(WireGuardInterfaceError) -> (Int32, String)? {
        let directory = "/var/run/wireguard"
        mkdir(directory, 0o755)
        let path = directory + "/\(name).sock"
        func withAddress<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T { withUnixSocketAddress(path, body) }
        let probe = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if probe >= 0 {
            let live = withAddress { Glibc.connect(probe, $0, $1) } == 0
            Glibc.close(probe)
            if live { throw .device("\(path) is served by another process: an interface named \(name) is already up (choose another with --name)") }
        }
        unlink(path)
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        let previous = umask(0o077)
        let bound = withAddress { Glibc.bind(fd, $0, $1) } == 0
        umask(previous)
        guard bound, Glibc.listen(fd, 16) == 0 else {
            Glibc.close(fd)
            return nil
        }
        return (fd, path)
    }

    /// Answers `wg` on the UAPI socket, one request per connection, until the interface closes.
    private func serveUAPI(_ listener: Int32) {
        while !stopping.load(ordering: .acquiring) {
            var poller = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 200) == 1 else { continue }
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { continue }
            var wait = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
            var request: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            // A request ends with an empty line; 1 MiB is far beyond any real configuration.
            while request.count < 1 << 20, !(request.count >= 2 && request.suffix(2) == [10, 10]) {
                let n = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                if n <= 0 { break }
                request += chunk.prefix(n)
            }
            let answer = Array(respond(to: String(decoding: request, as: UTF8.self)).utf8)
            var sent = 0
            while sent < answer.count {
                let n = answer[sent...].withUnsafeBytes { Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { break }
                sent += n
            }
            Glibc.close(connection)
        }
    }

    private func respond(to request: String) -> String {
        let lines = request.split(separator: "\n", omittingEmptySubsequences: false)
        switch lines.first {
        case "get=1":
            let (device, peers) = state.withLock { ($0, $0.status) }
            return UAPI.get(privateKey: device.identity.privateKey, listenPort: listenPort, peers: peers,
                            presharedKeys: device.presharedKeys) { [started] instant in
                let nanoseconds = Int64((started.wall.timeIntervalSince1970 * 1e9).rounded()) + instant.nanoseconds(since: started.monotonic)
                return (nanoseconds / 1_000_000_000, nanoseconds % 1_000_000_000)
            }
        case "set=1":
            let body = lines.dropFirst().prefix { !$0.isEmpty }
            do {
                let change = try UAPI.parseSet(Array(body))
                let now = clock.now()
                try state.withLock { (device: inout WireGuardDevice) throws(UAPIError) in
                    try device.apply(change, listenPort: listenPort, now: now)
                }
                note("configuration changed through the UAPI socket (wg set)")
                return "errno=0\n\n"
            } catch {
                note("refused a change through the UAPI socket: \(error)")
                return "errno=\(error.errno)\n\n"
            }
        default:
            return "errno=22\n\n"
        }
    }

    private func startThreads() {
        if let (descriptor, _) = uapi {
            threads.start("wg-uapi") { [self] in serveUAPI(descriptor) }
        }
        for (index, queue) in tun.queues.enumerated() {
            threads.start("wg-tun-\(index)") { [self] in
                do {
                    try carryPacketsOut(from: queue)
                } catch TunnelError.interrupted {
                } catch TunnelError.closed {
                } catch {
                    fail("reading \(name): \(error)")
                }
            }
        }
        threads.start("wg-udp") { [self] in
            do {
                try carryDatagramsIn()
            } catch TunnelError.interrupted {
            } catch TunnelError.closed {
            } catch {
                fail("receiving on UDP port \(listenPort): \(error)")
            }
        }
        threads.start("wg-timers") { [self] in
            let interval = state.withLock { $0.tickInterval }
            while !stopping.load(ordering: .acquiring) {
                Thread.sleep(forTimeInterval: interval.inSeconds)
                let now = clock.now()
                perform(state.withLock { $0.tick(now: now) })
            }
        }
    }

    /// The device's packets to their peers, a batch at a time: read (super-packets split into
    /// MTU-sized ones), routed and given counters under one hold of the lock, sealed in place
    /// outside it, and sent with one system call (runs to one peer as UDP GSO super-datagrams).
    private func carryPacketsOut(from queue: TunQueue) throws(TunnelError) {
        let packets = PacketBatch(capacity: Self.batchSize, slotSize: slotSize)
        let datagrams = PacketBatch(capacity: Self.batchSize, slotSize: slotSize + 64)
        var seals: [(packet: Int, job: SealJob, endpoint: UDPEndpoint)] = []
        var destinations: [UDPEndpoint] = []
        var other: [DeviceAction] = []
        seals.reserveCapacity(Self.batchSize)
        destinations.reserveCapacity(Self.batchSize)
        while true {
            packets.removeAll()
            _ = try queue.readPackets(into: packets, timeout: nil)
            let now = clock.now()
            seals.removeAll(keepingCapacity: true)
            other.removeAll(keepingCapacity: true)
            state.withLock { device in
                for index in 0..<packets.count {
                    if let (job, endpoint) = device.packetFromTunnel(UnsafeRawBufferPointer(packets[index]), now: now, actions: &other) {
                        seals.append((index, job, endpoint))
                    }
                }
            }
            perform(other)
            datagrams.removeAll()
            destinations.removeAll(keepingCapacity: true)
            for seal in seals {
                datagrams.append { slot in seal.job.seal(UnsafeRawBufferPointer(packets[seal.packet]), into: slot) }
                destinations.append(seal.endpoint)
            }
            try socket.send(datagrams, to: destinations)
        }
    }

    /// Datagrams from the peers into the device, a batch at a time: received (GRO runs split),
    /// checked and handed their sessions under one hold of the lock, opened outside it, taken in
    /// under a second, and written with one system call (segments of one TCP flow coalesced).
    private func carryDatagramsIn() throws(TunnelError) {
        let datagrams = PacketBatch(capacity: Self.batchSize, slotSize: slotSize + 64)
        let packets = PacketBatch(capacity: Self.batchSize, slotSize: slotSize)
        let gro = offload ? tun.makeGROTable(capacity: Self.batchSize) : nil
        var sources: [UDPEndpoint] = []
        var opens: [(job: OpenJob, source: UDPEndpoint, size: Int)] = []
        var opened: [(job: OpenJob, packet: [UInt8], source: UDPEndpoint, size: Int)] = []
        var other: [DeviceAction] = []
        while true {
            datagrams.removeAll()
            sources.removeAll(keepingCapacity: true)
            _ = try socket.receive(into: datagrams, sources: &sources, timeout: nil)
            let now = clock.now()
            opens.removeAll(keepingCapacity: true)
            other.removeAll(keepingCapacity: true)
            state.withLock { device in
                for index in 0..<datagrams.count {
                    for action in device.datagram(Array(UnsafeRawBufferPointer(datagrams[index])), from: sources[index], now: now) {
                        if case .open(let job, let source, let size) = action { opens.append((job, source, size)) } else { other.append(action) }
                    }
                }
            }
            perform(other)
            opened.removeAll(keepingCapacity: true)
            for open in opens {
                if let packet = try? open.job.open() { opened.append((open.job, packet, open.source, open.size)) }
            }
            guard !opened.isEmpty else { continue }
            other.removeAll(keepingCapacity: true)
            let later = clock.now()
            state.withLock { device in
                for done in opened { other += device.opened(done.job, packet: done.packet, from: done.source, size: done.size, now: later) }
            }
            packets.removeAll()
            var rest: [DeviceAction] = []
            for action in other {
                if case .deliver(let packet) = action, packets.append(packet) { continue }
                rest.append(action)
            }
            if !packets.isEmpty { try tun.queues[0].writePackets(packets, coalescingWith: gro) }
            perform(rest)
        }
    }

    /// Carries out the device's actions on the calling thread, outside the device's lock: the
    /// sealing and opening run here, so the device and socket threads encrypt in parallel.
    private func perform(_ actions: [DeviceAction]) {
        for action in actions {
            switch action {
            case .send(let datagram, let endpoint):
                _ = try? datagram.withUnsafeBytes { raw in try socket.send(raw, to: endpoint) }
            case .seal(let job, let packet, let endpoint):
                let datagram = job.seal(packet)
                _ = try? datagram.withUnsafeBytes { raw in try socket.send(raw, to: endpoint) }
            case .open(let job, let source, let size):
                guard let packet = try? job.open() else { continue }
                let now = clock.now()
                perform(state.withLock { $0.opened(job, packet: packet, from: source, size: size, now: now) })
            case .deliver(let packet):
                _ = try? packet.withUnsafeBytes { raw in try tun.queues[0].write(raw) }
            case .note(let text):
                note(text)
            }
        }
    }

    private func fail(_ message: String) {
        failure.withLock { if $0 == nil { $0 = message } }
        note(message)
    }

    /// Why the interface stopped working, if it did.
    public var failed: String? { failure.withLock { $0 } }

    /// Every peer's state, with handshake times as dates.
    public var peers: [(status: PeerStatus, lastHandshakeDate: Date?)] {
        let statuses = state.withLock { $0.status }
        return statuses.map { status in
            (status, status.lastHandshake.map { started.wall.addingTimeInterval(Double($0.nanoseconds(since: started.monotonic)) / 1e9) })
        }
    }

    /// Takes the interface down: the threads stop, the device and the socket close.
    public func close() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        tun.interrupt()
        socket.interrupt()
        threads.join()
        tun.close()
        socket.close()
        if let (descriptor, path) = uapi {
            Glibc.close(descriptor)
            unlink(path)
        }
    }

    deinit { close() }
}

public enum WireGuardInterfaceError: Error, Equatable, Sendable, CustomStringConvertible {
    case endpoint(String, String)
    case socket(String)
    case device(String)
    case configuration(String)

    public var description: String {
        switch self {
        case .endpoint(let text, let reason): "Endpoint \(text): \(reason)"
        case .socket(let reason): "the UDP socket: \(reason)"
        case .device(let reason): "the TUN device: \(reason)"
        case .configuration(let reason): "configuring the device: \(reason)"
        }
    }
}
#endif
