import Discovery

/// A punktfunk host as its `_punktfunk._udp` advertisement describes it (TXT decoded).
///
/// `fingerprint` is advisory only: it is never trusted, only shown; pins come from pairing or
/// trust on first use, and TOFU is allowed only when the host says `pair=optional`.
public struct PunktfunkHostRecord: Sendable, Equatable {
    public static let serviceType = "_punktfunk._udp"

    /// Whether the host requires pairing.
    public enum PairingPolicy: String, Sendable {
        case required, optional, unknown
    }

    public var instanceName: String
    /// Addresses to try, best first (see `PunktfunkHostRecord.rank`).
    public var addresses: [String]
    /// The native QUIC port.
    public var port: UInt16
    /// TXT `proto` (nil on old hosts that do not send it).
    public var protocolVersion: String?
    public var hostID: String?
    public var fingerprint: String?
    public var pairing: PairingPolicy
    public var managementPort: UInt16?
    public var macAddresses: [String]
    public var os: String?
    public var declaredAddress: String?

    /// Decodes a TXT record; nil when `proto` names something other than punktfunk/1.
    public init?(instanceName: String, addresses: [String], port: Int, txt: [String: String]) {
        if let proto = txt["proto"], proto != "punktfunk/1" { return nil }
        guard (1...65535).contains(port) else { return nil }
        self.instanceName = instanceName
        self.addresses = addresses
        self.port = UInt16(port)
        protocolVersion = txt["proto"]
        hostID = txt["id"].flatMap { $0.isEmpty ? nil : $0 }
        let fp = txt["fp"]?.lowercased() ?? ""
        fingerprint = fp.count == 64 && fp.allSatisfy(\.isHexDigit) ? fp : nil
        pairing = PairingPolicy(rawValue: txt["pair"] ?? "") ?? .unknown
        managementPort = txt["mgmt"].flatMap { UInt16($0) }
        macAddresses = (txt["mac"] ?? "").split(separator: ",").map { String($0) }.filter { !$0.isEmpty }
        os = txt["os"].flatMap { $0.isEmpty ? nil : $0 }
        declaredAddress = txt["addr"].flatMap { IPv4Address($0) != nil ? $0 : nil }
    }

    /// Builds a record from a browse result, ranking its addresses against the local ones.
    public init?(_ service: DiscoveredService, localAddresses: [String] = [], defaultRouteSource: String? = nil) {
        self.init(instanceName: service.name, addresses: [service.host], port: service.port, txt: service.txt)
        var candidates = addresses
        if let declaredAddress, !candidates.contains(declaredAddress) { candidates.append(declaredAddress) }
        addresses = Self.rank(candidates, localAddresses: localAddresses, declared: declaredAddress,
                              defaultRouteSource: defaultRouteSource)
    }

    /// Trust on first use is allowed only toward hosts that say pairing is optional.
    public var allowsTrustOnFirstUse: Bool { pairing == .optional }

    /// Orders IPv4 candidates: longest common prefix with any local address first, then the
    /// declared `addr`, then the longest prefix shared with the default route's source, then the
    /// numerically lowest. Non-IPv4 candidates follow in their original order.
    public static func rank(_ candidates: [String], localAddresses: [String], declared: String?,
                            defaultRouteSource: String?) -> [String] {
        let locals = localAddresses.compactMap(IPv4Address.init)
        let route = defaultRouteSource.flatMap(IPv4Address.init)
        let v4 = candidates.compactMap { c in IPv4Address(c).map { (c, $0) } }
        let others = candidates.filter { IPv4Address($0) == nil }
        func localPrefix(_ a: IPv4Address) -> Int { locals.map { a.commonPrefix(with: $0) }.max() ?? 0 }
        let sorted = v4.sorted { lhs, rhs in
            let (l, r) = (lhs.1, rhs.1)
            if localPrefix(l) != localPrefix(r) { return localPrefix(l) > localPrefix(r) }
            let ld = lhs.0 == declared, rd = rhs.0 == declared
            if ld != rd { return ld }
            if let route {
                let lp = l.commonPrefix(with: route), rp = r.commonPrefix(with: route)
                if lp != rp { return lp > rp }
            }
            return l.value < r.value
        }
        var seen = Set<String>()
        return (sorted.map(\.0) + others).filter { seen.insert($0).inserted }
    }
}

/// A dotted-quad IPv4 address as a 32-bit value.
public struct IPv4Address: Sendable, Equatable {
    public let value: UInt32

    public init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var v: UInt32 = 0
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.allSatisfy(\.isASCII), let octet = UInt8(part) else { return nil }
            v = v << 8 | UInt32(octet)
        }
        value = v
    }

    /// Leading bits two addresses share (0…32).
    public func commonPrefix(with other: IPv4Address) -> Int {
        (value ^ other.value).leadingZeroBitCount
    }
}
