import Testing
@testable import Jellyfin

struct ServerAddressTests {
    private func normalised(_ text: String) throws -> String { try ServerAddress(parsing: text).description }

    @Test func aBareHostMeansHTTPOnJellyfinsPort() throws {
        #expect(try normalised("myserver") == "http://myserver:8096")
        #expect(try normalised("  MyServer.LAN  ") == "http://myserver.lan:8096")
        #expect(try normalised("192.168.1.20") == "http://192.168.1.20:8096")
    }

    @Test func port8920WithoutASchemeMeansHTTPS() throws {
        #expect(try normalised("myserver:8920") == "https://myserver:8920")
        #expect(try normalised("myserver:9000") == "http://myserver:9000")
    }

    @Test func aSchemeWithoutAPortMeansTheSchemesPort() throws {
        #expect(try normalised("https://media.example.org") == "https://media.example.org")
        #expect(try ServerAddress(parsing: "https://media.example.org").port == 443)
        #expect(try normalised("http://media.example.org") == "http://media.example.org")
        #expect(try normalised("HTTP://host:8096/") == "http://host:8096")
    }

    @Test func keepsTheBasePathAndDropsTheWebUI() throws {
        #expect(try normalised("https://example.org/jellyfin/") == "https://example.org/jellyfin")
        #expect(try normalised("http://host:8096/web/index.html#!/home.html") == "http://host:8096")
        #expect(try normalised("http://host:8096/jellyfin/web/") == "http://host:8096/jellyfin")
        #expect(try normalised("http://host:8096/jellyfin?x=1") == "http://host:8096/jellyfin")
    }

    @Test func bracketsIPv6() throws {
        #expect(try normalised("[::1]") == "http://[::1]:8096")
        #expect(try normalised("https://[fe80::1]:8920/jf") == "https://[fe80::1]:8920/jf")
        #expect(try ServerAddress(parsing: "[::1]:8096").host == "::1")
    }

    @Test func webSocketBaseFollowsTheScheme() throws {
        #expect(try ServerAddress(parsing: "https://example.org/jellyfin").webSocketBase == "wss://example.org/jellyfin")
        #expect(try ServerAddress(parsing: "myserver").webSocketBase == "ws://myserver:8096")
    }

    @Test func refusesWhatCannotBeAServer() {
        for text in ["", "ftp://host", "http://", "host:0", "host:70000", "host:port", "::1", "user@host", "http://host/a/../b", "ho st", "[::1"] {
            #expect(throws: JellyfinError.self, "\(text)") { try ServerAddress(parsing: text) }
        }
    }
}
