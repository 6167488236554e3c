/// What a device puts before each packet on its descriptor.
///
/// Linux with `IFF_NO_PI`: nothing. Linux without it: 4 bytes of packet information (flags u16,
/// EtherType u16, both big-endian). Linux with `IFF_VNET_HDR`: a virtio-net header (10 or 12
/// bytes). Apple's utun: the address family as a big-endian u32 (`AF_INET` 2, `AF_INET6` 30 —
/// Darwin's value, whatever the host compiling this uses).
public enum PacketFraming: Equatable, Sendable {
    case none
    case packetInformation
    case virtioNetHeader(size: Int)
    case addressFamily

    /// Bytes before each packet.
    public var prefixLength: Int {
        switch self {
        case .none: 0
        case .packetInformation, .addressFamily: 4
        case .virtioNetHeader(let size): size
        }
    }

    /// Darwin's address families, as utun writes them.
    public static let darwinAFInet: UInt32 = 2
    public static let darwinAFInet6: UInt32 = 30
    /// `TUN_PKT_STRIP`: the kernel cut the packet to fit the read buffer.
    public static let packetInformationStripped: UInt16 = 0x0001

    /// Writes the prefix for a packet whose first byte is `firstByte` (the IP version nibble for
    /// layer-3 devices) at `pointer`. A virtio-net header is written as "plain packet" (zeros).
    public func storePrefix(to pointer: UnsafeMutableRawPointer, firstByte: UInt8) {
        switch self {
        case .none:
            break
        case .packetInformation:
            // EtherType from the IP version; TAP devices ignore it and parse the frame.
            let etherType: UInt16 = firstByte >> 4 == 6 ? 0x86dd : firstByte >> 4 == 4 ? 0x0800 : 0
            pointer.storeBytes(of: UInt16(0), as: UInt16.self)
            pointer.storeBytes(of: etherType.bigEndian, toByteOffset: 2, as: UInt16.self)
        case .addressFamily:
            let family = firstByte >> 4 == 6 ? Self.darwinAFInet6 : Self.darwinAFInet
            pointer.storeBytes(of: family.bigEndian, as: UInt32.self)
        case .virtioNetHeader(let size):
            pointer.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        }
    }

    /// The prefix as bytes (tests and tools).
    public func prefix(forPacketStartingWith firstByte: UInt8) -> [UInt8] {
        var bytes = [UInt8](repeating: 0xee, count: prefixLength)
        bytes.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { storePrefix(to: base, firstByte: firstByte) }
        }
        return bytes
    }

    /// What a received prefix says about its packet.
    public enum Received: Equatable, Sendable {
        case ipv4, ipv6, other(UInt32)
        /// The kernel truncated the packet (packet information's strip flag).
        case truncated
    }

    /// Decodes a 4-byte packet-information or address-family prefix.
    public func decodePrefix(_ bytes: UnsafeRawBufferPointer) -> Received? {
        guard bytes.count >= 4, let p = bytes.baseAddress else { return nil }
        switch self {
        case .packetInformation:
            let flags = UInt16(bigEndian: p.loadUnaligned(as: UInt16.self))
            if flags & Self.packetInformationStripped != 0 { return .truncated }
            let etherType = UInt16(bigEndian: p.loadUnaligned(fromByteOffset: 2, as: UInt16.self))
            return etherType == 0x0800 ? .ipv4 : etherType == 0x86dd ? .ipv6 : .other(UInt32(etherType))
        case .addressFamily:
            let family = UInt32(bigEndian: p.loadUnaligned(as: UInt32.self))
            return family == Self.darwinAFInet ? .ipv4 : family == Self.darwinAFInet6 ? .ipv6 : .other(family)
        case .none, .virtioNetHeader:
            return nil
        }
    }
}
