/// Big-endian field access into packet memory. Every caller has checked the packet length first;
/// these never bounds-check, so they stay out of public API.
@usableFromInline
enum PacketField {
    @inlinable @inline(__always)
    static func u16(_ p: UnsafeRawPointer, _ offset: Int) -> UInt16 {
        UInt16(bigEndian: p.loadUnaligned(fromByteOffset: offset, as: UInt16.self))
    }

    @inlinable @inline(__always)
    static func u32(_ p: UnsafeRawPointer, _ offset: Int) -> UInt32 {
        UInt32(bigEndian: p.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }

    @inlinable @inline(__always)
    static func setU16(_ p: UnsafeMutableRawPointer, _ offset: Int, _ value: UInt16) {
        p.storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt16.self)
    }

    @inlinable @inline(__always)
    static func setU32(_ p: UnsafeMutableRawPointer, _ offset: Int, _ value: UInt32) {
        p.storeBytes(of: value.bigEndian, toByteOffset: offset, as: UInt32.self)
    }

    /// Stores a checksum computed by `InternetChecksum` (already in memory order).
    @inlinable @inline(__always)
    static func setChecksum(_ p: UnsafeMutableRawPointer, _ offset: Int, _ memoryOrder: UInt16) {
        p.storeBytes(of: memoryOrder, toByteOffset: offset, as: UInt16.self)
    }

    /// Recomputes an IPv4 header checksum in place.
    @inlinable
    static func refreshIPv4HeaderChecksum(_ p: UnsafeMutableRawPointer, headerLength: Int) {
        setChecksum(p, 10, 0)
        setChecksum(p, 10, InternetChecksum.checksum(p, count: headerLength))
    }
}

/// IP protocol numbers the tunnel code looks at.
@usableFromInline
enum IPProtocolNumber {
    @usableFromInline static let icmp: UInt8 = 1
    @usableFromInline static let tcp: UInt8 = 6
    @usableFromInline static let udp: UInt8 = 17
    @usableFromInline static let icmpv6: UInt8 = 58
}

/// TCP flag bits (byte 13 of the header).
@usableFromInline
enum TCPFlag {
    @usableFromInline static let fin: UInt8 = 0x01
    @usableFromInline static let syn: UInt8 = 0x02
    @usableFromInline static let rst: UInt8 = 0x04
    @usableFromInline static let psh: UInt8 = 0x08
    @usableFromInline static let ack: UInt8 = 0x10
    @usableFromInline static let urg: UInt8 = 0x20
    @usableFromInline static let ece: UInt8 = 0x40
    @usableFromInline static let cwr: UInt8 = 0x80
}
