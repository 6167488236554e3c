#if os(Linux)
import Glibc
import CTunnelLinux
import Synchronization

/// An unconnected UDP socket for protocols with many peers that may move (WireGuard): each
/// datagram says where it came from, and each send says where it goes. One socket serves IPv4
/// and IPv6 (an IPv6 socket with IPV6_V6ONLY off; IPv4 peers appear as plain IPv4 endpoints),
/// or IPv4 alone where the system has no IPv6. Reads can be interrupted from another thread.
/// Linux only, as `UDPBatchSocket`.
public final class UDPDatagramSocket: Sendable {
    public let localPort: UInt16
    private let descriptor: InterruptibleDescriptor
    private let dualStack: Bool
    /// Whether batch sends use `UDP_SEGMENT` (turned off for good if the kernel refuses it).
    private let segmentation: Atomic<Bool>
    /// Whether the kernel coalesces what arrives (`UDP_GRO`): only batch receives then.
    public let receiveOffload: Bool

    /// Binds every address on `port` (0: the kernel picks one; see `localPort`). With
    /// `offload`, batch sends go as `UDP_SEGMENT` runs and receives are coalesced by the kernel
    /// (`UDP_GRO`) where it can: use the batch `receive` then, which splits them.
    public init(port: UInt16, bufferBytes: Int = 4 << 20, offload: Bool = false) throws(TunnelError) {
        var fd = socket(AF_INET6, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var dual = fd >= 0
        if dual {
            var off: CInt = 0
            _ = setsockopt(fd, CInt(IPPROTO_IPV6), IPV6_V6ONLY, &off, socklen_t(MemoryLayout<CInt>.size))
        } else {
            fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            dual = false
        }
        guard fd >= 0 else { throw .system(operation: "open a UDP socket", errno: errno) }
        var keep = false
        defer { if !keep { _ = systemClose(fd) } }
        var size = CInt(clamping: bufferBytes)
        for (forced, plain) in [(SO_SNDBUFFORCE, SO_SNDBUF), (SO_RCVBUFFORCE, SO_RCVBUF)] {
            if setsockopt(fd, SOL_SOCKET, forced, &size, socklen_t(MemoryLayout<CInt>.size)) != 0 {
                _ = setsockopt(fd, SOL_SOCKET, plain, &size, socklen_t(MemoryLayout<CInt>.size))
            }
        }
        let local = UDPEndpoint(address: dual ? .v6(high: 0, low: 0) : .v4(0), port: port)
        guard local.withSocketAddress({ bind(fd, $0, $1) }) == 0 else {
            throw .system(operation: "bind UDP port \(port)", errno: errno)
        }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        localPort = withUnsafeBytes(of: &address) { UInt16(bigEndian: $0.loadUnaligned(fromByteOffset: 2, as: UInt16.self)) }
        var zero: CInt = 0, on: CInt = 1
        segmentation = Atomic(offload && setsockopt(fd, CInt(IPPROTO_UDP), UDP_SEGMENT, &zero, socklen_t(MemoryLayout<CInt>.size)) == 0)
        receiveOffload = offload && setsockopt(fd, CInt(IPPROTO_UDP), UDP_GRO, &on, socklen_t(MemoryLayout<CInt>.size)) == 0
        descriptor = try InterruptibleDescriptor(fd, what: "the UDP socket")
        dualStack = dual
        keep = true
    }

    /// Whether batch sends still use `UDP_SEGMENT`.
    public var segmentationOffload: Bool { segmentation.load(ordering: .relaxed) }

    /// Sends packet i of `batch` to `destinations[i]`, in order, many per system call (runs to
    /// one destination as `UDP_SEGMENT` super-datagrams with offload). A datagram the network
    /// refuses (no route, an IPv6 peer on an IPv4-only socket) is a loss like any other.
    /// Returns how many the kernel took.
    @discardableResult
    public func send(_ batch: PacketBatch, to destinations: [UDPEndpoint]) throws(TunnelError) -> Int {
        precondition(destinations.count >= batch.count, "a destination for every packet")
        try descriptor.enter(reading: false)
        defer { descriptor.leave() }
        guard batch.count > 0 else { return 0 }
        let vectors = batch.messageVectors
        let dualStack = dualStack
        let messages = vectors.plan(batch, segmenting: segmentation.load(ordering: .relaxed)) {
            dualStack ? destinations[$0].mappedToIPv6 : destinations[$0]
        }
        return try vectors.transmit(messages, on: descriptor, segmentation: segmentation, what: "a peer", called: {}, dropped: { _, _ in })
    }

    /// Receives datagrams into the free slots of `batch`, their senders appended to `sources`
    /// (packet i came from `sources[i]` when both started empty), waiting up to `timeout` (nil:
    /// no limit) for the first. Returns how many it added (0: timed out). A datagram larger than
    /// a slot is dropped.
    public func receive(into batch: PacketBatch, sources: inout [UDPEndpoint], timeout: Duration?) throws(TunnelError) -> Int {
        try descriptor.enter()
        defer { descriptor.leave() }
        let start = batch.count
        while true {
            try drain(into: batch, sources: &sources)
            if batch.count > start || batch.freeSlots == 0 { break }
            guard try descriptor.wait(timeout: timeout) else { break }
        }
        return batch.count - start
    }

    private func drain(into batch: PacketBatch, sources: inout [UDPEndpoint]) throws(TunnelError) {
        let vectors = batch.messageVectors
        if receiveOffload {
            while true {
                if batch.pendingScratchLength > 0, let source = batch.pendingSource {
                    let before = batch.count
                    let whole = batch.splitPendingDatagram(tooLarge: {})
                    for _ in before..<batch.count { sources.append(source) }
                    guard whole else { return }
                }
                guard batch.freeSlots > 0 else { return }
                let (n, segmentSize) = vectors.receiveOne(descriptor.fileDescriptor, into: batch.scratch, capacity: PacketBatch.scratchSize, named: true)
                guard try received(n) else { return }
                guard let source = Self.endpoint(from: vectors.names[0]) else { continue }
                batch.pendingScratchLength = n
                batch.pendingSegmentSize = segmentSize ?? n
                batch.pendingSource = source
            }
        }
        while batch.freeSlots > 0 {
            let want = batch.freeSlots
            for k in 0..<want {
                let slot = batch.slot(batch.count + k)
                vectors.iovecs[k] = iovec(iov_base: slot.baseAddress, iov_len: slot.count)
                vectors.prepare(message: k, iovecs: k, count: 1, segmentSize: nil)
                vectors.messages[k].msg_hdr.msg_name = UnsafeMutableRawPointer(vectors.names + k)
                vectors.messages[k].msg_hdr.msg_namelen = socklen_t(MemoryLayout<sockaddr_storage>.size)
            }
            let n = ctunnel_recvmmsg(descriptor.fileDescriptor, vectors.messages, UInt32(want), Int32(MSG_DONTWAIT))
            guard try received(n) else { return }
            // Packets land in consecutive slots; a truncated one is overwritten by the next.
            var kept = 0
            for k in 0..<Int(n) {
                let message = vectors.messages[k]
                let length = Int(message.msg_len)
                guard message.msg_hdr.msg_flags & Int32(MSG_TRUNC) == 0, length > 0,
                      let source = Self.endpoint(from: vectors.names[k]) else { continue }
                if kept != k {
                    batch.slot(batch.count).baseAddress!.copyMemory(from: batch.slot(batch.count + k - kept).baseAddress!, byteCount: length)
                }
                batch.commit(length: length)
                sources.append(source)
                kept += 1
            }
            if Int(n) < want { return }
        }
    }

    /// True when `n` datagrams (or bytes) arrived; false when nothing more is waiting.
    private func received(_ n: some BinaryInteger) throws(TunnelError) -> Bool {
        if n >= 0 { return true }
        switch errno {
        case EAGAIN, EWOULDBLOCK, EINTR, ECONNREFUSED, EHOSTUNREACH, ENETUNREACH: return false
        case EBADF: throw .closed
        case let code: throw .system(operation: "receive UDP datagrams", errno: code)
        }
    }

    deinit { close() }

    public func interrupt() { descriptor.interrupt() }
    public func close() { descriptor.close() }

    /// Waits for the next datagram (nil `timeout`: no limit) and copies it into `buffer`.
    /// Returns its length (truncated to the buffer) and sender, or nil when `timeout` passed.
    public func receive(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration?) throws(TunnelError) -> (Int, UDPEndpoint)? {
        try descriptor.enter()
        defer { descriptor.leave() }
        while true {
            var address = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let n = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    recvfrom(descriptor.fileDescriptor, buffer.baseAddress, buffer.count, 0, $0, &length)
                }
            }
            if n >= 0, let sender = Self.endpoint(from: address) { return (n, sender) }
            if n >= 0 { continue }   // an address family we do not speak
            switch errno {
            case EAGAIN, EWOULDBLOCK:
                guard try descriptor.wait(timeout: timeout) else { return nil }
            case EINTR, ECONNREFUSED:
                continue   // an ICMP port-unreachable from an earlier send: not this socket's failure
            case let code:
                throw .system(operation: "receive a UDP datagram", errno: code)
            }
        }
    }

    /// Sends one datagram; false when the network refused it (no route, too large, the
    /// buffer full for longer than a moment), which for a datagram is a loss like any other.
    @discardableResult
    public func send(_ datagram: UnsafeRawBufferPointer, to endpoint: UDPEndpoint) throws(TunnelError) -> Bool {
        try descriptor.enter(reading: false)
        defer { descriptor.leave() }
        let target = dualStack ? endpoint.mappedToIPv6 : endpoint
        if !dualStack, !endpoint.address.isIPv4 { return false }
        while true {
            let n = target.withSocketAddress { sendto(descriptor.fileDescriptor, datagram.baseAddress, datagram.count, 0, $0, $1) }
            if n >= 0 { return true }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK:
                guard (try? descriptor.wait(for: Int16(POLLOUT), timeout: .milliseconds(100))) == true else { return false }
            case ENETUNREACH, EHOSTUNREACH, EMSGSIZE, ECONNREFUSED, EADDRNOTAVAIL, EPERM:
                return false
            case let code:
                throw .system(operation: "send a UDP datagram to \(endpoint)", errno: code)
            }
        }
    }

    private static func endpoint(from storage: sockaddr_storage) -> UDPEndpoint? {
        var storage = storage
        return withUnsafeBytes(of: &storage) { raw -> UDPEndpoint? in
            let family = Int32(raw.loadUnaligned(as: sa_family_t.self))
            let port = UInt16(bigEndian: raw.loadUnaligned(fromByteOffset: 2, as: UInt16.self))
            if family == AF_INET {
                return IPAddress(bytes: raw[4..<8]).map { UDPEndpoint(address: $0, port: port) }
            }
            guard family == AF_INET6, let address = IPAddress(bytes: raw[8..<24]) else { return nil }
            return UDPEndpoint(address: address.unmappedIPv4, port: port)
        }
    }
}

extension IPAddress {
    /// `::ffff:a.b.c.d` as the IPv4 address it stands for; any other address unchanged.
    var unmappedIPv4: IPAddress {
        if case .v6(let high, let low) = self, high == 0, low >> 32 == 0xFFFF { return .v4(UInt32(truncatingIfNeeded: low)) }
        return self
    }
}

extension UDPEndpoint {
    /// An IPv4 endpoint as `::ffff:a.b.c.d` (for a dual-stack IPv6 socket).
    var mappedToIPv6: UDPEndpoint {
        guard case .v4(let value) = address else { return self }
        return UDPEndpoint(address: .v6(high: 0, low: 0xFFFF_0000_0000 | UInt64(value)), port: port)
    }
}
#endif
