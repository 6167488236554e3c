import Foundation

/// A TAI64N timestamp, the 12 bytes an initiation carries so the responder can refuse a
/// replayed one: seconds since 1970 plus 2^62 + 10 (TAI's offset) big-endian, then nanoseconds
/// big-endian. Big-endian fields make byte order the time order.
public struct TAI64N: Comparable, Hashable, Sendable {
    public let bytes: [UInt8]

    /// Nanoseconds are rounded down to a multiple of 2^24 (≈ 16.8 ms), as wireguard-go does, so
    /// the timestamp does not fingerprint the sender's clock more finely than that.
    public static let whitening: UInt32 = 0x0100_0000

    public init(secondsSince1970 seconds: Int64, nanoseconds: UInt32) {
        let tai = UInt64(bitPattern: seconds) &+ 0x4000_0000_0000_000A
        let nanos = nanoseconds & ~(Self.whitening - 1)
        bytes = (0..<8).map { UInt8(truncatingIfNeeded: tai >> UInt64(56 - 8 * $0)) }
            + (0..<4).map { UInt8(truncatingIfNeeded: nanos >> UInt32(24 - 8 * $0)) }
    }

    public init(_ date: Date) {
        let interval = date.timeIntervalSince1970
        let seconds = interval.rounded(.down)
        self.init(secondsSince1970: Int64(seconds), nanoseconds: UInt32(max(0, min(999_999_999, (interval - seconds) * 1e9))))
    }

    public static var now: TAI64N { TAI64N(Date()) }

    init(bytes: [UInt8]) {
        precondition(bytes.count == 12)
        self.bytes = bytes
    }

    public static func < (a: TAI64N, b: TAI64N) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }
}
