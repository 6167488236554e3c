import FarcastSupport
import Testing
import Tunnel
@testable import WireGuard

/// Cryptokey routing: the trie against a plain longest-prefix search over random tables, the
/// edges (default routes, host bits set in a prefix, the two families apart), and a prefix
/// having one owner, as `wg set` moves it.
@Suite struct AllowedIPsTests {
    /// The longest prefix holding `address`, by looking at every one (later owners win ties).
    static func reference(_ owners: [[IPPrefix]], _ address: IPAddress) -> Int? {
        var best: (peer: Int, length: Int)?
        for (peer, prefixes) in owners.enumerated() {
            for prefix in prefixes where prefix.contains(address) && prefix.length >= (best?.length ?? -1) { best = (peer, prefix.length) }
        }
        return best?.peer
    }

    @Test(arguments: [true, false])
    func theTrieFindsWhatAPlainSearchFinds(v4: Bool) throws {
        var random = Seeded(v4 ? 4 : 6)
        // Addresses drawn from a narrow space, so prefixes nest and overlap often.
        func address() -> IPAddress {
            v4 ? .v4(0x0A00_0000 | UInt32(truncatingIfNeeded: random.next()) & 0x0000_0FFF)
               : .v6(high: 0xFD00_0000_0000_0000 | random.next() & 0x3, low: random.next() & 0xFFF)
        }
        for _ in 0..<20 {
            let owners = try (0..<Int(random.next() % 12 + 1)).map { _ in
                try (0..<Int(random.next() % 6)).map { _ in
                    let width = v4 ? 32 : 128
                    // Lengths spread over the whole range, the short end included.
                    return try IPPrefix(address: address(), length: Int(random.next() % UInt64(width + 1)))
                }
            }
            let table = AllowedIPsTable(owners)
            for _ in 0..<300 {
                let probe = address()
                #expect(table.lookup(probe) == Self.reference(owners, probe), "\(probe) in \(owners)")
            }
        }
    }

    @Test func edges() throws {
        let table = AllowedIPsTable([[try IPPrefix("0.0.0.0/0")], [try IPPrefix("10.0.0.1/24"), try IPPrefix("fd00::/8")],
                                     [try IPPrefix("10.0.0.7/32")], [try IPPrefix("::/0")]])
        #expect(table.lookup(IPAddress("192.0.2.1")!) == 0, "the IPv4 default route")
        #expect(table.lookup(IPAddress("10.0.0.77")!) == 1, "host bits in a prefix are ignored")
        #expect(table.lookup(IPAddress("10.0.0.7")!) == 2, "the longer prefix wins")
        #expect(table.lookup(IPAddress("fd12::1")!) == 1)
        #expect(table.lookup(IPAddress("2001:db8::1")!) == 3, "the IPv6 default route")
        #expect(AllowedIPsTable([[try IPPrefix("::/0")]]).lookup(IPAddress("10.0.0.1")!) == nil, "IPv6 prefixes never hold an IPv4 address")
        #expect(AllowedIPsTable([]).lookup(IPAddress("10.0.0.1")!) == nil)
    }

    @Test func aPrefixHasOneOwner() throws {
        let first = PrivateKey().publicKey, second = PrivateKey().publicKey
        let now = MonotonicInstant(nanoseconds: 0)
        // In a configuration the last peer that lists a prefix has it.
        var device = WireGuardDevice(privateKey: PrivateKey(), peers: [
            PeerConfiguration(publicKey: first, allowedIPs: [try IPPrefix("10.0.0.0/24"), try IPPrefix("10.0.1.0/24")]),
            PeerConfiguration(publicKey: second, allowedIPs: [try IPPrefix("10.0.0.9/24")]),
        ], now: now)
        #expect(device.status.map(\.allowedIPs) == [[try IPPrefix("10.0.1.0/24")], [try IPPrefix("10.0.0.9/24")]])
        #expect(device.route(IPAddress("10.0.0.5")!) == 1 && device.route(IPAddress("10.0.1.5")!) == 0)
        // `wg set` giving a prefix to another peer moves it.
        var move = UAPISetRequest()
        move.peers = [UAPISetRequest.Peer(publicKey: first, allowedIPs: [try IPPrefix("10.0.0.0/24")])]
        try device.apply(move, listenPort: 51820, now: now)
        #expect(device.status.map(\.allowedIPs) == [[try IPPrefix("10.0.1.0/24"), try IPPrefix("10.0.0.0/24")], []])
        #expect(device.route(IPAddress("10.0.0.5")!) == 0)
        // Removing a peer takes its routes with it; the other peer's stay.
        var remove = UAPISetRequest()
        remove.peers = [UAPISetRequest.Peer(publicKey: first, remove: true)]
        try device.apply(remove, listenPort: 51820, now: now)
        #expect(device.route(IPAddress("10.0.0.5")!) == nil && device.status.count == 1)
    }
}

/// A reproducible stream of numbers (SplitMix64) for the random tables.
private struct Seeded {
    var state: UInt64
    init(_ seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
