/// Answers ICMP and ICMPv6 echo requests (ping) in place: the request becomes the reply, with
/// source and destination swapped, the type changed and the checksum recomputed. Pure; what
/// `farcast tun echo` runs for every packet its device yields.
///
/// Only well-formed requests get answers: IPv4 without fragmentation, IPv6 with ICMPv6 right
/// after the fixed header, lengths that agree with the packet, a valid checksum, and a unicast
/// destination (a reply must not come from a multicast or broadcast address).
public enum EchoResponder {
    /// Rewrites `packet` into its reply and returns the reply's length, or nil when the packet
    /// is not an echo request to answer (left unchanged then).
    public static func answer(_ packet: UnsafeMutableRawBufferPointer) -> Int? {
        guard let p = packet.baseAddress, packet.count >= 1 else { return nil }
        switch p.load(as: UInt8.self) >> 4 {
        case 4: return answerIPv4(p, packet.count)
        case 6: return answerIPv6(p, packet.count)
        default: return nil
        }
    }

    private static func answerIPv4(_ p: UnsafeMutableRawPointer, _ length: Int) -> Int? {
        guard length >= 28 else { return nil }
        let headerLength = Int(p.load(as: UInt8.self) & 0x0f) * 4
        let total = Int(PacketField.u16(p, 2))
        guard headerLength >= 20, total >= headerLength + 8, total <= length,
              p.load(fromByteOffset: 9, as: UInt8.self) == IPProtocolNumber.icmp,
              PacketField.u16(p, 6) & 0x3fff == 0,                                   // not a fragment
              InternetChecksum.fold(InternetChecksum.sum(p, count: headerLength)) == 0xffff else { return nil }
        let destination = PacketField.u32(p, 16)
        guard destination >> 28 != 0xe, destination != 0xffff_ffff, destination != 0 else { return nil }
        let icmp = p + headerLength
        let icmpLength = total - headerLength
        guard icmp.load(as: UInt8.self) == 8, icmp.load(fromByteOffset: 1, as: UInt8.self) == 0,
              InternetChecksum.fold(InternetChecksum.sum(icmp, count: icmpLength)) == 0xffff else { return nil }
        // Swap addresses, fresh TTL, echo reply (type 0).
        let source = PacketField.u32(p, 12)
        PacketField.setU32(p, 12, destination)
        PacketField.setU32(p, 16, source)
        p.storeBytes(of: UInt8(64), toByteOffset: 8, as: UInt8.self)
        PacketField.refreshIPv4HeaderChecksum(p, headerLength: headerLength)
        icmp.storeBytes(of: UInt8(0), as: UInt8.self)
        PacketField.setChecksum(icmp, 2, 0)
        PacketField.setChecksum(icmp, 2, InternetChecksum.checksum(icmp, count: icmpLength))
        return total
    }

    private static func answerIPv6(_ p: UnsafeMutableRawPointer, _ length: Int) -> Int? {
        guard length >= 48 else { return nil }
        let payloadLength = Int(PacketField.u16(p, 4))
        guard 40 + payloadLength <= length, payloadLength >= 8,
              p.load(fromByteOffset: 6, as: UInt8.self) == IPProtocolNumber.icmpv6,
              p.load(fromByteOffset: 24, as: UInt8.self) != 0xff else { return nil }    // multicast destination
        let icmp = p + 40
        let pseudo = InternetChecksum.pseudoHeaderSum(source: p + 8, destination: p + 24, addressLength: 16,
                                                      protocolNumber: IPProtocolNumber.icmpv6, length: payloadLength)
        guard icmp.load(as: UInt8.self) == 128, icmp.load(fromByteOffset: 1, as: UInt8.self) == 0,
              InternetChecksum.fold(InternetChecksum.sum(icmp, count: payloadLength, into: pseudo)) == 0xffff else { return nil }
        // Swap the 16-byte addresses, fresh hop limit, echo reply (type 129).
        var source = (UInt64(0), UInt64(0))
        withUnsafeMutableBytes(of: &source) { $0.baseAddress!.copyMemory(from: p + 8, byteCount: 16) }
        (p + 8).copyMemory(from: p + 24, byteCount: 16)
        withUnsafeBytes(of: &source) { (p + 24).copyMemory(from: $0.baseAddress!, byteCount: 16) }
        p.storeBytes(of: UInt8(64), toByteOffset: 7, as: UInt8.self)
        icmp.storeBytes(of: UInt8(129), as: UInt8.self)
        PacketField.setChecksum(icmp, 2, 0)
        // The pseudo-header sum does not change with the addresses swapped.
        PacketField.setChecksum(icmp, 2, InternetChecksum.finish(InternetChecksum.sum(icmp, count: payloadLength, into: pseudo)))
        return 40 + payloadLength
    }
}
