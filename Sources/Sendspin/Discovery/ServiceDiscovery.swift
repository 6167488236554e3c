/// Finding Sendspin peers on the local network with DNS-SD over mDNS (spec §11): a player that
/// waits for servers advertises `_sendspin._tcp`; a server that waits for players advertises
/// `_sendspin-server._tcp`. Both carry TXT `path` (the WebSocket path) and optionally `name`.
///
/// The protocol is the seam: `DNSServiceDiscovery` implements it over the dns_sd API (Avahi's
/// compatibility library on Linux, the system's on Apple platforms); an app may supply another.
public protocol ServiceDiscovery: Sendable {
    /// Announces a service until the returned advertisement is cancelled or released.
    /// Throws at once when the mDNS responder cannot be reached or an argument is invalid.
    func advertise(type: String, name: String, port: Int, txt: [String: String]) throws -> any ServiceAdvertisement

    /// Collects the services of `type` seen within `timeout`, each resolved to an address and port.
    func browse(type: String, timeout: Duration) async throws -> [DiscoveredService]
}

/// A live announcement. `cancel()` (or releasing the last reference) withdraws it.
public protocol ServiceAdvertisement: AnyObject, Sendable {
    /// Waits until the responder confirms the announcement and returns the instance name in
    /// use, which differs from the one asked for when another host already had it.
    func registered() async throws -> String
    /// Withdraws the announcement; returns once it is gone. Calling it again does nothing.
    func cancel()
}

/// One service instance found by browsing, resolved to an address.
public struct DiscoveredService: Sendable, Hashable {
    /// The instance name, e.g. "Kitchen".
    public var name: String
    /// The service type, e.g. "_sendspin-server._tcp".
    public var type: String
    /// The domain it was found in, normally "local.".
    public var domain: String
    /// The host name the service points at, e.g. "kitchen.local.".
    public var hostName: String
    /// The address to connect to, IPv4 when the host has one.
    public var host: String
    public var port: Int
    /// The TXT record as key → value (keys lower-cased; a key without "=" maps to "").
    public var txt: [String: String]

    public init(name: String, type: String, domain: String = "local.", hostName: String, host: String, port: Int,
                txt: [String: String]) {
        self.name = name
        self.type = type
        self.domain = domain
        self.hostName = hostName
        self.host = host
        self.port = port
        self.txt = txt
    }

    /// The TXT `name` when present (a hint; the hello's name wins), else the instance name.
    public var displayName: String { txt["name"].flatMap { $0.isEmpty ? nil : $0 } ?? name }

    /// The WebSocket URL: `ws://HOST:PORT` plus TXT `path` (default `/sendspin`).
    public var url: String {
        var path = txt["path"] ?? ""
        if path.isEmpty { path = SendspinService.defaultPath }
        if !path.hasPrefix("/") { path = "/" + path }
        let address = host.contains(":") ? "[\(host)]" : host
        return "ws://\(address):\(port)\(path)"
    }
}

/// Sendspin's DNS-SD service types and TXT keys (spec §11).
public enum SendspinService {
    /// Advertised by a player that accepts server-initiated connections (listens on 8928).
    public static let player = "_sendspin._tcp"
    /// Advertised by a server that accepts client-initiated connections (listens on 8927).
    public static let server = "_sendspin-server._tcp"
    public static let defaultPath = "/sendspin"

    /// The TXT record every Sendspin advertisement carries.
    public static func txt(name: String?, path: String = defaultPath) -> [String: String] {
        var txt = ["path": path]
        if let name, !name.isEmpty { txt["name"] = name }
        return txt
    }
}

extension ServiceDiscovery {
    /// Advertises a listening player as `_sendspin._tcp` with TXT `path` and `name`.
    public func advertisePlayer(name: String, port: Int, path: String = SendspinService.defaultPath) throws -> any ServiceAdvertisement {
        try advertise(type: SendspinService.player, name: name, port: port, txt: SendspinService.txt(name: name, path: path))
    }

    /// Finds servers that accept client-initiated connections (`_sendspin-server._tcp`).
    public func browseServers(timeout: Duration) async throws -> [DiscoveredService] {
        try await browse(type: SendspinService.server, timeout: timeout)
    }
}
