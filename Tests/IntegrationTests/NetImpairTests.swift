import Foundation
import Testing

/// The impairment other tests rely on (scripts/impair, netimpair over NFQUEUE) does what it says
/// on UDP through loopback: a fixed delay delays every datagram, jitter spreads them, loss drops
/// the share asked for, a rate limit holds throughput to it, and stopping removes the rule.
@Suite(.tags(.timing), .serialized, .timeLimit(.minutes(3)))
struct NetImpairTests {
    /// A UDP echo server on 127.0.0.1 and a client that times round trips.
    final class Echo: @unchecked Sendable {
        // @unchecked: the descriptors are set once in init and closed once in deinit.
        let server: Int32
        let client: Int32
        let port: UInt16

        init() throws {
            let server = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            let client = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(server, $0, length) == 0 && getsockname(server, $0, &length) == 0 }
            }
            guard bound else { throw PeerFailed(name: "UDP echo", log: String(cString: strerror(errno))) }
            port = UInt16(bigEndian: address.sin_port)
            self.server = server
            self.client = client
            var timeout = timeval(tv_sec: 0, tv_usec: 500_000)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            // Room for every echo of a flood (the default buffer holds ~250 small datagrams).
            var bufferSize: Int32 = 4 << 20
            setsockopt(client, SOL_SOCKET, SO_RCVBUF, &bufferSize, socklen_t(MemoryLayout<Int32>.size))
            let fd = server
            Thread.detachNewThread {
                var buffer = [UInt8](repeating: 0, count: 2048)
                var from = sockaddr_storage()
                while true {
                    var fromLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
                    let n = withUnsafeMutablePointer(to: &from) { p in
                        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, &buffer, buffer.count, 0, $0, &fromLength) }
                    }
                    if n <= 0 { return }
                    _ = withUnsafePointer(to: &from) { p in
                        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, buffer, n, 0, $0, fromLength) }
                    }
                }
            }
        }

        /// Round-trip times in ms of `count` pings, nil for each lost one.
        func ping(_ count: Int, size: Int = 64) -> [Double?] {
            var destination = sockaddr_in()
            destination.sin_family = sa_family_t(AF_INET)
            destination.sin_addr.s_addr = inet_addr("127.0.0.1")
            destination.sin_port = port.bigEndian
            var results: [Double?] = []
            var reply = [UInt8](repeating: 0, count: 2048)
            for i in 0..<count {
                var payload = [UInt8](repeating: 0, count: size)
                withUnsafeBytes(of: UInt32(i).bigEndian) { payload.replaceSubrange(0..<4, with: $0) }
                let start = ContinuousClock.now
                _ = withUnsafePointer(to: &destination) { p in
                    p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(client, payload, payload.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                var got: Double?
                while true {
                    let n = recv(client, &reply, reply.count, 0)
                    if n < 4 { break }
                    // A late answer to an earlier ping is not this one's.
                    if Array(reply[0..<4]) == Array(payload[0..<4]) {
                        let elapsed = ContinuousClock.now - start
                        got = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000
                        break
                    }
                }
                results.append(got)
            }
            return results
        }

        /// Sends `count` datagrams 1 ms apart, then counts the echoes that arrive.
        func flood(_ count: Int) -> Int {
            var destination = sockaddr_in()
            destination.sin_family = sa_family_t(AF_INET)
            destination.sin_addr.s_addr = inet_addr("127.0.0.1")
            destination.sin_port = port.bigEndian
            let payload = [UInt8](repeating: 0x41, count: 64)
            for _ in 0..<count {
                _ = withUnsafePointer(to: &destination) { p in
                    p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(client, payload, payload.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                usleep(1000)
            }
            var buffer = [UInt8](repeating: 0, count: 2048)
            var received = 0
            while recv(client, &buffer, buffer.count, 0) > 0 { received += 1 }
            return received
        }

        deinit {
            close(client)
            shutdown(server, Int32(SHUT_RDWR))
            close(server)
        }
    }

    @Test func delayAndJitterSpreadRoundTripsAroundTheMean() throws {
        let folder = try TemporaryFolder()
        let echo = try Echo()
        let link = try ImpairedLink(match: "-p udp --dport \(echo.port)", options: ["--delay-ms", "30", "--jitter-ms", "8", "--seed", "7"], folder: folder)
        let rtts = echo.ping(150).compactMap { $0 }
        let stats = link.stop()
        #expect(rtts.count == 150)
        let mean = rtts.reduce(0, +) / Double(rtts.count)
        let sd = (rtts.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(rtts.count)).squareRoot()
        #expect(mean > 26 && mean < 36, "mean \(mean) ms")
        #expect(sd > 5 && sd < 12, "standard deviation \(sd) ms")
        #expect(stats["received"] == 150, "\(stats)")
        // Stopped: no delay any more, and the rule is gone.
        let after = echo.ping(20).compactMap { $0 }
        #expect(after.count == 20 && after.allSatisfy { $0 < 10 }, "\(after)")
        let rules = try run(try requireExecutable("iptables", package: "iptables"), ["-S", "INPUT"])
        #expect(!rules.stdout.contains("NFQUEUE"), "\(rules.stdout)")
    }

    @Test func lossDropsTheShareAskedFor() throws {
        let folder = try TemporaryFolder()
        let echo = try Echo()
        let link = try ImpairedLink(match: "-p udp --dport \(echo.port)", options: ["--loss", "20", "--seed", "3"], folder: folder)
        // Send all, then count what comes back: a lost ping costs no timeout each.
        let answered = echo.flood(400)
        let stats = link.stop()
        // 400 draws at 20 %: 320 ± 8 (one standard deviation); ± 4 sd is generous and still tight.
        #expect((288...352).contains(answered), "\(answered) of 400 answered")
        #expect(stats["dropped_loss"] == 400 - answered, "\(stats)")
    }

    @Test func rateLimitHoldsThroughputToTheRate() throws {
        let folder = try TemporaryFolder()
        let echo = try Echo()
        // 1 KiB datagrams at 2 Mbit/s: about 240 a second. Send 120 back to back, then time
        // how long the echoes take to come back: the limit spaces them ~4.2 ms apart.
        let link = try ImpairedLink(match: "-p udp --dport \(echo.port)", options: ["--rate-kbit", "2000"], folder: folder)
        var destination = sockaddr_in()
        destination.sin_family = sa_family_t(AF_INET)
        destination.sin_addr.s_addr = inet_addr("127.0.0.1")
        destination.sin_port = echo.port.bigEndian
        let payload = [UInt8](repeating: 0x55, count: 1024)
        let start = ContinuousClock.now
        for _ in 0..<120 {
            _ = withUnsafePointer(to: &destination) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(echo.client, payload, payload.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        var buffer = [UInt8](repeating: 0, count: 2048)
        var received = 0
        while received < 120, recv(echo.client, &buffer, buffer.count, 0) > 0 { received += 1 }
        let elapsed = ContinuousClock.now - start
        link.stop()
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let megabits = Double(received * (1024 + 28) * 8) / seconds / 1e6
        #expect(received == 120)
        #expect(megabits > 1.7 && megabits < 2.2, "\(megabits) Mbit/s")
    }
}
