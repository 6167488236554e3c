import Discovery
import Foundation
import Synchronization
import Testing

/// `farcast discover` in the test namespace: avahi-publish announces one service of every type
/// on a private avahi-daemon (see `AvahiResponder`), a small responder answers Jellyfin's UDP
/// 7359 query (no Jellyfin server runs here: the responder sends the reply format of jellyfin
/// notes §5, from `AutoDiscoveryHost`), and the listing must carry each one's fields.
@Suite(.tags(.groupC), .serialized, .timeLimit(.minutes(3)))
struct DiscoverCommandTests {
    struct Listed: Decodable {
        var `protocol`: String
        var serviceType: String
        var name: String
        var address: String
        var addresses: [String]
        var port: Int
        var txt: [String: String]
        var url: String?
    }

    static func decode(_ text: String) throws -> [Listed] {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(JSONItems<Listed>.self, from: Data(text.utf8)).items
    }

    @Test func avahiPublishedServicesOfEveryTypeAreListedWithTheirFields() async throws {
        let responder = try AvahiResponder()
        let publish = try requireExecutable("avahi-publish", package: "avahi-utils")
        let announcements: [(String, String, Int, [String])] = [
            ("desk-vnc", "_rfb._tcp", 5901, []),
            ("desk-machine", "_workstation._tcp", 9, []),
            ("kitchen", "_sendspin-server._tcp", 8927, ["path=/sendspin", "name=Kitchen"]),
            ("bedroom-player", "_sendspin._tcp", 8928, ["path=/sendspin"]),
            ("gamebox", "_punktfunk._udp", 9777, ["proto=punktfunk/1", "id=host-42", "fp=ab12", "pair=optional", "mgmt=9778", "os=linux/debian", "addr=127.0.0.1"]),
        ]
        var publishers: [BackgroundProcess] = []
        defer { publishers.forEach { $0.stop() } }
        for (name, type, port, txt) in announcements {
            publishers.append(try BackgroundProcess(publish, ["-s", name, type, "\(port)"] + txt, environment: AvahiResponder.toolEnvironment,
                                                    logName: "avahi-publish-\(name)"))
        }
        // Wait until the daemon answers for the last one.
        _ = try responder.browse("_punktfunk._udp") { $0.contains { $0.name == "gamebox" } }
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = AvahiResponder.busAddress
        let result = try run(try farcastBinary(), ["discover", "--duration", "2", "--protocol", "vnc", "--protocol", "sendspin",
                                                   "--protocol", "punktfunk", "--json"], environment: environment)
        #expect(result.status == 0, "\(result.stderr)\n\(responder.logs)")
        let listed = try Self.decode(result.stdout)
        for (name, type, port, txt) in announcements {
            let entry = try #require(listed.first { $0.name.lowercased() == name && $0.serviceType == type }, "\(name) \(type) missing from \(result.stdout)")
            #expect(entry.port == port)
            #expect(entry.address == "127.0.0.1")
            var expectedTXT: [String: String] = [:]
            for item in txt {
                let parts = item.split(separator: "=", maxSplits: 1)
                expectedTXT[String(parts[0])] = String(parts[1])
            }
            #expect(entry.txt == expectedTXT, "\(name)")
        }
        #expect(listed.first { $0.name == "desk-vnc" }?.url == "vnc://127.0.0.1:5901")
        #expect(listed.first { $0.name == "desk-machine" }?.url == "vnc://127.0.0.1:5900")
        #expect(listed.first { $0.serviceType == "_sendspin-server._tcp" }?.url == "sendspin://127.0.0.1:8927")
        // The TXT name is shown in place of the instance name, as Sendspin's spec asks.
        #expect(listed.first { $0.serviceType == "_sendspin-server._tcp" }?.name == "Kitchen")
        #expect(listed.first { $0.name == "gamebox" }?.url == "punktfunk://127.0.0.1:9777")

        // A discovered host is saved with one command and used by name.
        let folder = try TemporaryFolder()
        environment["XDG_DATA_HOME"] = folder.path
        let url = try #require(listed.first { $0.name == "desk-vnc" }?.url)
        let add = try run(try farcastBinary(), ["hosts", "add", "desk", url, "--json"], environment: environment)
        #expect(add.status == 0, "\(add.stderr)")
        #expect(add.stdout.contains("\"url\":\"vnc://127.0.0.1:5901\""))
    }

    @Test func jellyfinServersAnsweringUDP7359AreListed() async throws {
        let responder = try JellyfinResponder(id: "0123456789abcdef0123456789abcdef", name: "Den", address: "http://127.0.0.1:8096")
        defer { responder.stop() }
        let result = try run(try farcastBinary(), ["discover", "--protocol", "jellyfin", "--jellyfin-target", "127.0.0.1", "--duration", "1", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let listed = try Self.decode(result.stdout)
        #expect(listed.count == 1)
        let server = try #require(listed.first)
        #expect(server.protocol == "jellyfin" && server.name == "Den" && server.port == 8096 && server.address == "127.0.0.1")
        #expect(server.txt["id"] == "0123456789abcdef0123456789abcdef")
        #expect(server.url == "jellyfin://127.0.0.1:8096")
        #expect(responder.log.lines.withLock { $0 } == ["who is JellyfinServer?"])
    }

    /// With no Avahi daemon to ask, every mDNS browse fails alike: one warning line names them
    /// all (it was printed once per service type), and what did answer is still listed.
    @Test func withoutAvahiTheWarningIsOneLine() async throws {
        let responder = try JellyfinResponder(id: "0123456789abcdef0123456789abcdef", name: "Den", address: "http://127.0.0.1:8096")
        defer { responder.stop() }
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=/nonexistent/system_bus_socket"
        let result = try run(try farcastBinary(), ["discover", "--jellyfin-target", "127.0.0.1", "--duration", "1"], environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("Den"), "\(result.stdout)")
        let warnings = result.stderr.split(separator: "\n").filter { $0.hasPrefix("farcast: warning:") }
        #expect(warnings.count == 1, "\(result.stderr)")
        #expect(warnings.first.map { $0.contains("_rfb._tcp") && $0.contains("_punktfunk._udp") } == true, "\(result.stderr)")
    }
}

/// Answers Jellyfin's discovery datagram on 127.0.0.1:7359 as the server's AutoDiscoveryHost
/// does: a case-insensitive match on the phrase, a JSON `ServerDiscoveryInfo` unicast back.
final class JellyfinResponder: @unchecked Sendable {
    // @unchecked: the socket is set in init and closed once by stop(); queries sit behind a Mutex.
    let log = QueryLog()
    private let fd: Int32
    /// Signalled when the answering thread has returned (its socket no longer in a call).
    private let finished = DispatchSemaphore(value: 0)

    init(id: String, name: String, address: String) throws {
        fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        var bindAddress = sockaddr_in()
        bindAddress.sin_family = sa_family_t(AF_INET)
        bindAddress.sin_addr.s_addr = inet_addr("127.0.0.1")
        bindAddress.sin_port = UInt16(7359).bigEndian
        let bound = withUnsafePointer(to: &bindAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw PeerFailed(name: "Jellyfin responder", log: "bind 127.0.0.1:7359: \(String(cString: strerror(errno)))") }
        let reply = Array(#"{"Address":"\#(address)","Id":"\#(id)","Name":"\#(name)","EndpointAddress":null}"#.utf8)
        let socketFD = fd
        let log = log
        let finished = finished
        Thread.detachNewThread {
            defer { finished.signal() }
            var buffer = [UInt8](repeating: 0, count: 1024)
            while true {
                var from = sockaddr_in()
                var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                let count = withUnsafeMutablePointer(to: &from) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(socketFD, &buffer, buffer.count, 0, $0, &length) }
                }
                guard count > 0 else { return }
                let text = String(decoding: buffer.prefix(count), as: UTF8.self)
                log.lines.withLock { $0.append(text) }
                guard text.lowercased().contains("who is jellyfinserver?") else { continue }
                _ = reply.withUnsafeBytes { bytes in
                    withUnsafePointer(to: &from) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(socketFD, bytes.baseAddress, bytes.count, 0, $0, length) }
                    }
                }
            }
        }
    }

    /// Stops answering and frees 127.0.0.1:7359 before returning: the thread is woken by the
    /// shutdown and waited for, then the socket is closed. (Closing while the thread was still in
    /// recvfrom left the port bound for a moment, and the next test's bind failed with "Address
    /// already in use" in CI.)
    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        _ = finished.wait(timeout: .now() + 5)
        close(fd)
    }
}

final class QueryLog: Sendable {
    let lines = Mutex<[String]>([])
}
