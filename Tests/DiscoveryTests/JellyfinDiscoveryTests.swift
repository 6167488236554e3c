import Discovery
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `JellyfinDiscovery.ask`, the one Jellyfin UDP discovery (farcast discover and the Jellyfin
/// module's UDPBroadcastDiscovery both use it), against a responder on 127.0.0.1 of this test's
/// own (unit tests run outside a network namespace: nothing is sent beyond loopback). The stand-in
/// server's real responder is exercised by the integration tests.
struct JellyfinDiscoveryTests {
    /// A UDP socket on 127.0.0.1 that answers each question with `replies`, in order.
    final class Responder: Sendable {
        let fd: Int32
        let port: UInt16
        init(replies: [[UInt8]]) throws {
            let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
            self.fd = fd
            port = UInt16(bigEndian: address.sin_port)
            Thread {
                var buffer = [UInt8](repeating: 0, count: 512)
                var from = sockaddr_in()
                var fromLength = socklen_t(MemoryLayout<sockaddr_in>.size)
                let count = withUnsafeMutablePointer(to: &from) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, &buffer, buffer.count, 0, $0, &fromLength) }
                }
                guard count > 0, String(decoding: buffer[0..<count], as: UTF8.self) == "who is JellyfinServer?" else { return }
                for reply in replies {
                    _ = withUnsafePointer(to: &from) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, reply, reply.count, 0, $0, fromLength) }
                    }
                }
            }.start()
        }
        deinit { close(fd) }
    }

    static func answer(id: String, name: String) -> [UInt8] {
        Array(#"{"Address":"http://127.0.0.1:8096","Id":"\#(id)","Name":"\#(name)","EndpointAddress":null}"#.utf8)
    }

    @Test func answersAreKeptOncePerServerAndJunkIsSkipped() async throws {
        let responder = try Responder(replies: [
            Self.answer(id: "aaaa", name: "Den"), Array("not json".utf8), [UInt8](repeating: 0x7b, count: 3000),
            Self.answer(id: "aaaa", name: "Den again"), Self.answer(id: "bbbb", name: "Attic"),
        ])
        let answers = try await JellyfinDiscovery.ask([.init(host: "127.0.0.1", port: responder.port)], timeout: .milliseconds(600))
        #expect(answers.servers.map(\.name) == ["Den", "Attic"])
        #expect(answers.servers.first?.endpoint == "127.0.0.1:\(responder.port)")
        #expect(answers.unsent.isEmpty)
    }

    @Test func atMostMaxServersAreCollected() async throws {
        let responder = try Responder(replies: (0..<5).map { Self.answer(id: "id\($0)", name: "S\($0)") })
        let answers = try await JellyfinDiscovery.ask([.init(host: "127.0.0.1", port: responder.port)], timeout: .seconds(2), maxServers: 2)
        #expect(answers.servers.map(\.name) == ["S0", "S1"])
    }

    @Test func aTargetThatIsNotAnIPv4AddressIsRefused() async {
        await #expect(throws: DiscoveryError.self) {
            try await JellyfinDiscovery.ask([.init(host: "kitchen.local")], timeout: .milliseconds(10))
        }
    }
}
