/// Why the data plane refused a datagram or a call. Every case names what was wrong in words a
/// person can act on; the receiver counts most of these as drops rather than failing a session.
public enum DataPlaneError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Fewer bytes than the structure needs.
    case truncated(what: String, needed: Int, available: Int)
    /// Byte 36 of a video header was not 0xC9.
    case badMagic(UInt8)
    /// The AEAD tag did not verify (wrong key, wrong direction, or a forged or corrupted datagram).
    case authenticationFailed(sequence: UInt64)
    /// A key of the wrong length for the cipher.
    case badKeyLength(cipher: String, expected: Int, actual: Int)
    /// A header whose block geometry cannot be true.
    case badGeometry(String)
    /// FEC parameters the code cannot represent.
    case fecParameters(String)
    /// Too few shards arrived to rebuild the block.
    case unrecoverable(received: Int, needed: Int)
    /// OpenSSL, which opens and seals datagrams on Linux, could not be loaded.
    case libraryMissing(String)

    public var description: String {
        switch self {
        case let .truncated(what, needed, available):
            return "\(what) is truncated: needs \(needed) byte(s), got \(available)"
        case let .badMagic(byte):
            return "not a punktfunk video datagram: header magic is 0x\(String(byte, radix: 16)), expected 0xc9"
        case let .authenticationFailed(sequence):
            return "video datagram \(sequence) failed authentication (wrong key or a corrupted packet)"
        case let .badKeyLength(cipher, expected, actual):
            return "\(cipher) needs a \(expected)-byte key, got \(actual) bytes"
        case let .badGeometry(reason):
            return "video datagram geometry refused: \(reason)"
        case let .fecParameters(reason):
            return "FEC parameters refused: \(reason)"
        case let .unrecoverable(received, needed):
            return "FEC block cannot be rebuilt: \(received) shard(s) arrived, \(needed) needed"
        case let .libraryMissing(detail):
            return "the data plane needs OpenSSL, which could not be loaded (\(detail)); install it: apt install libssl3"
        }
    }
}
