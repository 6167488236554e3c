import FarcastSupport
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The client's UDP socket for the video data plane: bound to an ephemeral port, connected to the
/// host's data port, with one thread that receives datagrams and sends the `PFpunch1` hole punch
/// on its schedule.
///
/// The handler runs on that thread with the datagram bytes (valid only during the call, and
/// writable so the data plane can open them in place) and the CLOCK_REALTIME receive time in ns;
/// it must not block. Every call comes from the same thread, in arrival order.
public final class DataPlaneSocket: Sendable {
    public typealias Handler = @Sendable (UnsafeMutableRawBufferPointer, UInt64) -> Void

    /// The local port to announce in Start.
    public let localPort: UInt16
    private let fd: Int32
    private let running = Mutex(true)
    private let stopped = Mutex(false)
    private let punches = Mutex(0)
    private let clock: any MonotonicClock

    /// Binds and connects the socket; `start` begins receiving. `clock` times the hole punches
    /// (the session's, `PunktfunkClient.Options.clock`).
    public init(host: SocketAddress, udpPort: UInt16, clock: any MonotonicClock = SystemClock()) throws(PunktfunkSessionError) {
        let remote = host.withPort(udpPort)
        let fd = socket(remote.family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .network(operation: "create the data-plane UDP socket", reason: String(cString: strerror(errno))) }
        var size: Int32 = 16 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        // Without CAP_NET_ADMIN the kernel caps SO_RCVBUF at rmem_max; try the forcing variant too.
        setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size))
        guard remote.withSockaddr({ Glibc.connect(fd, $0, $1) }) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw .network(operation: "reach the host's data port \(remote)", reason: reason)
        }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let port = withUnsafeBytes(of: &address) { raw in UInt16(raw[2]) << 8 | UInt16(raw[3]) }
        self.fd = fd
        self.localPort = port
        self.clock = clock
    }

    deinit {
        close(fd)
    }

    /// Hole punches sent so far.
    public var punchesSent: Int { punches.withLock { $0 } }

    /// Starts the receive/punch thread.
    public func start(handler: @escaping Handler) {
        let thread = Thread { [self] in self.run(handler) }
        thread.name = "punktfunk-data"
        thread.start()
    }

    /// Stops the thread (within 100 ms).
    public func stop() {
        running.withLock { $0 = false }
    }

    /// True once the thread has ended.
    public var isStopped: Bool { stopped.withLock { $0 } }

    private func run(_ handler: Handler) {
        defer { stopped.withLock { $0 = true } }
        var schedule = HolePunchSchedule()
        schedule.start(now: clock.now().nanoseconds)
        var buffer = [UInt8](repeating: 0, count: 9216)
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while running.withLock({ $0 }) {
            let now = clock.now().nanoseconds
            if schedule.isDue(now: now) {
                _ = HolePunchSchedule.payload.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
                schedule.didSend(now: now)
                punches.withLock { $0 += 1 }
            }
            let untilPunch = max(0, ((schedule.nextDue ?? now) - clock.now().nanoseconds) / 1_000_000)
            pfd.revents = 0
            let ready = poll(&pfd, 1, Int32(min(untilPunch, 100)))
            guard ready > 0 else { continue }
            // Drain what is there, up to a batch, before looking at the clock again.
            for _ in 0..<256 {
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if n <= 0 { break }
                let received = Self.realtime()
                buffer.withUnsafeMutableBytes { handler(UnsafeMutableRawBufferPointer(rebasing: $0[0..<n]), received) }
            }
        }
    }

    /// CLOCK_REALTIME in ns (the clock pts and clock probes use).
    public static func realtime() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}
