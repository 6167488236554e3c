@testable import Tunnel
import Testing

/// The ICMP answers to packets too big for the path, byte by byte; the kernel accepting them
/// (ping's "Frag needed and DF set", TCP shrinking its segments) is TunCommandTests'.
@Suite struct PacketTooBigTests {
    /// An IPv4 TCP packet of `length` bytes from 10.0.0.1:40000 to 10.0.0.2:5201.
    static func ipv4(length: Int, dontFragment: Bool = true, proto: UInt8 = 6, firstPayloadByte: UInt8 = 0) -> [UInt8] {
        var p = [UInt8](repeating: 0xab, count: length)
        p[0] = 0x45; p[1] = 0
        p[2] = UInt8(length >> 8); p[3] = UInt8(length & 0xff)
        p[4] = 0x12; p[5] = 0x34
        p[6] = dontFragment ? 0x40 : 0; p[7] = 0
        p[8] = 64; p[9] = proto; p[10] = 0; p[11] = 0
        p[12...15] = [10, 0, 0, 1]; p[16...19] = [10, 0, 0, 2]
        p[20] = firstPayloadByte; p[21] = 0x40; p[22] = 0x14; p[23] = 0x51   // ports 40000 → 5201 (or an ICMP type)
        return p
    }

    static func ipv6(length: Int, source: [UInt8] = [0xfd, 0x09] + [UInt8](repeating: 0, count: 13) + [1], next: UInt8 = 6, firstPayloadByte: UInt8 = 0) -> [UInt8] {
        var p = [UInt8](repeating: 0xcd, count: length)
        p[0] = 0x60; p[1] = 0; p[2] = 0; p[3] = 0
        p[4] = UInt8((length - 40) >> 8); p[5] = UInt8((length - 40) & 0xff)
        p[6] = next; p[7] = 64
        p[8..<24] = source[0..<16]
        p[24..<40] = ([0xfd, 0x09] + [UInt8](repeating: 0, count: 13) + [2])[0..<16]
        p[40] = firstPayloadByte
        return p
    }

    static func answer(_ packet: [UInt8], mtu: Int) -> [UInt8]? {
        var reply = [UInt8](repeating: 0, count: PacketTooBig.maximumReplyLength)
        let n = packet.withUnsafeBytes { p in reply.withUnsafeMutableBytes { PacketTooBig.reply(to: p, mtu: mtu, into: $0) } }
        return n.map { Array(reply[0..<$0]) }
    }

    @Test func anIPv4PacketThatForbidsFragmentingGetsFragmentationNeeded() throws {
        let packet = Self.ipv4(length: 1500)
        let reply = try #require(Self.answer(packet, mtu: 1472))
        #expect(reply.count == 20 + 8 + 28)
        #expect(reply[0] == 0x45 && reply[9] == 1 && reply[8] == 64)
        #expect(Array(reply[12..<16]) == [10, 0, 0, 2] && Array(reply[16..<20]) == [10, 0, 0, 1], "from the destination, to the source")
        #expect(Int(reply[2]) << 8 | Int(reply[3]) == reply.count)
        #expect(reply.withUnsafeBytes { InternetChecksum.fold(InternetChecksum.sum($0.baseAddress!, count: 20)) } == 0xffff)
        #expect(reply[20] == 3 && reply[21] == 4, "destination unreachable, fragmentation needed")
        #expect(Int(reply[26]) << 8 | Int(reply[27]) == 1472, "the next-hop MTU")
        #expect(Array(reply[28...]) == Array(packet[0..<28]), "the original header and the ports")
        #expect(reply.withUnsafeBytes { InternetChecksum.fold(InternetChecksum.sum($0.baseAddress! + 20, count: reply.count - 20)) } == 0xffff)
    }

    @Test func anIPv6PacketGetsPacketTooBigQuotingAsMuchAsFits() throws {
        let packet = Self.ipv6(length: 1500)
        let reply = try #require(Self.answer(packet, mtu: 1452))
        #expect(reply.count == 1280, "an IPv6 error fills the minimum MTU")
        #expect(reply[0] >> 4 == 6 && reply[6] == 58)
        #expect(Int(reply[4]) << 8 | Int(reply[5]) == 1240)
        #expect(Array(reply[8..<24]) == Array(packet[24..<40]) && Array(reply[24..<40]) == Array(packet[8..<24]))
        #expect(reply[40] == 2 && reply[41] == 0, "packet too big")
        #expect(reply[44...47] == [0, 0, 0x05, 0xac], "MTU 1452")
        #expect(Array(reply[48...]) == Array(packet[0..<1232]))
        let sum = reply.withUnsafeBytes { raw -> UInt16 in
            let p = raw.baseAddress!
            let pseudo = InternetChecksum.pseudoHeaderSum(source: p + 8, destination: p + 24, addressLength: 16, protocolNumber: 58, length: 1240)
            return InternetChecksum.fold(InternetChecksum.sum(p + 40, count: 1240, into: pseudo))
        }
        #expect(sum == 0xffff)
        // A short packet over a tiny MTU is quoted whole.
        #expect(try #require(Self.answer(Self.ipv6(length: 300), mtu: 280)).count == 40 + 8 + 300)
    }

    @Test func noAnswerWhereNoneIsDue() {
        #expect(Self.answer(Self.ipv4(length: 1400), mtu: 1472) == nil, "it fits")
        #expect(Self.answer(Self.ipv4(length: 1500, dontFragment: false), mtu: 1472) == nil, "fragmentation allowed")
        #expect(Self.answer(Self.ipv4(length: 1500, proto: 1, firstPayloadByte: 3), mtu: 1472) == nil, "an ICMP error")
        #expect(Self.answer(Self.ipv4(length: 1500, proto: 1, firstPayloadByte: 8), mtu: 1472) != nil, "an echo request is answered")
        var multicastSource = Self.ipv4(length: 1500)
        multicastSource[12] = 224
        #expect(Self.answer(multicastSource, mtu: 1472) == nil)
        #expect(Self.answer(Self.ipv6(length: 1500, next: 58, firstPayloadByte: 1), mtu: 1452) == nil, "an ICMPv6 error")
        #expect(Self.answer(Self.ipv6(length: 1500, next: 58, firstPayloadByte: 128), mtu: 1452) != nil, "an echo request is answered")
        #expect(Self.answer(Self.ipv6(length: 1500, source: [0xff, 0x02] + [UInt8](repeating: 0, count: 14)), mtu: 1452) == nil)
        #expect(Self.answer(Self.ipv6(length: 1500, source: [UInt8](repeating: 0, count: 16)), mtu: 1452) == nil)
        #expect(Self.answer([0x50] + [UInt8](repeating: 0, count: 1499), mtu: 1472) == nil, "not IP")
        var short = [UInt8](repeating: 0, count: 10)
        short[0] = 0x45
        #expect(Self.answer(short, mtu: 5) == nil)
        var lyingHeader = Self.ipv4(length: 1500)
        lyingHeader[0] = 0x4f   // a 60-byte header: still fits, quoted with its 8 bytes
        #expect(Self.answer(lyingHeader, mtu: 1472)?.count == 20 + 8 + 68)
    }

    @Test func hostileBytesNeverTrapAndNeverOverflowTheReply() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let length = Int.random(in: 0...1600, using: &generator)
            var packet = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if length > 0 { packet[0] = [0x45, 0x4f, 0x60, 0x41][Int.random(in: 0...3, using: &generator)] }
            if let reply = Self.answer(packet, mtu: Int.random(in: 1...1500, using: &generator)) {
                #expect(reply.count <= PacketTooBig.maximumReplyLength)
            }
        }
    }

    @Test func aBatchDropsThePacketsPickedAndKeepsTheRestInOrder() {
        let batch = PacketBatch(capacity: 6, slotSize: 200)
        for i in 0..<6 { batch.append([UInt8](repeating: UInt8(i), count: 10 + i)) }
        batch.removeAll { $0 % 2 == 0 }
        #expect(batch.count == 3)
        #expect((0..<3).map { batch.packetBytes($0) } == [1, 3, 5].map { [UInt8](repeating: UInt8($0), count: 10 + $0) })
        batch.removeAll { _ in false }
        #expect(batch.count == 3)
        batch.removeAll { _ in true }
        #expect(batch.isEmpty)
    }
}
