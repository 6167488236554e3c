import FarcastSupport
import Testing
import Tunnel
@testable import WireGuard

/// The UAPI's text, as `wg` writes and reads it (its live use is in WireGuardGoTests).
@Suite struct UAPITests {
    @Test func getListsTheInterfaceAndEveryPeerInHex() throws {
        let key = try PrivateKey(bytes: Array(repeating: 0x41, count: 32))
        let peer = try PublicKey(bytes: Array(repeating: 0x07, count: 32))
        let psk = try PresharedKey(bytes: Array(repeating: 0xAB, count: 32))
        let status = PeerStatus(publicKey: peer, hasPresharedKey: true, endpoint: UDPEndpoint("192.0.2.1:51820"),
                                allowedIPs: [try IPPrefix("10.0.0.2/32"), try IPPrefix("fd00::/64")],
                                lastHandshake: MonotonicInstant(nanoseconds: 5), receivedBytes: 10, sentBytes: 20, persistentKeepalive: .seconds(25))
        let text = UAPI.get(privateKey: key, listenPort: 51820, peers: [status], presharedKeys: [peer: psk]) { _ in (1_800_000_000, 7) }
        #expect(text == """
            private_key=\(String(repeating: "41", count: 32))
            listen_port=51820
            public_key=\(String(repeating: "07", count: 32))
            preshared_key=\(String(repeating: "ab", count: 32))
            protocol_version=1
            endpoint=192.0.2.1:51820
            last_handshake_time_sec=1800000000
            last_handshake_time_nsec=7
            tx_bytes=20
            rx_bytes=10
            persistent_keepalive_interval=25
            allowed_ip=10.0.0.2/32
            allowed_ip=fd00::/64
            errno=0


            """)
    }

    @Test func setIsParsedAndMistakesAreEINVAL() throws {
        let peer = String(repeating: "07", count: 32)
        let request = try UAPI.parseSet("""
            replace_peers=true
            public_key=\(peer)
            endpoint=[fd00::1]:51820
            persistent_keepalive_interval=25
            replace_allowed_ips=true
            allowed_ip=10.0.0.2/32
            """.split(separator: "\n"))
        #expect(request.replacePeers && request.peers.count == 1)
        #expect(request.peers[0].endpoint == UDPEndpoint("[fd00::1]:51820") && request.peers[0].allowedIPs.count == 1)
        for bad in ["public_key=zz", "listen_port=99999", "public_key=\(peer)\ncolour=blue", "nonsense", "public_key=\(peer)\nendpoint=host",
                    "public_key=\(peer)\nallowed_ip=10.0.0.300/32", "private_key=" + String(repeating: "g", count: 64)] {
            #expect(throws: UAPIError.self, "\(bad)") { try UAPI.parseSet(bad.split(separator: "\n")) }
        }
    }

    @Test func aSetAddsChangesAndRemovesPeersAndRefusesANewPort() throws {
        var device = WireGuardDevice(privateKey: PrivateKey(), peers: [], now: MonotonicInstant(nanoseconds: 0))
        let peer = PrivateKey().publicKey
        var add = UAPISetRequest()
        add.peers = [UAPISetRequest.Peer(publicKey: peer, allowedIPs: [try IPPrefix("10.0.0.2/32")])]
        try device.apply(add, listenPort: 51820, now: MonotonicInstant(nanoseconds: 0))
        #expect(device.status.map(\.publicKey) == [peer])
        #expect(device.route(IPAddress("10.0.0.2")!) == 0)
        var remove = UAPISetRequest()
        remove.peers = [UAPISetRequest.Peer(publicKey: peer, remove: true)]
        try device.apply(remove, listenPort: 51820, now: MonotonicInstant(nanoseconds: 0))
        #expect(device.status.isEmpty && device.route(IPAddress("10.0.0.2")!) == nil)
        var port = UAPISetRequest()
        port.listenPort = 1
        #expect(throws: UAPIError.self) { try device.apply(port, listenPort: 51820, now: MonotonicInstant(nanoseconds: 0)) }
    }
}
