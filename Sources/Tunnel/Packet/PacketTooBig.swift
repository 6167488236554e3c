/// The answer a tunnel gives a packet larger than its path carries, so the sender's kernel
/// learns the smaller path MTU (RFC 1191, RFC 8201) instead of losing every large packet
/// silently: ICMP "fragmentation needed" (type 3, code 4, with the MTU) for an IPv4 packet that
/// forbids fragmentation, ICMPv6 "packet too big" (type 2) for IPv6. The answer is written back
/// into the device, addressed to the packet's source and sent from its destination (a source
/// the kernel routes into the device, so reverse-path filtering accepts it). Pure.
///
/// No answer is made to an ICMP error (an error about an error), to a packet from an
/// unspecified, multicast or broadcast source, to an IPv4 packet that may be fragmented (the
/// tunnel's own datagrams are fragmented on the way instead), or to anything malformed.
public enum PacketTooBig {
    /// The largest answer made: an IPv6 error fills the 1280 bytes every IPv6 link carries.
    public static let maximumReplyLength = 1280

    /// Writes into `reply` the error for `packet`, which is larger than `mtu`, and returns its
    /// length; nil when no answer is due. `reply` needs `maximumReplyLength` bytes.
    public static func reply(to packet: UnsafeRawBufferPointer, mtu: Int, into reply: UnsafeMutableRawBufferPointer) -> Int? {
        guard let p = packet.baseAddress, packet.count > mtu, mtu > 0, let out = reply.baseAddress,
              reply.count >= maximumReplyLength else { return nil }
        switch p.load(as: UInt8.self) >> 4 {
        case 4: return replyIPv4(p, packet.count, mtu: mtu, into: out)
        case 6: return replyIPv6(p, packet.count, mtu: mtu, into: out)
        default: return nil
        }
    }

    private static func replyIPv4(_ p: UnsafeRawPointer, _ length: Int, mtu: Int, into out: UnsafeMutableRawPointer) -> Int? {
        guard length >= 20 else { return nil }
        let headerLength = Int(p.load(as: UInt8.self) & 0x0f) * 4
        guard headerLength >= 20, length >= headerLength + 8 else { return nil }
        let flags = PacketField.u16(p, 6)
        guard flags & 0x4000 != 0, flags & 0x1fff == 0 else { return nil }       // DF set, first fragment
        let source = PacketField.u32(p, 12), destination = PacketField.u32(p, 16)
        guard source != 0, source >> 28 != 0xe, source != 0xffff_ffff else { return nil }
        if p.load(fromByteOffset: 9, as: UInt8.self) == IPProtocolNumber.icmp,
           [3, 4, 5, 11, 12].contains(p.load(fromByteOffset: headerLength, as: UInt8.self)) { return nil }
        // The original header and the first 8 bytes after it (the ports) identify the sender's socket.
        let quoted = headerLength + 8
        let total = 20 + 8 + quoted
        out.initializeMemory(as: UInt8.self, repeating: 0, count: total)
        out.storeBytes(of: UInt8(0x45), as: UInt8.self)
        PacketField.setU16(out, 2, UInt16(total))
        out.storeBytes(of: UInt8(64), toByteOffset: 8, as: UInt8.self)
        out.storeBytes(of: IPProtocolNumber.icmp, toByteOffset: 9, as: UInt8.self)
        PacketField.setU32(out, 12, destination)
        PacketField.setU32(out, 16, source)
        PacketField.refreshIPv4HeaderChecksum(out, headerLength: 20)
        let icmp = out + 20
        icmp.storeBytes(of: UInt8(3), as: UInt8.self)
        icmp.storeBytes(of: UInt8(4), toByteOffset: 1, as: UInt8.self)
        PacketField.setU16(icmp, 6, UInt16(min(mtu, 0xffff)))
        (icmp + 8).copyMemory(from: p, byteCount: quoted)
        PacketField.setChecksum(icmp, 2, InternetChecksum.checksum(icmp, count: 8 + quoted))
        return total
    }

    private static func replyIPv6(_ p: UnsafeRawPointer, _ length: Int, mtu: Int, into out: UnsafeMutableRawPointer) -> Int? {
        guard length >= 40 else { return nil }
        let source = UnsafeRawBufferPointer(start: p + 8, count: 16)
        guard source[0] != 0xff, !source.allSatisfy({ $0 == 0 }) else { return nil }
        if p.load(fromByteOffset: 6, as: UInt8.self) == IPProtocolNumber.icmpv6, length >= 41,
           p.load(fromByteOffset: 40, as: UInt8.self) < 128 { return nil }      // an ICMPv6 error
        let quoted = min(length, maximumReplyLength - 40 - 8)
        let payload = 8 + quoted
        out.initializeMemory(as: UInt8.self, repeating: 0, count: 40 + payload)
        out.storeBytes(of: UInt8(0x60), as: UInt8.self)
        PacketField.setU16(out, 4, UInt16(payload))
        out.storeBytes(of: IPProtocolNumber.icmpv6, toByteOffset: 6, as: UInt8.self)
        out.storeBytes(of: UInt8(64), toByteOffset: 7, as: UInt8.self)
        (out + 8).copyMemory(from: p + 24, byteCount: 16)
        (out + 24).copyMemory(from: p + 8, byteCount: 16)
        let icmp = out + 40
        icmp.storeBytes(of: UInt8(2), as: UInt8.self)
        PacketField.setU32(icmp, 4, UInt32(mtu))
        (icmp + 8).copyMemory(from: p, byteCount: quoted)
        let pseudo = InternetChecksum.pseudoHeaderSum(source: out + 8, destination: out + 24, addressLength: 16,
                                                      protocolNumber: IPProtocolNumber.icmpv6, length: payload)
        PacketField.setChecksum(icmp, 2, InternetChecksum.finish(InternetChecksum.sum(icmp, count: payload, into: pseudo)))
        return 40 + payload
    }
}
