import Crypto
import Foundation
@testable import Sendspin
import Testing

/// Known-answer tests against vectors made with Python's `noiseprotocol` 0.3.1 in the roles
/// aiosendspin 10.2.1 plays (scripts/vectors/make_noise_vectors.py → Fixtures/noise-vectors.json).
@Suite struct NoiseTests {
    struct Vectors: Decodable {
        struct PSKVector: Decodable { var psk_hex: String; var psk_id: String }
        struct PSKSection: Decodable { var vectors: [PSKVector] }
        struct Keys: Decodable {
            var server_static_public_hex: String
            var client_static_private_hex: String
            var client_static_public_hex: String
            var client_ephemeral_private_hex: String
            var client_id: String
            var server_id: String
        }
        struct Prologue: Decodable { var client_init_text: String; var server_init_text: String }
        struct Handshake: Decodable {
            var msg1_payload_text: String
            var msg1_hex: String
            var msg2_hex: String
            var handshake_hash_hex: String
        }
        struct TransportMessage: Decodable { var nonce: Int; var plaintext_hex: String; var ciphertext_hex: String }
        struct Transport: Decodable { var server_to_client: [TransportMessage]; var client_to_server: [TransportMessage] }
        struct Suite: Decodable {
            var suite: String
            var keys: Keys
            var psk_hex: String
            var prologue: Prologue
            var handshake: Handshake
            var transport: Transport
        }
        var psk_id: PSKSection
        var suites: [Suite]
    }

    static let vectors: Vectors = {
        let url = Bundle.module.resourceURL!.appendingPathComponent("Fixtures/noise-vectors.json")
        return try! JSONDecoder().decode(Vectors.self, from: Data(contentsOf: url))
    }()

    static func hex(_ s: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = s.startIndex
        while i < s.endIndex {
            let j = s.index(i, offsetBy: 2)
            out.append(UInt8(s[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    @Test(arguments: NoiseSuite.allCases)
    func responderReproducesTheHandshakeAndTransportByteForByte(suite: NoiseSuite) throws {
        let v = Self.vectors.suites.first { $0.suite == suite.rawValue }!
        let clientStatic = try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: Self.hex(v.keys.client_static_private_hex))
        #expect(Array(clientStatic.publicKey.rawRepresentation) == Self.hex(v.keys.client_static_public_hex))
        #expect(Base64URL.encode(Array(clientStatic.publicKey.rawRepresentation)) == v.keys.client_id)
        let serverStatic = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: Self.hex(v.keys.server_static_public_hex))
        #expect(Base64URL.decode(v.keys.server_id) == Self.hex(v.keys.server_static_public_hex))
        let prologue = Array(v.prologue.client_init_text.utf8) + Array(v.prologue.server_init_text.utf8)
        var responder = NoiseKKpsk2Responder(
            suite: suite, localStatic: clientStatic, remoteStatic: serverStatic, prologue: prologue,
            ephemeral: try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: Self.hex(v.keys.client_ephemeral_private_hex)))
        let payload = try responder.readMessage1(Self.hex(v.handshake.msg1_hex))
        #expect(String(decoding: payload, as: UTF8.self) == v.handshake.msg1_payload_text)
        let msg2 = try responder.writeMessage2(payload: Array("{}".utf8), psk: Self.hex(v.psk_hex))
        #expect(msg2 == Self.hex(v.handshake.msg2_hex))
        #expect(msg2.count == 50)
        #expect(responder.handshakeHash == Self.hex(v.handshake.handshake_hash_hex))
        var (receive, send) = responder.split()
        for m in v.transport.server_to_client {
            #expect(receive.nonce == UInt64(m.nonce))
            #expect(try receive.decrypt(Self.hex(m.ciphertext_hex)) == Self.hex(m.plaintext_hex))
        }
        for m in v.transport.client_to_server {
            #expect(send.nonce == UInt64(m.nonce))
            #expect(try send.encrypt(Self.hex(m.plaintext_hex)) == Self.hex(m.ciphertext_hex))
        }
    }

    @Test func protocolNamesAndInitialHash() {
        // The AES-GCM name is exactly 32 bytes and used as h unhashed; ChaChaPoly's is hashed.
        #expect(NoiseSuite.aesGCM.protocolName.utf8.count == 32)
        #expect(NoiseSymmetricState(suite: .aesGCM).hash == Array(NoiseSuite.aesGCM.protocolName.utf8))
        #expect(NoiseSymmetricState(suite: .chaChaPoly).hash == Array(SHA256.hash(data: Array(NoiseSuite.chaChaPoly.protocolName.utf8))))
    }

    @Test func tamperedAndWrongPSKMessagesFailAuthentication() throws {
        let v = Self.vectors.suites[0]
        let clientStatic = try Curve25519.KeyAgreement.PrivateKey(rawRepresentation: Self.hex(v.keys.client_static_private_hex))
        let serverStatic = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: Self.hex(v.keys.server_static_public_hex))
        let prologue = Array(v.prologue.client_init_text.utf8) + Array(v.prologue.server_init_text.utf8)
        var tampered = Self.hex(v.handshake.msg1_hex)
        tampered[40] ^= 1
        var responder = NoiseKKpsk2Responder(suite: .chaChaPoly, localStatic: clientStatic, remoteStatic: serverStatic, prologue: prologue)
        #expect(throws: NoiseError.decryptionFailed) { try responder.readMessage1(tampered) }
        // A different prologue (a re-serialised client/init) also breaks it.
        var wrongPrologue = NoiseKKpsk2Responder(suite: .chaChaPoly, localStatic: clientStatic, remoteStatic: serverStatic, prologue: prologue + [0x20])
        #expect(throws: NoiseError.decryptionFailed) { try wrongPrologue.readMessage1(Self.hex(v.handshake.msg1_hex)) }
        var short = NoiseKKpsk2Responder(suite: .chaChaPoly, localStatic: clientStatic, remoteStatic: serverStatic, prologue: prologue)
        #expect(throws: NoiseError.self) { try short.readMessage1([1, 2, 3]) }
    }

    @Test func pskIdentifiersMatchTheReference() {
        for vector in Self.vectors.psk_id.vectors {
            #expect(SendspinPSK.identifier(of: Self.hex(vector.psk_hex)) == vector.psk_id)
        }
        #expect(SendspinPSK.identifier(of: SendspinPSK.sentinel) == "GFsV9tLaSQm9HcFWpKsgYQOr7wFTvNUtkmFwuVz3zoo")
        #expect(SendspinPSK.identifier(of: Array(SHA256.hash(data: Array("5".utf8)))) == "-zraBRghtlU_WiGdO1hpDWL_x6ylHh3-WhFS5FM-FyA")
    }

    @Test func base64URLRoundTripsAndRejectsPaddingAndStandardAlphabet() {
        for n in 0..<40 {
            let bytes = (0..<n).map { UInt8(($0 * 37 + n) & 255) }
            #expect(Base64URL.decode(Base64URL.encode(bytes)) == bytes)
        }
        #expect(Base64URL.decode("ab+c") == nil)
        #expect(Base64URL.decode("abc=") == nil)
        #expect(Base64URL.decode("a") == nil)
        #expect(Base64URL.encode([0xFB, 0xFF]) == "-_8")
    }
}
