internal import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Finding Jellyfin servers on the local network. Jellyfin does not use DNS-SD, so this is a
/// seam of its own beside the shared `Discovery` module's: the UDP broadcast below implements
/// it, and an app may supply another (a list it remembers, a test double).
public protocol JellyfinServerDiscovery: Sendable {
    /// The servers that answered within `timeout`, one per server id.
    func discover(timeout: Duration) async throws -> [DiscoveredJellyfinServer]
}

/// One server's answer to the discovery broadcast (`ServerDiscoveryInfo`).
public struct DiscoveredJellyfinServer: Sendable, Hashable, Codable {
    /// The server id (32 hex digits).
    public var id: String
    public var name: String
    /// The URL the server says is reachable from the asker's network, e.g. `http://10.0.0.5:8096`.
    public var address: String
    /// Where the answer came from (`host:port` of the datagram's source).
    public var endpointAddress: String?

    public init(id: String, name: String, address: String, endpointAddress: String? = nil) {
        self.id = id
        self.name = name
        self.address = address
        self.endpointAddress = endpointAddress
    }

    enum CodingKeys: String, CodingKey { case id = "Id", name = "Name", address = "Address", endpointAddress = "EndpointAddress" }
}

/// Jellyfin's LAN discovery: the ASCII datagram `who is JellyfinServer?` to UDP port 7359 (by
/// default the limited broadcast address), answered by each server with JSON sent back to the
/// asking socket. Answers are collected until the timeout, bounded in size (1 KiB each, at most
/// `maxServers`), de-duplicated by id; a malformed answer is skipped, never fatal.
public struct UDPBroadcastDiscovery: JellyfinServerDiscovery {
    public static let port: UInt16 = 7359
    /// The exact phrase the server matches (case-insensitively, as a substring).
    public static let question = "who is JellyfinServer?"

    /// IPv4 addresses (dotted quads) and ports to ask.
    public var targets: [(host: String, port: UInt16)]
    public var maxServers: Int

    public init(targets: [(host: String, port: UInt16)] = [("255.255.255.255", UDPBroadcastDiscovery.port)], maxServers: Int = 64) {
        self.targets = targets
        self.maxServers = maxServers
    }

    public func discover(timeout: Duration) async throws -> [DiscoveredJellyfinServer] {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw JellyfinError.discoveryFailed("cannot open a UDP socket: \(Self.errnoText())") }
        defer { close(fd) }
        var on: Int32 = 1
        guard setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &on, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw JellyfinError.discoveryFailed("cannot enable broadcast on a UDP socket: \(Self.errnoText())")
        }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)

        var sent = 0
        var lastError = ""
        for target in targets {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = target.port.bigEndian
            guard inet_pton(AF_INET, target.host, &address.sin_addr) == 1 else {
                throw JellyfinError.discoveryFailed("\(target.host) is not an IPv4 address")
            }
            let result = Self.question.withCString { text in
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(fd, text, strlen(text), 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
            if result >= 0 { sent += 1 } else { lastError = "\(target.host):\(target.port): \(Self.errnoText())" }
        }
        guard sent > 0 else { throw JellyfinError.discoveryFailed("cannot send the discovery broadcast to \(lastError)") }

        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        var found: [DiscoveredJellyfinServer] = []
        var seen = Set<String>()
        var buffer = [UInt8](repeating: 0, count: 1024)
        while clock.now < deadline, found.count < maxServers {
            var source = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let n = buffer.withUnsafeMutableBytes { raw in
                withUnsafeMutablePointer(to: &source) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, raw.baseAddress, raw.count, 0, $0, &length) }
                }
            }
            if n < 0 {
                // ECONNREFUSED: an ICMP "port unreachable" from a unicast target; others may answer.
                guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNREFUSED else {
                    throw JellyfinError.discoveryFailed("cannot receive discovery answers: \(Self.errnoText())")
                }
                try await Task.sleep(for: .milliseconds(20))
                continue
            }
            guard var server = try? JSONDecoder().decode(DiscoveredJellyfinServer.self, from: Data(buffer[0..<n])),
                  !server.id.isEmpty, !seen.contains(server.id) else { continue }
            var host = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            inet_ntop(AF_INET, &source.sin_addr, &host, socklen_t(INET_ADDRSTRLEN))
            let hostText = String(decoding: host.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            server.endpointAddress = "\(hostText):\(UInt16(bigEndian: source.sin_port))"
            seen.insert(server.id)
            found.append(server)
        }
        return found
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }
}
