import Sendspin
import Testing

/// The URL a discovered Sendspin service turns into (spec §11).
struct SendspinDiscoveryURLTests {
    @Test func urlUsesAddressPortAndTXTPath() {
        var service = DiscoveredService(name: "srv", type: SendspinService.server, hostName: "srv.local.", host: "192.168.1.5",
                                        port: 8927, txt: ["path": "/sendspin", "name": "Living room"])
        #expect(service.url == "ws://192.168.1.5:8927/sendspin")
        #expect(service.displayName == "Living room")
        service.txt = [:]
        #expect(service.url == "ws://192.168.1.5:8927/sendspin")
        #expect(service.displayName == "srv")
        service.txt = ["path": "custom"]
        #expect(service.url == "ws://192.168.1.5:8927/custom")
        service.host = "fe80::1"
        #expect(service.url == "ws://[fe80::1]:8927/custom")
    }
}
