@testable import Hosts
import Testing

/// The URL forms every protocol command accepts, parsed in one place (docs/hosts.md).
struct HostURLTests {
    @Test func vncURLsCarryUserPortTLSAndRoute() throws {
        let plain = try HostAddress(parsing: "vnc://alice@office.example:5901")
        #expect(plain.kind == .vnc && plain.host == "office.example" && plain.port == 5901 && plain.user == "alice" && !plain.tls && plain.ssh == nil)
        let tls = try HostAddress(parsing: "vncs://[fe80::1]")
        #expect(tls.tls && tls.host == "fe80::1" && tls.port == 5900)
        let routed = try HostAddress(parsing: "vnc://10.0.0.5:5901?ssh=me@bastion.example:2222")
        #expect(routed.ssh == SSHRoute(user: "me", host: "bastion.example", port: 2222))
        #expect(routed.url == "vnc://10.0.0.5:5901?ssh=me@bastion.example:2222")
        #expect(try HostAddress(parsing: routed.url) == routed)
    }

    @Test func eachProtocolHasItsDefaultPortAndDialURL() throws {
        #expect(try HostAddress(parsing: "sendspin://kitchen.local").protocolURL() == "ws://kitchen.local:8927/sendspin")
        #expect(try HostAddress(parsing: "ws://10.0.0.9:9000/custom").protocolURL() == "ws://10.0.0.9:9000/custom")
        #expect(try HostAddress(parsing: "punktfunk://gamebox").port == 9777)
        #expect(try HostAddress(parsing: "jellyfin://media/jf").protocolURL() == "http://media:8096/jf")
        #expect(try HostAddress(parsing: "jellyfins://media").protocolURL() == "https://media:8920")
        let tunnelled = try HostAddress(parsing: "sendspin://kitchen?ssh=pi@gateway")
        #expect(tunnelled.protocolURL(host: "127.0.0.1", port: 40123) == "ws://127.0.0.1:40123/sendspin")
    }

    @Test func malformedURLsAreRefusedWithTheReason() {
        let cases: [(String, String)] = [
            ("vnc://", "no host"), ("vnc://host:0", "outside 1…65535"), ("vnc://host:99999", "outside"),
            ("vnc://fe80::1:5901", "brackets"), ("gopher://x", "unknown scheme"), ("vnc://h/path", "no path"),
            ("vnc://h?foo=1", "unknown parameter"), ("punktfunk://h?ssh=me@b", "UDP"), ("vnc://h?ssh=", "empty"),
            ("vnc://h?ssh=me@b:x", "bad port"), ("vnc://[::1", "unclosed"),
        ]
        for (text, reason) in cases {
            do {
                _ = try HostAddress(parsing: text)
                Issue.record("\(text) parsed")
            } catch {
                #expect(error.description.contains(reason), "\(text): \(error.description)")
            }
        }
    }

    @Test func routesParseLikeSSHDestinations() throws {
        #expect(try SSHRoute(parsing: "bastion") == SSHRoute(host: "bastion"))
        #expect(try SSHRoute(parsing: "ssh://me@bastion:2222") == SSHRoute(user: "me", host: "bastion", port: 2222))
        #expect(try SSHRoute(parsing: "me@[2001:db8::1]:22") == SSHRoute(user: "me", host: "2001:db8::1", port: 22))
        #expect(try SSHRoute(parsing: "first%40corp@bastion").user == "first@corp")
        #expect(SSHRoute(user: "me", host: "::1", port: 2200).description == "me@[::1]:2200")
        #expect(throws: SSHTunnelError.self) { try SSHRoute(parsing: "me@") }
        #expect(throws: SSHTunnelError.self) { try SSHRoute(parsing: "me@host:70000") }
        #expect(throws: SSHTunnelError.self) { try SSHRoute(parsing: "2001:db8::1") }
        #expect(throws: SSHTunnelError.self) { try SSHRoute(parsing: "me@host/path") }
    }

    @Test func onlyKnownSchemesLookLikeURLs() {
        #expect(HostAddress.looksLikeURL("vnc://x"))
        #expect(HostAddress.looksLikeURL("JELLYFIN://x"))
        #expect(!HostAddress.looksLikeURL("office"))
        #expect(!HostAddress.looksLikeURL("host:1"))
        #expect(!HostAddress.looksLikeURL("ftp://x"))
    }
}
