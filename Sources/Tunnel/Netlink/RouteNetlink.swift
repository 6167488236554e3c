#if os(Linux)
import Glibc
import CTunnelLinux

/// A NETLINK_ROUTE socket that configures interfaces the way `ip` does, without running it:
/// addresses, MTU, up/down and routes. Every request asks for an acknowledgement and extended
/// error messages, so a refusal comes back as a `NetlinkError` carrying the kernel's errno and
/// sentence. Requests wait at most `timeout` for their answer.
///
/// Not `Sendable`: one socket per configuring thread (each request is a send then a receive).
public final class RouteNetlink {
    private let fd: Int32
    private var sequence: UInt32
    private let timeoutMilliseconds: Int
    private var buffer = [UInt8](repeating: 0, count: 32 * 1024)

    /// Opens the socket in the caller's network namespace.
    public init(timeout: Duration = .seconds(5)) throws(NetlinkError) {
        let fd = socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_ROUTE)
        guard fd >= 0 else { throw NetlinkError(operation: "open a netlink socket", reason: .system(errno: errno)) }
        self.fd = fd
        var on: CInt = 1
        // Extended acks give the kernel's reason as text; capped acks keep errors short.
        _ = setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &on, socklen_t(MemoryLayout<CInt>.size))
        _ = setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &on, socklen_t(MemoryLayout<CInt>.size))
        timeoutMilliseconds = Int(TunQueue.milliseconds(timeout))
        var address = sockaddr_nl()
        address.nl_family = sa_family_t(AF_NETLINK)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_nl>.size)) }
        }
        guard bound == 0 else {
            let code = errno
            _ = systemClose(fd)
            throw NetlinkError(operation: "bind a netlink socket", reason: .system(errno: code))
        }
        sequence = UInt32(truncatingIfNeeded: UInt64(bitPattern: Int64(time(nil)))) &* 2654435761
    }

    deinit { _ = systemClose(fd) }

    private func nextSequence() -> UInt32 {
        sequence &+= 1
        return sequence
    }

    // MARK: - Requests

    /// Adds an address (`10.0.0.1/24`, `fd00::1/64`); the kernel adds the prefix route once the
    /// link is up. `peer` makes it a point-to-point address.
    public func addAddress(_ prefix: IPPrefix, interface index: Int32, peer: IPAddress? = nil, replace: Bool = false,
                           interfaceName: String? = nil) throws(NetlinkError) {
        try perform(RouteRequest.addAddress(prefix, interface: index, peer: peer, replace: replace, sequence: nextSequence()),
                    "add address \(prefix) to \(interfaceName ?? "interface \(index)")")
    }

    public func removeAddress(_ prefix: IPPrefix, interface index: Int32, interfaceName: String? = nil) throws(NetlinkError) {
        try perform(RouteRequest.removeAddress(prefix, interface: index, sequence: nextSequence()),
                    "remove address \(prefix) from \(interfaceName ?? "interface \(index)")")
    }

    public func setMTU(_ mtu: Int, interface index: Int32, interfaceName: String? = nil) throws(NetlinkError) {
        try perform(RouteRequest.setMTU(mtu, interface: index, sequence: nextSequence()),
                    "set the MTU of \(interfaceName ?? "interface \(index)") to \(mtu)")
    }

    public func setUp(_ up: Bool, interface index: Int32, interfaceName: String? = nil) throws(NetlinkError) {
        try perform(RouteRequest.setUp(up, interface: index, sequence: nextSequence()),
                    "bring \(interfaceName ?? "interface \(index)") \(up ? "up" : "down")")
    }

    public func addRoute(_ destination: IPPrefix, interface index: Int32, gateway: IPAddress? = nil, metric: UInt32? = nil,
                         table: UInt32? = nil, replace: Bool = false, interfaceName: String? = nil) throws(NetlinkError) {
        try perform(RouteRequest.addRoute(destination, interface: index, gateway: gateway, metric: metric, table: table,
                                          replace: replace, sequence: nextSequence()),
                    "add route \(destination.network) via \(interfaceName ?? "interface \(index)")")
    }

    public func removeRoute(_ destination: IPPrefix, interface index: Int32, gateway: IPAddress? = nil, metric: UInt32? = nil,
                            table: UInt32? = nil, interfaceName: String? = nil) throws(NetlinkError) {
        try perform(RouteRequest.removeRoute(destination, interface: index, gateway: gateway, metric: metric, table: table,
                                             sequence: nextSequence()),
                    "remove route \(destination.network) via \(interfaceName ?? "interface \(index)")")
    }

    /// Every address of every interface (or of `interface`).
    public func addresses(interface index: Int32? = nil) throws(NetlinkError) -> [NetlinkReply.InterfaceAddress] {
        let request = RouteRequest.dumpAddresses(sequence: nextSequence())
        let operation = "list addresses"
        try send(request, operation)
        var result: [NetlinkReply.InterfaceAddress] = []
        while true {
            for item in try receive(operation) {
                switch item {
                case .message(let type, _, let seq, let payload) where seq == request.sequence && type == NetlinkMessage.Kind.newAddress:
                    if let address = NetlinkReply.interfaceAddress(payload), index == nil || address.interfaceIndex == index {
                        result.append(address)
                    }
                case .done(let seq) where seq == request.sequence:
                    return result
                case .failed(let seq, let code, let message, _) where seq == request.sequence:
                    throw NetlinkError(operation: operation, reason: .kernel(errno: code, message: message))
                default:
                    continue
                }
            }
        }
    }

    // MARK: - Transport

    /// Sends a request and waits for its acknowledgement.
    public func perform(_ message: NetlinkMessage, _ operation: String) throws(NetlinkError) {
        try send(message, operation)
        while true {
            for item in try receive(operation) {
                switch item {
                case .acknowledged(let seq) where seq == message.sequence:
                    return
                case .failed(let seq, let code, let text, _) where seq == message.sequence:
                    throw NetlinkError(operation: operation, reason: .kernel(errno: code, message: text))
                default:
                    continue    // an answer to an earlier, abandoned request
                }
            }
        }
    }

    private func send(_ message: NetlinkMessage, _ operation: String) throws(NetlinkError) {
        var destination = sockaddr_nl()
        destination.nl_family = sa_family_t(AF_NETLINK)
        let sent = message.bytes.withUnsafeBytes { bytes in
            withUnsafePointer(to: &destination) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_nl>.size))
                }
            }
        }
        guard sent == message.bytes.count else {
            throw NetlinkError(operation: operation, reason: .system(errno: sent < 0 ? errno : EMSGSIZE))
        }
    }

    private func receive(_ operation: String) throws(NetlinkError) -> [NetlinkReply.Item] {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while true {
            let ready = poll(&pfd, 1, Int32(timeoutMilliseconds))
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 { throw NetlinkError(operation: operation, reason: .system(errno: errno)) }
            if ready == 0 { throw NetlinkError(operation: operation, reason: .timedOut(milliseconds: timeoutMilliseconds)) }
            var from = sockaddr_nl()
            var fromLength = socklen_t(MemoryLayout<sockaddr_nl>.size)
            let n = buffer.withUnsafeMutableBytes { raw in
                withUnsafeMutablePointer(to: &from) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        recvfrom(fd, raw.baseAddress, raw.count, Int32(MSG_TRUNC), $0, &fromLength)
                    }
                }
            }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw NetlinkError(operation: operation, reason: .system(errno: errno))
            }
            guard n <= buffer.count else {
                throw NetlinkError(operation: operation, reason: .malformedReply("a \(n)-byte answer exceeds the \(buffer.count)-byte buffer"))
            }
            // Only the kernel (port 0) speaks for the kernel.
            guard from.nl_pid == 0 else { continue }
            let parsed = buffer.withUnsafeBytes { raw -> Result<[NetlinkReply.Item], NetlinkError.Reason> in
                do throws(NetlinkError.Reason) {
                    return .success(try NetlinkReply.parse(UnsafeRawBufferPointer(rebasing: raw[0..<n])))
                } catch {
                    return .failure(error)
                }
            }
            switch parsed {
            case .success(let items): return items
            case .failure(let reason): throw NetlinkError(operation: operation, reason: reason)
            }
        }
    }
}

/// Configuration of a device through rtnetlink (a new socket per call; hold a `RouteNetlink`
/// yourself for many changes).
extension TunDevice {
    private func withNetlink<T>(_ body: (RouteNetlink, Int32) throws(NetlinkError) -> T) throws(TunnelError) -> T {
        let index = interfaceIndex
        guard index > 0 else { throw .system(operation: "find interface \(name)", errno: ENODEV) }
        do {
            return try body(try RouteNetlink(), index)
        } catch {
            throw .netlink(error)
        }
    }

    /// Adds an interface address (the kernel routes its prefix into the device once it is up).
    public func addAddress(_ prefix: IPPrefix, peer: IPAddress? = nil) throws(TunnelError) {
        try withNetlink { (netlink, index) throws(NetlinkError) in try netlink.addAddress(prefix, interface: index, peer: peer, interfaceName: name) }
    }

    public func removeAddress(_ prefix: IPPrefix) throws(TunnelError) {
        try withNetlink { (netlink, index) throws(NetlinkError) in try netlink.removeAddress(prefix, interface: index, interfaceName: name) }
    }

    public func setMTU(_ mtu: Int) throws(TunnelError) {
        try withNetlink { (netlink, index) throws(NetlinkError) in try netlink.setMTU(mtu, interface: index, interfaceName: name) }
    }

    public func setUp(_ up: Bool = true) throws(TunnelError) {
        try withNetlink { (netlink, index) throws(NetlinkError) in try netlink.setUp(up, interface: index, interfaceName: name) }
    }

    /// Routes `destination` into the device.
    public func addRoute(_ destination: IPPrefix, metric: UInt32? = nil) throws(TunnelError) {
        try withNetlink { (netlink, index) throws(NetlinkError) in try netlink.addRoute(destination, interface: index, metric: metric, interfaceName: name) }
    }

    public func removeRoute(_ destination: IPPrefix) throws(TunnelError) {
        try withNetlink { (netlink, index) throws(NetlinkError) in try netlink.removeRoute(destination, interface: index, interfaceName: name) }
    }

    /// The device's addresses as the kernel lists them.
    public func addresses() throws(TunnelError) -> [IPPrefix] {
        try withNetlink { (netlink, index) throws(NetlinkError) in try netlink.addresses(interface: index).map(\.prefix) }
    }
}
#endif
