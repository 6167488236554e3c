import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Jellyfin's LAN discovery (jellyfin notes §5): the ASCII datagram `who is JellyfinServer?` to
/// UDP 7359, and a JSON `ServerDiscoveryInfo` answered unicast to the sender. Jellyfin is not on
/// DNS-SD, so it sits beside the mDNS browse here.
public enum JellyfinDiscovery {
    /// One server that answered.
    public struct Server: Sendable, Hashable, Codable {
        /// The 32-hex server id (replies are de-duplicated by it).
        public var id: String
        public var name: String
        /// The base URL the server says is reachable from our subnet, e.g. `http://10.0.0.5:8096`.
        public var address: String
        /// Where the reply came from (`ip:port`).
        public var endpoint: String
    }

    /// The exact phrase Jellyfin matches (a case-insensitive *contains*; "Who is Jellyfin Server?" does not match).
    public static let query = Array("who is JellyfinServer?".utf8)
    public static let port: UInt16 = 7359
    /// Replies are small JSON objects; anything larger is not a Jellyfin answer.
    static let maximumReply = 2048

    /// Where to ask: an IPv4 address (a broadcast address or one server's) and a UDP port.
    public struct Target: Sendable, Hashable {
        public var host: String
        public var port: UInt16
        public init(host: String, port: UInt16 = JellyfinDiscovery.port) {
            self.host = host
            self.port = port
        }
    }

    /// What the query found: the servers that answered, and the targets it could not be sent
    /// to (`host:port: reason`, e.g. no broadcast route inside a network namespace).
    public struct Answers: Sendable {
        public var servers: [Server]
        public var unsent: [String]
    }

    /// Sends the query to each target (the limited broadcast address by default) and collects
    /// answers for `timeout`, at most `maxServers`, one per server id; a malformed answer is
    /// skipped. Returns at once when it could be sent nowhere. Runs on a thread of its own; a
    /// cancelled task ends it early. `farcast discover` and the Jellyfin module's
    /// `UDPBroadcastDiscovery` both ask through this.
    public static func ask(_ targets: [Target] = [Target(host: "255.255.255.255")], timeout: Duration,
                           maxServers: Int = 64) async throws -> Answers {
        let stop = Flag()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Answers, any Error>) in
                let thread = Thread {
                    continuation.resume(with: Result { try run(targets: targets, timeout: timeout, maxServers: maxServers, stop: stop) })
                }
                thread.name = "farcast-jellyfin-discovery"
                thread.start()
            }
        } onCancel: {
            stop.set()
        }
    }

    /// The servers that answered the query sent to each of `targets` on `port`.
    public static func discover(targets: [String] = ["255.255.255.255"], port: UInt16 = port,
                                timeout: Duration) async throws -> [Server] {
        try await ask(targets.map { Target(host: $0, port: port) }, timeout: timeout).servers
    }

    static func run(targets: [Target], timeout: Duration, maxServers: Int, stop: Flag) throws -> Answers {
        #if canImport(Glibc)
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        #else
        let fd = socket(AF_INET, SOCK_DGRAM, 0)
        #endif
        guard fd >= 0 else { throw DiscoveryError.invalidArgument("cannot open a UDP socket: \(String(cString: strerror(errno)).lowercased())") }
        defer { close(fd) }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &yes, socklen_t(MemoryLayout<Int32>.size))
        var unsent: [String] = []
        for target in targets {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = target.port.bigEndian
            guard inet_pton(AF_INET, target.host, &address.sin_addr) == 1 else {
                throw DiscoveryError.invalidArgument("\(target.host) is not an IPv4 address")
            }
            let sent = query.withUnsafeBytes { bytes in
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        sendto(fd, bytes.baseAddress, bytes.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }
            }
            if sent < 0 {
                // One unreachable target (no broadcast route in a namespace) must not hide the others.
                unsent.append("\(target.host):\(target.port): \(String(cString: strerror(errno)).lowercased())")
            }
        }
        var servers: [Server] = []
        if unsent.count == targets.count { return Answers(servers: [], unsent: unsent) }
        var seen = Set<String>()
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: maximumReply + 1)
        while !stop.isRaised && servers.count < maxServers {
            let remaining = deadline - .now
            guard remaining > .zero else { break }
            let slice = min(remaining, .milliseconds(50))
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(max(1, slice.components.seconds * 1000 + slice.components.attoseconds / 1_000_000_000_000_000))
            guard poll(&poller, 1, milliseconds) > 0 else { continue }
            var from = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let count = buffer.withUnsafeMutableBytes { bytes in
                withUnsafeMutablePointer(to: &from) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, bytes.baseAddress, bytes.count, 0, $0, &length) }
                }
            }
            guard count > 0, count <= maximumReply else { continue }
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN) + 1)
            inet_ntop(AF_INET, &from.sin_addr, &text, socklen_t(text.count))
            let sender = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let endpoint = "\(sender):\(UInt16(bigEndian: from.sin_port))"
            guard let server = parse(Array(buffer.prefix(count)), endpoint: endpoint), seen.insert(server.id).inserted else { continue }
            servers.append(server)
        }
        if stop.isRaised { throw CancellationError() }
        return Answers(servers: servers, unsent: unsent)
    }

    /// A reply's JSON, or nil for anything that is not a Jellyfin answer.
    public static func parse(_ bytes: [UInt8], endpoint: String) -> Server? {
        guard bytes.count <= maximumReply,
              let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
              let id = object["Id"] as? String, !id.isEmpty, id.count <= 64,
              let address = object["Address"] as? String, address.hasPrefix("http://") || address.hasPrefix("https://") else { return nil }
        let name = (object["Name"] as? String) ?? id
        return Server(id: id, name: String(name.prefix(200)), address: String(address.prefix(500)), endpoint: endpoint)
    }
}

extension JellyfinDiscovery.Server {
    /// The `jellyfin://` form of `address` (`farcast hosts add NAME URL` saves it).
    public var farcastURL: String {
        if address.hasPrefix("https://") { return "jellyfins://" + address.dropFirst(8) }
        if address.hasPrefix("http://") { return "jellyfin://" + address.dropFirst(7) }
        return address
    }
}
