/// The DNS-SD service types farcast browses, one list for every protocol, and what each means.
public enum ServiceCatalog {
    /// One browsable service type.
    public struct Entry: Sendable, Hashable {
        /// "vnc", "sendspin", "punktfunk".
        public var protocolName: String
        /// "_rfb._tcp".
        public var type: String
        /// What an instance of the type is, for listings.
        public var role: String
    }

    public static let entries: [Entry] = [
        Entry(protocolName: "vnc", type: "_rfb._tcp", role: "VNC server"),
        // Avahi announces every machine as _workstation._tcp (port 9, the discard port): a host
        // that may run a VNC server on 5900, as Screens and other viewers list it.
        Entry(protocolName: "vnc", type: "_workstation._tcp", role: "machine (VNC on 5900 if it runs a server)"),
        Entry(protocolName: "sendspin", type: "_sendspin-server._tcp", role: "Sendspin server"),
        Entry(protocolName: "sendspin", type: "_sendspin._tcp", role: "Sendspin player"),
        Entry(protocolName: "punktfunk", type: "_punktfunk._udp", role: "punktfunk host"),
    ]

    /// The protocols `farcast discover --protocol` accepts (Jellyfin answers on UDP 7359 instead).
    public static let protocolNames = ["vnc", "sendspin", "punktfunk", "jellyfin"]

    public static func entries(forProtocol name: String) -> [Entry] { entries.filter { $0.protocolName == name } }

    public static func entry(forType type: String) -> Entry? {
        let bare = type.hasSuffix(".") ? String(type.dropLast()) : type
        return entries.first { $0.type == bare }
    }
}

extension DiscoveredService {
    /// A URL a farcast command accepts for this service (`farcast hosts add NAME URL` saves it),
    /// or nil for a Sendspin player (servers dial players; farcast does not).
    public var farcastURL: String? {
        let address = host.contains(":") ? "[\(host)]" : host
        switch type {
        case "_rfb._tcp": return "vnc://\(address):\(port)"
        case "_workstation._tcp": return "vnc://\(address):5900"
        case "_sendspin-server._tcp":
            var path = txt["path"] ?? "/sendspin"
            if path.isEmpty { path = "/sendspin" }
            if !path.hasPrefix("/") { path = "/" + path }
            return "sendspin://\(address):\(port)" + (path == "/sendspin" ? "" : path)
        case "_punktfunk._udp":
            let ranked = PunktfunkAddressRanking.rank(addresses, declared: txt["addr"], local: PunktfunkAddressRanking.localIPv4Addresses())
            let best = ranked.first ?? host
            return "punktfunk://\(best.contains(":") ? "[\(best)]" : best):\(port)"
        default: return nil
        }
    }

    /// punktfunk TXT `proto`: absent (old hosts) or `punktfunk/1`; anything else is not a host we speak to.
    public var isCompatiblePunktfunkHost: Bool {
        guard type == "_punktfunk._udp" else { return false }
        guard let proto = txt["proto"] else { return true }
        return proto == "punktfunk/1"
    }
}
