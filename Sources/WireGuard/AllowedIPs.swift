import Tunnel

/// Cryptokey routing's table: which peer owns the most specific allowed-IPs prefix holding an
/// address, IPv4 and IPv6 apart. A binary trie over the address bits, so a lookup costs one step
/// per bit of the longest matching prefix (at most 32 or 128) however many peers and prefixes
/// there are. Nodes live in one array (a value, copied with the device); the table is built
/// again when the configuration changes, which is rare beside lookups (one per packet).
struct AllowedIPsTable: Sendable {
    private struct Node: Sendable {
        var children: (Int32, Int32) = (-1, -1)
        /// The owner of the prefix ending here, or -1.
        var peer: Int32 = -1
    }

    /// Two roots: node 0 for IPv4, node 1 for IPv6.
    private var nodes = [Node(), Node()]

    /// The table for `owners`: peer index → its prefixes. A prefix listed by several peers
    /// belongs to the last (as `wg set` moves a prefix to the peer it is given to).
    init(_ owners: [[IPPrefix]]) {
        for (peer, prefixes) in owners.enumerated() {
            for prefix in prefixes { insert(prefix, peer: peer) }
        }
    }

    private static func bit(_ address: IPAddress, _ position: Int) -> Int {
        switch address {
        case .v4(let value): return Int(value >> UInt32(31 - position) & 1)
        case .v6(let high, let low):
            return position < 64 ? Int(high >> UInt64(63 - position) & 1) : Int(low >> UInt64(127 - position) & 1)
        }
    }

    private mutating func insert(_ prefix: IPPrefix, peer: Int) {
        var node = prefix.address.isIPv4 ? 0 : 1
        for position in 0..<prefix.length {
            let next = Self.bit(prefix.address, position) == 0 ? nodes[node].children.0 : nodes[node].children.1
            if next >= 0 {
                node = Int(next)
                continue
            }
            nodes.append(Node())
            let created = Int32(nodes.count - 1)
            if Self.bit(prefix.address, position) == 0 { nodes[node].children.0 = created } else { nodes[node].children.1 = created }
            node = Int(created)
        }
        nodes[node].peer = Int32(peer)
    }

    /// The peer owning the longest prefix that holds `address`, if any.
    func lookup(_ address: IPAddress) -> Int? {
        var node = address.isIPv4 ? 0 : 1
        var best = nodes[node].peer
        for position in 0..<address.bitWidth {
            let next = Self.bit(address, position) == 0 ? nodes[node].children.0 : nodes[node].children.1
            guard next >= 0 else { break }
            node = Int(next)
            if nodes[node].peer >= 0 { best = nodes[node].peer }
        }
        return best >= 0 ? Int(best) : nil
    }
}
