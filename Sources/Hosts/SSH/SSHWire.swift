import FarcastSupport

/// SSH's wire encodings (RFC 4251 §5) over a bounds-checked `ByteReader`: `string` is a 32-bit
/// length then bytes, `mpint` a two's-complement big-endian string. Every length is checked
/// against what is left before anything is read or allocated.
struct SSHWireReader {
    var reader: ByteReader

    init(_ bytes: [UInt8]) { reader = ByteReader(bytes) }

    var isAtEnd: Bool { reader.isAtEnd }
    var remaining: Int { reader.remaining }

    mutating func uint32() throws(TruncatedInput) -> UInt32 {
        try reader.readInteger(as: UInt32.self)
    }

    mutating func string() throws(TruncatedInput) -> [UInt8] {
        let length = Int(try uint32())
        guard length <= reader.remaining else {
            throw TruncatedInput(needed: length, available: reader.remaining, offset: reader.offset)
        }
        return try reader.readBytes(length)
    }

    mutating func text() throws(TruncatedInput) -> String {
        String(decoding: try string(), as: UTF8.self)
    }

    /// An mpint's magnitude without its sign byte.
    mutating func mpint() throws(TruncatedInput) -> [UInt8] {
        var bytes = try string()[...]
        while bytes.first == 0 { bytes = bytes.dropFirst() }
        return Array(bytes)
    }

    mutating func bytes(_ count: Int) throws(TruncatedInput) -> [UInt8] { try reader.readBytes(count) }
}

/// Builds SSH wire encodings.
struct SSHWireWriter {
    var bytes: [UInt8] = []

    mutating func uint32(_ value: UInt32) {
        bytes += [UInt8(value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }

    mutating func string<C: Collection>(_ value: C) where C.Element == UInt8 {
        uint32(UInt32(value.count))
        bytes += value
    }

    mutating func string(_ value: String) { string(Array(value.utf8)) }

    mutating func mpint(_ magnitude: [UInt8]) {
        var trimmed = magnitude[...]
        while trimmed.first == 0 { trimmed = trimmed.dropFirst() }
        if let first = trimmed.first, first & 0x80 != 0 {
            string([0] + trimmed)
        } else {
            string(trimmed)
        }
    }
}
