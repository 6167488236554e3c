import CryptoExtras
import FarcastSupport
import Foundation
@testable import RFB
import Testing

/// Known-answer tests for RSA-AES (RA2 family), AES-EAX, Apple Remote Desktop (type 30) and
/// MS-Logon II (type 113), from Fixtures/security-vectors.json. That file is made by
/// scripts/vectors/make_rfb_security_vectors.py with pycryptodome and `cryptography` (an
/// implementation independent of ours) and was checked against a real TigerVNC server and
/// libvncclient; see docs/rfb-security-digest.md.
@Suite struct SecurityVectorTests {
    nonisolated(unsafe) static let vectors: [String: Any] = {  // read-only after loading
        let url = Bundle.module.resourceURL!.appendingPathComponent("Fixtures/security-vectors.json")
        return try! JSONSerialization.jsonObject(with: Data(contentsOf: url)) as! [String: Any]
    }()

    static func hex(_ s: Any?) -> [UInt8] {
        let text = s as! String
        var out: [UInt8] = []
        var i = text.startIndex
        while i < text.endIndex {
            let j = text.index(i, offsetBy: 2)
            out.append(UInt8(text[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    /// Hands out scripted random bytes by request size.
    final class ScriptedRandom: @unchecked Sendable {
        private var bySize: [Int: [[UInt8]]]
        init(_ values: [[UInt8]]) { bySize = Dictionary(grouping: values, by: \.count) }
        func take(_ count: Int) -> [UInt8] {
            guard var list = bySize[count], !list.isEmpty else { Issue.record("no scripted random of \(count) bytes"); return [UInt8](repeating: 1, count: count) }
            let first = list.removeFirst()
            bySize[count] = list
            return first
        }
    }

    // MARK: - EAX

    @Test func eaxMatchesThePublishedAndRA2ShapedVectors() throws {
        let list = Self.vectors["eax"] as! [[String: Any]]
        #expect(list.count >= 10)
        for v in list {
            let eax = AESEAX(key: Self.hex(v["key"]))
            let (ciphertext, tag) = eax.seal(Self.hex(v["plaintext"]), nonce: Self.hex(v["nonce"]), header: Self.hex(v["header"]))
            #expect(ciphertext == Self.hex(v["ciphertext"]), "\(v["source"] ?? "")")
            #expect(tag == Self.hex(v["tag"]), "\(v["source"] ?? "")")
            #expect(eax.open(ciphertext, nonce: Self.hex(v["nonce"]), header: Self.hex(v["header"]), tag: tag) == Self.hex(v["plaintext"]))
            var forged = tag
            forged[0] ^= 1
            #expect(eax.open(ciphertext, nonce: Self.hex(v["nonce"]), header: Self.hex(v["header"]), tag: forged) == nil)
        }
    }

    // MARK: - RSA-AES

    private func serverPreamble(type: UInt8) -> [UInt8] { Array("RFB 003.008\n".utf8) + [1, type] }

    private func steps(_ case_: [String: Any]) -> [[String: Any]] { case_["steps"] as! [[String: Any]] }

    /// Drives a connection through one recorded RSA-AES login and checks every byte it sends.
    private func runTranscript(_ name: String, failing: Bool = false) throws {
        let c = Self.vectors[name] as! [String: Any]
        let type = UInt8(c["securityType"] as! Int)
        let steps = steps(c)
        let clientKey = c["clientKey"] as! [String: Any]
        let padding = Self.hex(steps[2]["pkcs1PaddingString"])
        let random = ScriptedRandom([Self.hex(c["clientRandom"]), padding])
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.ra2_256, .ra2, .ra2ne_256, .ra2ne]
        configuration.rsaClientKey = try RSAAES.ClientKey(_RSA.Encryption.PrivateKey(derRepresentation: Self.hex(clientKey["privateKeyPKCS1DER"])))
        configuration.randomBytes = { random.take($0) }
        var h = Harness(configuration: configuration)

        h.feed(serverPreamble(type: type))
        #expect(h.sent == [Array("RFB 003.008\n".utf8), [type]])
        h.actions = []
        h.feed(Self.hex(steps[0]["bytes"]))
        let checks = h.actions.compactMap { if case .verifyServerKey(let k) = $0 { k } else { nil } }
        #expect(checks.map(\.blob) == [Self.hex((c["serverKey"] as! [String: Any])["publicKeyBlob"])])
        h.actions = h.connection.serverKeyVerified()
        #expect(h.sent == [Self.hex(steps[1]["bytes"]) + Self.hex(steps[2]["bytes"])], "client key and random")
        h.actions = []
        h.feed(Self.hex(steps[3]["bytes"]))
        #expect(h.sent == [Self.hex(steps[5]["bytes"])], "client hash frame")
        h.actions = []
        // The server's hash and subtype frames, arriving in one piece.
        h.feed(Self.hex(steps[4]["bytes"]) + Self.hex(steps[6]["bytes"]))
        let requests = h.actions.compactMap { if case .requestCredentials(let r) = $0 { r } else { nil } }
        #expect(requests.map(\.needsUsername) == [c["subtype"] as! Int == 1])
        h.actions = h.connection.provideCredentials(VNCCredentials(username: c["username"] as? String, password: c["password"] as! String))
        #expect(h.sent == [Self.hex(steps[7]["bytes"])], "credentials frame")
        h.actions = []
        if failing {
            let failure = c["failureVariant"] as! [String: Any]
            h.feed(Self.hex(failure["bytes"]))
            #expect(h.closeError == .authenticationFailed(reason: "Authentication failed"))
            return
        }
        h.feed(Self.hex(steps[8]["bytes"]))      // SecurityResult OK
        #expect(h.sent == [Self.hex(steps[9]["bytes"])], "ClientInit")
        h.actions = []
        h.feed(Self.hex(steps[10]["bytes"]))     // ServerInit
        #expect(h.connection.isReady == true)
        #expect(h.connection.framebuffer.width == 1024 && h.connection.framebuffer.height == 768)
        #expect(h.connection.serverInfo?.security == [5: "RA2", 6: "RA2ne", 129: "RA2_256", 130: "RA2ne_256"][type])
        if c["allEncrypted"] as! Bool {
            // Everything we send now is framed: SetPixelFormat, SetEncodings, the first request.
            #expect(h.sent.allSatisfy { $0.count >= 18 && Int($0[0]) << 8 | Int($0[1]) == $0.count - 18 })
            // A FramebufferUpdate split across two frames decodes.
            h.actions = []
            h.feed(Self.hex(steps[13]["bytes"]) + Self.hex(steps[14]["bytes"]))
            #expect(h.updatesCompleted == 1)
            #expect(h.closeError == nil)
        } else {
            #expect(h.sent.first == ClientMessage.setPixelFormat(.rgb888).encoded(), "the ne types send plain after the login")
        }
    }

    @Test(arguments: ["ra2", "ra2PasswordOnly", "ra2ne", "ra2_256", "ra2ne_256"])
    func rsaAESLoginMatchesTheRecordedTranscript(name: String) throws {
        try runTranscript(name)
    }

    @Test func rsaAESFailureCarriesTheServersReason() throws {
        try runTranscript("ra2", failing: true)
    }

    /// The server's random, its hash and subtype frames in one read: the record-layer stage must
    /// open the bytes that were already buffered when the keys were agreed. Then the result and
    /// ServerInit in one read, which the ne types send in plain text and RA2 in frames.
    @Test(arguments: ["ra2", "ra2ne", "ra2_256", "ra2ne_256"])
    func rsaAESBytesBufferedWhenKeysAreAgreedAreOpened(name: String) throws {
        let c = Self.vectors[name] as! [String: Any]
        let type = UInt8(c["securityType"] as! Int)
        let steps = steps(c)
        let random = ScriptedRandom([Self.hex(c["clientRandom"]), Self.hex(steps[2]["pkcs1PaddingString"])])
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.ra2_256, .ra2, .ra2ne_256, .ra2ne]
        configuration.rsaClientKey = try RSAAES.ClientKey(_RSA.Encryption.PrivateKey(derRepresentation: Self.hex((c["clientKey"] as! [String: Any])["privateKeyPKCS1DER"])))
        configuration.randomBytes = { random.take($0) }
        var h = Harness(configuration: configuration)
        h.feed(serverPreamble(type: type) + Self.hex(steps[0]["bytes"]))
        h.actions = h.connection.serverKeyVerified()
        h.actions = []
        h.feed(Self.hex(steps[3]["bytes"]) + Self.hex(steps[4]["bytes"]) + Self.hex(steps[6]["bytes"]))
        #expect(h.sent == [Self.hex(steps[5]["bytes"])], "client hash frame")
        let requests = h.actions.compactMap { if case .requestCredentials(let r) = $0 { r } else { nil } }
        #expect(requests.map(\.needsUsername) == [c["subtype"] as! Int == 1])
        h.actions = h.connection.provideCredentials(VNCCredentials(username: c["username"] as? String, password: c["password"] as! String))
        #expect(h.sent == [Self.hex(steps[7]["bytes"])], "credentials frame")
        h.actions = []
        h.feed(Self.hex(steps[8]["bytes"]) + Self.hex(steps[10]["bytes"]))
        #expect(h.closeError == nil)
        #expect(h.sent.first == Self.hex(steps[9]["bytes"]), "ClientInit")
        #expect(h.connection.isReady == true)
        #expect(h.connection.framebuffer.width == 1024 && h.connection.framebuffer.height == 768)
    }

    @Test func rsaAESRejectsATamperedFrameAndAWrongServerHash() throws {
        let c = Self.vectors["ra2"] as! [String: Any]
        let steps = steps(c)
        for tamper in [4, 6] {
            let random = ScriptedRandom([Self.hex(c["clientRandom"]), Self.hex(steps[2]["pkcs1PaddingString"])])
            var configuration = RFBConnection.Configuration()
            configuration.securityPreference = [.ra2]
            configuration.rsaClientKey = try RSAAES.ClientKey(_RSA.Encryption.PrivateKey(derRepresentation: Self.hex((c["clientKey"] as! [String: Any])["privateKeyPKCS1DER"])))
            configuration.randomBytes = { random.take($0) }
            var h = Harness(configuration: configuration)
            h.feed(serverPreamble(type: 5) + Self.hex(steps[0]["bytes"]))
            h.actions = h.connection.serverKeyVerified()
            h.feed(Self.hex(steps[3]["bytes"]))
            var frame = Self.hex(steps[tamper]["bytes"])
            frame[4] ^= 0x40
            h.feed(tamper == 6 ? Self.hex(steps[4]["bytes"]) + frame : frame)
            #expect(h.closeError != nil, "tampered frame \(tamper)")
        }
    }

    @Test func rsaAESRefusesKeysOutsideTheAllowedSizes() {
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.ra2]
        var h = Harness(configuration: configuration)
        h.feed(serverPreamble(type: 5) + [0, 0, 2, 0])    // 512 bits
        #expect(h.closeError == .protocolViolation("the server's RSA key has 512 bits (1024–8192 accepted)"))
        var big = Harness(configuration: configuration)
        big.feed(serverPreamble(type: 5) + [0, 1, 0, 0])  // 65536 bits: refused before waiting for 16 KiB
        #expect(big.closeError != nil)
    }

    @Test func recordLayerSplitsLargeMessagesAndReadsThemBack() {
        var client = RA2RecordLayer(clientToServerKey: [UInt8](repeating: 7, count: 16), serverToClientKey: [UInt8](repeating: 9, count: 16))
        var server = RA2RecordLayer(clientToServerKey: [UInt8](repeating: 9, count: 16), serverToClientKey: [UInt8](repeating: 7, count: 16))
        let message = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 * 31) }
        let framed = client.seal(message)
        #expect(framed.count == message.count + 3 * 18, "8192 + 8192 + 3616 bytes in three frames")
        var received: [UInt8] = []
        for chunk in stride(from: 0, to: framed.count, by: 777) {
            received += try! server.open(framed[chunk..<min(chunk + 777, framed.count)])
        }
        #expect(received == message)
    }

    // MARK: - Apple Remote Desktop and MS-Logon II

    @Test func appleDHMatchesTheVectorsIncludingLeadingZeros() throws {
        for v in Self.vectors["ard"] as! [[String: Any]] {
            var reader = ByteReader(Self.hex(v["serverMessage"]))
            let parameters = try AppleDH.readParameters(&reader)
            let random = ScriptedRandom([Self.hex(v["clientPrivate"]), Self.hex(v["randomFill"])])
            let response = try AppleDH.response(parameters, username: v["username"] as! String, password: v["password"] as! String, random: random.take)
            #expect(response == Self.hex(v["clientMessage"]), "\(v["label"] ?? "")")
        }
    }

    @Test func msLogonIIMatchesTheVector() throws {
        let v = Self.vectors["msLogonII"] as! [String: Any]
        var reader = ByteReader(Self.hex(v["serverMessage"]))
        let parameters = try MSLogonII.readParameters(&reader)
        let random = ScriptedRandom([Self.hex(v["clientPrivate"]), Self.hex(v["usernameBlock"]), Self.hex(v["passwordBlock"])])
        let response = try MSLogonII.response(parameters, username: v["username"] as! String, password: v["password"] as! String, random: random.take)
        #expect(response == Self.hex(v["clientMessage"]))
    }

    @Test func diffieHellmanLoginsRunThroughTheConnection() throws {
        let ard = (Self.vectors["ard"] as! [[String: Any]])[0]
        let random = ScriptedRandom([Self.hex(ard["clientPrivate"]), Self.hex(ard["randomFill"])])
        var configuration = RFBConnection.Configuration()
        configuration.securityPreference = [.appleDH]
        configuration.randomBytes = { random.take($0) }
        var h = Harness(configuration: configuration)
        h.feed(serverPreamble(type: 30) + Self.hex(ard["serverMessage"]))
        #expect(h.actions.contains { if case .requestCredentials(let r) = $0 { r.needsUsername && r.method == .appleDH } else { false } })
        h.actions = h.connection.provideCredentials(VNCCredentials(username: "ann", password: "secret12"))
        #expect(h.sent == [Self.hex(ard["clientMessage"])])
        h.feed([0, 0, 0, 1, 0, 0, 0, 6] + Array("denied".utf8))
        #expect(h.closeError == .authenticationFailed(reason: "denied"))

        // MS-Logon II is never chosen unless listed.
        var quiet = Harness()
        quiet.feed(serverPreamble(type: 113))
        #expect(quiet.closeError != nil)
    }

    @Test func longCredentialsAreTypedErrors() throws {
        let ard = (Self.vectors["ard"] as! [[String: Any]])[0]
        var reader = ByteReader(Self.hex(ard["serverMessage"]))
        let parameters = try AppleDH.readParameters(&reader)
        #expect(throws: RFBError.self) {
            _ = try AppleDH.response(parameters, username: String(repeating: "u", count: 64), password: "x", random: { [UInt8](repeating: 1, count: $0) })
        }
        #expect(throws: RFBError.self) { _ = try RSAAES.credentials(username: nil, password: String(repeating: "p", count: 256)) }
    }
}
