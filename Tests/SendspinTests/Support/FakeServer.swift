import Crypto
import Foundation
@testable import Sendspin

/// The server side of Noise_KKpsk2 (the initiator), written independently of the client's
/// responder from the Noise specification, to drive `SendspinSession` in unit tests.
/// Real-server behaviour is covered by the integration tests against aiosendspin.
struct NoiseInitiator {
    var state: NoiseSymmetricState
    let localStatic: Curve25519.KeyAgreement.PrivateKey
    let remoteStatic: Curve25519.KeyAgreement.PublicKey
    let ephemeral = Curve25519.KeyAgreement.PrivateKey()

    init(suite: NoiseSuite, localStatic: Curve25519.KeyAgreement.PrivateKey, remoteStatic: Curve25519.KeyAgreement.PublicKey, prologue: [UInt8]) {
        self.localStatic = localStatic
        self.remoteStatic = remoteStatic
        state = NoiseSymmetricState(suite: suite)
        state.mixHash(prologue)
        state.mixHash(Array(localStatic.publicKey.rawRepresentation))
        state.mixHash(Array(remoteStatic.rawRepresentation))
    }

    static func dh(_ a: Curve25519.KeyAgreement.PrivateKey, _ b: Curve25519.KeyAgreement.PublicKey) -> [UInt8] {
        try! a.sharedSecretFromKeyAgreement(with: b).withUnsafeBytes { Array($0) }
    }

    mutating func writeMessage1(payload: [UInt8]) -> [UInt8] {
        let e = Array(ephemeral.publicKey.rawRepresentation)
        state.mixHash(e)
        state.mixKey(e)
        state.mixKey(Self.dh(ephemeral, remoteStatic))    // es
        state.mixKey(Self.dh(localStatic, remoteStatic))  // ss
        return e + (try! state.encryptAndHash(payload))
    }

    mutating func readMessage2(_ message: [UInt8], psk: [UInt8]) throws -> [UInt8] {
        let re = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: message[0..<32])
        state.mixHash(Array(message[0..<32]))
        state.mixKey(Array(message[0..<32]))
        state.mixKey(Self.dh(ephemeral, re))              // ee
        state.mixKey(Self.dh(localStatic, re))            // se
        state.mixKeyAndHash(psk)
        return try state.decryptAndHash(Array(message[32...]))
    }
}

/// A scripted Sendspin server for one session: it answers the handshake and then sends
/// whatever the test asks for, encrypted and framed like a real server.
struct FakeServer {
    let identity = Curve25519.KeyAgreement.PrivateKey()
    var send: NoiseCipherState?
    var receive: NoiseCipherState?
    var suite: NoiseSuite = .chaChaPoly
    var serverInitText = ""

    var serverID: String { Base64URL.encode(Array(identity.publicKey.rawRepresentation)) }

    /// Runs the handshake against `session`; returns the actions the session produced.
    mutating func handshake(_ session: inout SendspinSession, pskCategory: String = "sn",
                            pskID: String = SendspinPSK.identifier(of: SendspinPSK.sentinel)) throws -> [SendspinSession.Action] {
        guard case .sendText(let clientInit)? = session.start().first else { throw TestFailure("no client/init") }
        let initPayload = try JSONDecoder().decode(IncomingEnvelope<ClientInit>.self, from: Data(clientInit.utf8)).payload
        suite = NoiseSuite(rawValue: initPayload.suite)!
        let clientKey = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: Base64URL.decode(initPayload.clientID)!)
        serverInitText = #"{"payload":{"server_id":"\#(serverID)","version":1},"type":"server/init"}"#
        var initiator = NoiseInitiator(suite: suite, localStatic: identity, remoteStatic: clientKey,
                                       prologue: Array(clientInit.utf8) + Array(serverInitText.utf8))
        let message1 = initiator.writeMessage1(payload: Array(#"{"psk_id":"\#(pskID)","psk_category":"\#(pskCategory)"}"#.utf8))
        var actions = session.receive(.text(serverInitText), at: 1)
        actions += session.receive(.text(#"{"payload":{"data":"\#(Base64URL.encode(message1))"},"type":"noise/handshake"}"#), at: 2)
        guard let reply = actions.compactMap({ if case .sendText(let t) = $0 { return t } else { return nil } }).first else {
            throw TestFailure("no message 2; actions: \(actions)")
        }
        let data = try JSONDecoder().decode(IncomingEnvelope<HandshakePayload>.self, from: Data(reply.utf8)).payload.data
        let payload = try initiator.readMessage2(Base64URL.decode(data)!, psk: SendspinPSK.sentinel)
        guard payload == Array("{}".utf8) else { throw TestFailure("message 2 payload \(payload)") }
        let (i2r, r2i) = initiator.state.split()
        send = i2r
        receive = r2i
        return actions
    }

    /// One encrypted transport message carrying `plaintext`.
    mutating func seal(_ plaintext: [UInt8]) -> [UInt8] { try! send!.encrypt(plaintext) }

    /// A JSON message, framed (fragmented if large) and encrypted.
    mutating func json(_ text: String) -> [[UInt8]] {
        SendspinFraming.plaintexts(type: 0, body: Array(text.utf8)).map { seal($0) }
    }

    mutating func audio(timestamp: Int64, payload: [UInt8], sendAhead: UInt32 = 250_000) -> [UInt8] {
        var header: [UInt8] = [4]
        withUnsafeBytes(of: timestamp.bigEndian) { header += $0 }
        withUnsafeBytes(of: sendAhead.bigEndian) { header += $0 }
        return seal(header + payload)
    }

    /// Decrypts one message the client sent (its plaintext, type byte first).
    mutating func open(_ bytes: [UInt8]) throws -> [UInt8] { try receive!.decrypt(bytes) }

    /// Decrypts what the client sent and returns its JSON texts (type 0).
    mutating func openJSON(_ actions: [SendspinSession.Action]) throws -> [String] {
        var texts: [String] = []
        for case .sendBinary(let bytes) in actions {
            let plaintext = try receive!.decrypt(bytes)
            if plaintext.first == 0 { texts.append(String(decoding: plaintext.dropFirst(), as: UTF8.self)) }
        }
        return texts
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

extension Array where Element == SendspinSession.Action {
    var events: [SendspinEvent] { compactMap { if case .event(let e) = $0 { return e } else { return nil } } }
    var closeReason: SendspinError?? {
        for case .close(let e) in self { return .some(e) }
        return nil
    }
}
