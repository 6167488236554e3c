/// AV1 low-overhead bitstream format: a sequence of OBUs, each with a header and (as every
/// encoder punktfunk hosts use writes it) a LEB128 size.
public enum AV1 {
    /// OBU types (AV1 specification §6.2.2).
    public enum OBUType {
        public static let sequenceHeader: UInt8 = 1
        public static let temporalDelimiter: UInt8 = 2
        public static let frameHeader: UInt8 = 3
        public static let tileGroup: UInt8 = 4
        public static let metadata: UInt8 = 5
        public static let frame: UInt8 = 6
        public static let redundantFrameHeader: UInt8 = 7
        public static let tileList: UInt8 = 8
        public static let padding: UInt8 = 15
    }

    /// One OBU: where it starts and ends, where its payload is, and its header fields.
    public struct OBU: Sendable, Equatable {
        public let range: Range<Int>
        public let payload: Range<Int>
        public let type: UInt8
        public let temporalID: UInt8
        public let spatialID: UInt8
    }

    /// The OBUs of a temporal unit. An OBU without a size field runs to the end of the buffer.
    /// Throws for a set forbidden bit, an overlong or unterminated LEB128, or a size past the end.
    public static func obus(in bytes: [UInt8]) throws(MediaError) -> [OBU] {
        var out: [OBU] = []
        var i = 0
        while i < bytes.count {
            let start = i
            let header = bytes[i]
            guard header & 0x80 == 0 else { throw .malformed("AV1 OBU at byte \(i) has its forbidden bit set") }
            let type = (header >> 3) & 0x0F
            let hasExtension = header & 0x04 != 0
            let hasSize = header & 0x02 != 0
            i += 1
            var temporal: UInt8 = 0, spatial: UInt8 = 0
            if hasExtension {
                guard i < bytes.count else { throw .truncated(what: "AV1 OBU extension header", needed: 1, available: 0) }
                temporal = bytes[i] >> 5
                spatial = (bytes[i] >> 3) & 0x03
                i += 1
            }
            let size: Int
            if hasSize {
                var value: UInt64 = 0
                var read = 0
                while true {
                    guard read < 8 else { throw .malformed("AV1 OBU size at byte \(i) is longer than 8 LEB128 bytes") }
                    guard i < bytes.count else { throw .truncated(what: "AV1 OBU size", needed: 1, available: 0) }
                    let byte = bytes[i]
                    value |= UInt64(byte & 0x7F) << (7 * UInt64(read))
                    i += 1
                    read += 1
                    if byte & 0x80 == 0 { break }
                }
                guard value <= UInt64(bytes.count - i) else {
                    throw .truncated(what: "AV1 OBU of type \(type)", needed: Int(clamping: value), available: bytes.count - i)
                }
                size = Int(value)
            } else {
                size = bytes.count - i
            }
            out.append(OBU(range: start..<(i + size), payload: i..<(i + size), type: type, temporalID: temporal, spatialID: spatial))
            i += size
        }
        return out
    }

    /// Encodes a value as LEB128 (for building OBUs in tests and the stand-in host).
    public static func leb128(_ value: Int) -> [UInt8] {
        var v = UInt64(value), out: [UInt8] = []
        repeat {
            var byte = UInt8(v & 0x7F)
            v >>= 7
            if v != 0 { byte |= 0x80 }
            out.append(byte)
        } while v != 0
        return out
    }
}
