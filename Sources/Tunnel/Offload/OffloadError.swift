/// Why a packet handed over with a virtio-net header could not be split or completed. A TUN
/// reader drops that one packet, counts it, and carries on with the next.
public enum OffloadError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Fewer bytes than a virtio-net header arrived.
    case truncatedVirtioHeader(length: Int)
    /// The `gso_type` byte is none the kernel defines.
    case unknownGSOType(UInt8)
    /// UFO (IPv4 UDP fragmentation offload) is never enabled, so it never legitimately arrives.
    case unsupportedGSOType(UInt8)
    /// The packet is not IPv4 or IPv6 (first nibble).
    case notIP(versionNibble: UInt8)
    /// The packet ends before a header it must hold.
    case packetTooShort(length: Int, needed: Int)
    /// `csum_start`/`csum_offset` point outside the packet.
    case checksumOutsidePacket(start: Int, offset: Int, length: Int)
    /// A GSO packet without `NEEDS_CSUM`.
    case gsoWithoutChecksum
    /// The GSO type does not match the packet (TCPv4 on an IPv6 packet, UDP on TCP…).
    case gsoTypeMismatch(gsoType: UInt8, ipVersion: Int, protocolNumber: UInt8)
    /// `csum_start` is not where the transport header begins.
    case badTransportOffset(Int)
    /// The TCP data offset is outside 20–60 bytes or past the end.
    case badTCPHeaderLength(Int)
    /// `csum_offset` is not the transport's checksum field.
    case badChecksumOffset(Int)
    /// A GSO packet with `gso_size` 0.
    case zeroGSOSize
    /// One segment would be larger than a batch slot.
    case segmentLargerThanSlot(segment: Int, slot: Int)
    /// More segments than a batch has slots.
    case tooManySegments(Int, capacity: Int)

    public var description: String {
        switch self {
        case .truncatedVirtioHeader(let n): "truncated virtio-net header: \(n) of 10 bytes"
        case .unknownGSOType(let t): "unknown GSO type \(t) in virtio-net header"
        case .unsupportedGSOType(let t): "GSO type \(t) (UFO) was never enabled"
        case .notIP(let v): "not an IP packet (version \(v))"
        case .packetTooShort(let n, let needed): "packet of \(n) bytes is shorter than its headers (\(needed) bytes)"
        case .checksumOutsidePacket(let s, let o, let n): "checksum at \(s)+\(o) lies outside the \(n)-byte packet"
        case .gsoWithoutChecksum: "GSO packet without NEEDS_CSUM"
        case .gsoTypeMismatch(let t, let v, let p): "GSO type \(t) does not fit an IPv\(v) packet carrying protocol \(p)"
        case .badTransportOffset(let n): "checksum start \(n) is not the transport header's offset"
        case .badTCPHeaderLength(let n): "TCP header length \(n) is outside 20–60 bytes or past the end"
        case .badChecksumOffset(let n): "checksum offset \(n) is not the transport checksum field"
        case .zeroGSOSize: "GSO packet with gso_size 0"
        case .segmentLargerThanSlot(let s, let slot): "a \(s)-byte segment does not fit a \(slot)-byte slot"
        case .tooManySegments(let n, let c): "\(n) segments exceed the batch's \(c) slots"
        }
    }
}
