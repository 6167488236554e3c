/// The Internet checksum (RFC 1071): the ones'-complement sum of 16-bit words.
///
/// Sums are kept in *memory order*: words are loaded from the packet as they lie in memory and
/// the folded result is stored back the same way, which the ones'-complement sum allows on any
/// byte order (RFC 1071 §2B). Values that are numbers rather than packet bytes (a length, a
/// protocol number) enter through `adding(word:)`, which converts them.
public enum InternetChecksum {
    /// Adds `count` bytes at `start` to `sum` (unfolded, memory order). An odd trailing byte is
    /// padded with zero, as the RFC says.
    @inlinable
    public static func sum(_ start: UnsafeRawPointer, count: Int, into initial: UInt64 = 0) -> UInt64 {
        var acc = initial
        var p = start
        var remaining = count
        // Four 64-bit loads per round, each split into 32-bit halves so the 64-bit accumulator
        // cannot overflow before 2^32 rounds.
        while remaining >= 32 {
            let a = p.loadUnaligned(as: UInt64.self)
            let b = p.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
            let c = p.loadUnaligned(fromByteOffset: 16, as: UInt64.self)
            let d = p.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
            acc &+= (a & 0xffff_ffff) &+ (a >> 32) &+ (b & 0xffff_ffff) &+ (b >> 32)
            acc &+= (c & 0xffff_ffff) &+ (c >> 32) &+ (d & 0xffff_ffff) &+ (d >> 32)
            p += 32
            remaining -= 32
        }
        while remaining >= 8 {
            let a = p.loadUnaligned(as: UInt64.self)
            acc &+= (a & 0xffff_ffff) &+ (a >> 32)
            p += 8
            remaining -= 8
        }
        if remaining >= 4 {
            acc &+= UInt64(p.loadUnaligned(as: UInt32.self))
            p += 4
            remaining -= 4
        }
        if remaining >= 2 {
            acc &+= UInt64(p.loadUnaligned(as: UInt16.self))
            p += 2
            remaining -= 2
        }
        if remaining == 1 {
            // The last byte is the high half of a big-endian word whose low half is zero.
            acc &+= UInt64((UInt16(p.load(as: UInt8.self)) << 8).bigEndian)
        }
        return acc
    }

    /// Copies `count` bytes from `source` to `destination` and adds them to `sum` in the same
    /// pass (the segment split's inner loop: the bytes are touched once, not twice). The ranges
    /// must not overlap; `count` must be even unless it is the end of the checksummed data.
    @inlinable
    public static func copyAndSum(from source: UnsafeRawPointer, to destination: UnsafeMutableRawPointer, count: Int,
                                  into initial: UInt64 = 0) -> UInt64 {
        var acc = initial
        var s = source
        var d = destination
        var remaining = count
        while remaining >= 32 {
            let a = s.loadUnaligned(as: UInt64.self)
            let b = s.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
            let c = s.loadUnaligned(fromByteOffset: 16, as: UInt64.self)
            let e = s.loadUnaligned(fromByteOffset: 24, as: UInt64.self)
            d.storeBytes(of: a, as: UInt64.self)
            d.storeBytes(of: b, toByteOffset: 8, as: UInt64.self)
            d.storeBytes(of: c, toByteOffset: 16, as: UInt64.self)
            d.storeBytes(of: e, toByteOffset: 24, as: UInt64.self)
            acc &+= (a & 0xffff_ffff) &+ (a >> 32) &+ (b & 0xffff_ffff) &+ (b >> 32)
            acc &+= (c & 0xffff_ffff) &+ (c >> 32) &+ (e & 0xffff_ffff) &+ (e >> 32)
            s += 32
            d += 32
            remaining -= 32
        }
        if remaining > 0 {
            d.copyMemory(from: s, byteCount: remaining)
            acc = sum(s, count: remaining, into: acc)
        }
        return acc
    }

    /// Adds a 16-bit number (not packet bytes) to a memory-order sum.
    @inlinable
    public static func adding(word value: UInt16, to sum: UInt64) -> UInt64 {
        sum &+ UInt64(value.bigEndian)
    }

    /// Folds a sum to 16 bits (memory order), without complementing.
    @inlinable
    public static func fold(_ sum: UInt64) -> UInt16 {
        var s = (sum & 0xffff_ffff) &+ (sum >> 32)
        s = (s & 0xffff_ffff) &+ (s >> 32)
        s = (s & 0xffff) &+ (s >> 16)
        s = (s & 0xffff) &+ (s >> 16)
        s = (s & 0xffff) &+ (s >> 16)
        return UInt16(truncatingIfNeeded: s)
    }

    /// The checksum to store in a header (memory order): the complement of the folded sum.
    @inlinable
    public static func finish(_ sum: UInt64) -> UInt16 { ~fold(sum) }

    /// The checksum of a byte range, ready to store (memory order).
    @inlinable
    public static func checksum(_ start: UnsafeRawPointer, count: Int) -> UInt16 {
        finish(sum(start, count: count))
    }

    /// The sum of the TCP/UDP pseudo-header: both addresses as they lie in the packet, the
    /// protocol number and the upper-layer length.
    @inlinable
    public static func pseudoHeaderSum(source: UnsafeRawPointer, destination: UnsafeRawPointer,
                                       addressLength: Int, protocolNumber: UInt8, length: Int) -> UInt64 {
        var s = sum(source, count: addressLength)
        s = sum(destination, count: addressLength, into: s)
        s = adding(word: UInt16(protocolNumber), to: s)
        // The length is 16 bits for IPv4 and 32 bits for IPv6; both fold the same way.
        s = adding(word: UInt16(truncatingIfNeeded: length >> 16), to: s)
        s = adding(word: UInt16(truncatingIfNeeded: length), to: s)
        return s
    }
}
