@testable import Tunnel
import Testing

/// rtnetlink requests byte for byte (host order; these machines are little-endian), laid out
/// from linux/netlink.h, linux/if_addr.h and linux/rtnetlink.h.
@Suite struct NetlinkMessageTests {
    @Test func addIPv4AddressSendsLocalAndAddress() throws {
        let m = RouteRequest.addAddress(try IPPrefix("10.0.0.1/24"), interface: 5, sequence: 1)
        let expected = "28000000" + "1400" + "0506" + "01000000" + "00000000"   // nlmsghdr: 40 bytes, RTM_NEWADDR, REQUEST|ACK|EXCL|CREATE
            + "02180000" + "05000000"                                           // ifaddrmsg: AF_INET /24, index 5
            + "0800" + "0200" + "0a000001"                                      // IFA_LOCAL
            + "0800" + "0100" + "0a000001"                                      // IFA_ADDRESS
        #expect(m.bytes.hex == expected)
    }

    @Test func addIPv6AddressSkipsDuplicateAddressDetection() throws {
        let m = RouteRequest.addAddress(try IPPrefix("fd00::1/64"), interface: 3, sequence: 2)
        let expected = "34000000" + "1400" + "0506" + "02000000" + "00000000"
            + "0a400000" + "03000000"                                           // AF_INET6 /64, index 3
            + "1400" + "0100" + "fd000000000000000000000000000001"              // IFA_ADDRESS
            + "0800" + "0800" + "02000000"                                      // IFA_FLAGS = IFA_F_NODAD
        #expect(m.bytes.hex == expected)
    }

    @Test func replaceUsesReplaceInsteadOfExclusive() throws {
        let m = RouteRequest.addAddress(try IPPrefix("10.0.0.1/24"), interface: 5, replace: true, sequence: 1)
        #expect(m.flags == 0x0505)
    }

    @Test func setMTUAndUp() {
        let mtu = RouteRequest.setMTU(1420, interface: 7, sequence: 9)
        #expect(mtu.bytes.hex == "28000000" + "1000" + "0500" + "09000000" + "00000000"
                + "00000000" + "07000000" + "00000000" + "00000000"         // ifinfomsg, index 7
                + "0800" + "0400" + "8c050000")                               // IFLA_MTU 1420
        let up = RouteRequest.setUp(true, interface: 7, sequence: 10)
        #expect(up.bytes.hex == "20000000" + "1000" + "0500" + "0a000000" + "00000000"
                + "00000000" + "07000000" + "01000000" + "01000000")         // flags IFF_UP, change IFF_UP
        let down = RouteRequest.setUp(false, interface: 7, sequence: 11)
        #expect(down.bytes.suffix(8).map { $0 }.hex == "00000000" + "01000000")
    }

    @Test func routeThroughTheDeviceIsLinkScopeInTheMainTable() throws {
        let m = RouteRequest.addRoute(try IPPrefix("10.9.1.7/16"), interface: 4, sequence: 3)
        #expect(m.bytes.hex == "2c000000" + "1800" + "0506" + "03000000" + "00000000"
                + "02100000" + "fe04fd01" + "00000000"                        // AF_INET /16, main, static, link, unicast
                + "0800" + "0100" + "0a090000"                                // RTA_DST 10.9.0.0 (masked)
                + "0800" + "0400" + "04000000")                               // RTA_OIF 4
        let v6 = RouteRequest.addRoute(try IPPrefix("fd09::/48"), interface: 4, metric: 100, table: 1000, sequence: 4)
        #expect(v6.bytes.hex == "48000000" + "1800" + "0506" + "04000000" + "00000000"
                + "0a300000" + "fc04fd01" + "00000000"                        // table byte RT_TABLE_COMPAT
                + "1400" + "0100" + "fd090000000000000000000000000000"
                + "0800" + "0400" + "04000000"
                + "0800" + "0600" + "64000000"                                // RTA_PRIORITY 100
                + "0800" + "0f00" + "e8030000")                               // RTA_TABLE 1000
    }

    @Test func defaultRouteHasNoDestinationAttribute() throws {
        let m = RouteRequest.addRoute(try IPPrefix("0.0.0.0/0"), interface: 4, sequence: 3)
        #expect(m.bytes.count == 16 + 12 + 8)
    }

    @Test func dumpAsksForEverything() {
        let m = RouteRequest.dumpAddresses(sequence: 5)
        #expect(m.bytes.hex == "18000000" + "1600" + "0103" + "05000000" + "00000000" + "00000000" + "00000000")
    }
}

@Suite struct NetlinkReplyTests {
    static func message(type: UInt16, flags: UInt16, sequence: UInt32, payload: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        withUnsafeBytes(of: UInt32(16 + payload.count)) { bytes += $0 }
        withUnsafeBytes(of: type) { bytes += $0 }
        withUnsafeBytes(of: flags) { bytes += $0 }
        withUnsafeBytes(of: sequence) { bytes += $0 }
        bytes += [0, 0, 0, 0]
        bytes += payload
        while bytes.count % 4 != 0 { bytes.append(0) }
        return bytes
    }

    static func errorPayload(_ code: Int32, request: [UInt8], tlvs: [UInt8] = []) -> [UInt8] {
        var payload: [UInt8] = []
        withUnsafeBytes(of: code) { payload += $0 }
        return payload + request + tlvs
    }

    static func attribute(_ type: UInt16, _ value: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        withUnsafeBytes(of: UInt16(4 + value.count)) { bytes += $0 }
        withUnsafeBytes(of: type) { bytes += $0 }
        bytes += value
        while bytes.count % 4 != 0 { bytes.append(0) }
        return bytes
    }

    static func parse(_ bytes: [UInt8]) throws -> [NetlinkReply.Item] {
        try bytes.withUnsafeBytes { raw in try NetlinkReply.parse(raw) }
    }

    @Test func anAcknowledgement() throws {
        let request = RouteRequest.setUp(true, interface: 1, sequence: 42).bytes
        let bytes = Self.message(type: 2, flags: 0x100, sequence: 42, payload: Self.errorPayload(0, request: Array(request[0..<16])))
        #expect(try Self.parse(bytes) == [.acknowledged(sequence: 42)])
    }

    @Test func aCappedErrorWithTheKernelsMessage() throws {
        let request = try RouteRequest.addAddress(IPPrefix("10.0.0.1/24"), interface: 1, sequence: 7).bytes
        let tlvs = Self.attribute(1, Array("Address already assigned".utf8) + [0]) + Self.attribute(2, [24, 0, 0, 0])
        let bytes = Self.message(type: 2, flags: 0x300, sequence: 7, payload: Self.errorPayload(-17, request: Array(request[0..<16]), tlvs: tlvs))
        #expect(try Self.parse(bytes) == [.failed(sequence: 7, errno: 17, message: "Address already assigned", offset: 24)])
    }

    @Test func anUncappedErrorCarriesTheWholeRequestBeforeItsAttributes() throws {
        let request = try RouteRequest.addRoute(IPPrefix("10.9.0.0/16"), interface: 9, sequence: 8).bytes
        let tlvs = Self.attribute(1, Array("Nexthop device is not up".utf8) + [0])
        let bytes = Self.message(type: 2, flags: 0x200, sequence: 8, payload: Self.errorPayload(-100, request: request, tlvs: tlvs))
        #expect(try Self.parse(bytes) == [.failed(sequence: 8, errno: 100, message: "Nexthop device is not up", offset: nil)])
    }

    @Test func aDumpEndsWithDone() throws {
        var address = [UInt8]([2, 24, 0, 0]) + [6, 0, 0, 0]
        address += Self.attribute(2, [10, 0, 0, 1]) + Self.attribute(1, [10, 0, 0, 1])
        let bytes = Self.message(type: 20, flags: 2, sequence: 5, payload: address) + Self.message(type: 3, flags: 2, sequence: 5, payload: [0, 0, 0, 0])
        let items = try Self.parse(bytes)
        #expect(items.count == 2)
        guard case .message(20, _, 5, let payload) = items[0] else { Issue.record("\(items)"); return }
        #expect(NetlinkReply.interfaceAddress(payload) == NetlinkReply.InterfaceAddress(interfaceIndex: 6, prefix: try IPPrefix("10.0.0.1/24")))
        #expect(items[1] == .done(sequence: 5))
    }

    @Test func lengthsThatLieAreMalformedNotCrashes() {
        var bytes = Self.message(type: 2, flags: 0, sequence: 1, payload: [0, 0, 0, 0])
        bytes[0] = 0xff
        #expect(throws: NetlinkError.Reason.self) { try Self.parse(bytes) }
        bytes[0] = 8
        #expect(throws: NetlinkError.Reason.self) { try Self.parse(bytes) }
        #expect(throws: NetlinkError.Reason.self) { try Self.parse(Self.message(type: 2, flags: 0, sequence: 1, payload: [])) }
    }

    @Test func randomDatagramsNeverCrashTheParser() {
        var rng = SplitMix(seed: 11)
        let good = Self.message(type: 2, flags: 0x300, sequence: 7,
                                payload: Self.errorPayload(-17, request: [UInt8](repeating: 1, count: 16),
                                                           tlvs: Self.attribute(1, Array("x".utf8) + [0])))
        for _ in 0..<20_000 {
            var bytes = good
            for _ in 0..<Int.random(in: 1...6, using: &rng) {
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            }
            if Bool.random(using: &rng) { bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &rng))) }
            _ = try? Self.parse(bytes)
            _ = NetlinkReply.interfaceAddress(Array(bytes.dropFirst(16)))
        }
    }
}
