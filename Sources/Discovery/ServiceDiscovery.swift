/// Finding services on the local network with DNS-SD over mDNS, for every protocol: Sendspin's
/// `_sendspin._tcp` and `_sendspin-server._tcp`, VNC's `_rfb._tcp`, punktfunk's `_punktfunk._udp`.
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
    /// Every address the host's A and AAAA records gave within the browse (IPv4 first), for
    /// protocols that rank them (punktfunk §11); `host` is the first.
    public var addresses: [String]
    public var port: Int
    /// The TXT record as key → value (keys lower-cased; a key without "=" maps to "").
    public var txt: [String: String]

    public init(name: String, type: String, domain: String = "local.", hostName: String, host: String, addresses: [String]? = nil,
                port: Int, txt: [String: String]) {
        self.name = name
        self.type = type
        self.domain = domain
        self.hostName = hostName
        self.host = host
        self.addresses = addresses ?? [host]
        self.port = port
        self.txt = txt
    }

    /// The TXT `name` when present (a hint; the hello's name wins), else the instance name.
    public var displayName: String { txt["name"].flatMap { $0.isEmpty ? nil : $0 } ?? name }
}

