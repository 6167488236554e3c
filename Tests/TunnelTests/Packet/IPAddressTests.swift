@testable import Tunnel
import Testing

@Suite struct IPAddressTests {
    @Test func parsesAndPrintsBothFamilies() throws {
        #expect(IPAddress("10.0.0.1") == .v4(0x0a00_0001))
        #expect(IPAddress("10.0.0.1")?.description == "10.0.0.1")
        #expect(IPAddress("FD00:0:0::1")?.description == "fd00::1")
        #expect(IPAddress("::ffff:192.0.2.1")?.bytes.suffix(4) == [192, 0, 2, 1])
        #expect(IPAddress("2001:db8::1")?.bytes == [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1])
    }

    @Test(arguments: ["", "10.0.0", "10.0.0.256", "01.2.3.4", "1.2.3.4.5", "fd00::1::2", "g::1", "10.0.0.1 ", "::1%lo"])
    func rejectsWhatIsNotAnAddress(text: String) {
        #expect(IPAddress(text) == nil)
    }

    @Test func prefixesKeepHostBitsAndMaskToTheirNetwork() throws {
        let p = try IPPrefix("10.1.2.3/20")
        #expect(p.address.description == "10.1.2.3")
        #expect(p.network.description == "10.1.0.0/20")
        #expect(p.contains(IPAddress("10.1.15.255")!))
        #expect(!p.contains(IPAddress("10.1.16.0")!))
        #expect(try IPPrefix("fd00:1:2:3::9/64").network.description == "fd00:1:2:3::/64")
        #expect(try IPPrefix("fd00::1/127").network.description == "fd00::/127")
        #expect(try IPPrefix("192.0.2.7").length == 32)
        #expect(try IPPrefix("0.0.0.0/0").network.description == "0.0.0.0/0")
    }

    @Test(arguments: ["10.0.0.1/33", "fd00::1/129", "10.0.0.1/-1", "10.0.0.1/", "10.0.0.1/x", "nope/8", "/8"])
    func rejectsBadPrefixesWithAReason(text: String) {
        #expect(throws: IPPrefixError.self) { try IPPrefix(text) }
    }

    @Test func endpointsParseWithBracketsForIPv6() {
        #expect(UDPEndpoint("192.0.2.1:51820") == UDPEndpoint(address: .v4(0xc000_0201), port: 51820))
        #expect(UDPEndpoint("[fd00::2]:7000")?.description == "[fd00::2]:7000")
        #expect(UDPEndpoint("fd00::2:7000") == nil)
        #expect(UDPEndpoint("192.0.2.1:70000") == nil)
        #expect(UDPEndpoint("host:7000") == nil)
    }
}
