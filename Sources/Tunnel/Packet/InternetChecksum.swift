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
        // 64 bytes a round as 32-bit lanes widened into four 64-bit vector accumulators: the
        // compiler keeps this in SSE registers on the x86-64 baseline, and no lane can overflow
        // before 2^32 rounds. (Measured on the build VM: about 1.3x the scalar loop, and faster
        // than a fused copy-and-sum, since libc's memcpy is far quicker than any copy here.)
        if remaining >= 64 {
            var a0 = SIMD4<UInt64>(repeating: 0), a1 = SIMD4<UInt64>(repeating: 0)
            var a2 = SIMD4<UInt64>(repeating: 0), a3 = SIMD4<UInt64>(repeating: 0)
            while remaining >= 64 {
                let v = p.loadUnaligned(as: SIMD8<UInt32>.self)
                let w = p.loadUnaligned(fromByteOffset: 32, as: SIMD8<UInt32>.self)
                a0 &+= SIMD4<UInt64>(truncatingIfNeeded: v.lowHalf)
                a1 &+= SIMD4<UInt64>(truncatingIfNeeded: v.highHalf)
                a2 &+= SIMD4<UInt64>(truncatingIfNeeded: w.lowHalf)
                a3 &+= SIMD4<UInt64>(truncatingIfNeeded: w.highHalf)
                p += 64
                remaining -= 64
            }
            let t = (a0 &+ a1) &+ (a2 &+ a3)
            // Fold each lane to 32 bits first so the final additions cannot overflow.
            for lane in 0..<4 { acc &+= (t[lane] & 0xffff_ffff) &+ (t[lane] >> 32) }
        }
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
