internal import Discovery
internal import Foundation

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
/// asking socket. The one implementation is `Discovery.JellyfinDiscovery` (also what `farcast
/// discover` runs): answers collected until the timeout, bounded in size (2 KiB each, at most
/// `maxServers`), de-duplicated by id, a malformed answer skipped, never fatal.
public struct UDPBroadcastDiscovery: JellyfinServerDiscovery {
    public static let port: UInt16 = JellyfinDiscovery.port
    /// The exact phrase the server matches (case-insensitively, as a substring).
    public static let question = String(decoding: JellyfinDiscovery.query, as: UTF8.self)

    /// IPv4 addresses (dotted quads) and ports to ask.
    public var targets: [(host: String, port: UInt16)]
    public var maxServers: Int

    public init(targets: [(host: String, port: UInt16)] = [("255.255.255.255", UDPBroadcastDiscovery.port)], maxServers: Int = 64) {
        self.targets = targets
        self.maxServers = maxServers
    }

    public func discover(timeout: Duration) async throws -> [DiscoveredJellyfinServer] {
        let answers: JellyfinDiscovery.Answers
        do {
            answers = try await JellyfinDiscovery.ask(targets.map { JellyfinDiscovery.Target(host: $0.host, port: $0.port) },
                                                      timeout: timeout, maxServers: maxServers)
        } catch let error as DiscoveryError {
            throw JellyfinError.discoveryFailed(error.description)
        }
        if answers.servers.isEmpty, answers.unsent.count == targets.count, let last = answers.unsent.last {
            throw JellyfinError.discoveryFailed("cannot send the discovery broadcast to \(last)")
        }
        return answers.servers.map { DiscoveredJellyfinServer(id: $0.id, name: $0.name, address: $0.address, endpointAddress: $0.endpoint) }
    }
}
