#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 address, held as numbers in network (big-endian) significance: `10.0.0.1` is
/// `.v4(0x0A00_0001)`; an IPv6 address is its high and low 64 bits.
public enum IPAddress: Hashable, Sendable, CustomStringConvertible {
    case v4(UInt32)
    case v6(high: UInt64, low: UInt64)

    /// Parses dotted-quad IPv4 or any RFC 4291 IPv6 text form; nil if it is neither.
    public init?(_ text: some StringProtocol) {
        let string = String(text)
        guard !string.isEmpty, string.utf8.count <= 45 else { return nil }
        var v4 = in_addr()
        if inet_pton(AF_INET, string, &v4) == 1 {
            self = .v4(UInt32(bigEndian: v4.s_addr))
            return
        }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, string, &v6) == 1 else { return nil }
        self.init(bytes: withUnsafeBytes(of: &v6) { Array($0) })
    }

    /// An address from its 4 or 16 bytes as they appear on the wire; nil for any other length.
    public init?(bytes: some Collection<UInt8>) {
        let b = Array(bytes)
        switch b.count {
        case 4:
            self = .v4(b.reduce(0) { $0 << 8 | UInt32($1) })
        case 16:
            let high = b[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let low = b[8..<16].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            self = .v6(high: high, low: low)
        default:
            return nil
        }
    }

    /// Reads an address of `length` (4 or 16) bytes from packet memory.
    public init?(reading pointer: UnsafeRawPointer, length: Int) {
        self.init(bytes: UnsafeRawBufferPointer(start: pointer, count: length))
    }

    public var isIPv4: Bool { if case .v4 = self { true } else { false } }

    /// Address bits: 32 or 128.
    public var bitWidth: Int { isIPv4 ? 32 : 128 }

    /// The wire bytes (4 or 16).
    public var bytes: [UInt8] {
        switch self {
        case .v4(let value):
            return (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) }
        case .v6(let high, let low):
            return (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * $0)) }
                + (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * $0)) }
        }
    }

    /// RFC 5952 text for IPv6 (lower case, longest zero run compressed), dotted quad for IPv4.
    public var description: String {
        var bytes = self.bytes
        let family = isIPv4 ? AF_INET : AF_INET6
        var text = [CChar](repeating: 0, count: 64)
        let ok = bytes.withUnsafeMutableBytes { raw in
            text.withUnsafeMutableBufferPointer { inet_ntop(family, raw.baseAddress, $0.baseAddress, 64) != nil }
        }
        guard ok else { return "?" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// This address with all bits after the first `length` cleared.
    public func masked(to length: Int) -> IPAddress {
        switch self {
        case .v4(let value):
            let keep = max(0, min(32, length))
            return .v4(keep == 0 ? 0 : value & ~UInt32(0) << (32 - keep))
        case .v6(let high, let low):
            let keep = max(0, min(128, length))
            let highMask: UInt64 = keep >= 64 ? ~0 : (keep == 0 ? 0 : ~UInt64(0) << (64 - keep))
            let lowMask: UInt64 = keep <= 64 ? 0 : (keep == 128 ? ~0 : ~UInt64(0) << (128 - keep))
            return .v6(high: high & highMask, low: low & lowMask)
        }
    }
}

/// An address with a prefix length, as in `10.0.0.1/24` or `fd00::1/64`. The address keeps its
/// host bits (an interface address); `network` is the masked form (a route).
public struct IPPrefix: Hashable, Sendable, CustomStringConvertible {
    public let address: IPAddress
    /// 0...32 for IPv4, 0...128 for IPv6.
    public let length: Int

    public init(address: IPAddress, length: Int) throws(IPPrefixError) {
        guard (0...address.bitWidth).contains(length) else {
            throw IPPrefixError(text: "\(address)/\(length)", reason: "prefix length must be 0–\(address.bitWidth)")
        }
        self.address = address
        self.length = length
    }

    /// Parses `ADDRESS/LENGTH`; a bare address means a host prefix (/32 or /128).
    public init(_ text: String) throws(IPPrefixError) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPAddress(parts[0]) else {
            throw IPPrefixError(text: text, reason: "'\(parts[0])' is not an IPv4 or IPv6 address")
        }
        var length = address.bitWidth
        if parts.count == 2 {
            guard let n = Int(parts[1]), parts[1].allSatisfy(\.isASCII) else {
                throw IPPrefixError(text: text, reason: "'\(parts[1])' is not a prefix length")
            }
            length = n
        }
        try self.init(address: address, length: length)
    }

    /// The prefix with host bits cleared: `10.0.0.1/24` → `10.0.0.0/24`.
    public var network: IPPrefix {
        // The length was validated at init, so this cannot throw.
        (try? IPPrefix(address: address.masked(to: length), length: length)) ?? self
    }

    public func contains(_ other: IPAddress) -> Bool {
        other.isIPv4 == address.isIPv4 && other.masked(to: length) == address.masked(to: length)
    }

    public var description: String { "\(address)/\(length)" }
}

/// Text that is not an address with a prefix length.
public struct IPPrefixError: Error, Equatable, Sendable, CustomStringConvertible {
    public let text: String
    public let reason: String
    public var description: String { "invalid address '\(text)': \(reason)" }
}
