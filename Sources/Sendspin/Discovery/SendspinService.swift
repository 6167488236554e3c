// Sendspin's use of the shared DNS-SD seam; re-exported so Sendspin users need one import.
@_exported import Discovery

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

extension DiscoveredService {
    /// The WebSocket URL: `ws://HOST:PORT` plus TXT `path` (default `/sendspin`).
    public var url: String {
        var path = txt["path"] ?? ""
        if path.isEmpty { path = SendspinService.defaultPath }
        if !path.hasPrefix("/") { path = "/" + path }
        let address = host.contains(":") ? "[\(host)]" : host
        return "ws://\(address):\(port)\(path)"
    }
}
