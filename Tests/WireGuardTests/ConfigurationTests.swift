import Testing
import Tunnel
@testable import WireGuard

@Suite struct ConfigurationTests {
    let key = PrivateKey()
    let peerKey = PrivateKey().publicKey

    @Test func aWgQuickFileIsRead() throws {
        let psk = PresharedKey.random()
        let configuration = try WireGuardConfiguration(parsing: """
            # office tunnel
            [Interface]
            PrivateKey = \(key.base64)
            Address = 10.0.0.1/24, fd00::1/64
            ListenPort = 51820
            MTU = 1380
            DNS = 10.0.0.53
            PostUp = iptables -A FORWARD -i %i -j ACCEPT

            [Peer]
            publickey = \(peerKey.base64)   # keys in any case
            PresharedKey = \(psk.base64)
            AllowedIPs = 10.0.0.2/32, 192.168.0.0/16
            AllowedIPs = fd00::2
            Endpoint = [2001:db8::1]:51820
            PersistentKeepalive = 25
            """)
        #expect(configuration.privateKey.publicKey == key.publicKey)
        #expect(configuration.addresses.map(\.description) == ["10.0.0.1/24", "fd00::1/64"])
        #expect(configuration.listenPort == 51820 && configuration.mtu == 1380)
        #expect(configuration.ignored == ["DNS (line 7)", "PostUp (line 8)"])
        let peer = try #require(configuration.peers.first)
        #expect(peer.publicKey == peerKey && peer.presharedKey == psk)
        #expect(peer.allowedIPs.map(\.description) == ["10.0.0.2/32", "192.168.0.0/16", "fd00::2/128"])
        #expect(peer.endpoint == "[2001:db8::1]:51820" && peer.persistentKeepalive == .seconds(25))
    }

    @Test func mistakesNameTheirLine() {
        let header = "[Interface]\nPrivateKey = \(key.base64)\n"
        let cases: [(String, Int, String)] = [
            ("PrivateKey = x\n", 1, "before any [Interface]"),
            (header + "[Peer]\nAllowedIPs = 10.0.0.2/32\n", 3, "no PublicKey"),
            (header + "[Peer]\nPublicKey = abc\n", 4, "invalid public key"),
            (header + "ListenPort = 70000\n", 3, "ListenPort"),
            (header + "Address = 10.0.0.300/24\n", 3, "Address"),
            (header + "Colour = blue\n", 3, "unknown [Interface] setting Colour"),
            (header + "[Peer]\nPublicKey = \(peerKey.base64)\nEndpoint = example.org\n", 5, "HOST:PORT"),
            (header + "[Peer]\nPublicKey = \(peerKey.base64)\nPersistentKeepalive = often\n", 5, "PersistentKeepalive"),
            (header + "[Peer]\nPublicKey = \(peerKey.base64)\n[Peer]\nPublicKey = \(peerKey.base64)\n", 5, "the same PublicKey"),
            (header + "[Tunnel]\n", 3, "unknown section"),
            (header + "just words\n", 3, "Key = Value"),
            ("[Interface]\nAddress = 10.0.0.1/24\n", 0, "no PrivateKey"),
        ]
        for (text, line, fragment) in cases {
            do {
                _ = try WireGuardConfiguration(parsing: text)
                Issue.record("accepted: \(text)")
            } catch {
                #expect(error.line == line, "\(error)")
                #expect(error.message.contains(fragment), "\(error)")
            }
        }
    }

    @Test func endpointsSplitAsHostAndPort() {
        #expect(WireGuardConfiguration.splitEndpoint("vpn.example.org:51820")! == ("vpn.example.org", 51820))
        #expect(WireGuardConfiguration.splitEndpoint("[fd00::1]:1")! == ("fd00::1", 1))
        for bad in ["fd00::1:51820", "host", ":51820", "host:99999", "[fd00::1]51820"] {
            #expect(WireGuardConfiguration.splitEndpoint(bad) == nil, "\(bad)")
        }
    }
}
