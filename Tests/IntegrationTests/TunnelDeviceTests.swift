import Foundation
import Glibc
import Testing
import Tunnel

/// The `Tunnel` library against the real kernel, in the private network namespace scripts/test
/// runs integration tests in: devices created and adopted, configuration over rtnetlink read back
/// with `ip -j`, blocking, batch and async I/O, interruption, and GSO packets from the kernel.
@Suite(.tags(.groupA), .serialized, .timeLimit(.minutes(3)))
struct TunnelDeviceTests {
    init() throws { try requireTunnelPrerequisites() }

    static func addresses(of device: String) throws -> [String] {
        let links = try ipJSON(["addr", "show", "dev", device])
        return links.flatMap { ($0["addr_info"] as? [[String: Any]]) ?? [] }
            .compactMap { info in (info["local"] as? String).map { "\($0)/\(info["prefixlen"] as? Int ?? -1)" } }
    }

    static func routes(of device: String, family: String = "-4") throws -> [String] {
        try ipJSON([family, "route", "show", "dev", device]).compactMap { $0["dst"] as? String }
    }

    @Test func netlinkConfigurationReadsBackThroughIP() throws {
        let device = try TunDevice(.init(name: "ftcfg%d"))
        defer { device.close() }
        #expect(device.name.hasPrefix("ftcfg"))
        try device.setMTU(1400)
        try device.addAddress(try IPPrefix("10.71.0.1/24"))
        try device.addAddress(try IPPrefix("10.71.1.1/24"))
        try device.addAddress(try IPPrefix("fd71::1/64"))
        try device.setUp()
        try device.addRoute(try IPPrefix("10.72.0.0/16"))
        try device.addRoute(try IPPrefix("fd72::/48"), metric: 50)

        let link = try #require(try ipJSON(["link", "show", "dev", device.name]).first)
        #expect(link["mtu"] as? Int == 1400)
        #expect((link["flags"] as? [String])?.contains("UP") == true)
        #expect(Set(try Self.addresses(of: device.name)).isSuperset(of: ["10.71.0.1/24", "10.71.1.1/24", "fd71::1/64"]))
        let v4 = try Self.routes(of: device.name)
        #expect(Set(v4).isSuperset(of: ["10.71.0.0/24", "10.71.1.0/24", "10.72.0.0/16"]), "\(v4)")
        let v6 = try ipJSON(["-6", "route", "show", "dev", device.name])
        #expect(v6.contains { $0["dst"] as? String == "fd72::/48" && $0["metric"] as? Int == 50 }, "\(v6)")
        #expect(v6.contains { $0["dst"] as? String == "fd71::/64" })
        // The library's own dump agrees.
        #expect(Set(try device.addresses().map(\.description)).isSuperset(of: ["10.71.0.1/24", "fd71::1/64"]))

        try device.removeRoute(try IPPrefix("10.72.0.0/16"))
        try device.removeAddress(try IPPrefix("10.71.1.1/24"))
        try device.setUp(false)
        #expect(!(try Self.routes(of: device.name)).contains("10.72.0.0/16"))
        #expect(!(try Self.addresses(of: device.name)).contains("10.71.1.1/24"))
        let down = try #require(try ipJSON(["link", "show", "dev", device.name]).first)
        #expect((down["flags"] as? [String])?.contains("UP") == false)
    }

    /// The netlink error `body` fails with, if it fails with one.
    static func netlinkError(_ body: () throws -> Void) -> NetlinkError? {
        do {
            try body()
            return nil
        } catch let error as NetlinkError {
            return error
        } catch let error as TunnelError {
            if case .netlink(let inner) = error { return inner }
            return nil
        } catch {
            return nil
        }
    }

    @Test func kernelRefusalsAreTypedErrorsWithTheNetlinkReason() throws {
        let device = try TunDevice(.init(name: "ftrefuse0"))
        defer { device.close() }
        let prefix = try IPPrefix("10.73.0.1/24")
        try device.addAddress(prefix)
        let duplicate = Self.netlinkError { try device.addAddress(prefix) }
        #expect(duplicate?.errno == EEXIST, "a duplicate address must be refused: \(String(describing: duplicate))")
        #expect(duplicate?.description.hasPrefix("add address 10.73.0.1/24 to ftrefuse0: File exists") == true, "\(String(describing: duplicate))")

        let tooSmall = Self.netlinkError { try device.setMTU(40) }
        #expect(tooSmall?.errno == EINVAL, "an MTU below the minimum must be refused: \(String(describing: tooSmall))")
        #expect(tooSmall?.kernelMessage?.isEmpty == false, "the kernel explains an MTU refusal: \(String(describing: tooSmall))")

        let route = try IPPrefix("10.74.0.0/16")
        let noDevice = Self.netlinkError { try RouteNetlink().addRoute(route, interface: 999_999) }
        #expect(noDevice?.errno == ENODEV, "\(String(describing: noDevice))")
    }

    @Test func theKernelPicksANameAndANonPersistentDeviceGoesWithItsDescriptor() throws {
        let device = try TunDevice()
        let name = device.name
        #expect(name.hasPrefix("tun"))
        #expect(device.interfaceIndex > 0)
        #expect(try ipJSON(["link", "show", "dev", name]).count == 1)
        device.close()
        #expect(try Tests.run(try requireExecutable("ip", package: "iproute2"), ["link", "show", "dev", name]).status != 0)
    }

    @Test func aPersistentDeviceOutlivesItsDescriptorUntilReleased() throws {
        let first = try TunDevice(.init(name: "ftkeep0", persistent: true))
        first.close()
        let info = try #require(try ipJSON(["-d", "link", "show", "dev", "ftkeep0"]).first)
        let data = (info["linkinfo"] as? [String: Any])?["info_data"] as? [String: Any]
        #expect(data?["persist"] as? Bool == true, "\(info)")
        let again = try TunDevice(.init(name: "ftkeep0"))
        try again.setPersistent(false)
        again.close()
        #expect(try Tests.run(try requireExecutable("ip", package: "iproute2"), ["link", "show", "dev", "ftkeep0"]).status != 0)
    }

    @Test func tapMultiQueueAndOffloadShowInTheLinkDetails() throws {
        let tap = try TunDevice(.init(name: "fttap0", layer: .tap))
        defer { tap.close() }
        #expect(try ipJSON(["link", "show", "dev", "fttap0"]).first?["link_type"] as? String == "ether")

        let mq = try TunDevice(.init(name: "ftmq0", queues: 3, offload: true))
        defer { mq.close() }
        #expect(mq.queues.count == 3)
        #expect(Set(mq.queues.map(\.fileDescriptor)).count == 3)
        let info = try #require(try ipJSON(["-d", "link", "show", "dev", "ftmq0"]).first)
        let data = (info["linkinfo"] as? [String: Any])?["info_data"] as? [String: Any]
        #expect(data?["multi_queue"] as? Bool == true, "\(info)")
        #expect(data?["vnet_hdr"] as? Bool == true)
        #expect(data?["pi"] as? Bool == false)
        // This kernel (>= 6.2) takes USO; the probe must have found it.
        #expect(mq.offload.isSuperset(of: [.checksum, .tso4, .tso6, .uso4, .uso6]), "\(mq.offload)")
        // TAP takes offload too (super-frames split and coalesced behind their Ethernet header).
        let tapOffload = try TunDevice(.init(name: "fttap1", layer: .tap, offload: true))
        defer { tapOffload.close() }
        #expect(tapOffload.queues[0].linkLayer == .ethernet)
        #expect(tapOffload.offload.isSuperset(of: [.checksum, .tso4, .tso6]), "\(tapOffload.offload)")
        let tapInfo = try #require(try ipJSON(["-d", "link", "show", "dev", "fttap1"]).first)
        #expect(((tapInfo["linkinfo"] as? [String: Any])?["info_data"] as? [String: Any])?["vnet_hdr"] as? Bool == true, "\(tapInfo)")
        #expect(throws: TunnelError.self) { try TunDevice(.init(name: "this-name-is-too-long")) }
    }

    @Test func adoptsADescriptorOpenedElsewhere() throws {
        // Opened and attached with plain system calls, as an app's VPN service or a parent
        // process would, then handed to the library.
        let fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC)
        #expect(fd >= 0)
        var request = ifreq()
        withUnsafeMutableBytes(of: &request.ifr_ifrn.ifrn_name) { raw in
            for (i, b) in "ftadopt0".utf8.enumerated() { raw[i] = b }
        }
        request.ifr_ifru.ifru_flags = Int16(0x0001 | 0x1000)   // IFF_TUN | IFF_NO_PI
        #expect(ioctl(fd, 0x4004_54ca, &request) == 0)
        let device = try TunDevice(fileDescriptor: fd)
        defer { device.close() }
        #expect(device.name == "ftadopt0")
        #expect(device.layer == .tun)
        #expect(device.framing == .none)
        try device.addAddress(try IPPrefix("10.75.0.1/24"))
        try device.setUp()
        // A packet sent into the device's prefix comes out of the adopted descriptor.
        try sendUDP(to: "10.75.0.2", port: 9, payload: Array("adopted".utf8))
        var buffer = [UInt8](repeating: 0, count: 2048)
        var got: [UInt8] = []
        for _ in 0..<20 {
            let n = try buffer.withUnsafeMutableBytes { try device.queues[0].read(into: $0, timeout: .seconds(2)) }
            let packet = Array(buffer[0..<n])
            if n >= 28, packet[9] == 17 { got = packet; break }   // skip anything else the kernel sends
        }
        #expect(got.count == 20 + 8 + 7)
        #expect(Array(got.suffix(7)) == Array("adopted".utf8))
        let notTun = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        #expect(throws: TunnelError.self) { try TunDevice(fileDescriptor: notTun) }
        close(notTun)
    }

    @Test func packetInformationIsStrippedOnReadAndAddedOnWrite() throws {
        let device = try TunDevice(.init(name: "ftpi0", packetInformation: true))
        defer { device.close() }
        #expect(device.framing == .packetInformation)
        try device.addAddress(try IPPrefix("10.70.0.1/24"))
        try device.setUp()
        try sendUDP(to: "10.70.0.2", port: 9, payload: Array("with pi".utf8))
        let batch = PacketBatch(capacity: 8)
        var got: [UInt8] = []
        let deadline = Date().addingTimeInterval(3)
        while got.isEmpty && Date() < deadline {
            batch.removeAll()
            _ = try device.queues[0].readPackets(into: batch, timeout: .seconds(1))
            for i in 0..<batch.count where batch.length(at: i) == 35 && batch[i][0] == 0x45 { got = batch.packetBytes(i) }
        }
        #expect(Array(got.suffix(7)) == Array("with pi".utf8), "the packet starts right after the 4-byte prefix")
        let receiver = try UDPReceiver(address: "10.70.0.1", port: 5556)
        let packet = udpPacket(from: [10, 70, 0, 2], to: [10, 70, 0, 1], port: 5556, payload: Array("pi write".utf8))
        try packet.withUnsafeBytes { try device.queues[0].write($0) }
        #expect(try receiver.receive(timeout: 2) == Array("pi write".utf8))
        batch.removeAll()
        batch.append(packet)
        #expect(try device.queues[0].writePackets(batch).written == 1)
        #expect(try receiver.receive(timeout: 2) == Array("pi write".utf8))
    }

    @Test func interruptEndsABlockedReadAndCloseEndsTheDevice() throws {
        let device = try TunDevice(.init(name: "ftintr0"))
        let queue = device.queues[0]
        let outcome = Mutex<String>("")
        let finished = DispatchSemaphore(value: 0)
        Thread {
            let batch = PacketBatch(capacity: 8)
            do {
                _ = try queue.readPackets(into: batch, timeout: nil)
                outcome.withLock { $0 = "returned" }
            } catch {
                outcome.withLock { $0 = "\(error)" }
            }
            finished.signal()
        }.start()
        usleep(200_000)
        let start = Date()
        queue.interrupt()
        #expect(finished.wait(timeout: .now() + 1) == .success, "interrupt() must end a blocked read within a second")
        #expect(Date().timeIntervalSince(start) < 1)
        #expect(outcome.withLock { $0 } == "interrupted")
        // Writes still work after an interrupt; reads do not.
        #expect(throws: TunnelError.interrupted) { try queue.readPackets(into: PacketBatch(capacity: 1), timeout: .zero) }
        device.close()
        #expect(throws: TunnelError.closed) { try queue.write(UnsafeRawBufferPointer(start: nil, count: 0)) }
    }

    @Test func aReadTimesOutWithNothingAndAsyncReadsAreCancellable() async throws {
        let device = try TunDevice(.init(name: "ftasync0"))
        defer { device.close() }
        try device.addAddress(try IPPrefix("10.76.0.1/24"))
        try device.setUp()
        let queue = device.queues[0]
        let batch = PacketBatch(capacity: 8)
        // The kernel may send a router solicitation or MLD report; drain those first.
        while try queue.readPackets(into: batch, timeout: .milliseconds(300)) > 0 { batch.removeAll() }
        let start = ContinuousClock.now
        #expect(try queue.readPackets(into: batch, timeout: .milliseconds(200)) == 0)
        #expect(ContinuousClock.now - start >= .milliseconds(190))

        // An async read waits without a thread and gets the packet.
        let reader = Task { () throws -> [UInt8] in
            let packets = PacketBatch(capacity: 8)
            while true {
                _ = try await queue.readPackets(into: packets)
                for i in 0..<packets.count where packets.length(at: i) > 28 && packets[i][9] == 17 { return packets.packetBytes(i) }
                packets.removeAll()
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        try sendUDP(to: "10.76.0.2", port: 9, payload: Array("async".utf8))
        let packet = try await reader.value
        #expect(Array(packet.suffix(5)) == Array("async".utf8))

        // Cancelling a waiting read ends it promptly with CancellationError.
        let waiting = Task { () async throws -> Int in
            let packets = PacketBatch(capacity: 8)
            while true {
                packets.removeAll()
                _ = try await queue.readPackets(into: packets)
                if (0..<packets.count).contains(where: { packets[$0][0] >> 4 == 4 }) { return 1 }
            }
        }
        try await Task.sleep(for: .milliseconds(200))
        let cancelledAt = ContinuousClock.now
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(ContinuousClock.now - cancelledAt < .seconds(1))
    }

    @Test func kernelUDPSuperPacketsAreSplitIntoChecksummedDatagrams() throws {
        // A UDP socket sending with UDP_SEGMENT through an offload device: the kernel hands the
        // reader one USO super-packet, which the batch read splits.
        let device = try TunDevice(.init(name: "ftuso0", offload: true))
        defer { device.close() }
        try device.setMTU(1500)
        try device.addAddress(try IPPrefix("10.77.0.1/24"))
        try device.setUp()
        let payload = (0..<(1200 * 5 + 321)).map { UInt8(truncatingIfNeeded: $0 * 13 + 1) }
        try sendUDP(to: "10.77.0.2", port: 4242, payload: payload, segmentSize: 1200)
        let batch = PacketBatch(capacity: 64, slotSize: 1500)
        var datagrams: [[UInt8]] = []
        let deadline = Date().addingTimeInterval(5)
        while datagrams.count < 6 && Date() < deadline {
            batch.removeAll()
            _ = try device.queues[0].readPackets(into: batch, timeout: .seconds(1))
            for i in 0..<batch.count where batch.length(at: i) > 28 && batch[i][9] == 17 { datagrams.append(batch.packetBytes(i)) }
        }
        #expect(device.queues[0].statistics.superPacketsRead >= 1, "the kernel sent no super-packet")
        #expect(datagrams.count == 6)
        #expect(datagrams.allSatisfy(udpChecksumsHold), "every datagram's checksums must verify")
        #expect(datagrams.flatMap { $0.dropFirst(28) } == payload)
        #expect(datagrams.map { $0.count } == [1228, 1228, 1228, 1228, 1228, 349])
    }

    @Test func malformedWritesAreRefusedWithoutDisturbingTheNext() throws {
        let device = try TunDevice(.init(name: "ftbad0", offload: true))
        defer { device.close() }
        try device.addAddress(try IPPrefix("10.78.0.1/24"))
        try device.setUp()
        let receiver = try UDPReceiver(address: "10.78.0.1", port: 5555)
        let good = udpPacket(from: [10, 78, 0, 2], to: [10, 78, 0, 1], port: 5555, payload: Array("still fine".utf8))
        let batch = PacketBatch(capacity: 8, slotSize: 9000)
        // The kernel refuses at write what is not IPv4 or IPv6 at all; a runt and a packet whose
        // length lies are taken and dropped by the IP stack. None may hurt the packet after them.
        batch.append([0x45])                                              // runt
        batch.append([UInt8](repeating: 0x1f, count: 60))                 // not IP
        var lying = good; lying[3] = 0xff                                 // total length beyond the packet
        batch.append(lying)
        batch.append(good)
        let outcome = try device.queues[0].writePackets(batch)
        #expect(outcome.dropped == 1 && outcome.written == 3 && outcome.lastErrno == EINVAL, "\(outcome)")
        #expect(try receiver.receive(timeout: 2) == Array("still fine".utf8))

        // A hostile virtio-net header written straight to the descriptor: the kernel refuses it,
        // and the next packet still arrives whole.
        var bogus = [UInt8](repeating: 0, count: 10) + good
        bogus[0] = 1; bogus[1] = 1; bogus[4] = 0; bogus[5] = 0; bogus[6] = 200      // TCPv4 GSO, gso_size 0, csum_start past the packet
        let n = bogus.withUnsafeBytes { write(device.queues[0].fileDescriptor, $0.baseAddress, $0.count) }
        #expect(n < 0)
        batch.removeAll()
        batch.append(good)
        #expect(try device.queues[0].writePackets(batch).written == 1)
        #expect(try receiver.receive(timeout: 2) == Array("still fine".utf8))
    }

    @Test func anOversizePacketForTheSlotDoesNotCorruptTheNextRead() throws {
        let device = try TunDevice(.init(name: "ftbig0"))
        defer { device.close() }
        try device.setMTU(9000)
        try device.addAddress(try IPPrefix("10.79.0.1/24"))
        try device.setUp()
        try sendUDP(to: "10.79.0.2", port: 9, payload: [UInt8](repeating: 0xaa, count: 3000))
        try sendUDP(to: "10.79.0.2", port: 9, payload: Array("small".utf8))
        let batch = PacketBatch(capacity: 8, slotSize: 1500)
        var small: [UInt8]?
        let deadline = Date().addingTimeInterval(3)
        while small == nil && Date() < deadline {
            batch.removeAll()
            _ = try device.queues[0].readPackets(into: batch, timeout: .seconds(1))
            for i in 0..<batch.count where batch.length(at: i) == 33 { small = batch.packetBytes(i) }
            for i in 0..<batch.count { #expect(batch.length(at: i) < 1500, "no packet may come back cut to the slot") }
        }
        #expect(small.map { Array($0.suffix(5)) } == Array("small".utf8))
        // The big one was recognised and dropped, not handed over cut short.
        #expect(device.queues[0].statistics.malformedDropped >= 1)
        #expect(device.queues[0].statistics.lastMalformed == .segmentLargerThanSlot(segment: 3028, slot: 1500))
    }
}

import Synchronization

// MARK: - Helpers

/// Sends one UDP datagram (or, with `segmentSize`, a UDP_SEGMENT run) from this namespace.
func sendUDP(to address: String, port: UInt16, payload: [UInt8], segmentSize: Int? = nil) throws {
    let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
    defer { close(fd) }
    if let segmentSize {
        var size = CInt(segmentSize)
        guard setsockopt(fd, CInt(IPPROTO_UDP), 103, &size, socklen_t(MemoryLayout<CInt>.size)) == 0 else {
            throw CommandFailed(command: "setsockopt UDP_SEGMENT", status: errno, stderr: String(cString: strerror(errno)))
        }
    }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = inet_addr(address)
    let sent = payload.withUnsafeBytes { bytes in
        withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
    guard sent == payload.count else {
        throw CommandFailed(command: "sendto \(address)", status: errno, stderr: String(cString: strerror(errno)))
    }
}

/// A UDP socket bound in this namespace that receives one datagram at a time.
final class UDPReceiver {
    let fd: Int32
    init(address: String, port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr(address)
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard ok == 0 else { throw CommandFailed(command: "bind \(address):\(port)", status: errno, stderr: String(cString: strerror(errno))) }
    }
    deinit { close(fd) }

    func receive(timeout: Int) throws -> [UInt8]? {
        var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&pfd, 1, Int32(timeout * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return n >= 0 ? Array(buffer[0..<n]) : nil
    }
}

/// An IPv4/UDP packet with correct checksums.
func udpPacket(from source: [UInt8], to destination: [UInt8], port: UInt16, payload: [UInt8]) -> [UInt8] {
    let total = 28 + payload.count
    var p: [UInt8] = [0x45, 0, UInt8(total >> 8), UInt8(total & 0xff), 0, 1, 0x40, 0, 64, 17, 0, 0] + source + destination
    p += [0x30, 0x39, UInt8(port >> 8), UInt8(port & 0xff), UInt8((8 + payload.count) >> 8), UInt8((8 + payload.count) & 0xff), 0, 0]
    p += payload
    let ip = onesComplement(Array(p[0..<20]))
    p[10] = UInt8(ip >> 8); p[11] = UInt8(ip & 0xff)
    let udp = onesComplement(source + destination + [0, 17, p[24], p[25]] + Array(p[20...]))
    p[26] = UInt8(udp >> 8); p[27] = UInt8(udp & 0xff)
    return p
}

func onesComplement(_ bytes: [UInt8]) -> UInt16 {
    var sum: UInt32 = 0
    var i = 0
    while i + 1 < bytes.count { sum += UInt32(bytes[i]) << 8 | UInt32(bytes[i + 1]); i += 2 }
    if i < bytes.count { sum += UInt32(bytes[i]) << 8 }
    while sum >> 16 != 0 { sum = (sum & 0xffff) + (sum >> 16) }
    return ~UInt16(sum)
}

/// Whether an IPv4/UDP packet's header and UDP checksums verify (computed the plain way).
func udpChecksumsHold(_ p: [UInt8]) -> Bool {
    guard p.count >= 28, onesComplement(Array(p[0..<20])) == 0 else { return false }
    let length = p.count - 20
    return onesComplement(Array(p[12..<20]) + [0, 17, UInt8(length >> 8), UInt8(length & 0xff)] + Array(p[20...])) == 0
}
