/// Splits a GSO super-packet read from a TUN device (virtio-net header + up to 64 KiB) into
/// MTU-sized packets with correct lengths, sequence numbers, flags and checksums, or completes
/// the checksum of a single partially checksummed packet. Pure: memory in, memory out.
///
/// From a TAP device the same is done to Ethernet frames: each segment starts with a copy of
/// the super-frame's Ethernet header (and up to two VLAN tags), the offsets in the virtio-net header
/// count from the frame's first byte, and a frame that is not IP passes through whole.
///
/// Nothing in the header is trusted: `hdr_len` is ignored and recomputed, every offset is
/// checked against the packet before use, and a bad header is a typed error for that packet
/// alone (the batch keeps what it had).
public enum GSOSplitter {
    /// A validated description of how one packet splits.
    public struct Plan: Equatable, Sendable {
        public enum Transport: Sendable { case tcp, udp, other }
        /// Packets this becomes (1 for a packet that is not GSO).
        public let segments: Int
        /// The largest of them.
        public let largestSegment: Int
        let isIPv6: Bool
        let transport: Transport
        let gso: Bool
        /// Where the IP header starts: 0 in a TUN packet, after the Ethernet header (and VLAN
        /// tags) in a TAP frame. Every other offset counts from the packet's or frame's start.
        let ipOffset: Int
        let transportOffset: Int
        let headerLength: Int
        let gsoSize: Int
        /// For a non-GSO packet: complete the checksum at this start/offset.
        let checksumStart: Int?
        let checksumOffset: Int
    }

    /// What comes before the IP header: nothing (TUN) or an Ethernet header (TAP).
    public enum LinkLayer: Sendable { case none, ethernet }

    /// Validates `header` against `packet` (the bytes after the header: an IP packet, or an
    /// Ethernet frame for `.ethernet`).
    public static func plan(_ header: VirtioNetHeader, packet: UnsafeRawBufferPointer,
                            linkLayer: LinkLayer = .none) throws(OffloadError) -> Plan {
        guard let frame = UnsafeRawPointer(packet.baseAddress), packet.count >= 1 else {
            throw .packetTooShort(length: packet.count, needed: 20)
        }
        var l2 = 0
        if linkLayer == .ethernet {
            guard let offset = ethernetPayloadOffset(frame, length: packet.count) else {
                return try nonIPFramePlan(header, length: packet.count)
            }
            l2 = offset
            // An Ethernet header with nothing after it.
            guard packet.count > l2 else { throw .packetTooShort(length: 0, needed: 20) }
        }
        let p = frame + l2
        let length = packet.count - l2
        let version = p.load(as: UInt8.self) >> 4
        let isIPv6: Bool
        let ipHeaderLength: Int
        let protocolNumber: UInt8
        switch version {
        case 4:
            guard length >= 20 else { throw .packetTooShort(length: length, needed: 20) }
            ipHeaderLength = Int(p.load(as: UInt8.self) & 0x0f) * 4
            guard ipHeaderLength >= 20, ipHeaderLength <= length else {
                throw .packetTooShort(length: length, needed: max(ipHeaderLength, 20))
            }
            protocolNumber = p.load(fromByteOffset: 9, as: UInt8.self)
            isIPv6 = false
        case 6:
            guard length >= 40 else { throw .packetTooShort(length: length, needed: 40) }
            ipHeaderLength = 40
            protocolNumber = p.load(fromByteOffset: 6, as: UInt8.self)
            isIPv6 = true
        default:
            throw .notIP(versionNibble: version)
        }

        guard let gsoType = header.gsoType else { throw .unknownGSOType(header.gsoTypeByte) }
        // The checksum start counts from the frame's first byte; below, from the IP header's.
        let start = Int(header.checksumStart) - l2, offset = Int(header.checksumOffset)
        switch gsoType {
        case .none:
            var checksumStart: Int? = nil
            if header.needsChecksum {
                guard start >= ipHeaderLength, start + offset + 2 <= length else {
                    throw .checksumOutsidePacket(start: start, offset: offset, length: length)
                }
                checksumStart = start
            }
            let transport: Plan.Transport = protocolNumber == IPProtocolNumber.udp ? .udp
                : protocolNumber == IPProtocolNumber.tcp ? .tcp : .other
            return Plan(segments: 1, largestSegment: l2 + length, isIPv6: isIPv6, transport: transport, gso: false,
                        ipOffset: l2, transportOffset: l2 + start, headerLength: l2 + length, gsoSize: 0,
                        checksumStart: checksumStart.map { l2 + $0 }, checksumOffset: offset)
        case .udp:
            throw .unsupportedGSOType(header.gsoTypeByte)
        case .tcpv4, .tcpv6, .udpL4:
            break
        }

        guard header.needsChecksum else { throw .gsoWithoutChecksum }
        let isTCP = gsoType != .udpL4
        if (gsoType == .tcpv4 && isIPv6) || (gsoType == .tcpv6 && !isIPv6) {
            throw .gsoTypeMismatch(gsoType: header.gsoTypeByte, ipVersion: isIPv6 ? 6 : 4, protocolNumber: protocolNumber)
        }
        // The transport header starts where checksumming starts. IPv4 says where that is; for
        // IPv6 extension headers may come between, so any start inside the packet will do, but a
        // transport header right after the fixed header must be the one the GSO type claims.
        if !isIPv6 {
            guard start == ipHeaderLength else { throw .badTransportOffset(start) }
        } else {
            guard start >= 40, start < length else { throw .badTransportOffset(start) }
        }
        if !isIPv6 || start == 40 {
            let expected = isTCP ? IPProtocolNumber.tcp : IPProtocolNumber.udp
            guard protocolNumber == expected else {
                throw .gsoTypeMismatch(gsoType: header.gsoTypeByte, ipVersion: isIPv6 ? 6 : 4, protocolNumber: protocolNumber)
            }
        }
        let headerLength: Int
        if isTCP {
            guard offset == 16 else { throw .badChecksumOffset(offset) }
            guard start + 20 <= length else { throw .packetTooShort(length: length, needed: start + 20) }
            let tcpHeaderLength = Int(p.load(fromByteOffset: start + 12, as: UInt8.self) >> 4) * 4
            guard tcpHeaderLength >= 20, start + tcpHeaderLength <= length else {
                throw .badTCPHeaderLength(tcpHeaderLength)
            }
            headerLength = start + tcpHeaderLength
        } else {
            guard offset == 6 else { throw .badChecksumOffset(offset) }
            guard start + 8 <= length else { throw .packetTooShort(length: length, needed: start + 8) }
            headerLength = start + 8
        }
        let gsoSize = Int(header.gsoSize)
        guard gsoSize > 0 else { throw .zeroGSOSize }
        let payload = length - headerLength
        let segments = payload == 0 ? 1 : (payload + gsoSize - 1) / gsoSize
        return Plan(segments: segments, largestSegment: l2 + headerLength + min(gsoSize, payload), isIPv6: isIPv6,
                    transport: isTCP ? .tcp : .udp, gso: true, ipOffset: l2, transportOffset: l2 + start,
                    headerLength: l2 + headerLength, gsoSize: gsoSize, checksumStart: nil, checksumOffset: offset)
    }

    /// EtherType values the splitter looks inside.
    static let etherTypeIPv4: UInt16 = 0x0800, etherTypeIPv6: UInt16 = 0x86DD
    /// VLAN tags: 802.1Q (C-tag) and 802.1ad (S-tag).
    static let etherTypeVLAN: UInt16 = 0x8100, etherTypeServiceVLAN: UInt16 = 0x88A8
    /// The most VLAN tags a frame's header may carry (S-tag then C-tag).
    static let maximumVLANTags = 2

    /// Where the IP header of an Ethernet frame starts (14, plus 4 per VLAN tag, at most two),
    /// or nil when the frame carries something else (ARP, say) or is too short to tell.
    static func ethernetPayloadOffset(_ frame: UnsafeRawPointer, length: Int) -> Int? {
        guard length >= 14 else { return nil }
        var type = PacketField.u16(frame, 12), offset = 14
        for _ in 0..<maximumVLANTags where type == etherTypeVLAN || type == etherTypeServiceVLAN {
            guard length >= offset + 4 else { return nil }
            type = PacketField.u16(frame, offset + 2)
            offset += 4
        }
        return type == etherTypeIPv4 || type == etherTypeIPv6 ? offset : nil
    }

    /// A frame that is not IP: it passes whole, its checksum completed where the header asks.
    /// Segmenting it is refused (the kernel never asks that of a non-IP frame).
    private static func nonIPFramePlan(_ header: VirtioNetHeader, length: Int) throws(OffloadError) -> Plan {
        guard let gsoType = header.gsoType else { throw .unknownGSOType(header.gsoTypeByte) }
        guard gsoType == .none else { throw .notIP(versionNibble: 0) }
        let start = Int(header.checksumStart), offset = Int(header.checksumOffset)
        var checksumStart: Int? = nil
        if header.needsChecksum {
            guard start + offset + 2 <= length else { throw .checksumOutsidePacket(start: start, offset: offset, length: length) }
            checksumStart = start
        }
        return Plan(segments: 1, largestSegment: length, isIPv6: false, transport: .other, gso: false, ipOffset: 0,
                    transportOffset: start, headerLength: length, gsoSize: 0, checksumStart: checksumStart, checksumOffset: offset)
    }

    /// Appends the packets of `plan` to `batch` — all of them, or only the segments numbered in
    /// `segments` (the rest of a super-packet that did not fit one batch goes into the next, and
    /// each segment comes out the same either way). Throws, appending nothing, when they do not
    /// fit or the range is not within the plan.
    @discardableResult
    public static func split(_ packet: UnsafeRawBufferPointer, plan: Plan, into batch: PacketBatch,
                             segments: Range<Int>? = nil) throws(OffloadError) -> Int {
        let range = segments ?? 0..<plan.segments
        guard range.lowerBound >= 0, range.upperBound <= plan.segments, !range.isEmpty, plan.gso || range == 0..<1 else {
            throw .tooManySegments(range.upperBound, capacity: plan.segments)
        }
        guard range.count <= batch.freeSlots else { throw .tooManySegments(range.count, capacity: batch.freeSlots) }
        guard plan.largestSegment <= batch.slotSize else {
            throw .segmentLargerThanSlot(segment: plan.largestSegment, slot: batch.slotSize)
        }
        guard let source = UnsafeRawPointer(packet.baseAddress) else { return 0 }
        if !plan.gso {
            let destination = batch.slot(batch.count).baseAddress!
            destination.copyMemory(from: source, byteCount: packet.count)
            if let start = plan.checksumStart {
                // 0 is stored as 0xffff for UDP (0 means "no checksum") and for frames whose
                // protocol is not known here (what the kernel does for any of them).
                completeChecksum(destination, length: packet.count, start: start, offset: plan.checksumOffset,
                                 zeroAsAllOnes: (plan.transport == .udp && plan.checksumOffset == 6) || plan.transport == .other)
            }
            batch.commit(length: packet.count)
            return 1
        }

        let l4 = plan.transportOffset
        let ip = plan.ipOffset
        let headerLength = plan.headerLength
        let payload = packet.count - headerLength
        let isTCP = plan.transport == .tcp
        // Both addresses lie side by side: IPv4 at 12..<20, IPv6 at 8..<40.
        let addressSum = plan.isIPv6 ? InternetChecksum.sum(source + ip + 8, count: 32) : InternetChecksum.sum(source + ip + 12, count: 8)
        let protocolNumber = isTCP ? IPProtocolNumber.tcp : IPProtocolNumber.udp
        let firstID = plan.isIPv6 ? 0 : PacketField.u16(source, ip + 4)
        let firstSequence = isTCP ? PacketField.u32(source, l4 + 4) : 0
        let flags = isTCP ? source.load(fromByteOffset: l4 + 13, as: UInt8.self) : 0
        let last = plan.segments - 1

        for i in range {
            let chunkStart = i * plan.gsoSize
            let chunk = min(plan.gsoSize, payload - chunkStart)
            let segmentLength = headerLength + chunk
            let d = batch.slot(batch.count).baseAddress!
            d.copyMemory(from: source, byteCount: headerLength)
            // The payload is copied (libc's memcpy) and summed; the transport header is summed
            // after its fields are fixed up (the sum is linear, and the header length is even).
            (d + headerLength).copyMemory(from: source + headerLength + chunkStart, byteCount: chunk)
            let payloadSum = InternetChecksum.sum(d + headerLength, count: chunk)
            if plan.isIPv6 {
                PacketField.setU16(d, ip + 4, UInt16(truncatingIfNeeded: segmentLength - ip - 40))
            } else {
                PacketField.setU16(d, ip + 2, UInt16(truncatingIfNeeded: segmentLength - ip))
                PacketField.setU16(d, ip + 4, firstID &+ UInt16(truncatingIfNeeded: i))
                PacketField.refreshIPv4HeaderChecksum(d + ip, headerLength: l4 - ip)
            }
            let l4Length = segmentLength - l4
            let checksumField: Int
            if isTCP {
                PacketField.setU32(d, l4 + 4, firstSequence &+ UInt32(truncatingIfNeeded: chunkStart))
                var f = flags
                // FIN and PSH belong to the last segment, CWR to the first (what a NIC does).
                if i != last { f &= ~(TCPFlag.fin | TCPFlag.psh) }
                if i != 0 { f &= ~TCPFlag.cwr }
                d.storeBytes(of: f, toByteOffset: l4 + 13, as: UInt8.self)
                checksumField = l4 + 16
            } else {
                PacketField.setU16(d, l4 + 4, UInt16(truncatingIfNeeded: l4Length))
                checksumField = l4 + 6
            }
            PacketField.setChecksum(d, checksumField, 0)
            var sum = InternetChecksum.adding(word: UInt16(protocolNumber), to: addressSum &+ payloadSum)
            sum = InternetChecksum.adding(word: UInt16(truncatingIfNeeded: l4Length >> 16), to: sum)
            sum = InternetChecksum.adding(word: UInt16(truncatingIfNeeded: l4Length), to: sum)
            sum = InternetChecksum.sum(d + l4, count: headerLength - l4, into: sum)
            var checksum = InternetChecksum.finish(sum)
            if !isTCP && checksum == 0 { checksum = 0xffff }
            PacketField.setChecksum(d, checksumField, checksum)
            batch.commit(length: segmentLength)
        }
        return range.count
    }

    /// Plans and splits in one step.
    @discardableResult
    public static func split(_ packet: UnsafeRawBufferPointer, header: VirtioNetHeader, linkLayer: LinkLayer = .none,
                             into batch: PacketBatch) throws(OffloadError) -> Int {
        let plan = try plan(header, packet: packet, linkLayer: linkLayer)
        return try split(packet, plan: plan, into: batch)
    }

    /// Finishes a partial checksum as a NIC would: the field already holds the pseudo-header
    /// sum; sum from `start` to the end and store the complement there.
    @inlinable
    static func completeChecksum(_ p: UnsafeMutableRawPointer, length: Int, start: Int, offset: Int, zeroAsAllOnes: Bool) {
        var checksum = InternetChecksum.finish(InternetChecksum.sum(p + start, count: length - start))
        // A computed UDP checksum of 0 is sent as 0xffff (0 means "none"); equal in one's
        // complement, so harmless for any other protocol.
        if zeroAsAllOnes && checksum == 0 { checksum = 0xffff }
        PacketField.setChecksum(p, start + offset, checksum)
    }
}
