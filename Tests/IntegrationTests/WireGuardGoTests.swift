import FarcastSupport
import Foundation
import Glibc
import Testing
import WireGuard

/// Our WireGuard core against the real peer: Debian's wireguard-go (configured with Debian's
/// `wg`) on a TUN device in this test's network namespace, and our core on a plain UDP socket
/// over loopback. Both handshake directions complete, and an ICMP echo travels inside the
/// tunnel each way (wireguard-go hands it to the kernel, which answers through the tunnel), so
/// the keys, the counters and the padding are wireguard-go's own judgement, not ours.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct WireGuardGoTests {
    init() throws { try requireTunnelPrerequisites() }

    @Test func weInitiateAndAPingIsAnsweredThroughWireguardGo() throws {
        let peer = try WireguardGoPeer()
        let socket = try LoopbackUDPSocket()
        let local = LocalIdentity(privateKey: PrivateKey())
        try peer.addPeer(local.publicKey, endpoint: nil, presharedKey: peer.presharedKey)
        let remote = RemoteIdentity(publicKey: peer.publicKey, presharedKey: try PresharedKey(base64: peer.presharedKey))
        let now = SystemClock().now()

        var jar = CookieJar(remote: remote)
        let (pending, initiation) = try InitiatorHandshake.start(local: local, remote: remote, senderIndex: 0xFA12_0001)
        try socket.send(jar.stamp(initiation, now: now), to: peer.port)
        let reply = try #require(socket.receive(timeout: 5), "wireguard-go sent no response\n\(peer.log)")
        #expect(MessageMACs.verifyMAC1(reply, local: local), "wireguard-go's MAC1 is keyed with our public key")
        guard case .response(let response) = try Message(parsing: reply) else { Issue.record("not a response: \(reply.count) bytes"); return }
        var session = TransportSession(keys: try pending.finish(response, local: local), established: now)

        let request = icmpEcho(type: 8, from: [10, 77, 0, 2], to: [10, 77, 0, 1], identifier: 0x4647, sequence: 1, payload: Array("farcast".utf8))
        try socket.send(session.seal(request, mtu: 1420), to: peer.port)
        let answer = try #require(try receivePacket(socket, session: &session), "no echo reply came back through wireguard-go\n\(peer.log)")
        let echo = try #require(parseICMPEcho(answer), "not an ICMP echo: \(answer)")
        #expect(echo.type == 0 && echo.source == [10, 77, 0, 1] && echo.destination == [10, 77, 0, 2])
        #expect(echo.identifier == 0x4647 && echo.sequence == 1 && echo.payload == Array("farcast".utf8))

        let show = try peer.wg(["show", peer.interface, "dump"])
        #expect(show.contains(local.publicKey.base64), "\(show)")
        let peerLine = try #require(show.split(separator: "\n").first { $0.hasPrefix(local.publicKey.base64) }).split(separator: "\t")
        #expect((Int(peerLine[4]) ?? 0) > 0, "wg show records a handshake: \(peerLine)")
        #expect((Int(peerLine[5]) ?? 0) > 0 && (Int(peerLine[6]) ?? 0) > 0, "and bytes each way: \(peerLine)")
    }

    @Test func wireguardGoInitiatesAndItsPingIsAnsweredByUs() throws {
        let peer = try WireguardGoPeer()
        let socket = try LoopbackUDPSocket()
        let local = LocalIdentity(privateKey: PrivateKey())
        try peer.addPeer(local.publicKey, endpoint: socket.port, presharedKey: nil)
        let remote = RemoteIdentity(publicKey: peer.publicKey)
        let ping = try BackgroundProcess(try requireExecutable("ping", package: "iputils-ping"),
                                         ["-c", "1", "-W", "8", "-p", "6661726361737421", "10.77.0.2"], logName: "wg-ping")
        defer { ping.stop() }

        let first = try #require(socket.receive(timeout: 5), "wireguard-go sent no initiation\n\(peer.log)")
        #expect(MessageMACs.verifyMAC1(first, local: local))
        guard case .initiation(let initiation) = try Message(parsing: first) else { Issue.record("not an initiation: \(first.count) bytes"); return }
        let consumed = try ConsumedInitiation(consuming: initiation, local: local)
        #expect(consumed.peerPublicKey == peer.publicKey)
        let wallClock = TAI64N.now
        #expect(consumed.timestamp < wallClock || consumed.timestamp == wallClock, "its TAI64N timestamp is now or earlier")
        let (response, keys) = try consumed.respond(remote: remote, senderIndex: 0xFA12_0002)
        var jar = CookieJar(remote: remote)
        let now = SystemClock().now()
        try socket.send(jar.stamp(response, now: now), to: peer.port)

        var session = TransportSession(keys: keys, established: now)
        let packet = try #require(try receivePacket(socket, session: &session), "wireguard-go sent no data after our response\n\(peer.log)")
        let echo = try #require(parseICMPEcho(packet), "not an ICMP echo: \(packet)")
        #expect(echo.type == 8 && echo.source == [10, 77, 0, 1] && echo.destination == [10, 77, 0, 2])
        #expect(session.hasReceived, "the responder may send now")
        let reply = icmpEcho(type: 0, from: [10, 77, 0, 2], to: [10, 77, 0, 1], identifier: echo.identifier, sequence: echo.sequence, payload: echo.payload)
        try socket.send(session.seal(reply, mtu: 1420), to: peer.port)
        #expect(ping.waitForExit(timeout: 10) && ping.terminationStatus == 0, "ping through wireguard-go got our reply: \(ping.log)\n\(peer.log)")
    }

    /// A wrong public key for wireguard-go breaks MAC1: it does not answer at all. A preshared key
    /// that differs from its own gives a response whose payload does not open.
    @Test func wrongKeysGetNoSession() throws {
        let peer = try WireguardGoPeer()
        let socket = try LoopbackUDPSocket()
        let local = LocalIdentity(privateKey: PrivateKey())
        try peer.addPeer(local.publicKey, endpoint: nil, presharedKey: peer.presharedKey)
        let now = SystemClock().now()

        let wrongKey = RemoteIdentity(publicKey: PrivateKey().publicKey)
        var jar = CookieJar(remote: wrongKey)
        let (_, toNobody) = try InitiatorHandshake.start(local: local, remote: wrongKey, senderIndex: 1)
        try socket.send(jar.stamp(toNobody, now: now), to: peer.port)
        #expect(socket.receive(timeout: 1.5) == nil, "wireguard-go answered an initiation whose MAC1 is not for it")

        let wrongPSK = RemoteIdentity(publicKey: peer.publicKey, presharedKey: .random())
        var pskJar = CookieJar(remote: wrongPSK)
        let (pending, initiation) = try InitiatorHandshake.start(local: local, remote: wrongPSK, senderIndex: 2)
        try socket.send(pskJar.stamp(initiation, now: now), to: peer.port)
        let reply = try #require(socket.receive(timeout: 5), "wireguard-go sent no response\n\(peer.log)")
        guard case .response(let response) = try Message(parsing: reply) else { Issue.record("not a response"); return }
        #expect(throws: WireGuardError.decryptionFailed(field: "empty payload of the response")) { try pending.finish(response, local: local) }
    }

    /// `farcast wg up` in one network namespace and wireguard-go in another, joined by a veth
    /// pair: pings both ways and a TCP stream (iperf3) through the tunnel, with either side
    /// making the first handshake; SIGTERM takes our interface down.
    @Test(arguments: [true, false])
    func farcastWgUpAndWireguardGoCarryPingsAndTCP(farcastInitiates: Bool) throws {
        let ping = try requireExecutable("ping", package: "iputils-ping")
        let iperf = try requireExecutable("iperf3", package: "iperf3")
        let ours = try NetworkNamespace("wg-farcast"), theirs = try NetworkNamespace("wg-go")
        try NetworkNamespace.link(ours, "192.168.78.1/24", theirs, "192.168.78.2/24", mtu: 1500)
        let peer = try WireguardGoPeer(in: theirs, addresses: ["10.78.0.2/24", "fd78::2/64"])
        let key = PrivateKey()
        try peer.addPeer(key.publicKey, allowedIPs: "10.78.0.1/32,fd78::1/128",
                         endpoint: farcastInitiates ? nil : "192.168.78.1:51820", presharedKey: peer.presharedKey)
        let folder = try TemporaryFolder()
        // Named for this process: a UAPI socket in /var/run/wireguard is shared by every namespace.
        let ifname = "fcup\(getpid() % 100_000)"
        let config = folder.path + "/\(ifname).conf"
        let text = """
            [Interface]
            PrivateKey = \(key.base64)
            Address = 10.78.0.1/24, fd78::1/64
            ListenPort = 51820
            DNS = 10.78.0.53   # not applied: a note says so

            [Peer]
            PublicKey = \(peer.publicKey.base64)
            PresharedKey = \(peer.presharedKey)
            AllowedIPs = 10.78.0.2/32, fd78::2/128
            \(farcastInitiates ? "Endpoint = 192.168.78.2:\(peer.port)" : "")

            """
        FileManager.default.createFile(atPath: config, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        let up = try ours.start([try farcastBinary(), "wg", "up", config, "--json"], logName: "farcast-wg-up")
        defer { up.stop() }
        #expect(eventually { (try? ours.run(["ip", "-o", "addr", "show", "dev", ifname]).stdout.contains("10.78.0.1/24")) == true }, "\(up.log)")

        let (from, to) = farcastInitiates ? (ours, "10.78.0.2") : (theirs, "10.78.0.1")
        let first = try from.run([ping, "-c", "3", "-i", "0.2", "-W", "5", to])
        #expect(first.status == 0, "\(first.stdout)\(first.stderr)\n\(up.log)\n\(peer.log)")
        let back = try (farcastInitiates ? theirs : ours).run([ping, "-c", "3", "-i", "0.2", "-W", "5", farcastInitiates ? "10.78.0.1" : "10.78.0.2"])
        #expect(back.status == 0, "\(back.stdout)\(back.stderr)\n\(up.log)")
        // IPv6 inside the tunnel (the address needs a moment for duplicate address detection).
        #expect(eventually(timeout: 5) { (try? ours.run([ping, "-6", "-c", "1", "-W", "1", "fd78::2"]).status) == 0 }, "IPv6 through the tunnel\n\(up.log)")
        #expect(up.log.contains("DNS (line 5) is not applied"), "\(up.log)")

        // Debian's wg reads and changes our interface through its UAPI socket.
        let wg = try requireExecutable("wg", package: "wireguard-tools")
        let dump = try run(wg, ["show", ifname, "dump"])
        #expect(dump.status == 0, "\(dump.stderr)\n\(up.log)")
        let rows = dump.stdout.split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
        #expect(rows.first == [key.base64, key.publicKey.base64, "51820", "off"], "\(rows)")
        if rows.count == 2 {
            let row = rows[1]
            #expect(row[0] == peer.publicKey.base64 && row[1] == peer.presharedKey && row[2] == "192.168.78.2:\(peer.port)" && row[3] == "10.78.0.2/32,fd78::2/128",
                    "\(row)")
            #expect((Int(row[4]) ?? 0) > 1_700_000_000 && (Int(row[5]) ?? 0) > 0 && (Int(row[6]) ?? 0) > 0 && row[7] == "off", "\(row)")
        } else {
            Issue.record("wg show dump: \(rows)")
        }
        // farcast wg show reads ours and wireguard-go's the same way.
        let farcast = try farcastBinary()
        let shown = try run(farcast, ["wg", "show", ifname, "--json"])
        #expect(shown.status == 0, "\(shown.stderr)")
        #expect(shown.stdout.contains("\"public_key\":\"\(peer.publicKey.base64)\"") && shown.stdout.contains("\"latest_handshake\":\"20"),
                "\(shown.stdout)")
        #expect(!shown.stdout.contains(key.base64), "the private key is never shown")
        let theirsShown = try run(farcast, ["wg", "show", peer.interface])
        #expect(theirsShown.stdout.contains("peer: \(key.publicKey.base64)") && theirsShown.stdout.contains("listening port: \(peer.port)"),
                "\(theirsShown.stdout)")
        let missing = try run(farcast, ["wg", "show", "nosuchwg0"])
        #expect(missing.status == 1 && missing.stderr.contains("no WireGuard interface nosuchwg0 is running"), "\(missing.stderr)")
        let added = PrivateKey().publicKey.base64
        let set = try run(wg, ["set", ifname, "peer", added, "allowed-ips", "10.78.0.9/32,fd78::9/128", "persistent-keepalive", "0"])
        #expect(set.status == 0, "\(set.stderr)")
        #expect(try run(wg, ["show", ifname, "allowed-ips"]).stdout.contains("\(added)\t10.78.0.9/32 fd78::9/128"))
        #expect(try run(wg, ["set", ifname, "peer", added, "remove"]).status == 0)
        #expect(!(try run(wg, ["show", ifname, "peers"]).stdout.contains(added)))
        let refused = try run(wg, ["set", ifname, "listen-port", "51999"])
        #expect(refused.status != 0, "a running interface keeps its port: \(refused.stdout)")

        let server = try theirs.start([iperf, "-s", "-1", "-B", "10.78.0.2"], logName: "iperf3-server")
        defer { server.stop() }
        _ = eventually { (try? theirs.run(["ss", "-ltn"]).stdout.contains("10.78.0.2:5201")) == true }
        let client = try ours.run([iperf, "-c", "10.78.0.2", "-t", "2", "-J"], timeout: 30)
        #expect(client.status == 0, "\(client.stderr)\n\(up.log)")
        let result = try JSONSerialization.jsonObject(with: Data(client.stdout.utf8)) as? [String: Any]
        let end = result?["end"] as? [String: Any]
        let received = (end?["sum_received"] as? [String: Any])?["bytes"] as? Int ?? 0
        #expect(received > 1_000_000, "TCP through the tunnel: \(received) bytes in 2 s")
        // UDP at 50 Mbit/s: what arrived, and how much was lost on the way.
        let udpServer = try theirs.start([iperf, "-s", "-1", "-B", "10.78.0.2"], logName: "iperf3-udp-server")
        defer { udpServer.stop() }
        _ = eventually { (try? theirs.run(["ss", "-ltn"]).stdout.contains("10.78.0.2:5201")) == true }
        let udpClient = try ours.run([iperf, "-c", "10.78.0.2", "-t", "2", "-u", "-b", "50M", "-l", "1200", "-J"], timeout: 30)
        #expect(udpClient.status == 0, "\(udpClient.stderr)\n\(up.log)")
        let udpSum = ((try JSONSerialization.jsonObject(with: Data(udpClient.stdout.utf8)) as? [String: Any])?["end"] as? [String: Any])?["sum"] as? [String: Any]
        let udpPackets = udpSum?["packets"] as? Int ?? 0, udpLost = udpSum?["lost_packets"] as? Int ?? -1
        #expect(udpPackets > 5_000 && udpLost >= 0 && udpLost * 20 < udpPackets, "UDP through farcast and wireguard-go: \(udpSum ?? [:])")

        up.signal(SIGTERM)
        #expect(up.waitForExit(timeout: 3), "SIGTERM takes it down")
        #expect(up.terminationStatus == 0, "\(up.log)")
        #expect(try ours.run(["ip", "link", "show", "dev", ifname]).status != 0, "the device goes with the command")
        let json = try #require(up.log.split(separator: "\n").last { $0.hasPrefix("{") })
        #expect(json.contains(peer.publicKey.base64) && json.contains("\"latest_handshake\":\"20"), "\(json)")
    }

    enum Partner: String, CaseIterable, Sendable { case wireguardGo = "wireguard-go", farcast }

    /// Under a steady ping, our interface (its timers scaled down 20×: a new handshake every
    /// 6 s of sending, no session used past 9 s) keeps renewing its keys with the partner — the
    /// partner's `wg show` records each new handshake — and the ping loses at most a few
    /// packets across the changes. Against wireguard-go (unscaled) and against a second farcast
    /// (scaled too).
    @Test(arguments: Partner.allCases)
    func rekeyingUnderTrafficKeepsTheTunnelUp(partner: Partner) throws {
        let ping = try requireExecutable("ping", package: "iputils-ping")
        let wg = try requireExecutable("wg", package: "wireguard-tools")
        let farcast = try farcastBinary()
        let ours = try NetworkNamespace("wg-rekey-a"), theirs = try NetworkNamespace("wg-rekey-b")
        try NetworkNamespace.link(ours, "192.168.79.1/24", theirs, "192.168.79.2/24", mtu: 1500)
        let folder = try TemporaryFolder()
        let key = PrivateKey(), theirKey = PrivateKey()
        let ifname = "fcrk\(getpid() % 100_000)", theirName = "fcrb\(getpid() % 100_000)"
        func config(_ own: PrivateKey, _ address: String, _ other: PublicKey, _ allowed: String, _ endpoint: String?) -> String {
            let path = folder.path + "/\(own.publicKey.base64.prefix(6).filter(\.isLetter))-\(address.prefix(9).filter(\.isNumber)).conf"
            let text = "[Interface]\nPrivateKey = \(own.base64)\nAddress = \(address)\nListenPort = 51820\n\n[Peer]\nPublicKey = \(other.base64)\nAllowedIPs = \(allowed)\n"
                + (endpoint.map { "Endpoint = \($0)\n" } ?? "")
            FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
            return path
        }
        var partnerProcess: BackgroundProcess?
        var goPeer: WireguardGoPeer?
        let theirInterface: String
        let theirPublic: PublicKey
        switch partner {
        case .wireguardGo:
            let peer = try WireguardGoPeer(in: theirs, addresses: ["10.79.0.2/24"])
            try peer.addPeer(key.publicKey, allowedIPs: "10.79.0.1/32", endpoint: nil, presharedKey: nil)
            try peer.wg(["set", peer.interface, "listen-port", "51820"])
            goPeer = peer
            theirInterface = peer.interface
            theirPublic = peer.publicKey
        case .farcast:
            let path = config(theirKey, "10.79.0.2/24", key.publicKey, "10.79.0.1/32", nil)
            partnerProcess = try theirs.start([farcast, "wg", "up", path, "--name", theirName, "--test-timer-scale", "20"], logName: "farcast-wg-partner")
            theirInterface = theirName
            theirPublic = theirKey.publicKey
        }
        defer { partnerProcess?.stop() }
        let path = config(key, "10.79.0.1/24", theirPublic, "10.79.0.2/32", "192.168.79.2:51820")
        let up = try ours.start([farcast, "wg", "up", path, "--name", ifname, "--test-timer-scale", "20"], logName: "farcast-wg-rekey")
        defer { up.stop() }
        #expect(eventually { (try? ours.run(["ip", "-o", "addr", "show", "dev", ifname]).stdout.contains("10.79.0.1/24")) == true }, "\(up.log)")

        let pinging = try ours.start([ping, "-c", "100", "-i", "0.2", "-W", "1", "10.79.0.2"], logName: "wg-rekey-ping")
        defer { pinging.stop() }
        var handshakes = Set<String>()
        let started = Date()
        while pinging.isRunning, Date().timeIntervalSince(started) < 40 {
            let times = try run(wg, ["show", theirInterface, "latest-handshakes"]).stdout
            for line in times.split(separator: "\n") {
                if let value = line.split(separator: "\t").last, value != "0" { handshakes.insert(String(value)) }
            }
            usleep(500_000)
        }
        #expect(pinging.waitForExit(timeout: 5))
        let summary = pinging.log.split(separator: "\n").first { $0.contains("packets transmitted") }.map(String.init) ?? pinging.log
        let received = summary.split(separator: ",").dropFirst().first.flatMap { Int($0.split(separator: " ").first ?? "") } ?? 0
        #expect(received >= 96, "\(summary)\n\(up.log)\n\(goPeer?.log ?? partnerProcess?.log ?? "")")
        #expect(handshakes.count >= 3, "new handshakes seen by \(partner.rawValue) in 20 s: \(handshakes.sorted())\n\(up.log)")
    }

    /// Two `farcast wg up`, one per namespace (ours with two TUN queues): TCP (four streams) and
    /// UDP (iperf3) through the tunnel, then the peer roams — its outer address changes
    /// mid-ping — and our side answers it at its new address (learned from the first
    /// authenticated packet that came from there), as `wg show` then lists.
    @Test func farcastToFarcastCarriesTCPAndUDPAndFollowsAPeerThatRoams() throws {
        let ping = try requireExecutable("ping", package: "iputils-ping")
        let iperf = try requireExecutable("iperf3", package: "iperf3")
        let wg = try requireExecutable("wg", package: "wireguard-tools")
        let farcast = try farcastBinary()
        let ours = try NetworkNamespace("wg-ff-a"), theirs = try NetworkNamespace("wg-ff-b")
        try NetworkNamespace.link(ours, "192.168.81.1/24", theirs, "192.168.81.2/24", mtu: 1500)
        let folder = try TemporaryFolder()
        let key = PrivateKey(), theirKey = PrivateKey()
        let ifname = "fcfa\(getpid() % 100_000)", theirName = "fcfb\(getpid() % 100_000)"
        func write(_ name: String, _ text: String) -> String {
            let path = folder.path + "/\(name).conf"
            FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
            return path
        }
        let ourConfig = write(ifname, "[Interface]\nPrivateKey = \(key.base64)\nAddress = 10.81.0.1/24\nListenPort = 51820\n\n"
                              + "[Peer]\nPublicKey = \(theirKey.publicKey.base64)\nAllowedIPs = 10.81.0.2/32\nEndpoint = 192.168.81.2:51820\n")
        let theirConfig = write(theirName, "[Interface]\nPrivateKey = \(theirKey.base64)\nAddress = 10.81.0.2/24\nListenPort = 51820\n\n"
                                + "[Peer]\nPublicKey = \(key.publicKey.base64)\nAllowedIPs = 10.81.0.1/32\nEndpoint = 192.168.81.1:51820\n")
        let partner = try theirs.start([farcast, "wg", "up", theirConfig], logName: "farcast-wg-b")
        defer { partner.stop() }
        let up = try ours.start([farcast, "wg", "up", ourConfig, "--queues", "2"], logName: "farcast-wg-a")
        defer { up.stop() }
        for (namespace, name, address) in [(ours, ifname, "10.81.0.1/24"), (theirs, theirName, "10.81.0.2/24")] {
            #expect(eventually { (try? namespace.run(["ip", "-o", "addr", "show", "dev", name]).stdout.contains(address)) == true }, "\(up.log)\n\(partner.log)")
        }
        let first = try ours.run([ping, "-c", "3", "-i", "0.2", "-W", "5", "10.81.0.2"])
        #expect(first.status == 0, "\(first.stdout)\n\(up.log)\n\(partner.log)")
        let details = try ours.run(["ip", "-d", "link", "show", "dev", ifname]).stdout
        #expect(details.contains("multi_queue numqueues 2") && details.contains("vnet_hdr on"), "two TUN queues, offload on: \(details)")

        func iperfJSON(_ extra: [String]) throws -> [String: Any]? {
            let server = try theirs.start([iperf, "-s", "-1", "-B", "10.81.0.2"], logName: "iperf3-ff")
            defer { server.stop() }
            _ = eventually { (try? theirs.run(["ss", "-ltn"]).stdout.contains("10.81.0.2:5201")) == true }
            let client = try ours.run([iperf, "-c", "10.81.0.2", "-t", "2", "-J"] + extra, timeout: 30)
            #expect(client.status == 0, "\(client.stdout.suffix(600))\(client.stderr)\n\(up.log)\n\(partner.log)")
            return (try JSONSerialization.jsonObject(with: Data(client.stdout.utf8)) as? [String: Any])?["end"] as? [String: Any]
        }
        // Four streams: the kernel spreads them over our two queues, each sealed on its own thread.
        let tcp = try iperfJSON(["-P", "4"])
        let tcpBytes = (tcp?["sum_received"] as? [String: Any])?["bytes"] as? Int ?? 0
        #expect(tcpBytes > 1_000_000, "TCP farcast to farcast, 4 streams: \(tcpBytes) bytes in 2 s")
        // 50 Mbit/s of UDP: what the receiver counted, and how much of it was lost.
        let udp = try iperfJSON(["-u", "-b", "50M", "-l", "1200"])
        let udpSum = udp?["sum"] as? [String: Any]
        let udpPackets = udpSum?["packets"] as? Int ?? 0, udpLost = udpSum?["lost_packets"] as? Int ?? -1
        #expect(udpPackets > 5_000 && udpLost >= 0 && udpLost * 20 < udpPackets, "UDP farcast to farcast: \(udpSum ?? [:])")

        // The peer roams: it sends from a new address while pinging us; we follow it there.
        let pinging = try theirs.start([ping, "-c", "40", "-i", "0.1", "-W", "1", "10.81.0.1"], logName: "wg-roam-ping")
        defer { pinging.stop() }
        usleep(1_000_000)
        // (Deleted first: deleting a primary address takes its subnet's secondaries with it.)
        try theirs.check(["ip", "addr", "del", "192.168.81.2/24", "dev", "veth-b"])
        try theirs.check(["ip", "addr", "add", "192.168.81.3/24", "dev", "veth-b"])
        #expect(pinging.waitForExit(timeout: 15))
        let summary = pinging.log.split(separator: "\n").first { $0.contains("packets transmitted") }.map(String.init) ?? pinging.log
        let received = summary.split(separator: ",").dropFirst().first.flatMap { Int($0.split(separator: " ").first ?? "") } ?? 0
        #expect(received >= 36, "pings across the move: \(summary)\n\(up.log)")
        let endpoints = try run(wg, ["show", ifname, "endpoints"]).stdout
        #expect(endpoints.contains("\(theirKey.publicKey.base64)\t192.168.81.3:51820"), "our side answers the peer where it is now: \(endpoints)")
    }

    /// Our interface under load (a test setting makes every handshake need MAC2): wireguard-go's
    /// initiation gets a cookie reply instead of a response, wireguard-go takes the cookie (its
    /// log says so) and its retry, with MAC2 made from that cookie, is answered — the ping
    /// through the tunnel then works.
    @Test func wireguardGoAnswersOurCookieReplyAndTheHandshakeCompletes() throws {
        let ping = try requireExecutable("ping", package: "iputils-ping")
        let ours = try NetworkNamespace("wg-cookie-a"), theirs = try NetworkNamespace("wg-cookie-b")
        try NetworkNamespace.link(ours, "192.168.82.1/24", theirs, "192.168.82.2/24", mtu: 1500)
        let peer = try WireguardGoPeer(in: theirs, addresses: ["10.82.0.2/24"])
        let key = PrivateKey()
        try peer.addPeer(key.publicKey, allowedIPs: "10.82.0.1/32", endpoint: "192.168.82.1:51820", presharedKey: nil)
        let folder = try TemporaryFolder()
        let ifname = "fcck\(getpid() % 100_000)"
        let config = folder.path + "/\(ifname).conf"
        let text = "[Interface]\nPrivateKey = \(key.base64)\nAddress = 10.82.0.1/24\nListenPort = 51820\n\n[Peer]\nPublicKey = \(peer.publicKey.base64)\nAllowedIPs = 10.82.0.2/32\n"
        FileManager.default.createFile(atPath: config, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        let up = try ours.start([try farcastBinary(), "wg", "up", config, "--test-load-threshold", "0"], logName: "farcast-wg-cookie")
        defer { up.stop() }
        #expect(eventually { (try? ours.run(["ip", "-o", "addr", "show", "dev", ifname]).stdout.contains("10.82.0.1/24")) == true }, "\(up.log)")
        // wireguard-go initiates; its first initiation has no MAC2, so the answer is a cookie and
        // the retry comes REKEY_TIMEOUT (5 s) later.
        let started = Date()
        #expect(eventually(timeout: 20) { (try? theirs.run([ping, "-c", "1", "-W", "1", "10.82.0.1"]).status) == 0 }, "\(up.log)\n\(peer.log)")
        let took = Date().timeIntervalSince(started)
        #expect(peer.log.contains("Receiving cookie response"), "wireguard-go took our cookie reply\n\(peer.log)")
        #expect(took > 4, "the first initiation was answered with a cookie, not a response (\(took) s)")
        let dump = try peer.wg(["show", peer.interface, "latest-handshakes"])
        #expect(dump.contains(key.publicKey.base64) && !dump.contains("\t0\n"), "\(dump)")
    }

    /// 5 % loss and 5 % reordering of the tunnel's UDP both ways (NFQUEUE: this kernel has no
    /// netem): TCP through `farcast wg up` ↔ wireguard-go keeps flowing, and pings get through.
    @Test func tcpKeepsFlowingWithLossAndReordering() throws {
        let ping = try requireExecutable("ping", package: "iputils-ping")
        let iperf = try requireExecutable("iperf3", package: "iperf3")
        let ours = try NetworkNamespace("wg-lossy-a"), theirs = try NetworkNamespace("wg-lossy-b")
        try NetworkNamespace.link(ours, "192.168.80.1/24", theirs, "192.168.80.2/24", mtu: 1500)
        let peer = try WireguardGoPeer(in: theirs, addresses: ["10.80.0.2/24"])
        let key = PrivateKey()
        try peer.addPeer(key.publicKey, allowedIPs: "10.80.0.1/32", endpoint: nil, presharedKey: nil)
        let folder = try TemporaryFolder()
        let ifname = "fclo\(getpid() % 100_000)"
        let config = folder.path + "/\(ifname).conf"
        let text = "[Interface]\nPrivateKey = \(key.base64)\nAddress = 10.80.0.1/24\nListenPort = 51820\n\n[Peer]\nPublicKey = \(peer.publicKey.base64)\nAllowedIPs = 10.80.0.2/32\nEndpoint = 192.168.80.2:\(peer.port)\n"
        FileManager.default.createFile(atPath: config, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        let impairment = ["--loss", "5", "--reorder", "5", "--delay-ms", "2", "--seed", "7"]
        let toUs = try ImpairedLink(match: "-p udp --dport 51820", options: impairment, folder: folder, in: ours, device: "veth-a")
        let toThem = try ImpairedLink(match: "-p udp --dport \(peer.port)", options: impairment, folder: folder, in: theirs, device: "veth-b")
        let up = try ours.start([try farcastBinary(), "wg", "up", config], logName: "farcast-wg-lossy")
        defer { up.stop() }
        #expect(eventually { (try? ours.run(["ip", "-o", "addr", "show", "dev", ifname]).stdout.contains("10.80.0.1/24")) == true }, "\(up.log)")
        // The first handshake may be among the losses: its retry comes 5 s later.
        #expect(eventually(timeout: 15) { (try? ours.run([ping, "-c", "1", "-W", "1", "10.80.0.2"]).status) == 0 }, "\(up.log)\n\(peer.log)")
        let pings = try ours.run([ping, "-c", "40", "-i", "0.05", "-W", "1", "10.80.0.2"])
        let received = pings.stdout.split(separator: "\n").first { $0.contains("packets transmitted") }
            .flatMap { $0.split(separator: ",").dropFirst().first }.flatMap { Int($0.split(separator: " ").first ?? "") } ?? 0
        #expect(received >= 30, "about 10 % of round trips lost at most: \(pings.stdout)")

        let server = try theirs.start([iperf, "-s", "-1", "-B", "10.80.0.2"], logName: "iperf3-lossy")
        defer { server.stop() }
        _ = eventually { (try? theirs.run(["ss", "-ltn"]).stdout.contains("10.80.0.2:5201")) == true }
        let client = try ours.run([iperf, "-c", "10.80.0.2", "-t", "3", "-J"], timeout: 40)
        #expect(client.status == 0, "\(client.stderr)\n\(up.log)")
        let result = try JSONSerialization.jsonObject(with: Data(client.stdout.utf8)) as? [String: Any]
        let end = result?["end"] as? [String: Any]
        let bytes = (end?["sum_received"] as? [String: Any])?["bytes"] as? Int ?? 0
        #expect(bytes > 200_000, "TCP under 5 % loss and reordering: \(bytes) bytes in 3 s")
        let (us, them) = (toUs.stop(), toThem.stop())
        #expect((us["dropped_loss"] ?? 0) > 0 && (them["dropped_loss"] ?? 0) > 0 && (us["reordered"] ?? 0) > 0 && (them["reordered"] ?? 0) > 0,
                "the impairment dropped and reordered packets both ways: \(us) \(them)")
    }

    /// `farcast wg genkey|pubkey|genpsk` and Debian's `wg` read each other's keys.
    @Test func keysInterchangeWithWg() throws {
        let farcast = try farcastBinary()
        let wg = try requireExecutable("wg", package: "wireguard-tools")
        func line(_ result: ProcessResult) -> String { result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) }
        for _ in 0..<3 {
            let ours = line(try run(farcast, ["wg", "genkey"]))
            #expect(line(try run(farcast, ["wg", "pubkey"], stdin: Data((ours + "\n").utf8))) == line(try run(wg, ["pubkey"], stdin: Data((ours + "\n").utf8))))
            let theirs = line(try run(wg, ["genkey"]))
            let wgPublic = line(try run(wg, ["pubkey"], stdin: Data((theirs + "\n").utf8)))
            #expect(line(try run(farcast, ["wg", "pubkey"], stdin: Data((theirs + "\n").utf8))) == wgPublic)
            #expect(wgPublic.count == 44)
        }
        let psk = line(try run(farcast, ["wg", "genpsk"]))
        #expect(Data(base64Encoded: psk)?.count == 32, "\(psk)")
        let bad = try run(farcast, ["wg", "pubkey"], stdin: Data("not a key\n".utf8))
        #expect(bad.status == 1)
        #expect(bad.stderr.hasPrefix("farcast: invalid private key: expected 44 characters of base64"), "\(bad.stderr)")
    }

    /// Receives transport messages until one opens to a non-empty packet (keepalives skipped).
    private func receivePacket(_ socket: LoopbackUDPSocket, session: inout TransportSession) throws -> [UInt8]? {
        let deadline = Date().addingTimeInterval(8)
        while Date() < deadline, let datagram = socket.receive(timeout: deadline.timeIntervalSinceNow) {
            guard case .transport(let receiver, let counter, let sealed) = try Message(parsing: datagram) else { continue }
            #expect(receiver == session.localIndex)
            let packet = try session.open(counter: counter, sealed: sealed)
            if !packet.isEmpty { return packet }
        }
        return nil
    }
}

/// wireguard-go on a TUN device named for this process (its UAPI socket in /var/run/wireguard
/// is shared by every namespace), address 10.77.0.1/24, listening on a loopback port.
final class WireguardGoPeer: @unchecked Sendable {
    // @unchecked: every stored property is immutable after init; the process is stopped in deinit.
    let interface: String
    let port: Int
    let publicKey: PublicKey
    let presharedKey: String
    private let process: BackgroundProcess
    private let wgPath: String
    private let folder: TemporaryFolder

    private let namespace: NetworkNamespace?

    /// In this test's namespace (nil) or in `namespace`, with `addresses` on its device.
    init(in namespace: NetworkNamespace? = nil, addresses: [String] = ["10.77.0.1/24"]) throws {
        self.namespace = namespace
        let wireguardGo = try requireExecutable("wireguard-go", package: "wireguard-go")
        wgPath = try requireExecutable("wg", package: "wireguard-tools")
        let interface = "fcwg\(getpid() % 100_000)"
        self.interface = interface
        folder = try TemporaryFolder()
        port = 52_000 + Int(getpid() % 1000)
        let environment = ["WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1", "LOG_LEVEL=verbose", "PATH=/usr/sbin:/usr/bin:/sbin:/bin"]
        let env = try requireExecutable("env", package: "coreutils")
        if let namespace {
            process = try namespace.start([env] + environment + [wireguardGo, "-f", interface], logName: "wireguard-go")
        } else {
            process = try BackgroundProcess(env, environment + [wireguardGo, "-f", interface], logName: "wireguard-go")
        }
        guard eventually(timeout: 10, { FileManager.default.fileExists(atPath: "/var/run/wireguard/\(interface).sock") }) else {
            throw PeerFailed(name: "wireguard-go", log: process.log)
        }
        let key = PrivateKey()
        let keyFile = folder.path + "/private", pskFile = folder.path + "/psk"
        presharedKey = PresharedKey.random().base64
        FileManager.default.createFile(atPath: keyFile, contents: Data(key.base64.utf8), attributes: [.posixPermissions: 0o600])
        FileManager.default.createFile(atPath: pskFile, contents: Data(presharedKey.utf8), attributes: [.posixPermissions: 0o600])
        publicKey = key.publicKey
        _ = try wg(["set", interface, "private-key", keyFile, "listen-port", "\(port)"])
        let ip = try requireExecutable("ip", package: "iproute2")
        for arguments in addresses.map({ ["addr", "add", $0, "dev", interface] }) + [["link", "set", interface, "up"]] {
            let result = try namespace?.run([ip] + arguments) ?? run(ip, arguments)
            guard result.status == 0 else { throw PeerFailed(name: "ip \(arguments.joined(separator: " "))", log: result.stderr) }
        }
    }

    deinit {
        process.stop()
    }

    var log: String { "wireguard-go:\n" + String(process.log.suffix(4000)) }

    /// Adds our key as its peer for 10.77.0.2/32, with an endpoint when it should initiate.
    func addPeer(_ key: PublicKey, endpoint: Int?, presharedKey: String?) throws {
        try addPeer(key, allowedIPs: "10.77.0.2/32", endpoint: endpoint.map { "127.0.0.1:\($0)" }, presharedKey: presharedKey)
    }

    func addPeer(_ key: PublicKey, allowedIPs: String, endpoint: String?, presharedKey: String?) throws {
        var arguments = ["set", interface, "peer", key.base64, "allowed-ips", allowedIPs]
        if let endpoint { arguments += ["endpoint", endpoint] }
        if let presharedKey {
            let file = folder.path + "/peer-psk"
            FileManager.default.createFile(atPath: file, contents: Data(presharedKey.utf8), attributes: [.posixPermissions: 0o600])
            arguments += ["preshared-key", file]
        }
        _ = try wg(arguments)
    }

    @discardableResult
    func wg(_ arguments: [String]) throws -> String {
        let result = try run(wgPath, arguments)
        guard result.status == 0 else { throw PeerFailed(name: "wg \(arguments.joined(separator: " "))", log: result.stderr + "\n" + log) }
        return result.stdout
    }
}

/// A UDP socket on 127.0.0.1 with an ephemeral port, for datagrams to and from a local peer.
final class LoopbackUDPSocket: @unchecked Sendable {
    // @unchecked: the descriptor is immutable; tests use the socket from one thread.
    let fd: Int32
    let port: Int

    init() throws {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            close(fd)
            throw PeerFailed(name: "UDP socket", log: String(cString: strerror(errno)))
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }

    func send(_ datagram: [UInt8], to port: Int) throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let sent = datagram.withUnsafeBytes { bytes in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
        guard sent == datagram.count else { throw PeerFailed(name: "sendto", log: String(cString: strerror(errno))) }
    }

    /// The next datagram, or nil when none arrives within `timeout` seconds.
    func receive(timeout: TimeInterval) -> [UInt8]? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, Int32(max(0, timeout) * 1000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        return count < 0 ? nil : Array(buffer.prefix(count))
    }
}

// MARK: - ICMP echo in IPv4, built and read by hand (the test's own, independent of the code under test)

private func onesComplementSum(_ bytes: [UInt8]) -> UInt16 {
    var sum: UInt32 = 0
    var i = 0
    while i + 1 < bytes.count { sum += UInt32(bytes[i]) << 8 | UInt32(bytes[i + 1]); i += 2 }
    if i < bytes.count { sum += UInt32(bytes[i]) << 8 }
    while sum > 0xFFFF { sum = (sum & 0xFFFF) + (sum >> 16) }
    return ~UInt16(sum)
}

func icmpEcho(type: UInt8, from source: [UInt8], to destination: [UInt8], identifier: UInt16, sequence: UInt16, payload: [UInt8]) -> [UInt8] {
    var icmp: [UInt8] = [type, 0, 0, 0, UInt8(identifier >> 8), UInt8(identifier & 0xFF), UInt8(sequence >> 8), UInt8(sequence & 0xFF)] + payload
    let icmpSum = onesComplementSum(icmp)
    icmp[2] = UInt8(icmpSum >> 8); icmp[3] = UInt8(icmpSum & 0xFF)
    let total = 20 + icmp.count
    var ip: [UInt8] = [0x45, 0, UInt8(total >> 8), UInt8(total & 0xFF), 0x12, 0x34, 0, 0, 64, 1, 0, 0] + source + destination
    let ipSum = onesComplementSum(ip)
    ip[10] = UInt8(ipSum >> 8); ip[11] = UInt8(ipSum & 0xFF)
    return ip + icmp
}

struct ICMPEcho { var type: UInt8; var source: [UInt8]; var destination: [UInt8]; var identifier: UInt16; var sequence: UInt16; var payload: [UInt8] }

/// An IPv4 ICMP echo (request or reply) with valid checksums, or nil.
func parseICMPEcho(_ packet: [UInt8]) -> ICMPEcho? {
    guard packet.count >= 28, packet[0] >> 4 == 4, packet[9] == 1 else { return nil }
    let headerLength = Int(packet[0] & 0x0F) * 4
    let total = Int(packet[2]) << 8 | Int(packet[3])
    guard total <= packet.count, total >= headerLength + 8, onesComplementSum(Array(packet[0..<headerLength])) == 0 else { return nil }
    let icmp = Array(packet[headerLength..<total])
    guard onesComplementSum(icmp) == 0, icmp[0] == 0 || icmp[0] == 8 else { return nil }
    return ICMPEcho(type: icmp[0], source: Array(packet[12..<16]), destination: Array(packet[16..<20]),
                    identifier: UInt16(icmp[4]) << 8 | UInt16(icmp[5]), sequence: UInt16(icmp[6]) << 8 | UInt16(icmp[7]),
                    payload: Array(icmp[8...]))
}
