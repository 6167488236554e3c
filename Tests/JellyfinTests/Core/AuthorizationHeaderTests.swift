import Testing
@testable import Jellyfin

struct AuthorizationHeaderTests {
    let identity = ClientIdentity(client: "Farcast", device: "Living Room", deviceId: "0123456789abcdef0123456789abcdef", version: "0.1.0")

    @Test func listsTheFourFieldsAndNoTokenBeforeSignIn() {
        #expect(AuthorizationHeader.value(identity: identity, token: nil)
                == #"MediaBrowser Client="Farcast", Device="Living%20Room", DeviceId="0123456789abcdef0123456789abcdef", Version="0.1.0""#)
    }

    @Test func appendsTheTokenOnceThereIsOne() {
        let header = AuthorizationHeader.value(identity: identity, token: "f00dfeed")
        #expect(header.hasSuffix(#", Token="f00dfeed""#))
    }

    @Test func percentEncodesWhatWouldBreakTheServersParser() {
        // The server splits on commas, strips quotes and URL-decodes each value: a comma, a quote,
        // an equals sign, a plus (which would decode to a space), a newline and non-ASCII text must
        // all survive the trip.
        let awkward = ClientIdentity(client: "Farcast", device: "Kid's \"TV\", 2+2=4\nÜber", deviceId: "id", version: "1")
        let header = AuthorizationHeader.value(identity: awkward, token: nil)
        #expect(header.contains(#"Device="Kid%27s%20%22TV%22%2C%202%2B2%3D4%0A%C3%9Cber""#))
        let parsed = AuthorizationHeader.parse(header)
        #expect(parsed?["Device"] == "Kid's \"TV\", 2+2=4\nÜber")
        #expect(parsed?["Client"] == "Farcast")
    }

    @Test func parsesTheServerIntegrationTestsHeaderAndOtherSchemes() {
        let parsed = AuthorizationHeader.parse(#"MediaBrowser Client="Jellyfin.Server%20Integration%20Tests", DeviceId="69420", Device="Apple%20II", Version="10.8.0", Token=abc"#)
        #expect(parsed == ["Client": "Jellyfin.Server Integration Tests", "DeviceId": "69420", "Device": "Apple II", "Version": "10.8.0", "Token": "abc"])
        #expect(AuthorizationHeader.parse(#"mediabrowser Token="x""#)?["Token"] == "x")
        #expect(AuthorizationHeader.parse(#"Emby Token="x""#) == nil)
        #expect(AuthorizationHeader.parse("Bearer abc") == nil)
    }
}
