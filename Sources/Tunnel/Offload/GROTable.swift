#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Coalesces a batch of IP packets bound for a TUN device into GSO super-packets (receive
/// offload in reverse: many MTU-sized TCP segments, or equal-sized UDP datagrams, of one flow
/// become one write with a virtio-net header), so the kernel handles one packet instead of
/// dozens. The packets themselves are never copied: each write is a list of `iovec`s — the head
/// packet with its header rewritten in place, then the payload of every packet appended to it.
///
/// Rules (the kernel's own GRO conditions, simplified): same addresses, ports, TOS/traffic
/// class, TTL and DF; TCP only with ACK (and PSH on the last segment), identical options and
/// acknowledgement number, each segment's sequence number continuing the previous; every segment
/// as large as the first except a shorter last one; at most 64 KiB; IPv4 without options or
/// fragments; IPv6 without extension headers. Every packet merged into a super-packet has its
/// checksums verified first, because the kernel trusts the partial checksum of what we write; a
/// packet that fails keeps its own write and the kernel drops it.
///
/// For a TAP device the packets are Ethernet frames (`linkHeaderLength` 14): only untagged IPv4
/// and IPv6 frames take part, frames join a super-frame only behind an identical Ethernet
/// header, and the virtio-net header's offsets count from the frame's first byte.
///
/// A table belongs to one writer and keeps its storage between batches (nothing is allocated
/// per packet). Not `Sendable`.
public final class GROTable {
    /// The batch size this table plans for.
    public let capacity: Int
    /// Coalesce TCP segments.
    public var tcpEnabled: Bool
    /// Coalesce UDP datagrams (needs a kernel that takes USO packets, >= 6.2).
    public var udpEnabled: Bool
    /// Bytes before each packet's IP header: 0 (TUN) or 14 (TAP: an Ethernet header).
    public let linkHeaderLength: Int

    /// One write: `iovecCount` entries from `firstIOVec` in `iovecs`, header included.
    public struct Write: Sendable {
        public var packetIndex: Int
        public var segments: Int
        public var firstIOVec: Int
        public var iovecCount: Int
        public var byteCount: Int
    }

    /// The writes planned by the last `plan` call, in order.
    public private(set) var writeCount = 0
    let writes: UnsafeMutablePointer<Write>
    /// Scatter lists for the writes.
    public let iovecs: UnsafeMutablePointer<iovec>

    struct Head {
        var kind: UInt8 = 0          // 0 not a candidate, 1 TCP, 2 UDP
        var isIPv6 = false
        var verified = false
        var closed = false
        var transportOffset: Int32 = 0
        var headerLength: Int32 = 0
        var gsoSize: Int32 = 0
        var total: Int32 = 0
        var segments: Int32 = 0
        var nextSequence: UInt32 = 0
        var tail: Int32 = -1
        var flowHash: UInt64 = 0
        var isHead = true
        var pushSeen = false
    }
    let heads: UnsafeMutablePointer<Head>
    let next: UnsafeMutablePointer<Int32>
    let active: UnsafeMutablePointer<Int32>
    var activeCount = 0

    /// Most segments one super-packet takes (each is an iovec; the kernel's limit is 1024).
    public static let maximumSegments = 64

    public init(capacity: Int = 128, tcp: Bool = true, udp: Bool = true, linkHeaderLength: Int = 0) {
        precondition(capacity > 0)
        precondition(linkHeaderLength == 0 || linkHeaderLength == 14, "a link header is none or Ethernet's 14 bytes")
        self.capacity = capacity
        self.linkHeaderLength = linkHeaderLength
        tcpEnabled = tcp
        udpEnabled = udp
        writes = .allocate(capacity: capacity)
        iovecs = .allocate(capacity: capacity)
        heads = .allocate(capacity: capacity)
        heads.initialize(repeating: Head(), count: capacity)
        next = .allocate(capacity: capacity)
        next.initialize(repeating: -1, count: capacity)
        active = .allocate(capacity: capacity)
        active.initialize(repeating: -1, count: capacity)
    }

    deinit {
        writes.deallocate()
        iovecs.deallocate()
        heads.deinitialize(count: capacity)
        heads.deallocate()
        next.deallocate()
        active.deallocate()
    }

    /// Write `index` of the last plan.
    public func write(_ index: Int) -> Write {
        precondition(index >= 0 && index < writeCount)
        return writes[index]
    }

    /// Plans the writes for every packet in `batch`, rewriting head packets' headers in place
    /// and putting each write's virtio-net header (`headerSize` bytes: 10, or 12 with
    /// `num_buffers`) in the headroom before its head packet. Returns the number of writes.
    @discardableResult
    public func plan(_ batch: PacketBatch, headerSize: Int = VirtioNetHeader.size) -> Int {
        precondition(batch.count <= capacity, "batch of \(batch.count) exceeds the GRO table's \(capacity)")
        precondition(headerSize == 10 || headerSize == 12)
        activeCount = 0
        writeCount = 0
        let count = batch.count
        for i in 0..<count {
            next[i] = -1
            heads[i] = Head()
            consider(i, batch)
        }
        // Emit the heads in order; appended packets ride along in their head's write.
        var iov = 0
        for i in 0..<count where heads[i].isHead {
            let p = batch[i].baseAddress!
            let length = batch.length(at: i)
            var header = VirtioNetHeader()
            var h = heads[i]
            if h.segments >= 2 {
                header = finalize(p + linkHeaderLength, &h)
                // Offsets from the frame's first byte, as the kernel reads them.
                header.checksumStart += UInt16(linkHeaderLength)
                header.headerLength += UInt16(linkHeaderLength)
            }
            let start = UnsafeMutableRawPointer(p) - headerSize
            header.store(to: start)
            if headerSize == 12 { start.storeBytes(of: UInt16(0), toByteOffset: 10, as: UInt16.self) }
            writes[writeCount] = Write(packetIndex: i, segments: max(1, Int(h.segments)), firstIOVec: iov,
                                       iovecCount: 1, byteCount: headerSize + length)
            iovecs[iov] = iovec(iov_base: start, iov_len: headerSize + length)
            iov += 1
            var j = next[i]
            let headerLength = linkHeaderLength + Int(h.headerLength)
            while j >= 0 {
                let q = batch[Int(j)].baseAddress!
                let payload = batch.length(at: Int(j)) - headerLength
                iovecs[iov] = iovec(iov_base: q + headerLength, iov_len: payload)
                writes[writeCount].iovecCount += 1
                writes[writeCount].byteCount += payload
                iov += 1
                j = next[Int(j)]
            }
            writeCount += 1
        }
        return writeCount
    }

    // MARK: - Coalescing

    /// The IP packet inside packet `i` (after its Ethernet header on a TAP device), or nil for
    /// a frame that carries something else.
    @inline(__always)
    private func ipPacket(_ i: Int, _ batch: PacketBatch) -> (UnsafeRawPointer, Int)? {
        let base = UnsafeRawPointer(batch[i].baseAddress!)
        let length = batch.length(at: i)
        guard linkHeaderLength > 0 else { return (base, length) }
        guard length > linkHeaderLength else { return nil }
        let type = PacketField.u16(base, 12)
        guard type == GSOSplitter.etherTypeIPv4 || type == GSOSplitter.etherTypeIPv6 else { return nil }
        return (base + linkHeaderLength, length - linkHeaderLength)
    }

    private func consider(_ i: Int, _ batch: PacketBatch) {
        guard let (p, length) = ipPacket(i, batch) else { return }
        guard let candidate = Self.candidate(p, length: length, tcp: tcpEnabled, udp: udpEnabled) else {
            // A TCP or UDP packet of an open flow that cannot join it (a FIN, IP options, a
            // fragment…) still ends that flow's head: a later packet must not overtake it.
            if activeCount > 0, let flow = Self.transport(p, length: length) {
                let hash = Self.flowHash(p, isIPv6: flow.isIPv6, transportOffset: flow.transportOffset)
                if let slot = activeSlot(hash: hash, kind: flow.kind, p, flow.isIPv6, flow.transportOffset, batch) {
                    heads[Int(active[slot])].closed = true
                    removeActive(slot)
                }
            }
            return
        }
        let flowHash = Self.flowHash(p, isIPv6: candidate.isIPv6, transportOffset: candidate.transportOffset)
        // The open head of the same flow, if any.
        let slot = activeSlot(hash: flowHash, kind: candidate.kind, p, candidate.isIPv6, candidate.transportOffset, batch) ?? -1
        if slot >= 0 {
            let h = Int(active[slot])
            if canAppend(i, p, length, candidate, to: h, batch) {
                append(i, p, length, candidate, to: h)
                if heads[h].closed { removeActive(slot) }
                return
            }
            // Same flow but not continuing it: the old head takes nothing more, or a later
            // segment could overtake this one.
            heads[h].closed = true
            removeActive(slot)
        }
        // A new head.
        let payload = length - candidate.headerLength
        heads[i] = Head(kind: candidate.kind, isIPv6: candidate.isIPv6, verified: false, closed: candidate.push,
                        transportOffset: Int32(candidate.transportOffset), headerLength: Int32(candidate.headerLength),
                        gsoSize: Int32(payload), total: Int32(length), segments: 1,
                        nextSequence: candidate.sequence &+ UInt32(payload), tail: -1, flowHash: flowHash,
                        isHead: true, pushSeen: candidate.push)
        if !candidate.push {
            active[activeCount] = Int32(i)
            activeCount += 1
        }
    }

    private func activeSlot(hash: UInt64, kind: UInt8, _ p: UnsafeRawPointer, _ isIPv6: Bool, _ l4: Int,
                            _ batch: PacketBatch) -> Int? {
        for a in 0..<activeCount {
            let h = Int(active[a])
            if heads[h].flowHash == hash, heads[h].kind == kind,
               Self.sameFlow(UnsafeRawPointer(batch[h].baseAddress!) + linkHeaderLength, Int(heads[h].transportOffset), p, l4, isIPv6: isIPv6) {
                return a
            }
        }
        return nil
    }

    private func removeActive(_ slot: Int) {
        activeCount -= 1
        active[slot] = active[activeCount]
    }

    private func canAppend(_ i: Int, _ p: UnsafeRawPointer, _ length: Int, _ c: Candidate, to h: Int, _ batch: PacketBatch) -> Bool {
        let head = heads[h]
        guard !head.closed, Int(head.segments) < Self.maximumSegments else { return false }
        let payload = length - c.headerLength
        guard payload <= Int(head.gsoSize), Int(head.total) + payload <= 65535,
              c.headerLength == Int(head.headerLength) else { return false }
        let hp = UnsafeRawPointer(batch[h].baseAddress!) + linkHeaderLength
        // A super-frame has one Ethernet header: only frames with the same one may join it.
        if linkHeaderLength > 0, memcmp(hp - linkHeaderLength, p - linkHeaderLength, linkHeaderLength) != 0 { return false }
        // Network-layer fields the merged packet keeps from its head.
        if c.isIPv6 {
            guard hp.loadUnaligned(as: UInt32.self) == p.loadUnaligned(as: UInt32.self),
                  hp.load(fromByteOffset: 7, as: UInt8.self) == p.load(fromByteOffset: 7, as: UInt8.self) else { return false }
        } else {
            guard hp.load(fromByteOffset: 1, as: UInt8.self) == p.load(fromByteOffset: 1, as: UInt8.self),
                  hp.load(fromByteOffset: 8, as: UInt8.self) == p.load(fromByteOffset: 8, as: UInt8.self),
                  hp.load(fromByteOffset: 6, as: UInt8.self) & 0x40 == p.load(fromByteOffset: 6, as: UInt8.self) & 0x40
            else { return false }
        }
        if c.kind == Candidate.tcp {
            let l4 = c.transportOffset
            guard c.sequence == head.nextSequence,
                  PacketField.u32(hp, l4 + 8) == PacketField.u32(p, l4 + 8),
                  memcmp(hp + l4 + 20, p + l4 + 20, c.headerLength - l4 - 20) == 0 else { return false }
        }
        // Only packets whose checksums hold may hide inside a super-packet.
        if !head.verified {
            guard Self.checksumsValid(hp, length: batch.length(at: h) - linkHeaderLength, c) else { return false }
            heads[h].verified = true
        }
        return Self.checksumsValid(p, length: length, c)
    }

    private func append(_ i: Int, _ p: UnsafeRawPointer, _ length: Int, _ c: Candidate, to h: Int) {
        let payload = length - c.headerLength
        heads[i].isHead = false
        if heads[h].tail >= 0 { next[Int(heads[h].tail)] = Int32(i) } else { next[h] = Int32(i) }
        heads[h].tail = Int32(i)
        heads[h].total += Int32(payload)
        heads[h].segments += 1
        heads[h].nextSequence = heads[h].nextSequence &+ UInt32(payload)
        if payload < Int(heads[h].gsoSize) || c.push { heads[h].closed = true }
        if c.push { heads[h].pushSeen = true }
    }

    /// Rewrites a head's headers for the whole super-packet and returns its virtio-net header.
    private func finalize(_ p: UnsafeMutableRawPointer, _ h: inout Head) -> VirtioNetHeader {
        let l4 = Int(h.transportOffset)
        let total = Int(h.total)
        let l4Length = total - l4
        if h.isIPv6 {
            PacketField.setU16(p, 4, UInt16(truncatingIfNeeded: total - 40))
        } else {
            PacketField.setU16(p, 2, UInt16(truncatingIfNeeded: total))
            PacketField.refreshIPv4HeaderChecksum(p, headerLength: l4)
        }
        let isTCP = h.kind == Candidate.tcp
        let pseudo = InternetChecksum.pseudoHeaderSum(
            source: p + (h.isIPv6 ? 8 : 12), destination: p + (h.isIPv6 ? 24 : 16), addressLength: h.isIPv6 ? 16 : 4,
            protocolNumber: isTCP ? IPProtocolNumber.tcp : IPProtocolNumber.udp, length: l4Length)
        // A partial checksum, as the kernel leaves it for a NIC: the folded pseudo-header sum,
        // not complemented; whoever segments the packet finishes it.
        if isTCP {
            if h.pushSeen {
                let flags = p.load(fromByteOffset: l4 + 13, as: UInt8.self)
                p.storeBytes(of: flags | TCPFlag.psh, toByteOffset: l4 + 13, as: UInt8.self)
            }
            PacketField.setChecksum(p, l4 + 16, InternetChecksum.fold(pseudo))
            return VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, gsoType: h.isIPv6 ? .tcpv6 : .tcpv4,
                                   headerLength: UInt16(h.headerLength), gsoSize: UInt16(h.gsoSize),
                                   checksumStart: UInt16(l4), checksumOffset: 16)
        } else {
            PacketField.setU16(p, l4 + 4, UInt16(truncatingIfNeeded: l4Length))
            PacketField.setChecksum(p, l4 + 6, InternetChecksum.fold(pseudo))
            return VirtioNetHeader(flags: VirtioNetHeader.needsChecksum, gsoType: .udpL4,
                                   headerLength: UInt16(h.headerLength), gsoSize: UInt16(h.gsoSize),
                                   checksumStart: UInt16(l4), checksumOffset: 6)
        }
    }

    // MARK: - Packet inspection

    struct Candidate {
        static let tcp: UInt8 = 1
        static let udp: UInt8 = 2
        var kind: UInt8
        var isIPv6: Bool
        var transportOffset: Int
        var headerLength: Int
        var sequence: UInt32
        var push: Bool
    }

    /// Whether a packet may take part in coalescing at all, and its shape.
    static func candidate(_ p: UnsafeRawPointer, length: Int, tcp: Bool, udp: Bool) -> Candidate? {
        guard length >= 28 else { return nil }
        let first = p.load(as: UInt8.self)
        let isIPv6: Bool
        let l4: Int
        let protocolNumber: UInt8
        switch first >> 4 {
        case 4:
            // No options, not a fragment, total length exactly the packet.
            guard first == 0x45, PacketField.u16(p, 6) & 0x3fff == 0, Int(PacketField.u16(p, 2)) == length else { return nil }
            isIPv6 = false
            l4 = 20
            protocolNumber = p.load(fromByteOffset: 9, as: UInt8.self)
        case 6:
            guard length >= 48, Int(PacketField.u16(p, 4)) + 40 == length else { return nil }
            isIPv6 = true
            l4 = 40
            protocolNumber = p.load(fromByteOffset: 6, as: UInt8.self)
        default:
            return nil
        }
        if protocolNumber == IPProtocolNumber.tcp, tcp {
            guard length >= l4 + 20 else { return nil }
            let tcpHeaderLength = Int(p.load(fromByteOffset: l4 + 12, as: UInt8.self) >> 4) * 4
            guard tcpHeaderLength >= 20, l4 + tcpHeaderLength < length else { return nil }   // some payload
            let flags = p.load(fromByteOffset: l4 + 13, as: UInt8.self)
            guard flags & ~(TCPFlag.ack | TCPFlag.psh) == 0, flags & TCPFlag.ack != 0 else { return nil }
            return Candidate(kind: Candidate.tcp, isIPv6: isIPv6, transportOffset: l4, headerLength: l4 + tcpHeaderLength,
                             sequence: PacketField.u32(p, l4 + 4), push: flags & TCPFlag.psh != 0)
        }
        if protocolNumber == IPProtocolNumber.udp, udp {
            guard length > l4 + 8, Int(PacketField.u16(p, l4 + 4)) == length - l4 else { return nil }
            return Candidate(kind: Candidate.udp, isIPv6: isIPv6, transportOffset: l4, headerLength: l4 + 8,
                             sequence: 0, push: false)
        }
        return nil
    }

    static func flowHash(_ p: UnsafeRawPointer, isIPv6: Bool, transportOffset l4: Int) -> UInt64 {
        let ports = UInt64(p.loadUnaligned(fromByteOffset: l4, as: UInt32.self))
        if isIPv6 {
            var h: UInt64 = ports
            for k in stride(from: 8, to: 40, by: 8) { h = (h ^ p.loadUnaligned(fromByteOffset: k, as: UInt64.self)) &* 0x9E37_79B9_7F4A_7C15 }
            return h
        }
        return (p.loadUnaligned(fromByteOffset: 12, as: UInt64.self) ^ (ports << 7)) &* 0x9E37_79B9_7F4A_7C15
    }

    static func sameFlow(_ a: UnsafeRawPointer, _ aL4: Int, _ b: UnsafeRawPointer, _ bL4: Int, isIPv6: Bool) -> Bool {
        guard a.load(as: UInt8.self) >> 4 == b.load(as: UInt8.self) >> 4 else { return false }
        let addresses = isIPv6 ? memcmp(a + 8, b + 8, 32) : memcmp(a + 12, b + 12, 8)
        return addresses == 0 && memcmp(a + aL4, b + bL4, 4) == 0
    }

    /// Where the ports of any TCP or UDP packet are, for one that is not a candidate.
    static func transport(_ p: UnsafeRawPointer, length: Int) -> (kind: UInt8, isIPv6: Bool, transportOffset: Int)? {
        guard length >= 20 else { return nil }
        let first = p.load(as: UInt8.self)
        let isIPv6 = first >> 4 == 6
        let l4 = isIPv6 ? 40 : Int(first & 0x0f) * 4
        guard first >> 4 == 4 || isIPv6, l4 >= 20, length >= l4 + 4 else { return nil }
        let protocolNumber = p.load(fromByteOffset: isIPv6 ? 6 : 9, as: UInt8.self)
        switch protocolNumber {
        case IPProtocolNumber.tcp: return (Candidate.tcp, isIPv6, l4)
        case IPProtocolNumber.udp: return (Candidate.udp, isIPv6, l4)
        default: return nil
        }
    }

    /// IPv4 header checksum (if IPv4) and transport checksum (a UDP checksum of 0 means none).
    static func checksumsValid(_ p: UnsafeRawPointer, length: Int, _ c: Candidate) -> Bool {
        if !c.isIPv6, InternetChecksum.fold(InternetChecksum.sum(p, count: 20)) != 0xffff { return false }
        let l4 = c.transportOffset
        if c.kind == Candidate.udp, !c.isIPv6, PacketField.u16(p, l4 + 6) == 0 { return true }
        let pseudo = InternetChecksum.pseudoHeaderSum(
            source: p + (c.isIPv6 ? 8 : 12), destination: p + (c.isIPv6 ? 24 : 16), addressLength: c.isIPv6 ? 16 : 4,
            protocolNumber: c.kind == Candidate.tcp ? IPProtocolNumber.tcp : IPProtocolNumber.udp, length: length - l4)
        return InternetChecksum.fold(InternetChecksum.sum(p + l4, count: length - l4, into: pseudo)) == 0xffff
    }
}

@available(*, unavailable, message: "a GROTable belongs to one writer")
extension GROTable: Sendable {}
