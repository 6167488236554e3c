/// An rtnetlink request as bytes: the 16-byte `nlmsghdr`, a fixed family header, then
/// attributes (`rtattr`: u16 length, u16 type, value, padded to 4 bytes). Host byte order
/// throughout, as netlink is. Pure, so every request is checked byte for byte in tests.
public struct NetlinkMessage: Equatable, Sendable {
    /// The whole message, header included; the length field is kept current.
    public private(set) var bytes: [UInt8]

    /// Message types and flags (`linux/netlink.h`, `linux/rtnetlink.h`).
    public enum Kind {
        public static let error: UInt16 = 2           // NLMSG_ERROR
        public static let done: UInt16 = 3            // NLMSG_DONE
        public static let newLink: UInt16 = 16        // RTM_NEWLINK
        public static let getLink: UInt16 = 18        // RTM_GETLINK
        public static let newAddress: UInt16 = 20     // RTM_NEWADDR
        public static let deleteAddress: UInt16 = 21  // RTM_DELADDR
        public static let getAddress: UInt16 = 22     // RTM_GETADDR
        public static let newRoute: UInt16 = 24       // RTM_NEWROUTE
        public static let deleteRoute: UInt16 = 25    // RTM_DELROUTE
        public static let getRoute: UInt16 = 26       // RTM_GETROUTE
    }

    public enum Flag {
        public static let request: UInt16 = 0x001     // NLM_F_REQUEST
        public static let multi: UInt16 = 0x002       // NLM_F_MULTI
        public static let ack: UInt16 = 0x004         // NLM_F_ACK
        public static let dump: UInt16 = 0x300        // NLM_F_ROOT | NLM_F_MATCH
        public static let replace: UInt16 = 0x100     // NLM_F_REPLACE
        public static let exclusive: UInt16 = 0x200   // NLM_F_EXCL
        public static let create: UInt16 = 0x400      // NLM_F_CREATE
        public static let capped: UInt16 = 0x100      // NLM_F_CAPPED (in an error)
        public static let ackTLVs: UInt16 = 0x200     // NLM_F_ACK_TLVS (in an error)
    }

    /// Attribute types.
    public enum Attribute {
        public static let linkMTU: UInt16 = 4          // IFLA_MTU
        public static let linkName: UInt16 = 3         // IFLA_IFNAME
        public static let addressAddress: UInt16 = 1   // IFA_ADDRESS
        public static let addressLocal: UInt16 = 2     // IFA_LOCAL
        public static let addressFlags: UInt16 = 8     // IFA_FLAGS
        public static let routeDestination: UInt16 = 1 // RTA_DST
        public static let routeOutputInterface: UInt16 = 4 // RTA_OIF
        public static let routeGateway: UInt16 = 5     // RTA_GATEWAY
        public static let routePriority: UInt16 = 6    // RTA_PRIORITY
        public static let routeTable: UInt16 = 15      // RTA_TABLE
        public static let errorMessage: UInt16 = 1     // NLMSGERR_ATTR_MSG
        public static let errorOffset: UInt16 = 2      // NLMSGERR_ATTR_OFFS
    }

    /// Address families as Linux numbers them.
    public static let familyUnspecified: UInt8 = 0
    public static let familyIPv4: UInt8 = 2
    public static let familyIPv6: UInt8 = 10

    public static let headerSize = 16
    public static let linkHeaderSize = 16      // struct ifinfomsg
    public static let addressHeaderSize = 8    // struct ifaddrmsg
    public static let routeHeaderSize = 12     // struct rtmsg
    public static let interfaceUp: UInt32 = 1  // IFF_UP
    public static let addressNoDAD: UInt32 = 0x02      // IFA_F_NODAD
    public static let mainTable: UInt8 = 254           // RT_TABLE_MAIN
    public static let protocolStatic: UInt8 = 4        // RTPROT_STATIC
    public static let scopeUniverse: UInt8 = 0         // RT_SCOPE_UNIVERSE
    public static let scopeLink: UInt8 = 253           // RT_SCOPE_LINK
    public static let scopeHost: UInt8 = 254           // RT_SCOPE_HOST
    public static let scopeNowhere: UInt8 = 255        // RT_SCOPE_NOWHERE
    public static let routeUnicast: UInt8 = 1          // RTN_UNICAST

    public init(type: UInt16, flags: UInt16, sequence: UInt32) {
        bytes = []
        bytes.reserveCapacity(64)
        appendU32(0)                // length, patched as we go
        appendU16(type)
        appendU16(flags)
        appendU32(sequence)
        appendU32(0)                // port id: the kernel fills in ours
        patchLength()
    }

    public var type: UInt16 { readU16(4) }
    public var flags: UInt16 { readU16(6) }
    public var sequence: UInt32 { readU32(8) }

    // MARK: Family headers

    /// `struct ifinfomsg`.
    public mutating func appendLinkHeader(family: UInt8 = 0, index: Int32, flags: UInt32 = 0, change: UInt32 = 0) {
        bytes.append(family)
        bytes.append(0)
        appendU16(0)                       // ifi_type
        appendU32(UInt32(bitPattern: index))
        appendU32(flags)
        appendU32(change)
        patchLength()
    }

    /// `struct ifaddrmsg`.
    public mutating func appendAddressHeader(family: UInt8, prefixLength: UInt8, flags: UInt8 = 0, scope: UInt8 = 0, index: Int32) {
        bytes += [family, prefixLength, flags, scope]
        appendU32(UInt32(bitPattern: index))
        patchLength()
    }

    /// `struct rtmsg`.
    public mutating func appendRouteHeader(family: UInt8, destinationLength: UInt8, table: UInt8, protocol routeProtocol: UInt8,
                                           scope: UInt8, type: UInt8) {
        bytes += [family, destinationLength, 0, 0, table, routeProtocol, scope, type]
        appendU32(0)                       // rtm_flags
        patchLength()
    }

    // MARK: Attributes

    public mutating func appendAttribute(_ type: UInt16, _ value: [UInt8]) {
        appendU16(UInt16(4 + value.count))
        appendU16(type)
        bytes += value
        while bytes.count % 4 != 0 { bytes.append(0) }
        patchLength()
    }

    public mutating func appendAttribute(_ type: UInt16, u32 value: UInt32) {
        appendAttribute(type, withUnsafeBytes(of: value) { Array($0) })
    }

    /// A NUL-terminated string attribute.
    public mutating func appendAttribute(_ type: UInt16, string: String) {
        appendAttribute(type, Array(string.utf8) + [0])
    }

    // MARK: Bytes

    private mutating func appendU16(_ value: UInt16) { withUnsafeBytes(of: value) { bytes += $0 } }
    private mutating func appendU32(_ value: UInt32) { withUnsafeBytes(of: value) { bytes += $0 } }
    private mutating func patchLength() {
        let length = UInt32(bytes.count)
        withUnsafeBytes(of: length) { for i in 0..<4 { bytes[i] = $0[i] } }
    }
    private func readU16(_ offset: Int) -> UInt16 {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt16.self) }
    }
    private func readU32(_ offset: Int) -> UInt32 {
        bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
    }
}

/// The requests Farcast makes, built as bytes (pure).
public enum RouteRequest {
    /// Adds (or with `replace`, updates) an interface address. IPv4 sends the address as both
    /// local and peer address, as `ip addr add` does; IPv6 skips duplicate address detection by
    /// default (a point-to-point TUN has no neighbour to collide with, and DAD would leave the
    /// address unusable for a second or two).
    public static func addAddress(_ prefix: IPPrefix, interface index: Int32, peer: IPAddress? = nil,
                                  skipDuplicateAddressDetection: Bool = true, replace: Bool = false,
                                  sequence: UInt32) -> NetlinkMessage {
        var m = NetlinkMessage(type: NetlinkMessage.Kind.newAddress,
                               flags: NetlinkMessage.Flag.request | NetlinkMessage.Flag.ack | NetlinkMessage.Flag.create
                                   | (replace ? NetlinkMessage.Flag.replace : NetlinkMessage.Flag.exclusive),
                               sequence: sequence)
        appendAddressBody(&m, prefix, index: index, peer: peer)
        if !prefix.address.isIPv4 && skipDuplicateAddressDetection {
            m.appendAttribute(NetlinkMessage.Attribute.addressFlags, u32: NetlinkMessage.addressNoDAD)
        }
        return m
    }

    public static func removeAddress(_ prefix: IPPrefix, interface index: Int32, sequence: UInt32) -> NetlinkMessage {
        var m = NetlinkMessage(type: NetlinkMessage.Kind.deleteAddress,
                               flags: NetlinkMessage.Flag.request | NetlinkMessage.Flag.ack, sequence: sequence)
        appendAddressBody(&m, prefix, index: index, peer: nil)
        return m
    }

    private static func appendAddressBody(_ m: inout NetlinkMessage, _ prefix: IPPrefix, index: Int32, peer: IPAddress?) {
        let isIPv4 = prefix.address.isIPv4
        m.appendAddressHeader(family: isIPv4 ? NetlinkMessage.familyIPv4 : NetlinkMessage.familyIPv6,
                              prefixLength: UInt8(prefix.length), index: index)
        if isIPv4 {
            m.appendAttribute(NetlinkMessage.Attribute.addressLocal, prefix.address.bytes)
            m.appendAttribute(NetlinkMessage.Attribute.addressAddress, (peer ?? prefix.address).bytes)
        } else {
            if let peer {
                m.appendAttribute(NetlinkMessage.Attribute.addressLocal, prefix.address.bytes)
                m.appendAttribute(NetlinkMessage.Attribute.addressAddress, peer.bytes)
            } else {
                m.appendAttribute(NetlinkMessage.Attribute.addressAddress, prefix.address.bytes)
            }
        }
    }

    /// Sets the link's MTU.
    public static func setMTU(_ mtu: Int, interface index: Int32, sequence: UInt32) -> NetlinkMessage {
        var m = NetlinkMessage(type: NetlinkMessage.Kind.newLink,
                               flags: NetlinkMessage.Flag.request | NetlinkMessage.Flag.ack, sequence: sequence)
        m.appendLinkHeader(index: index)
        m.appendAttribute(NetlinkMessage.Attribute.linkMTU, u32: UInt32(clamping: mtu))
        return m
    }

    /// Brings the link up or down (only the IFF_UP bit changes).
    public static func setUp(_ up: Bool, interface index: Int32, sequence: UInt32) -> NetlinkMessage {
        var m = NetlinkMessage(type: NetlinkMessage.Kind.newLink,
                               flags: NetlinkMessage.Flag.request | NetlinkMessage.Flag.ack, sequence: sequence)
        m.appendLinkHeader(index: index, flags: up ? NetlinkMessage.interfaceUp : 0, change: NetlinkMessage.interfaceUp)
        return m
    }

    /// Adds a route to `destination` through the interface (a link-scope route when there is no
    /// gateway), in the main table unless another is given.
    public static func addRoute(_ destination: IPPrefix, interface index: Int32, gateway: IPAddress? = nil,
                                metric: UInt32? = nil, table: UInt32? = nil, replace: Bool = false,
                                sequence: UInt32) -> NetlinkMessage {
        var m = NetlinkMessage(type: NetlinkMessage.Kind.newRoute,
                               flags: NetlinkMessage.Flag.request | NetlinkMessage.Flag.ack | NetlinkMessage.Flag.create
                                   | (replace ? NetlinkMessage.Flag.replace : NetlinkMessage.Flag.exclusive),
                               sequence: sequence)
        appendRouteBody(&m, destination, index: index, gateway: gateway, metric: metric, table: table,
                        scope: gateway == nil ? NetlinkMessage.scopeLink : NetlinkMessage.scopeUniverse)
        return m
    }

    public static func removeRoute(_ destination: IPPrefix, interface index: Int32, gateway: IPAddress? = nil,
                                   metric: UInt32? = nil, table: UInt32? = nil, sequence: UInt32) -> NetlinkMessage {
        var m = NetlinkMessage(type: NetlinkMessage.Kind.deleteRoute,
                               flags: NetlinkMessage.Flag.request | NetlinkMessage.Flag.ack, sequence: sequence)
        // Scope "nowhere" and protocol/type 0 match any route to the prefix (what `ip route del`
        // sends); the interface, gateway and metric narrow it down.
        appendRouteBody(&m, destination, index: index, gateway: gateway, metric: metric, table: table,
                        scope: NetlinkMessage.scopeNowhere, routeProtocol: 0, type: 0)
        return m
    }

    private static func appendRouteBody(_ m: inout NetlinkMessage, _ destination: IPPrefix, index: Int32, gateway: IPAddress?,
                                        metric: UInt32?, table: UInt32?, scope: UInt8,
                                        routeProtocol: UInt8 = NetlinkMessage.protocolStatic,
                                        type: UInt8 = NetlinkMessage.routeUnicast) {
        let network = destination.network
        let isIPv4 = network.address.isIPv4
        let tableID = table ?? UInt32(NetlinkMessage.mainTable)
        m.appendRouteHeader(family: isIPv4 ? NetlinkMessage.familyIPv4 : NetlinkMessage.familyIPv6,
                            destinationLength: UInt8(network.length), table: tableID < 256 ? UInt8(tableID) : 252,
                            protocol: routeProtocol, scope: scope, type: type)
        if network.length > 0 { m.appendAttribute(NetlinkMessage.Attribute.routeDestination, network.address.bytes) }
        if let gateway { m.appendAttribute(NetlinkMessage.Attribute.routeGateway, gateway.bytes) }
        m.appendAttribute(NetlinkMessage.Attribute.routeOutputInterface, u32: UInt32(bitPattern: index))
        if let metric { m.appendAttribute(NetlinkMessage.Attribute.routePriority, u32: metric) }
        // Tables past 255 only fit the attribute (rtm_table then says RT_TABLE_COMPAT, 252).
        if tableID >= 256 { m.appendAttribute(NetlinkMessage.Attribute.routeTable, u32: tableID) }
    }

    /// Asks for every address of a family (0: both).
    public static func dumpAddresses(family: UInt8 = 0, sequence: UInt32) -> NetlinkMessage {
        var m = NetlinkMessage(type: NetlinkMessage.Kind.getAddress,
                               flags: NetlinkMessage.Flag.request | NetlinkMessage.Flag.dump, sequence: sequence)
        m.appendAddressHeader(family: family, prefixLength: 0, index: 0)
        return m
    }
}
