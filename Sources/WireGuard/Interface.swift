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

    /// Brings the interface up. `resolve` turns an endpoint's `host:port` into an address
    /// (IP literals need none); `note` receives log lines (handshakes, peers that went quiet).
    public init(configuration: WireGuardConfiguration, name: String, timers: WireGuardTimers = .standard,
                note: @escaping @Sendable (String) -> Void = { _ in }) throws(WireGuardInterfaceError) {
        var peers: [PeerConfiguration] = []
        for peer in configuration.peers {
            var endpoint: UDPEndpoint?
            if let text = peer.endpoint { endpoint = try Self.resolve(text) }
            peers.append(PeerConfiguration(publicKey: peer.publicKey, presharedKey: peer.presharedKey, allowedIPs: peer.allowedIPs,
                                           endpoint: endpoint, persistentKeepalive: peer.persistentKeepalive))
        }
        do {
            socket = try UDPDatagramSocket(port: configuration.listenPort ?? 0)
        } catch {
            throw .socket("\(error)")
        }
        do {
            tun = try TunDevice(TunDevice.Configuration(name: name, layer: .tun, queues: 1))
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
        listenPort = socket.localPort
        publicKey = configuration.privateKey.publicKey
        started = (clock.now(), Date())
        state = Mutex(WireGuardDevice(privateKey: configuration.privateKey, peers: peers, timers: timers,
                                       now: started.monotonic, wallClock: started.wall))
        self.note = note
        startThreads()
    }

    private static func resolve(_ text: String) throws(WireGuardInterfaceError) -> UDPEndpoint {
        if let literal = UDPEndpoint(text) { return literal }
        guard let (host, port) = WireGuardConfiguration.splitEndpoint(text) else { throw .endpoint(text, "not HOST:PORT") }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0, let first = list else { throw .endpoint(text, String(cString: gai_strerror(status))) }
        defer { freeaddrinfo(list) }
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            let info = current.pointee
            if info.ai_family == AF_INET, let raw = info.ai_addr {
                let address = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr) }
                return UDPEndpoint(address: .v4(address), port: port)
            }
            if info.ai_family == AF_INET6, let raw = info.ai_addr {
                let bytes = raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                    withUnsafeBytes(of: pointer.pointee.sin6_addr) { Array($0) }
                }
                if let address = IPAddress(bytes: bytes) { return UDPEndpoint(address: address, port: port) }
            }
            entry = info.ai_next
        }
        throw .endpoint(text, "no IPv4 or IPv6 address")
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
        threads.start("wg-tun") { [self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count: Int
                do {
                    count = try buffer.withUnsafeMutableBytes { raw in try tun.queues[0].read(into: raw, timeout: nil) }
                } catch TunnelError.interrupted {
                    return
                } catch TunnelError.closed {
                    return
                } catch {
                    fail("reading \(name): \(error)")
                    return
                }
                let packet = Array(buffer.prefix(count))
                let now = clock.now()
                perform(state.withLock { $0.packetFromTunnel(packet, now: now) })
            }
        }
        threads.start("wg-udp") { [self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let received: (Int, UDPEndpoint)?
                do {
                    received = try buffer.withUnsafeMutableBytes { raw in try socket.receive(into: raw, timeout: nil) }
                } catch TunnelError.interrupted {
                    return
                } catch TunnelError.closed {
                    return
                } catch {
                    fail("receiving on UDP port \(listenPort): \(error)")
                    return
                }
                guard let (count, source) = received else { continue }
                let datagram = Array(buffer.prefix(count))
                let now = clock.now()
                perform(state.withLock { $0.datagram(datagram, from: source, now: now) })
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
