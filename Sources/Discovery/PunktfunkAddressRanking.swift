#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Orders a punktfunk host's advertised IPv4 addresses the way its own clients do (punktfunk
/// notes §11): longest common prefix with one of our addresses, then the host's declared TXT
/// `addr`, then the prefix shared with the default route's source, then the lowest address.
/// IPv6 addresses follow in the order given. Pure apart from `localIPv4Addresses()`.
public enum PunktfunkAddressRanking {
    public static func rank(_ addresses: [String], declared: String?, local: [String], defaultRouteSource: String? = nil) -> [String] {
        let locals = local.compactMap(parse)
        let source = defaultRouteSource.flatMap(parse)
        let v4 = addresses.compactMap { address in parse(address).map { (address, $0) } }
        let others = addresses.filter { parse($0) == nil }
        let sorted = v4.sorted { a, b in
            let la = locals.map { commonPrefix(a.1, $0) }.max() ?? 0
            let lb = locals.map { commonPrefix(b.1, $0) }.max() ?? 0
            if la != lb { return la > lb }
            let da = a.0 == declared, db = b.0 == declared
            if da != db { return da }
            let sa = source.map { commonPrefix(a.1, $0) } ?? 0
            let sb = source.map { commonPrefix(b.1, $0) } ?? 0
            if sa != sb { return sa > sb }
            return a.1 < b.1
        }
        return sorted.map(\.0) + others
    }

    /// Dotted IPv4 to its 32-bit value.
    static func parse(_ text: String) -> UInt32? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var value: UInt32 = 0
        for part in parts {
            guard let byte = UInt8(part) else { return nil }
            value = value << 8 | UInt32(byte)
        }
        return value
    }

    /// Leading bits two addresses share.
    static func commonPrefix(_ a: UInt32, _ b: UInt32) -> Int { (a ^ b).leadingZeroBitCount }

    /// This machine's IPv4 interface addresses (loopback excluded).
    public static func localIPv4Addresses() -> [String] {
        var head: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&head) == 0 else { return [] }
        defer { freeifaddrs(head) }
        var result: [String] = []
        var cursor = head
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            guard let address = entry.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET) else { continue }
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN) + 1)
            let ok = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { inet -> Bool in
                var raw = inet.pointee.sin_addr
                return inet_ntop(AF_INET, &raw, &text, socklen_t(text.count)) != nil
            }
            guard ok else { continue }
            let string = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if !string.hasPrefix("127.") { result.append(string) }
        }
        return result
    }
}
