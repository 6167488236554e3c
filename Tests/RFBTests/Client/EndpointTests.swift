@testable import RFB
import Testing

@Suite struct EndpointTests {
    @Test(arguments: [
        ("vnc://example.org", "example.org", 5900, nil as String?),
        ("vnc://ann@example.org:5999", "example.org", 5999, "ann"),
        ("vnc://ann%40work@host:1", "host", 1, "ann@work"),       // URL ports are TCP ports
        ("vnc://[::1]:5901/", "::1", 5901, nil),
        ("host:1", "host", 5901, nil),
        ("host:99", "host", 5999, nil),
        ("host:5905", "host", 5905, nil),                        // large numbers are ports
        ("host::5902", "host", 5902, nil),
        ("[::1]:2", "::1", 5902, nil),
        ("[fe80::1]::6000", "fe80::1", 6000, nil),
        ("  10.0.0.2  ", "10.0.0.2", 5900, nil),
    ])
    func parsesEveryForm(text: String, host: String, port: Int, user: String?) throws {
        let endpoint = try VNCEndpoint(parsing: text)
        #expect(endpoint.host == host)
        #expect(endpoint.port == port)
        #expect(endpoint.username == user)
    }

    @Test(arguments: ["", "vnc://", ":1", "host:x", "host::0", "host::70000", "vnc://host::5900", "[::1", "host:1:2", "host:-1"])
    func rejectsNonsense(text: String) {
        #expect(throws: VNCEndpoint.ParseError.self) { try VNCEndpoint(parsing: text) }
    }

    @Test func vncsMeansTLSFromTheFirstByte() throws {
        let endpoint = try VNCEndpoint(parsing: "vncs://ann@host:5901")
        #expect(endpoint.tlsFirst && endpoint.port == 5901 && endpoint.username == "ann")
        #expect(try !VNCEndpoint(parsing: "vnc://host:5901").tlsFirst)
    }

    @Test(arguments: [("::1", "brackets"), ("fe80::1:2", "brackets"), ("http://host:8080/", "not a VNC address scheme"),
                      ("ssh://host", "not a VNC address scheme")])
    func commonMistakesGetAHint(text: String, hint: String) {
        do {
            _ = try VNCEndpoint(parsing: text)
            Issue.record("\(text) was accepted")
        } catch {
            #expect(error.description.contains(hint), "\(error)")
        }
    }

    @Test func aSmallURLPortMentionsTheDisplayItMayHaveMeant() throws {
        let endpoint = try VNCEndpoint(parsing: "vnc://127.0.0.1:31")
        #expect(endpoint.port == 31)
        #expect(endpoint.displayHint?.contains("127.0.0.1:31 or vnc://127.0.0.1:5931") == true)
        #expect(try VNCEndpoint(parsing: "127.0.0.1:31").displayHint == nil)
    }

    @Test func pinKeysAndDescriptionsBracketIPv6() throws {
        #expect(try VNCEndpoint(parsing: "[::1]:1").pinKey == "[::1]:5901")
        #expect(try VNCEndpoint(parsing: "host:1").pinKey == "host:5901")
        #expect(try VNCEndpoint(parsing: "host:1").description == "host::5901")
    }
}

@Suite struct PNGEncoderTests {
    @Test func writesAValidRGBPNG() throws {
        var fb = Framebuffer(width: 3, height: 2)
        fb.pixels = [0xFF0000, 0x00FF00, 0x0000FF, 0xFFFFFF, 0x000000, 0x123456]
        let png = try PNGEncoder.encode(fb)
        #expect(Array(png.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        // IHDR: 3×2, 8-bit, colour type 2.
        #expect(Array(png[8..<16]) == [0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52])
        #expect(Array(png[16..<29]) == [0, 0, 0, 3, 0, 0, 0, 2, 8, 2, 0, 0, 0])
        #expect(Array(png.suffix(12)) == [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82])
    }

    @Test func refusesAnEmptyImage() {
        #expect(throws: PNGEncoder.EncodingFailed.self) { try PNGEncoder.encode(Framebuffer(width: 0, height: 0)) }
    }
}
