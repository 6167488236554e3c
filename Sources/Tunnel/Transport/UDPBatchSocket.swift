#if os(Linux)
import Glibc
import CTunnelLinux
import Synchronization

/// A connected UDP socket that moves a whole `PacketBatch` per system call: `sendmmsg` with UDP
/// segmentation offload (runs of equal-sized datagrams leave as one `UDP_SEGMENT` super-datagram
/// the kernel splits as late as possible) and `recvmmsg`, or with UDP receive offload (`UDP_GRO`)
/// one coalesced read split into the batch. The transport under `farcast tun pipe`, and the one a
/// VPN's data plane needs. Linux only.
///
/// Reads block until data, a timeout, or `interrupt()`/`close()`. Thread-safe; the batch passed
/// in belongs to the caller's thread and carries the message vectors, so nothing is allocated
/// per call.
public final class UDPBatchSocket: Sendable {
    public let remote: UDPEndpoint
    public let localPort: UInt16
    /// Whether receives are coalesced by the kernel (`UDP_GRO`).
    public let receiveOffload: Bool
    private let segmentation: Atomic<Bool>
    private let descriptor: InterruptibleDescriptor
    private let counters = Counters()

    /// Largest run of datagrams sent as one super-datagram (the kernel's limit is 64 on older
    /// kernels, 128 on newer).
    public static let maximumSegments = 64
    /// Largest super-datagram payload: 64 KiB less the IPv6/IPv4 and UDP headers, rounded down.
    public static let maximumSuperDatagram = 65_000

    /// Binds `localPort` (0: any) on `localAddress` (nil: the wildcard address of the remote's
    /// family) and connects to `remote`. `bufferBytes` sizes both socket buffers (forced past the
    /// system limit when the process may).
    public init(localPort: UInt16, localAddress: IPAddress? = nil, remote: UDPEndpoint, segmentationOffload: Bool = true,
                receiveOffload: Bool = true, bufferBytes: Int = 4 << 20) throws(TunnelError) {
        if let localAddress, localAddress.isIPv4 != remote.address.isIPv4 {
            throw .invalidConfiguration("the local address \(localAddress) and the peer \(remote) are of different IP versions")
        }
        let family = remote.address.isIPv4 ? AF_INET : AF_INET6
        let fd = socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system(operation: "open a UDP socket", errno: errno) }
        var keep = false
        defer { if !keep { _ = systemClose(fd) } }
        var on: CInt = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<CInt>.size))
        var size = CInt(clamping: bufferBytes)
        for (forced, plain) in [(SO_SNDBUFFORCE, SO_SNDBUF), (SO_RCVBUFFORCE, SO_RCVBUF)] {
            if setsockopt(fd, SOL_SOCKET, forced, &size, socklen_t(MemoryLayout<CInt>.size)) != 0 {
                _ = setsockopt(fd, SOL_SOCKET, plain, &size, socklen_t(MemoryLayout<CInt>.size))
            }
        }
        let local = UDPEndpoint(address: localAddress ?? (remote.address.isIPv4 ? .v4(0) : .v6(high: 0, low: 0)), port: localPort)
        let bound = local.withSocketAddress { bind(fd, $0, $1) }
        guard bound == 0 else { throw .system(operation: "bind UDP \(localAddress == nil ? "port \(localPort)" : "\(local)")", errno: errno) }
        let connected = remote.withSocketAddress { connect(fd, $0, $1) }
        guard connected == 0 else { throw .system(operation: "connect to \(remote)", errno: errno) }
        var zero: CInt = 0
        let canSegment = segmentationOffload
            && setsockopt(fd, CInt(IPPROTO_UDP), UDP_SEGMENT, &zero, socklen_t(MemoryLayout<CInt>.size)) == 0
        let canCoalesce = receiveOffload
            && setsockopt(fd, CInt(IPPROTO_UDP), UDP_GRO, &on, socklen_t(MemoryLayout<CInt>.size)) == 0
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        let port = withUnsafeBytes(of: &address) { UInt16(bigEndian: $0.loadUnaligned(fromByteOffset: 2, as: UInt16.self)) }
        descriptor = try InterruptibleDescriptor(fd, what: "the UDP socket")
        keep = true
        self.remote = remote
        self.localPort = port
        self.receiveOffload = canCoalesce
        segmentation = Atomic(canSegment)
    }

    deinit { close() }

    public var fileDescriptor: Int32 { descriptor.fileDescriptor }
    /// Whether sends still use `UDP_SEGMENT` (turned off for good if the kernel refuses it).
    public var segmentationOffload: Bool { segmentation.load(ordering: .relaxed) }

    /// Ends blocked and later receives with `TunnelError.interrupted`.
    public func interrupt() { descriptor.interrupt() }
    public func close() { descriptor.close() }

    /// Counts since the socket was opened.
    public struct Statistics: Sendable, Equatable {
        public var datagramsSent = 0
        public var sendCalls = 0
        public var datagramsReceived = 0
        public var receiveCalls = 0
        public var dropped = 0
        public var lastErrno: Int32 = 0
    }

    private final class Counters: Sendable {
        let sent = Atomic<Int>(0), sendCalls = Atomic<Int>(0), received = Atomic<Int>(0), receiveCalls = Atomic<Int>(0)
        let dropped = Atomic<Int>(0), lastErrno = Atomic<Int32>(0)
    }

    public var statistics: Statistics {
        Statistics(datagramsSent: counters.sent.load(ordering: .relaxed), sendCalls: counters.sendCalls.load(ordering: .relaxed),
                   datagramsReceived: counters.received.load(ordering: .relaxed),
                   receiveCalls: counters.receiveCalls.load(ordering: .relaxed),
                   dropped: counters.dropped.load(ordering: .relaxed), lastErrno: counters.lastErrno.load(ordering: .relaxed))
    }

    private func drop(_ count: Int, _ code: Int32) {
        counters.dropped.add(count, ordering: .relaxed)
        counters.lastErrno.store(code, ordering: .relaxed)
    }

    // MARK: - Sending

    /// Sends every packet of `batch` as one datagram each (in order), waiting for buffer room
    /// when the socket is full. Datagrams the network refuses (no listener yet, too large) are
    /// counted as dropped. Returns the number handed to the kernel.
    @discardableResult
    public func send(_ batch: PacketBatch) throws(TunnelError) -> Int {
        try descriptor.enter(reading: false)
        defer { descriptor.leave() }
        guard batch.count > 0 else { return 0 }
        let vectors = batch.messageVectors
        let messages = vectors.plan(batch, segmenting: segmentation.load(ordering: .relaxed), destination: nil)
        let sent = try vectors.transmit(messages, on: descriptor, segmentation: segmentation, what: "\(remote)",
                                        called: { counters.sendCalls.add(1, ordering: .relaxed) }, dropped: drop)
        counters.sent.add(sent, ordering: .relaxed)
        return sent
    }

    // MARK: - Receiving

    /// Receives datagrams into the free slots of `batch`, waiting up to `timeout` (nil: no
    /// limit) for the first. Returns how many it added (0: timed out). A datagram larger than a
    /// slot is dropped and counted.
    public func receive(into batch: PacketBatch, timeout: Duration? = nil) throws(TunnelError) -> Int {
        try descriptor.enter()
        defer { descriptor.leave() }
        let start = batch.count
        while true {
            try drain(into: batch)
            if batch.count > start || batch.freeSlots == 0 { break }
            guard try descriptor.wait(timeout: timeout) else { break }
        }
        let added = batch.count - start
        counters.received.add(added, ordering: .relaxed)
        return added
    }

    private func drain(into batch: PacketBatch) throws(TunnelError) {
        if receiveOffload {
            if batch.pendingScratchLength > 0 { guard batch.splitPendingDatagram(tooLarge: { drop(1, EMSGSIZE) }) else { return } }
            while batch.freeSlots > 0 {
                let vectors = batch.messageVectors
                let (n, segmentSize) = vectors.receiveOne(descriptor.fileDescriptor, into: batch.scratch, capacity: PacketBatch.scratchSize)
                counters.receiveCalls.add(1, ordering: .relaxed)
                guard try check(n) else { return }
                batch.pendingScratchLength = n
                batch.pendingSegmentSize = segmentSize ?? n
                guard batch.splitPendingDatagram(tooLarge: { drop(1, EMSGSIZE) }) else { return }
            }
            return
        }
        while batch.freeSlots > 0 {
            let vectors = batch.messageVectors
            let want = batch.freeSlots
            for k in 0..<want {
                let slot = batch.slot(batch.count + k)
                vectors.iovecs[k] = iovec(iov_base: slot.baseAddress, iov_len: slot.count)
                vectors.prepare(message: k, iovecs: k, count: 1, segmentSize: nil)
            }
            let n = ctunnel_recvmmsg(descriptor.fileDescriptor, vectors.messages, UInt32(want), Int32(MSG_DONTWAIT))
            counters.receiveCalls.add(1, ordering: .relaxed)
            guard try check(n) else { return }
            // Packets land in consecutive slots; a truncated one is overwritten by the next.
            var kept = 0
            for k in 0..<Int(n) {
                let message = vectors.messages[k]
                let length = Int(message.msg_len)
                if message.msg_hdr.msg_flags & Int32(MSG_TRUNC) != 0 || length == 0 {
                    drop(1, EMSGSIZE)
                    continue
                }
                if kept != k {
                    batch.slot(batch.count).baseAddress!.copyMemory(from: batch.slot(batch.count + k - kept).baseAddress!, byteCount: length)
                }
                batch.commit(length: length)
                kept += 1
            }
            if Int(n) < want { return }
        }
    }

    private func check(_ n: some BinaryInteger) throws(TunnelError) -> Bool {
        if n >= 0 { return true }
        let code = errno
        if code == EAGAIN || code == EWOULDBLOCK || code == EINTR { return false }
        // An ICMP error for an earlier datagram (the peer is not listening yet): nothing to read.
        if code == ECONNREFUSED || code == EHOSTUNREACH || code == ENETUNREACH { return false }
        if code == EBADF { throw .closed }
        throw .system(operation: "receive from \(remote)", errno: code)
    }
}

/// The `mmsghdr`s, `iovec`s and control buffers for one batch's socket calls, allocated once.
final class MessageVectors {
    let capacity: Int
    let messages: UnsafeMutablePointer<ctunnel_mmsghdr>
    let iovecs: UnsafeMutablePointer<iovec>
    let control: UnsafeMutableRawPointer
    let controlStride: Int
    /// A socket address per message, for sockets that are not connected.
    let names: UnsafeMutablePointer<sockaddr_storage>
    /// Datagrams and first iovec of each prepared message.
    var datagrams: [Int]
    var firstIOVec: [Int]

    init(capacity: Int) {
        self.capacity = capacity
        messages = .allocate(capacity: capacity)
        messages.initialize(repeating: ctunnel_mmsghdr(), count: capacity)
        iovecs = .allocate(capacity: capacity)
        iovecs.initialize(repeating: iovec(), count: capacity)
        controlStride = Int(ctunnel_cmsg_space(UInt(MemoryLayout<CInt>.size)))
        control = .allocate(byteCount: controlStride * capacity, alignment: 8)
        control.initializeMemory(as: UInt8.self, repeating: 0, count: controlStride * capacity)
        names = .allocate(capacity: capacity)
        names.initialize(repeating: sockaddr_storage(), count: capacity)
        datagrams = Array(repeating: 0, count: capacity)
        firstIOVec = Array(repeating: 0, count: capacity)
    }

    deinit {
        names.deallocate()
        messages.deallocate()
        iovecs.deallocate()
        control.deallocate()
    }

    /// The messages for sending `batch`: one datagram per packet, in order; with `segmenting`,
    /// runs of equal-sized datagrams to one destination (a shorter one may end a run) become one
    /// `UDP_SEGMENT` message. `destination` gives packet i's address (nil: a connected socket).
    /// Returns the number of messages.
    func plan(_ batch: PacketBatch, segmenting: Bool, destination: ((Int) -> UDPEndpoint)?) -> Int {
        var messages = 0
        var i = 0
        while i < batch.count {
            let size = batch.length(at: i)
            let target = destination?(i)
            var n = 1
            var total = size
            if segmenting {
                while i + n < batch.count, n < UDPBatchSocket.maximumSegments {
                    let next = batch.length(at: i + n)
                    guard next <= size, total + next <= UDPBatchSocket.maximumSuperDatagram, destination?(i + n) == target else { break }
                    total += next
                    n += 1
                    if next < size { break }
                }
            }
            for k in 0..<n {
                let packet = batch[i + k]
                iovecs[i + k] = iovec(iov_base: packet.baseAddress, iov_len: packet.count)
            }
            prepare(message: messages, iovecs: i, count: n, segmentSize: n > 1 ? size : nil, name: target)
            messages += 1
            i += n
        }
        return messages
    }

    /// Sends the `count` planned messages, waiting for buffer room when the socket is full.
    /// Messages the network refuses are `dropped` (datagrams, errno); a run the kernel will not
    /// segment turns segmentation off for good and goes out datagram by datagram. Returns the
    /// datagrams handed to the kernel.
    func transmit(_ count: Int, on descriptor: InterruptibleDescriptor, segmentation: borrowing Atomic<Bool>, what: @autoclosure () -> String,
                  called: () -> Void, dropped: (Int, Int32) -> Void) throws(TunnelError) -> Int {
        var sent = 0
        var first = 0
        while first < count {
            let n = ctunnel_sendmmsg(descriptor.fileDescriptor, messages + first, UInt32(count - first), 0)
            called()
            if n > 0 {
                for m in first..<(first + Int(n)) { sent += datagrams[m] }
                first += Int(n)
                continue
            }
            let code = errno
            switch code {
            case EINTR:
                continue
            case EAGAIN, EWOULDBLOCK:
                _ = try descriptor.wait(for: Int16(POLLOUT), timeout: .seconds(1))
            case EIO where datagrams[first] > 1:
                // The kernel refused segmentation offload for this route: datagram by datagram
                // from now on (this run goes out again as separate datagrams).
                segmentation.store(false, ordering: .relaxed)
                sent += try sendSeparately(message: first, on: descriptor, dropped: dropped)
                first += 1
            case ECONNREFUSED, EMSGSIZE, EHOSTUNREACH, ENETUNREACH, EPERM, ENOBUFS, EIO, EINVAL, EADDRNOTAVAIL, EAFNOSUPPORT:
                dropped(datagrams[first], code)
                first += 1
            case EBADF:
                throw .closed
            default:
                throw .system(operation: "send to \(what())", errno: code)
            }
        }
        return sent
    }

    /// Message `m`'s datagrams one by one, to its address if it has one.
    private func sendSeparately(message m: Int, on descriptor: InterruptibleDescriptor, dropped: (Int, Int32) -> Void) throws(TunnelError) -> Int {
        var sent = 0
        let start = firstIOVec[m]
        for k in 0..<datagrams[m] {
            var header = messages[m].msg_hdr
            header.msg_iov = iovecs + start + k
            header.msg_iovlen = 1
            header.msg_control = nil
            header.msg_controllen = 0
            while true {
                if sendmsg(descriptor.fileDescriptor, &header, 0) >= 0 {
                    sent += 1
                    break
                }
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN {
                    _ = try descriptor.wait(for: Int16(POLLOUT), timeout: .seconds(1))
                    continue
                }
                dropped(1, code)
                break
            }
        }
        return sent
    }

    /// Fills message `m` with `count` iovecs from `first`, a `UDP_SEGMENT` control message when
    /// `segmentSize` is given, and `name` as its destination when given.
    func prepare(message m: Int, iovecs first: Int, count: Int, segmentSize: Int?, name: UDPEndpoint? = nil) {
        var header = msghdr()
        header.msg_iov = iovecs + first
        header.msg_iovlen = count
        if let name {
            header.msg_name = UnsafeMutableRawPointer(names + m)
            header.msg_namelen = name.write(to: UnsafeMutableRawPointer(names + m))
        }
        if let segmentSize {
            let buffer = control + m * controlStride
            header.msg_control = buffer
            header.msg_controllen = controlStride
            let cmsg = buffer.assumingMemoryBound(to: cmsghdr.self)
            cmsg.pointee.cmsg_level = CInt(IPPROTO_UDP)
            cmsg.pointee.cmsg_type = UDP_SEGMENT
            cmsg.pointee.cmsg_len = Int(ctunnel_cmsg_len(UInt(MemoryLayout<UInt16>.size)))
            ctunnel_cmsg_data(cmsg).withMemoryRebound(to: UInt16.self, capacity: 1) { $0.pointee = UInt16(segmentSize) }
        }
        messages[m] = ctunnel_mmsghdr(msg_hdr: header, msg_len: 0)
        datagrams[m] = count
        firstIOVec[m] = first
    }

    /// One `recvmsg` into `buffer`; returns the length (or -1) and the `UDP_GRO` segment size.
    /// With `named`, the sender's address is left in `names[0]`.
    func receiveOne(_ fd: Int32, into buffer: UnsafeMutableRawPointer, capacity: Int, named: Bool = false) -> (Int, Int?) {
        iovecs[0] = iovec(iov_base: buffer, iov_len: capacity)
        var header = msghdr()
        header.msg_iov = iovecs
        header.msg_iovlen = 1
        if named {
            header.msg_name = UnsafeMutableRawPointer(names)
            header.msg_namelen = socklen_t(MemoryLayout<sockaddr_storage>.size)
        }
        header.msg_control = control
        header.msg_controllen = controlStride
        let n = recvmsg(fd, &header, Int32(MSG_DONTWAIT))
        guard n > 0 else { return (n, nil) }
        var segmentSize: Int?
        var cmsg = ctunnel_cmsg_firsthdr(&header)
        while let c = cmsg {
            if c.pointee.cmsg_level == CInt(IPPROTO_UDP) && c.pointee.cmsg_type == UDP_GRO {
                segmentSize = Int(UnsafeRawPointer(ctunnel_cmsg_data(c)).loadUnaligned(as: CInt.self))
            }
            cmsg = ctunnel_cmsg_nxthdr(&header, c)
        }
        return (n, segmentSize)
    }
}
#endif
