@testable import Tunnel
import Testing

/// The 4-byte prefixes: Apple's utun address family (big-endian AF_INET 2 / AF_INET6 30) and
/// Linux's packet information (flags, EtherType). Pure, so tested here although utun exists
/// only on Apple platforms.
@Suite struct PacketFramingTests {
    @Test func utunPrefixIsTheDarwinAddressFamilyBigEndian() {
        #expect(PacketFraming.addressFamily.prefix(forPacketStartingWith: 0x45) == [0, 0, 0, 2])
        #expect(PacketFraming.addressFamily.prefix(forPacketStartingWith: 0x60) == [0, 0, 0, 30])
        let v6: [UInt8] = [0, 0, 0, 30], v4: [UInt8] = [0, 0, 0, 2], other: [UInt8] = [0, 0, 0, 10]
        #expect(v6.withUnsafeBytes { PacketFraming.addressFamily.decodePrefix($0) } == .ipv6)
        #expect(v4.withUnsafeBytes { PacketFraming.addressFamily.decodePrefix($0) } == .ipv4)
        // Linux's AF_INET6 (10) is not Darwin's: a prefix of 10 is something else.
        #expect(other.withUnsafeBytes { PacketFraming.addressFamily.decodePrefix($0) } == .other(10))
        #expect([UInt8]([0, 0, 2]).withUnsafeBytes { PacketFraming.addressFamily.decodePrefix($0) } == nil)
    }

    @Test func linuxPacketInformationCarriesTheEtherType() {
        #expect(PacketFraming.packetInformation.prefix(forPacketStartingWith: 0x45) == [0, 0, 0x08, 0x00])
        #expect(PacketFraming.packetInformation.prefix(forPacketStartingWith: 0x60) == [0, 0, 0x86, 0xdd])
        let stripped: [UInt8] = [0, 1, 0x08, 0x00]
        #expect(stripped.withUnsafeBytes { PacketFraming.packetInformation.decodePrefix($0) } == .truncated)
    }

    @Test func virtioFramingWritesAPlainHeader() {
        #expect(PacketFraming.virtioNetHeader(size: 10).prefix(forPacketStartingWith: 0x45) == [UInt8](repeating: 0, count: 10))
        #expect(PacketFraming.virtioNetHeader(size: 12).prefixLength == 12)
        #expect(PacketFraming.none.prefixLength == 0)
    }
}

/// The utun descriptor search's matching, over an injected descriptor table (the system calls
/// exist only on Apple platforms; these machines run Linux).
@Suite struct UtunDescriptorSearchTests {
    /// A Darwin `sockaddr_ctl` as getpeername fills it (host byte order, little-endian here).
    static func sockaddrCtl(family: UInt8 = 32, subsystem: UInt16 = 2, id: UInt32, unit: UInt32) -> [UInt8] {
        var bytes: [UInt8] = [32, family]
        withUnsafeBytes(of: subsystem) { bytes += $0 }
        withUnsafeBytes(of: id) { bytes += $0 }
        withUnsafeBytes(of: unit) { bytes += $0 }
        return bytes + [UInt8](repeating: 0, count: 20)
    }

    @Test func decodesAKernelControlPeer() {
        let bytes = Self.sockaddrCtl(id: 0x1234, unit: 5)
        #expect(bytes.count == UtunDescriptorSearch.socketAddressSize)
        #expect(bytes.withUnsafeBytes { UtunDescriptorSearch.decodePeer($0) } == .init(family: 32, controlID: 0x1234, unit: 5))
        // An IPv4 socket's peer (sockaddr_in, family 2) and a short buffer are not candidates.
        let inet: [UInt8] = [16, 2, 0x1f, 0x90, 127, 0, 0, 1] + [UInt8](repeating: 0, count: 8)
        #expect(inet.withUnsafeBytes { UtunDescriptorSearch.decodePeer($0) } == nil)
        #expect(Self.sockaddrCtl(subsystem: 1, id: 1, unit: 1).withUnsafeBytes { UtunDescriptorSearch.decodePeer($0) } == nil)
        #expect(Array(bytes.prefix(11)).withUnsafeBytes { UtunDescriptorSearch.decodePeer($0) } == nil)
    }

    @Test func findsTheDescriptorConnectedToTheUtunControl() {
        // 0–2 stdio, 3 a TCP socket, 7 another kernel control (say, a different extension's),
        // 9 the utun socket; everything else closed.
        let table: [Int32: [UInt8]] = [
            3: [16, 2, 0, 80, 10, 0, 0, 1] + [UInt8](repeating: 0, count: 8),
            7: Self.sockaddrCtl(id: 0x77, unit: 1),
            9: Self.sockaddrCtl(id: 0x1234, unit: 3),
        ]
        var asked: [Int32] = []
        let found = UtunDescriptorSearch.find(controlID: 0x1234) { fd in
            asked.append(fd)
            return table[fd].flatMap { bytes in bytes.withUnsafeBytes { UtunDescriptorSearch.decodePeer($0) } }
        }
        #expect(found == 9)
        #expect(asked == Array(0...9), "the walk goes in order and stops at the match")
        #expect(UtunDescriptorSearch.find(controlID: 0x9999) { table[$0].flatMap { b in b.withUnsafeBytes { UtunDescriptorSearch.decodePeer($0) } } } == nil)
    }

    @Test func walksAtMostDescriptors0Through1024() {
        var highest: Int32 = -1
        _ = UtunDescriptorSearch.find(controlID: 1) { fd in highest = fd; return nil }
        #expect(highest == 1024)
    }

    @Test func unitsAndNames() {
        #expect(UtunDescriptorSearch.interfaceName(unit: 3) == "utun2")
        #expect(UtunDescriptorSearch.interfaceName(unit: 0) == nil)
        #expect(UtunDescriptorSearch.unit(forInterfaceName: "utun2") == 3)
        #expect(UtunDescriptorSearch.unit(forInterfaceName: nil) == 0)
        #expect(UtunDescriptorSearch.unit(forInterfaceName: "tun2") == nil)
        #expect(UtunDescriptorSearch.unit(forInterfaceName: "utunx") == nil)
    }
}
