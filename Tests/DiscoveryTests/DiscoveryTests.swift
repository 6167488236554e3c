import Discovery
import Testing

/// The pure parts of mDNS discovery: TXT record coding (RFC 6763 §6), error wording, argument
/// checks. The responder itself is exercised by the integration tests.
struct DiscoveryTests {
    @Test func txtRecordEncodesSortedLengthPrefixedEntries() throws {
        let bytes = try TXTRecord.encode(["path": "/sendspin", "name": "Kitchen"])
        #expect(bytes == [12] + Array("name=Kitchen".utf8) + [14] + Array("path=/sendspin".utf8))
    }

    @Test func emptyTXTRecordIsOneEmptyString() throws {
        #expect(try TXTRecord.encode([:]) == [0])
        #expect(TXTRecord.decode([0]) == [:])
    }

    @Test func txtRecordRoundTrips() throws {
        let entries = ["path": "/sendspin", "name": "Wohnzimmer – oben", "flag": ""]
        #expect(TXTRecord.decode(try TXTRecord.encode(entries)) == entries)
    }

    @Test func txtDecodingFoldsKeysKeepsFirstAndToleratesTruncation() {
        var bytes: [UInt8] = [9] + Array("PATH=/one".utf8) + [9] + Array("path=/two".utf8) + [4] + Array("bool".utf8)
        bytes += [1] + Array("=".utf8)       // empty key: ignored
        bytes += [40] + Array("name=cut".utf8) // length past the end: stops here
        #expect(TXTRecord.decode(bytes) == ["path": "/one", "bool": ""])
    }

    @Test func txtEncodingRejectsWhatDoesNotFit() {
        #expect(throws: DiscoveryError.self) { try TXTRecord.encode(["a=b": "c"]) }
        #expect(throws: DiscoveryError.self) { try TXTRecord.encode(["": "c"]) }
        #expect(throws: DiscoveryError.self) { try TXTRecord.encode(["name": String(repeating: "x", count: 251)]) }
        #expect((try? TXTRecord.encode(["name": String(repeating: "x", count: 250)]))?.count == 256)
    }

    @Test func unavailableResponderSaysWhatToDo() {
        let message = DiscoveryError.unavailable(code: -65537).description
        #expect(message.contains("-65537"))
        #expect(message.contains("connect with a URL"))
    }

    @Test func malformedServiceTypesAreRefusedUpFront() {
        let discovery = DNSServiceDiscovery()
        #expect(throws: DiscoveryError.self) { _ = try discovery.advertise(type: "sendspin", name: "x", port: 8928, txt: [:]) }
        #expect(throws: DiscoveryError.self) { _ = try discovery.advertise(type: "_sendspin._tcp", name: "x", port: 0, txt: [:]) }
    }
}

/// The catalogue of service types, punktfunk's address ranking and Jellyfin's UDP replies.
struct DiscoveryCatalogTests {
    @Test func everyProtocolHasItsServiceTypes() {
        #expect(ServiceCatalog.entries(forProtocol: "vnc").map(\.type) == ["_rfb._tcp", "_workstation._tcp"])
        #expect(ServiceCatalog.entries(forProtocol: "sendspin").map(\.type) == ["_sendspin-server._tcp", "_sendspin._tcp"])
        #expect(ServiceCatalog.entries(forProtocol: "punktfunk").map(\.type) == ["_punktfunk._udp"])
        #expect(ServiceCatalog.entry(forType: "_rfb._tcp.")?.protocolName == "vnc")
    }

    @Test func discoveredServicesBecomeFarcastURLs() {
        let rfb = DiscoveredService(name: "desk", type: "_rfb._tcp", hostName: "desk.local.", host: "10.0.0.5", port: 5901, txt: [:])
        #expect(rfb.farcastURL == "vnc://10.0.0.5:5901")
        let machine = DiscoveredService(name: "desk", type: "_workstation._tcp", hostName: "desk.local.", host: "fe80::1", port: 9, txt: [:])
        #expect(machine.farcastURL == "vnc://[fe80::1]:5900")
        let server = DiscoveredService(name: "k", type: "_sendspin-server._tcp", hostName: "k.local.", host: "10.0.0.9", port: 8927, txt: ["path": "/custom"])
        #expect(server.farcastURL == "sendspin://10.0.0.9:8927/custom")
        let player = DiscoveredService(name: "p", type: "_sendspin._tcp", hostName: "p.local.", host: "10.0.0.9", port: 8928, txt: [:])
        #expect(player.farcastURL == nil)
        let pf = DiscoveredService(name: "g", type: "_punktfunk._udp", hostName: "g.local.", host: "10.0.0.7", port: 9777, txt: ["proto": "punktfunk/2"])
        #expect(!pf.isCompatiblePunktfunkHost)
    }

    @Test func punktfunkAddressesRankAsItsClientsDo() {
        let addresses = ["192.168.7.20", "10.1.2.3", "10.9.9.9", "fe80::1"]
        // Longest common prefix with a local address first.
        #expect(PunktfunkAddressRanking.rank(addresses, declared: nil, local: ["10.1.2.200"]) == ["10.1.2.3", "10.9.9.9", "192.168.7.20", "fe80::1"])
        // Equal prefixes: the declared address wins, then the default route's source, then the lowest.
        #expect(PunktfunkAddressRanking.rank(["10.0.0.9", "10.0.0.8"], declared: "10.0.0.9", local: ["172.16.0.1"]) == ["10.0.0.9", "10.0.0.8"])
        #expect(PunktfunkAddressRanking.rank(["10.0.0.9", "192.168.1.1"], declared: nil, local: [], defaultRouteSource: "192.168.1.50") == ["192.168.1.1", "10.0.0.9"])
        #expect(PunktfunkAddressRanking.rank(["10.0.0.9", "10.0.0.8"], declared: nil, local: []) == ["10.0.0.8", "10.0.0.9"])
    }

    @Test func jellyfinRepliesParseAndJunkIsIgnored() {
        let reply = Array(#"{"Address":"http://10.0.0.5:8096","Id":"0123456789abcdef0123456789abcdef","Name":"Den","EndpointAddress":null}"#.utf8)
        let server = JellyfinDiscovery.parse(reply, endpoint: "10.0.0.5:7359")
        #expect(server?.name == "Den")
        #expect(server?.farcastURL == "jellyfin://10.0.0.5:8096")
        #expect(JellyfinDiscovery.parse(Array("who is JellyfinServer?".utf8), endpoint: "x") == nil)
        #expect(JellyfinDiscovery.parse(Array(#"{"Address":"ftp://x","Id":"1"}"#.utf8), endpoint: "x") == nil)
        #expect(JellyfinDiscovery.parse([UInt8](repeating: 0x20, count: 5000), endpoint: "x") == nil)
    }
}
