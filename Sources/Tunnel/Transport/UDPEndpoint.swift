#if canImport(Glibc)
import Glibc
#if os(Linux)
import CTunnelLinux   // socket constants (SOCK_DGRAM, IP_MTU) for pathMTU
#endif
#elseif canImport(Darwin)
import Darwin
#endif

/// An IP address and UDP port: `192.0.2.1:51820`, `[2001:db8::1]:51820`.
public struct UDPEndpoint: Hashable, Sendable, CustomStringConvertible {
    public var address: IPAddress
    public var port: UInt16

    public init(address: IPAddress, port: UInt16) {
        self.address = address
        self.port = port
    }

    /// Parses `ADDRESS:PORT` with an IPv6 address in brackets; nil for anything else (host
    /// names are resolved by the caller).
    public init?(_ text: String) {
        let host: Substring, port: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            port = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), text.firstIndex(of: ":") == colon else { return nil }
            host = text[..<colon]
            port = text[text.index(after: colon)...]
        }
        guard let address = IPAddress(host), let number = UInt16(port), port.allSatisfy(\.isASCII) else { return nil }
        self.init(address: address, port: number)
    }

    public var description: String {
        address.isIPv4 ? "\(address):\(port)" : "[\(address)]:\(port)"
    }

    /// Writes the `sockaddr_in`/`sockaddr_in6` for this endpoint at `storage` (room for a
    /// `sockaddr_storage`) and returns its length. Allocates nothing (a batch send does this per
    /// message).
    func write(to storage: UnsafeMutableRawPointer) -> socklen_t {
        switch address {
        case .v4(let value):
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = port.bigEndian
            a.sin_addr.s_addr = value.bigEndian
            storage.storeBytes(of: a, as: sockaddr_in.self)
            return socklen_t(MemoryLayout<sockaddr_in>.size)
        case .v6(let high, let low):
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &a.sin6_addr) {
                $0.storeBytes(of: high.bigEndian, toByteOffset: 0, as: UInt64.self)
                $0.storeBytes(of: low.bigEndian, toByteOffset: 8, as: UInt64.self)
            }
            storage.storeBytes(of: a, as: sockaddr_in6.self)
            return socklen_t(MemoryLayout<sockaddr_in6>.size)
        }
    }

    /// The `sockaddr_in`/`sockaddr_in6` for this endpoint and its length.
    public func withSocketAddress<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws -> T) rethrows -> T {
        var storage = sockaddr_storage()
        let length = withUnsafeMutableBytes(of: &storage) { write(to: $0.baseAddress!) }
        return try withUnsafePointer(to: &storage) {
            try $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { try body($0, length) }
        }
    }
}

extension UDPEndpoint {
    /// Splits `HOST:PORT` (`[IPv6]:PORT` for an IPv6 literal) without resolving the host; nil when
    /// the text is not of that shape or the port is not 0–65535.
    public static func split(_ text: String) -> (host: String, port: UInt16)? {
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":"), let port = UInt16(rest.dropFirst()) else { return nil }
            return (String(text[text.index(after: text.startIndex)..<close]), port)
        }
        guard let colon = text.lastIndex(of: ":"), text.firstIndex(of: ":") == colon,
              let port = UInt16(text[text.index(after: colon)...]), colon > text.startIndex else { return nil }
        return (String(text[..<colon]), port)
    }

    /// Why `resolve` found no endpoint.
    public enum ResolveError: Error, Equatable, Sendable, CustomStringConvertible {
        /// The text is not `HOST:PORT` (`[IPv6]:PORT`).
        case malformed(String)
        /// The host name did not resolve (the resolver's reason), or only to other families.
        case unresolved(host: String, reason: String)

        public var description: String {
            switch self {
            case .malformed(let text): "'\(text)' is not HOST:PORT (an IPv6 address in brackets: [fd00::1]:51820)"
            case .unresolved(let host, let reason): "cannot resolve \(host): \(reason)"
            }
        }
    }

    /// An endpoint from `ADDRESS:PORT` or `HOSTNAME:PORT`: an address literal as it is, a host
    /// name resolved once through the system resolver (its first IPv4 or IPv6 address, in the
    /// resolver's order). Blocks while the resolver works.
    public static func resolve(_ text: String) throws(ResolveError) -> UDPEndpoint {
        if let literal = UDPEndpoint(text) { return literal }
        guard let (host, port) = split(text), !host.isEmpty else { throw .malformed(text) }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0, let first = list else { throw .unresolved(host: host, reason: String(cString: gai_strerror(status))) }
        defer { freeaddrinfo(list) }
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            let info = current.pointee
            if info.ai_family == AF_INET, let raw = info.ai_addr {
                let address = raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt32(bigEndian: $0.pointee.sin_addr.s_addr) }
                return UDPEndpoint(address: .v4(address), port: port)
            }
            if info.ai_family == AF_INET6, let raw = info.ai_addr {
                let address = raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                    withUnsafeBytes(of: pointer.pointee.sin6_addr) { IPAddress(bytes: $0) }
                }
                if let address { return UDPEndpoint(address: address, port: port) }
            }
            entry = info.ai_next
        }
        throw .unresolved(host: host, reason: "no IPv4 or IPv6 address")
    }
}

extension UDPEndpoint {
    /// The MTU of the path to this endpoint as the kernel knows it now: the MTU of the device its
    /// route leaves by, or a smaller one learned from ICMP since (Linux: IP_MTU / IPV6_MTU of a
    /// UDP socket connected to it; nothing is sent). nil when there is no route or the system
    /// cannot say.
    public func pathMTU() -> Int? {
        #if os(Linux)
        let family = address.isIPv4 ? AF_INET : AF_INET6
        let fd = socket(family, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard withSocketAddress({ connect(fd, $0, $1) }) == 0 else { return nil }
        var mtu: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        let level = address.isIPv4 ? Int32(IPPROTO_IP) : Int32(IPPROTO_IPV6)
        let option = address.isIPv4 ? IP_MTU : IPV6_MTU
        guard getsockopt(fd, level, option, &mtu, &length) == 0, mtu > 0 else { return nil }
        return Int(mtu)
        #else
        return nil
        #endif
    }
}
