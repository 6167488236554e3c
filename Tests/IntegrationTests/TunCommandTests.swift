import Foundation
import Glibc
import Testing

/// `farcast tun` as a user runs it: `echo` answering real pings, `pipe` carrying real TCP and UDP
/// between two network namespaces joined by a veth pair (with and without offload, 1 and 2
/// queues, MTU 1280 and 9000), and the exit codes and one-line failures of the command line.
@Suite(.tags(.groupB), .serialized, .timeLimit(.minutes(10)))
struct TunCommandTests {
    init() throws { try requireTunnelPrerequisites() }

    // MARK: - echo

    @Test(arguments: [[String](), ["--offload", "--queues", "2"]])
    func echoAnswersPingsForV4AndV6(extra: [String]) throws {
        let ping = try requireExecutable("ping", package: "iputils-ping")
        let farcast = try farcastBinary()
        let echo = try BackgroundProcess(farcast, ["tun", "echo", "ftecho0", "--address", "10.81.0.1/24", "--address", "fd81::1/64",
                                                  "--duration", "60", "--json"] + extra, logName: "tun-echo")
        defer { echo.stop() }
        #expect(eventually { (try? ipJSON(["addr", "show", "dev", "ftecho0"]).first?["operstate"]) != nil && echo.isRunning }, "\(echo.log)")
        #expect(try eventually { try TunnelDeviceTests.addresses(of: "ftecho0").contains("fd81::1/64") }, "\(echo.log)")
        let v4 = try run(ping, ["-c", "3", "-i", "0.2", "-W", "2", "10.81.0.9"])
        #expect(v4.status == 0, "\(v4.stdout)\(v4.stderr)\n\(echo.log)")
        #expect(v4.stdout.contains("3 received"))
        let v6 = try run(ping, ["-6", "-c", "3", "-i", "0.2", "-W", "2", "fd81::77"])
        #expect(v6.status == 0, "\(v6.stdout)\(v6.stderr)\n\(echo.log)")
        // The device's own address is the kernel's to answer; an address outside every prefix
        // is not routed into the device at all.
        #expect(try run(ping, ["-c", "1", "-W", "1", "10.82.0.9"]).status != 0)

        // SIGTERM ends it within a second, exit 0, one JSON object with the count.
        let stoppedAt = Date()
        echo.signal(SIGTERM)
        _ = echo.waitForExit(timeout: 5)
        #expect(Date().timeIntervalSince(stoppedAt) < 1.5)
        #expect(echo.terminationStatus == 0, "\(echo.log)")
        let json = try #require(echo.log.split(separator: "\n").last { $0.hasPrefix("{") })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect((object["echo_requests_answered"] as? Int ?? 0) >= 6, "\(object)")
        #expect(try run(try requireExecutable("ip", package: "iproute2"), ["link", "show", "dev", "ftecho0"]).status != 0,
                "the device must go away with the command")
    }

    // MARK: - pipe

    struct PipeCase: CustomTestStringConvertible, Sendable {
        var offload: Bool
        var queues: Int
        var mtu: Int
        var gro = true
        var tap = false
        /// Packets per read or write call (nil: the default, 128).
        var batch: Int?
        var testDescription: String {
            "\(tap ? "TAP, " : "")offload \(offload ? "on" : "off"), \(queues) queue\(queues == 1 ? "" : "s"), MTU \(mtu)\(offload && !gro ? ", GRO off at the receiver" : "")"
                + (batch.map { ", batches of \($0)" } ?? "")
        }
    }

    static let pipeCases: [PipeCase] = [
        PipeCase(offload: false, queues: 1, mtu: 1280), PipeCase(offload: false, queues: 2, mtu: 1280),
        PipeCase(offload: false, queues: 1, mtu: 9000), PipeCase(offload: false, queues: 2, mtu: 9000),
        PipeCase(offload: true, queues: 1, mtu: 1280), PipeCase(offload: true, queues: 2, mtu: 1280),
        PipeCase(offload: true, queues: 1, mtu: 9000), PipeCase(offload: true, queues: 2, mtu: 9000),
        PipeCase(offload: true, queues: 1, mtu: 1280, gro: false),
        // Batches smaller than a TSO super-packet's ~50 segments: each spans several reads.
        PipeCase(offload: true, queues: 1, mtu: 1280, batch: 8),
        // TAP: Ethernet frames (ARP included) cross the pipe; offload splits and coalesces frames.
        PipeCase(offload: false, queues: 1, mtu: 1500, tap: true), PipeCase(offload: true, queues: 2, mtu: 1500, tap: true),
    ]

    @Test(arguments: pipeCases)
    func pipeCarriesTCPAndUDPBetweenNamespaces(_ c: PipeCase) throws {
        let socat = try requireExecutable("socat", package: "socat")
        let python = try requireExecutable("python3", package: "python3")
        let farcast = try farcastBinary()
        let a = try NetworkNamespace("a"), b = try NetworkNamespace("b")
        try NetworkNamespace.link(a, "192.0.2.1/24", b, "192.0.2.2/24", mtu: c.mtu + 100)
        var common = ["--mtu", "\(c.mtu)", "--queues", "\(c.queues)", "--listen", "7000", "--json", "--duration", "120"]
        if c.offload { common.append("--offload") }
        if c.tap { common.append("--tap") }
        if let batch = c.batch { common += ["--batch", "\(batch)"] }
        let pipeA = try a.start([farcast, "tun", "pipe", "ftp0", "--address", "10.90.0.1/24", "--address", "fd90::1/64",
                                 "--peer", "192.0.2.2:7000"] + common, logName: "pipe-a")
        let pipeB = try b.start([farcast, "tun", "pipe", "ftp0", "--address", "10.90.0.2/24", "--address", "fd90::2/64",
                                 "--peer", "192.0.2.1:7000"] + common + (c.gro ? [] : ["--no-gro"]), logName: "pipe-b")
        defer { pipeA.stop(); pipeB.stop() }
        for (ns, pipe) in [(a, pipeA), (b, pipeB)] {
            #expect(eventually {
                pipe.isRunning && (try? ipJSON(["-6", "addr", "show", "dev", "ftp0"], in: ns).first?["addr_info"] as? [Any])?.isEmpty == false
            }, "\(pipe.log)")
        }
        #expect(pipeA.log.contains("UNENCRYPTED"), "the pipe must warn that it is unencrypted")

        let folder = try TemporaryFolder()
        let source = folder.path + "/in", sink = folder.path + "/out", sink6 = folder.path + "/out6"
        let data = try #require(FileHandle(forReadingAtPath: "/dev/urandom")?.readData(ofLength: 12 << 20))
        try data.write(to: URL(fileURLWithPath: source))

        // TCP over IPv4, then (with offload: TSO6 and TCPv6 GRO) over IPv6.
        let targets = [("TCP-LISTEN:5001,reuseaddr,bind=10.90.0.2", "TCP:10.90.0.2:5001", sink)]
            + (c.offload ? [("TCP6-LISTEN:5001,reuseaddr,bind=[fd90::2]", "TCP6:[fd90::2]:5001", sink6)] : [])
        for (listen, connect, out) in targets {
            let server = try b.start([socat, "-u", listen, "OPEN:\(out),creat,trunc"], logName: "socat-server")
            defer { server.stop() }
            #expect(try eventually { try b.run(["ss", "-ltn", "sport", "= :5001"]).stdout.contains("5001") })
            let client = try a.run([socat, "-u", "OPEN:\(source)", "\(connect),connect-timeout=5"], timeout: 120)
            #expect(client.status == 0, "\(client.stderr)\n\(pipeA.log)\n\(pipeB.log)")
            #expect(eventually(timeout: 20) { !server.isRunning })
            let received = (try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data()
            #expect(received.count == data.count && received == data, "TCP to \(connect): \(received.count) of \(data.count) bytes arrived intact")
        }

        // UDP: 1500 datagrams of varying sizes up to the MTU, each carrying its own digest.
        let udp = try runUDPExchange(python: python, from: a, to: b, address: "10.90.0.2", maxPayload: c.mtu - 28)
        #expect(udp.corrupt == 0)
        #expect(udp.received >= 1485, "UDP: \(udp.received) of 1500 datagrams arrived")
        if c.offload {
            // Equal sizes in bursts, over IPv4 and IPv6: runs the receiving pipe can coalesce
            // into UDP super-packets, which the kernel then checks (the counters below).
            for (address, overhead) in [("10.90.0.2", 28), ("fd90::2", 48)] {
                let equal = try runUDPExchange(python: python, from: a, to: b, address: address, maxPayload: c.mtu - overhead,
                                               equalSize: c.mtu - overhead)
                #expect(equal.corrupt == 0 && equal.received >= 1485, "equal-size UDP to \(address): \(equal)")
            }
        }

        // With several queues, the kernel spreads flows over them by hash: 32 more UDP flows
        // (32 source ports, to a port nobody listens on) make it all but certain that each
        // queue gets some, so each queue's own path is seen to carry packets below.
        if c.queues > 1 {
            let spread = try a.run([python, "-c", """
                import socket
                for p in range(32):
                    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    s.bind(("10.90.0.1", 41000 + p))
                    for _ in range(4): s.sendto(b"q" * 200, ("10.90.0.2", 6999))
                """], timeout: 30)
            #expect(spread.status == 0, "\(spread.stderr)")
        }

        // The receiving kernel verified every checksum: none failed.
        for ns in [a, b] {
            let snmp = try ns.check(["cat", "/proc/net/snmp"])
            #expect(inCsumErrors(snmp, "Tcp") == 0 && inCsumErrors(snmp, "Udp") == 0, "checksum errors in \(ns.name):\n\(snmp)")
            // IPv6 keeps its own counters (lines such as "Udp6InCsumErrors <spaces, tab> 0"; TCP's
            // are shared with IPv4 above).
            let snmp6 = try ns.check(["cat", "/proc/net/snmp6"])
            let udp6Errors = snmp6.split(separator: "\n").first { $0.hasPrefix("Udp6InCsumErrors") }?
                .split(whereSeparator: { $0 == " " || $0 == "\t" }).last.flatMap { Int($0) }
            #expect(udp6Errors == 0, "UDPv6 checksum errors in \(ns.name):\n\(snmp6)")
        }

        // SIGTERM and SIGINT each end a pipe within a second, with exit 0 and its report.
        let stopping = Date()
        pipeA.signal(SIGTERM)
        pipeB.signal(SIGINT)
        #expect(pipeA.waitForExit(timeout: 3) && pipeB.waitForExit(timeout: 3))
        #expect(Date().timeIntervalSince(stopping) < 1.5, "the pipes took \(Date().timeIntervalSince(stopping)) s to stop")
        let reportA = try pipeReport(pipeA), reportB = try pipeReport(pipeB)
        #expect(reportA["encrypted"] as? Bool == false)
        #expect((reportA["device"] as? [String: Any])?["queues"] as? Int == c.queues)
        // At least the TCP data in MTU-sized packets crossed (the kernel may send fewer, larger
        // ones only with offload, and those are split here).
        let least = data.count / c.mtu
        #expect((reportA["packets_from_device"] as? Int ?? 0) > least, "\(reportA)")
        #expect((reportB["packets_to_device"] as? Int ?? 0) > least, "\(reportB)")
        if c.offload {
            #expect((reportA["super_packets_split"] as? Int ?? 0) > 0, "the kernel handed over no TSO super-packets: \(reportA)")
            if c.gro {
                #expect((reportB["super_packets_written"] as? Int ?? 0) > 0, "nothing was coalesced: \(reportB)")
            } else {
                #expect(reportB["super_packets_written"] as? Int == 0)
            }
        } else {
            #expect(reportA["super_packets_split"] as? Int == 0)
        }
        #expect(reportA["malformed_dropped"] as? Int == 0 && reportB["device_write_dropped"] as? Int == 0, "\(reportA)\n\(reportB)")
        // Every queue carried packets both ways: from its device queue to its UDP socket at A,
        // and from its socket to its device queue at B.
        let queuesA = reportA["per_queue"] as? [[String: Int]] ?? [], queuesB = reportB["per_queue"] as? [[String: Int]] ?? []
        #expect(queuesA.count == c.queues && queuesB.count == c.queues, "\(reportA)")
        for (i, queue) in queuesA.enumerated() {
            #expect((queue["packets_from_device"] ?? 0) > 0 && (queue["datagrams_sent"] ?? 0) > 0, "A's queue \(i) carried nothing: \(queuesA)")
        }
        for (i, queue) in queuesB.enumerated() {
            #expect((queue["datagrams_received"] ?? 0) > 0 && (queue["packets_to_device"] ?? 0) > 0, "B's queue \(i) carried nothing: \(queuesB)")
        }
    }

    /// docs/tunnel.md's "Two namespaces joined by a pipe", run exactly as written (bash -e, with
    /// this build's farcast first on PATH): TCP through it must flow. With the device at the
    /// kernel's 1500 over a 1500-byte veth it crawled at ~64 kbit/s (every full-size packet lost
    /// to the outer headers); the MTU derived from the path fixes it.
    @Test func theDocsRecipeCarriesTCPAsWritten() throws {
        _ = try requireExecutable("iperf3", package: "iperf3")
        let docs = try String(contentsOf: packageRoot.appendingPathComponent("docs/tunnel.md"), encoding: .utf8)
        let section = try #require(docs.range(of: "## Two namespaces joined by a pipe"), "docs/tunnel.md lost its recipe")
        let rest = docs[section.upperBound...]
        let open = try #require(rest.range(of: "```\n"))
        let close = try #require(rest[open.upperBound...].range(of: "```"))
        let recipe = String(rest[open.upperBound..<close.lowerBound])
        let folder = try TemporaryFolder()
        try FileManager.default.createSymbolicLink(atPath: folder.path + "/farcast", withDestinationPath: try farcastBinary())
        try recipe.write(toFile: folder.path + "/recipe.sh", atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = folder.path + ":" + (environment["PATH"] ?? "/usr/bin:/bin") + ":/usr/sbin:/sbin"
        // Started with a clean signal state (BackgroundProcess), as from a shell: the recipe's
        // `kill` must reach the namespace holders it started.
        let recipeRun = try BackgroundProcess("/bin/bash", ["-e", folder.path + "/recipe.sh"], environment: environment, logName: "tun-recipe")
        #expect(recipeRun.waitForExit(timeout: 120), "the recipe did not finish within 120 s: \(recipeRun.log)")
        let output = recipeRun.log
        #expect(recipeRun.terminationStatus == 0, "\(output)")
        #expect(output.contains("3 packets transmitted, 3 received"), "\(output)")
        #expect(output.contains("MTU 1472 (the path's 1500 less 28)"), "\(output)")
        let receiver = output.split(separator: "\n").last { $0.contains("receiver") }.map(String.init) ?? ""
        let fields = receiver.split(separator: " ")
        let rate = fields.firstIndex { $0.hasSuffix("bits/sec") }.flatMap { i -> Double? in
            guard i > 0, let value = Double(fields[i - 1]) else { return nil }
            switch fields[i].first { case "K": return value / 1000; case "G": return value * 1000; case "M": return value; default: return value / 1e6 }
        }
        // A functional floor (the broken recipe gave 0.06), far below what the pipe does.
        #expect((rate ?? 0) >= 100, "iperf3 through the recipe's pipe: \(receiver)\n\(output)")
        #expect(!output.contains("Frag needed"), "\(output)")
        let counters = output.split(separator: "\n").filter { $0.contains("packets to the peer") }
        #expect(counters.count == 2 && counters.allSatisfy { $0.contains("0 by UDP") }, "both pipes ended and counted no UDP drop: \(counters)")
    }

    /// A device MTU over what the path carries: packets too big get the ICMP answer a router
    /// gives (IPv4 with DF: "fragmentation needed", IPv6: "packet too big"), so the sender's path
    /// MTU discovery shrinks its packets instead of losing them, and TCP gets through whole.
    @Test func packetsTooBigForThePathAreAnsweredSoPathMTUDiscoveryWorks() throws {
        let socat = try requireExecutable("socat", package: "socat")
        let farcast = try farcastBinary()
        let a = try NetworkNamespace("a"), b = try NetworkNamespace("b")
        try NetworkNamespace.link(a, "192.0.2.1/24", b, "192.0.2.2/24", mtu: 1500)
        let common = ["--mtu", "1500", "--offload", "--listen", "7000", "--json", "--duration", "120"]
        let pipeA = try a.start([farcast, "tun", "pipe", "ftb0", "--address", "10.91.0.1/24", "--address", "fd91::1/64",
                                 "--peer", "192.0.2.2:7000"] + common, logName: "pipe-a")
        let pipeB = try b.start([farcast, "tun", "pipe", "ftb0", "--address", "10.91.0.2/24", "--address", "fd91::2/64",
                                 "--peer", "192.0.2.1:7000"] + common, logName: "pipe-b")
        defer { pipeA.stop(); pipeB.stop() }
        for (ns, pipe) in [(a, pipeA), (b, pipeB)] {
            #expect(eventually {
                pipe.isRunning && (try? ipJSON(["-6", "addr", "show", "dev", "ftb0"], in: ns).first?["addr_info"] as? [Any])?.isEmpty == false
            }, "\(pipe.log)")
        }
        #expect(pipeA.log.contains("is more than fits (1472)"), "\(pipeA.log)")
        // TCP first, from B, while no kernel has learned anything (a ping's answer would teach
        // A, whose SYN-ACK would then advertise a smaller MSS): B's full-size segments are
        // answered and it shrinks them (over IPv6 too).
        let folder = try TemporaryFolder()
        let source = folder.path + "/in"
        let data = try #require(FileHandle(forReadingAtPath: "/dev/urandom")?.readData(ofLength: 4 << 20))
        try data.write(to: URL(fileURLWithPath: source))
        for (listen, connect, tag) in [("TCP-LISTEN:5002,reuseaddr,bind=10.91.0.1", "TCP:10.91.0.1:5002", "v4"),
                                       ("TCP6-LISTEN:5002,reuseaddr,bind=[fd91::1]", "TCP6:[fd91::1]:5002", "v6")] {
            let sink = folder.path + "/out-" + tag
            let server = try a.start([socat, "-u", listen, "OPEN:\(sink),creat,trunc"], logName: "socat-server")
            defer { server.stop() }
            #expect(try eventually { try a.run(["ss", "-ltn", "sport", "= :5002"]).stdout.contains("5002") })
            let client = try b.run([socat, "-u", "OPEN:\(source)", "\(connect),connect-timeout=5"], timeout: 60)
            #expect(client.status == 0, "\(client.stderr)")
            #expect(eventually(timeout: 20) { !server.isRunning })
            #expect((try? Data(contentsOf: URL(fileURLWithPath: sink))) == data, "TCP over \(tag) arrived whole")
        }
        // Then pings from A, which has sent nothing large yet.
        let v4 = try a.run(["ping", "-c", "1", "-W", "2", "-M", "do", "-s", "1472", "10.91.0.2"])
        #expect(v4.stdout.contains("Frag needed and DF set (mtu = 1472)"), "\(v4.stdout)\(v4.stderr)")
        let v6 = try a.run(["ping", "-6", "-c", "1", "-W", "2", "-M", "do", "-s", "1452", "fd91::2"])
        #expect(v6.stdout.contains("Packet too big: mtu=1472"), "\(v6.stdout)\(v6.stderr)")
        // What fits still goes through.
        #expect(try a.run(["ping", "-c", "1", "-W", "2", "-M", "do", "-s", "1444", "10.91.0.2"]).status == 0)

        pipeA.terminate()
        pipeB.terminate()
        let reportA = try pipeReport(pipeA), reportB = try pipeReport(pipeB)
        #expect((reportA["too_big_answered"] as? Int ?? 0) >= 2, "\(reportA)")
        #expect((reportB["too_big_answered"] as? Int ?? 0) >= 2, "B's TCP segments were answered: \(reportB)")
        #expect(reportA["udp_dropped"] as? Int == 0 && reportB["udp_dropped"] as? Int == 0, "\(reportA) \(reportB)")
    }

    func pipeReport(_ pipe: BackgroundProcess) throws -> [String: Any] {
        #expect(pipe.terminationStatus == 0, "\(pipe.log)")
        let line = try #require(pipe.log.split(separator: "\n").last { $0.hasPrefix("{") }, "no JSON report in: \(pipe.log)")
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    func inCsumErrors(_ snmp: String, _ proto: String) -> Int? {
        let lines = snmp.split(separator: "\n").filter { $0.hasPrefix("\(proto):") }
        guard lines.count == 2 else { return nil }
        let names = lines[0].split(separator: " "), values = lines[1].split(separator: " ")
        guard let i = names.firstIndex(of: "InCsumErrors"), i < values.count else { return nil }
        return Int(values[i])
    }

    /// Sends 1500 datagrams from `from` to a receiver in `to` and counts what arrived intact.
    /// 1500 datagrams from `from` to `to`, each carrying its digest; sizes vary up to
    /// `maxPayload`, or with `equalSize` all have that one size and leave in bursts (what UDP
    /// coalescing on the receiving pipe's writes needs).
    func runUDPExchange(python: String, from: NetworkNamespace, to: NetworkNamespace, address: String, maxPayload: Int,
                        equalSize: Int? = nil) throws -> (received: Int, corrupt: Int) {
        let family = address.contains(":") ? "AF_INET6" : "AF_INET"
        let receiverScript = """
            import hashlib, json, socket, sys
            s = socket.socket(socket.\(family), socket.SOCK_DGRAM)
            # SO_RCVBUFFORCE (root): past rmem_max, so a receiver descheduled on a loaded machine
            # does not drop datagrams the tunnel delivered.
            s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)
            s.bind((sys.argv[1], 6001)); s.settimeout(3)
            print("ready", flush=True)
            got, bad, seen = 0, 0, set()
            try:
                while True:
                    d = s.recv(65535)
                    body, digest = d[:-16], d[-16:]
                    if hashlib.md5(body).digest() != digest: bad += 1
                    elif body[:4] not in seen: seen.add(body[:4]); got += 1
            except socket.timeout:
                pass
            print(json.dumps({"received": got, "corrupt": bad}), flush=True)
            """
        let senderScript = """
            import hashlib, socket, sys, time
            s = socket.socket(socket.\(family), socket.SOCK_DGRAM)
            top = int(sys.argv[2])
            for i in range(1500):
                n = \(equalSize.map { "\($0 - 20)" } ?? "20 + (i * 7919) % (top - 36)")
                body = i.to_bytes(4, "big") + bytes((i + k) & 255 for k in range(n))
                s.sendto(body + hashlib.md5(body).digest(), (sys.argv[1], 6001))
                if i % 25 == 24: time.sleep(0.003)
            """
        let folder = try TemporaryFolder()
        try receiverScript.write(toFile: folder.path + "/rx.py", atomically: true, encoding: .utf8)
        try senderScript.write(toFile: folder.path + "/tx.py", atomically: true, encoding: .utf8)
        let receiver = try to.start([python, folder.path + "/rx.py", address], logName: "udp-rx")
        defer { receiver.stop() }
        #expect(eventually { receiver.log.contains("ready") })
        let sent = try from.run([python, folder.path + "/tx.py", address, "\(maxPayload)"], timeout: 60)
        #expect(sent.status == 0, "\(sent.stderr)")
        #expect(eventually(timeout: 15) { !receiver.isRunning })
        let line = receiver.log.split(separator: "\n").last { $0.hasPrefix("{") } ?? "{}"
        let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Int]) ?? [:]
        return (object["received"] ?? 0, object["corrupt"] ?? -1)
    }

    // MARK: - the command line

    @Test func usageErrorsExitTwoWithOneLine() throws {
        let farcast = try farcastBinary()
        for arguments in [["tun", "up", "a/b", "--duration", "1"],
                          ["tun", "up", "ftok0", "--address", "10.0.0.1/33"],
                          ["tun", "up", "ftok0", "--mtu", "50"],
                          ["tun", "up", "ftok0", "--address", "fd00::1/64", "--mtu", "1000"],
                          ["tun", "pipe", "ftok0", "--tap", "--peer", "192.0.2.1:7000", "--listen", "0"],
                          ["tun", "pipe", "ftok0", "--peer", "nonsense", "--listen", "7000"],
                          ["tun", "pipe", "ftok0", "--peer", "192.0.2.1:7000", "--listen", "70000"],
                          ["tun", "echo", "ftok0", "--duration", "inf"],
                          ["tun", "echo", "ftok0", "--netlink-timeout", "0"],
                          ["tun", "up", "ftok0", "--queues", "0"],
                          ["tun", "pipe", "ftok0", "--peer", "192.0.2.1:7000", "--listen", "7000", "--batch", "0"],
                          // A frame that no UDP datagram can carry (this trapped in the worker threads).
                          ["tun", "pipe", "ftok0", "--tap", "--mtu", "65500", "--peer", "192.0.2.1:7000", "--listen", "7000"],
                          ["tun", "up", "ftok0", "--route", "10.0.0.0/8x"],
                          // No prefix: a /32 would route nothing into the device (issue 36).
                          ["tun", "echo", "ftok0", "--address", "10.9.0.1"]] {
            let result = try run(farcast, arguments)
            #expect(result.status == 2, "\(arguments): \(result.stderr)")
            #expect(result.stderr.hasPrefix("farcast: "), "\(arguments): \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("(see `farcast tun \(arguments[1]) --help`)"), "\(arguments): \(result.stderr)")
            #expect(result.stdout.isEmpty, "\(arguments): \(result.stdout)")
        }
        let bare = try run(farcast, ["tun", "echo", "ftok0", "--address", "fd09::1"])
        #expect(bare.stderr.contains("--address fd09::1 needs a prefix length, e.g. fd09::1/64"), "\(bare.stderr)")
    }

    @Test func jsonIsOneObjectOnStdoutAndQuietLeavesStderrEmpty() throws {
        let farcast = try farcastBinary()
        let up = try run(farcast, ["tun", "up", "ftjson0", "--address", "10.85.0.1/24", "--address", "fd85::1/64",
                                   "--duration", "0.3", "--json"])
        #expect(up.status == 0, "\(up.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(up.stdout.utf8)) as? [String: Any], "stdout: \(up.stdout)")
        // The device under `device`, as echo and pipe report it.
        let object = try #require(report["device"] as? [String: Any], "stdout: \(up.stdout)")
        #expect(object["name"] as? String == "ftjson0")
        #expect(object["addresses"] as? [String] == ["10.85.0.1/24", "fd85::1/64"])
        #expect(object["queues"] as? Int == 1 && object["layer"] as? String == "tun")
        #expect(up.stderr.contains("ftjson0 is up"), "progress goes to stderr: \(up.stderr)")

        let echo = try run(farcast, ["tun", "echo", "ftjson1", "--address", "10.86.0.1/24", "--duration", "0.3", "--json", "--quiet"])
        #expect(echo.status == 0, "\(echo.stderr)")
        #expect(echo.stderr.isEmpty, "--quiet: \(echo.stderr)")
        let echoed = try #require(try JSONSerialization.jsonObject(with: Data(echo.stdout.utf8)) as? [String: Any], "stdout: \(echo.stdout)")
        #expect(echoed["echo_requests_answered"] as? Int == 0)
        #expect((echoed["device"] as? [String: Any])?["name"] as? String == "ftjson1")
        #expect(try run(try requireExecutable("ip", package: "iproute2"), ["link", "show", "dev", "ftjson1"]).status != 0)
    }

    @Test(arguments: ["up", "echo", "pipe"])
    func helpShowsAnExample(verb: String) throws {
        let help = try run(try farcastBinary(), ["tun", verb, "--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("Example") && help.stdout.contains("farcast tun \(verb) "), "\(help.stdout)")
    }

    @Test func withoutCapNetAdminTheFailureSaysSo() throws {
        let farcast = try farcastBinary()
        let setpriv = try requireExecutable("setpriv", package: "util-linux")
        // Root with no capabilities at all (an empty bounding set): the device file opens (root
        // owns it), creating the device needs CAP_NET_ADMIN.
        let rootless = try run(setpriv, ["--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--",
                                         farcast, "tun", "up", "ftnocap0", "--duration", "1"])
        #expect(rootless.status == 1, "\(rootless.stderr)")
        #expect(rootless.stderr.hasPrefix("farcast: "))
        #expect(rootless.stderr.contains("CAP_NET_ADMIN"), "\(rootless.stderr)")
        #expect(rootless.stderr.split(separator: "\n").count == 1, "\(rootless.stderr)")
        // An unprivileged user: where the file's mode keeps others out (0600), that is what the
        // message says; where it lets them in (0666), creating the device is what fails.
        var info = stat()
        #expect(stat("/dev/net/tun", &info) == 0)
        let othersMayOpen = info.st_mode & 0o006 == 0o006
        let result = try run(setpriv, ["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--",
                                       farcast, "tun", "up", "ftnocap0", "--duration", "1"])
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("farcast: "))
        #expect(result.stderr.contains(othersMayOpen ? "CAP_NET_ADMIN" : "file's mode"), "mode \(String(info.st_mode, radix: 8)): \(result.stderr)")
        #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
    }

    @Test func upHoldsTheDeviceAndRemovesItWhenStopped() throws {
        let farcast = try farcastBinary()
        let up = try BackgroundProcess(farcast, ["tun", "up", "ftup0", "--address", "10.83.0.1/24", "--route", "10.84.0.0/16",
                                                "--mtu", "1420", "--tap", "--json"], logName: "tun-up")
        defer { up.stop() }
        #expect(eventually { (try? TunnelDeviceTests.addresses(of: "ftup0"))?.contains("10.83.0.1/24") == true }, "\(up.log)")
        #expect(eventually { (try? TunnelDeviceTests.routes(of: "ftup0"))?.contains("10.84.0.0/16") == true }, "\(up.log)")
        let link = try #require(try ipJSON(["link", "show", "dev", "ftup0"]).first)
        #expect(link["mtu"] as? Int == 1420)
        #expect(link["link_type"] as? String == "ether")
        up.signal(SIGINT)
        _ = up.waitForExit(timeout: 5)
        #expect(up.terminationStatus == 0, "\(up.log)")
        #expect(up.log.contains("\"name\":\"ftup0\""), "\(up.log)")
        #expect(try run(try requireExecutable("ip", package: "iproute2"), ["link", "show", "dev", "ftup0"]).status != 0)
    }
}
