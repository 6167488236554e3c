@testable import Tunnel
import Testing

@Suite struct PacketBatchTests {
    @Test func slotsHoldPacketsAfterAnAlignedHeadroom() {
        let batch = PacketBatch(capacity: 3, slotSize: 100, headroom: 13)
        #expect(batch.headroom == 16)
        #expect(batch.append([1, 2, 3]))
        #expect(batch.append { slot in slot[0] = 9; return 1 })
        #expect(batch.append { _ in 0 })           // nothing written: the slot stays free
        #expect(batch.count == 2)
        #expect(batch.packetBytes(0) == [1, 2, 3])
        #expect(batch.packetBytes(1) == [9])
        #expect(Int(bitPattern: batch[0].baseAddress!) % 8 == 0)
        #expect(batch[0].baseAddress! - batch.headroomStart(0) == 16)
        #expect(!batch.append([UInt8](repeating: 0, count: 101)), "a packet larger than a slot is refused")
        #expect(batch.append([7]))
        #expect(!batch.append([8]), "full")
        batch.removeAll()
        #expect(batch.isEmpty && batch.freeSlots == 3)
    }
}

#if os(Linux)
import CTunnelLinux

/// Our Swift constants and layouts against the kernel's UAPI headers (Debian's linux-libc-dev),
/// so a typo in either cannot go unnoticed.
@Suite struct KernelConstantsTests {
    @Test func ioctlNumbersAndTUNFlags() {
        #expect(ctunnel_TUNSETIFF() == 0x4004_54ca)
        #expect(ctunnel_TUNSETOFFLOAD() == 0x4004_54d0)
        #expect(ctunnel_TUNGETFEATURES() == 0x8004_54cf)
        #expect(ctunnel_TUNSETVNETHDRSZ() == 0x4004_54d8)
        #expect(OffloadFeatures.checksum.rawValue == UInt32(TUN_F_CSUM))
        #expect(OffloadFeatures.tso4.rawValue == UInt32(TUN_F_TSO4))
        #expect(OffloadFeatures.tso6.rawValue == UInt32(TUN_F_TSO6))
        #expect(OffloadFeatures.tsoECN.rawValue == UInt32(TUN_F_TSO_ECN))
        #expect(OffloadFeatures.ufo.rawValue == UInt32(TUN_F_UFO))
        #expect(OffloadFeatures.uso4.rawValue == UInt32(TUN_F_USO4))
        #expect(OffloadFeatures.uso6.rawValue == UInt32(TUN_F_USO6))
    }

    @Test func virtioHeaderLayout() {
        #expect(ctunnel_virtio_net_hdr_size() == UInt32(VirtioNetHeader.size))
        #expect(VirtioNetHeader.needsChecksum == UInt8(VIRTIO_NET_HDR_F_NEEDS_CSUM))
        #expect(VirtioNetHeader.dataValid == UInt8(VIRTIO_NET_HDR_F_DATA_VALID))
        #expect(VirtioNetHeader.GSOType.tcpv4.rawValue == UInt8(VIRTIO_NET_HDR_GSO_TCPV4))
        #expect(VirtioNetHeader.GSOType.tcpv6.rawValue == UInt8(VIRTIO_NET_HDR_GSO_TCPV6))
        #expect(VirtioNetHeader.GSOType.udp.rawValue == UInt8(VIRTIO_NET_HDR_GSO_UDP))
        #expect(VirtioNetHeader.GSOType.udpL4.rawValue == UInt8(VIRTIO_NET_HDR_GSO_UDP_L4))
        #expect(VirtioNetHeader.gsoECN == UInt8(VIRTIO_NET_HDR_GSO_ECN))
        let header = VirtioNetHeader(flags: 1, gsoType: .tcpv6, headerLength: 0x0102, gsoSize: 0x0304,
                                     checksumStart: 0x0506, checksumOffset: 0x0708)
        #expect(header.bytes == [1, 4, 2, 1, 4, 3, 6, 5, 8, 7])
        #expect(header.bytes.withUnsafeBytes { VirtioNetHeader($0) } == header)
    }

    @Test func netlinkLayoutsAndNumbers() {
        #expect(ctunnel_nlmsghdr_size() == UInt32(NetlinkMessage.headerSize))
        #expect(ctunnel_ifinfomsg_size() == UInt32(NetlinkMessage.linkHeaderSize))
        #expect(ctunnel_ifaddrmsg_size() == UInt32(NetlinkMessage.addressHeaderSize))
        #expect(ctunnel_rtmsg_size() == UInt32(NetlinkMessage.routeHeaderSize))
        #expect(NetlinkMessage.Kind.error == UInt16(NLMSG_ERROR))
        #expect(NetlinkMessage.Kind.done == UInt16(NLMSG_DONE))
        #expect(NetlinkMessage.Kind.newLink == UInt16(RTM_NEWLINK))
        #expect(NetlinkMessage.Kind.newAddress == UInt16(RTM_NEWADDR))
        #expect(NetlinkMessage.Kind.deleteAddress == UInt16(RTM_DELADDR))
        #expect(NetlinkMessage.Kind.getAddress == UInt16(RTM_GETADDR))
        #expect(NetlinkMessage.Kind.newRoute == UInt16(RTM_NEWROUTE))
        #expect(NetlinkMessage.Kind.deleteRoute == UInt16(RTM_DELROUTE))
        #expect(NetlinkMessage.Flag.request == UInt16(NLM_F_REQUEST))
        #expect(NetlinkMessage.Flag.ack == UInt16(NLM_F_ACK))
        #expect(NetlinkMessage.Flag.dump == UInt16(NLM_F_DUMP))
        #expect(NetlinkMessage.Flag.create == UInt16(NLM_F_CREATE))
        #expect(NetlinkMessage.Flag.exclusive == UInt16(NLM_F_EXCL))
        #expect(NetlinkMessage.Flag.replace == UInt16(NLM_F_REPLACE))
        #expect(NetlinkMessage.Flag.capped == UInt16(NLM_F_CAPPED))
        #expect(NetlinkMessage.Flag.ackTLVs == UInt16(NLM_F_ACK_TLVS))
        #expect(NetlinkMessage.Attribute.linkMTU == UInt16(IFLA_MTU))
        #expect(NetlinkMessage.Attribute.addressAddress == UInt16(IFA_ADDRESS))
        #expect(NetlinkMessage.Attribute.addressLocal == UInt16(IFA_LOCAL))
        #expect(NetlinkMessage.Attribute.addressFlags == UInt16(IFA_FLAGS))
        #expect(NetlinkMessage.Attribute.routeDestination == UInt16(RTA_DST.rawValue))
        #expect(NetlinkMessage.Attribute.routeOutputInterface == UInt16(RTA_OIF.rawValue))
        #expect(NetlinkMessage.Attribute.routeGateway == UInt16(RTA_GATEWAY.rawValue))
        #expect(NetlinkMessage.Attribute.routePriority == UInt16(RTA_PRIORITY.rawValue))
        #expect(NetlinkMessage.Attribute.routeTable == UInt16(RTA_TABLE.rawValue))
        #expect(NetlinkMessage.Attribute.errorMessage == UInt16(NLMSGERR_ATTR_MSG.rawValue))
        #expect(NetlinkMessage.Attribute.errorOffset == UInt16(NLMSGERR_ATTR_OFFS.rawValue))
        #expect(NetlinkMessage.addressNoDAD == UInt32(IFA_F_NODAD))
        #expect(NetlinkMessage.mainTable == UInt8(RT_TABLE_MAIN.rawValue))
        #expect(NetlinkMessage.protocolStatic == UInt8(RTPROT_STATIC))
        #expect(NetlinkMessage.scopeLink == UInt8(RT_SCOPE_LINK.rawValue))
        #expect(NetlinkMessage.scopeNowhere == UInt8(RT_SCOPE_NOWHERE.rawValue))
        #expect(NetlinkMessage.routeUnicast == UInt8(RTN_UNICAST))
    }
}
#endif
