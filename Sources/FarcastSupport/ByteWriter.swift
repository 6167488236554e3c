/// Builds a message into one contiguous, growable array.
///
/// Writers are for composing outgoing messages; they never fail. Use `reserveCapacity` when the
/// final size is known so the array grows once.
public struct ByteWriter: Sendable {
    /// Everything written so far.
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// Number of bytes written so far.
    public var count: Int { bytes.count }

    public mutating func reserveCapacity(_ n: Int) { bytes.reserveCapacity(n) }

    public mutating func writeUInt8(_ value: UInt8) { bytes.append(value) }

    /// Writes a fixed-width integer in the given byte order (big-endian by default).
    public mutating func writeInteger<T: FixedWidthInteger>(_ value: T, endianness: Endianness = .big) {
        let size = MemoryLayout<T>.size
        switch endianness {
        case .big:
            for i in (0..<size).reversed() { bytes.append(UInt8(truncatingIfNeeded: value >> (i * 8))) }
        case .little:
            for i in 0..<size { bytes.append(UInt8(truncatingIfNeeded: value >> (i * 8))) }
        }
    }

    /// Writes the low `byteCount` bytes of `value` (1–8), for odd widths such as 24-bit fields.
    public mutating func writeUnsigned(_ value: UInt64, byteCount: Int, endianness: Endianness = .big) {
        precondition((1...8).contains(byteCount), "byteCount must be 1...8")
        switch endianness {
        case .big:
            for i in (0..<byteCount).reversed() { bytes.append(UInt8(truncatingIfNeeded: value >> (UInt64(i) * 8))) }
        case .little:
            for i in 0..<byteCount { bytes.append(UInt8(truncatingIfNeeded: value >> (UInt64(i) * 8))) }
        }
    }

    public mutating func writeBytes<S: Sequence>(_ data: S) where S.Element == UInt8 {
        bytes.append(contentsOf: data)
    }

    public mutating func writeUTF8(_ string: String) { bytes.append(contentsOf: string.utf8) }

    public mutating func writeZeros(_ count: Int) {
        bytes.append(contentsOf: repeatElement(0, count: max(count, 0)))
    }
}
