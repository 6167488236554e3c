/// The `virtio_net_hdr` that precedes every packet on a TUN descriptor opened with
/// `IFF_VNET_HDR`: how the kernel describes a partially checksummed packet or a GSO
/// super-packet, and how we describe a coalesced one. Ten bytes, host byte order (the UAPI layout;
/// a 12-byte variant appends `num_buffers`, which TUN ignores).
public struct VirtioNetHeader: Equatable, Sendable {
    /// Bytes of the basic header.
    public static let size = 10

    /// `flags` bits.
    public static let needsChecksum: UInt8 = 1      // VIRTIO_NET_HDR_F_NEEDS_CSUM
    public static let dataValid: UInt8 = 2          // VIRTIO_NET_HDR_F_DATA_VALID

    /// `gso_type` values (the ECN bit 0x80 may be or-ed in).
    public enum GSOType: UInt8, Sendable {
        case none = 0
        case tcpv4 = 1
        case udp = 3        // UFO, legacy: never enabled by us
        case tcpv6 = 4
        case udpL4 = 5      // USO, kernel >= 6.2
    }
    public static let gsoECN: UInt8 = 0x80

    public var flags: UInt8
    /// The raw `gso_type` byte, ECN bit included.
    public var gsoTypeByte: UInt8
    /// Length of the headers (L3 + L4 for TUN) as the sender claims it; not trusted.
    public var headerLength: UInt16
    /// Payload bytes per segment (the MSS for TCP).
    public var gsoSize: UInt16
    /// Where checksumming starts, from the start of the packet.
    public var checksumStart: UInt16
    /// Where the checksum is stored, relative to `checksumStart`.
    public var checksumOffset: UInt16

    public init(flags: UInt8 = 0, gsoType: GSOType = .none, headerLength: UInt16 = 0, gsoSize: UInt16 = 0,
                checksumStart: UInt16 = 0, checksumOffset: UInt16 = 0) {
        self.flags = flags
        self.gsoTypeByte = gsoType.rawValue
        self.headerLength = headerLength
        self.gsoSize = gsoSize
        self.checksumStart = checksumStart
        self.checksumOffset = checksumOffset
    }

    /// The GSO type without the ECN bit; nil for a value the kernel does not define.
    public var gsoType: GSOType? { GSOType(rawValue: gsoTypeByte & ~Self.gsoECN) }

    public var needsChecksum: Bool { flags & Self.needsChecksum != 0 }

    /// Reads the header from the first ten bytes at `pointer` (the caller checked the length).
    @inlinable
    public init(loading pointer: UnsafeRawPointer) {
        flags = pointer.load(as: UInt8.self)
        gsoTypeByte = pointer.load(fromByteOffset: 1, as: UInt8.self)
        headerLength = UInt16(littleEndian: pointer.loadUnaligned(fromByteOffset: 2, as: UInt16.self))
        gsoSize = UInt16(littleEndian: pointer.loadUnaligned(fromByteOffset: 4, as: UInt16.self))
        checksumStart = UInt16(littleEndian: pointer.loadUnaligned(fromByteOffset: 6, as: UInt16.self))
        checksumOffset = UInt16(littleEndian: pointer.loadUnaligned(fromByteOffset: 8, as: UInt16.self))
    }

    /// Parses a header from the start of `bytes`; nil when fewer than ten bytes are there.
    public init?(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= Self.size, let base = bytes.baseAddress else { return nil }
        self.init(loading: base)
    }

    /// Writes the ten bytes at `pointer`. The fields are little-endian because every platform
    /// this runs on is, and the kernel reads them in host order (`TUNSETVNETLE` not needed).
    @inlinable
    public func store(to pointer: UnsafeMutableRawPointer) {
        pointer.storeBytes(of: flags, as: UInt8.self)
        pointer.storeBytes(of: gsoTypeByte, toByteOffset: 1, as: UInt8.self)
        pointer.storeBytes(of: headerLength.littleEndian, toByteOffset: 2, as: UInt16.self)
        pointer.storeBytes(of: gsoSize.littleEndian, toByteOffset: 4, as: UInt16.self)
        pointer.storeBytes(of: checksumStart.littleEndian, toByteOffset: 6, as: UInt16.self)
        pointer.storeBytes(of: checksumOffset.littleEndian, toByteOffset: 8, as: UInt16.self)
    }

    public var bytes: [UInt8] {
        var out = [UInt8](repeating: 0, count: Self.size)
        out.withUnsafeMutableBytes { store(to: $0.baseAddress!) }
        return out
    }
}

/// What userspace tells the kernel it can take (`TUNSETOFFLOAD`'s flag word, `TUN_F_*`).
public struct OffloadFeatures: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let checksum = OffloadFeatures(rawValue: 0x01)   // TUN_F_CSUM
    public static let tso4 = OffloadFeatures(rawValue: 0x02)       // TUN_F_TSO4
    public static let tso6 = OffloadFeatures(rawValue: 0x04)       // TUN_F_TSO6
    public static let tsoECN = OffloadFeatures(rawValue: 0x08)     // TUN_F_TSO_ECN
    public static let ufo = OffloadFeatures(rawValue: 0x10)        // TUN_F_UFO (legacy)
    public static let uso4 = OffloadFeatures(rawValue: 0x20)       // TUN_F_USO4, kernel >= 6.2
    public static let uso6 = OffloadFeatures(rawValue: 0x40)       // TUN_F_USO6, kernel >= 6.2

    /// What `TunDevice` asks for first; without USO on kernels older than 6.2.
    public static let preferred: OffloadFeatures = [.checksum, .tso4, .tso6, .uso4, .uso6]
    public static let withoutUSO: OffloadFeatures = [.checksum, .tso4, .tso6]

    public var description: String {
        let names: [(OffloadFeatures, String)] = [(.checksum, "csum"), (.tso4, "tso4"), (.tso6, "tso6"),
            (.tsoECN, "tso_ecn"), (.ufo, "ufo"), (.uso4, "uso4"), (.uso6, "uso6")]
        let present = names.filter { contains($0.0) }.map(\.1)
        return present.isEmpty ? "none" : present.joined(separator: ",")
    }

    /// The names, for JSON.
    public var names: [String] { description == "none" ? [] : description.split(separator: ",").map(String.init) }
}
