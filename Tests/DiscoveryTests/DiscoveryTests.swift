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
