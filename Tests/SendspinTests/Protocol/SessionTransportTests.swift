import Crypto
import Foundation
@testable import Sendspin
import Testing

/// The established session's record layer through the session: a re-handshake's keys wait for
/// the server's first message under them, and nothing of ours leaves in between.
@Suite struct SessionTransportTests {
    @Test func duringARehandshakeNothingLeavesUntilTheServerSpeaksUnderTheNewKeys() throws {
        var (session, server) = try SessionTests.activeSession()
        let clientKey = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: try #require(Base64URL.decode(session.clientID)))
        var initiator = NoiseInitiator(suite: .chaChaPoly, localStatic: server.identity, remoteStatic: clientKey,
                                       prologue: try #require(session.handshakeHash))
        let message1 = initiator.writeMessage1(payload: Array(#"{"psk_id":"\#(SendspinPSK.identifier(of: SendspinPSK.sentinel))","psk_category":"sn"}"#.utf8))
        let answer = session.receive(.binary(server.json(#"{"type":"noise/handshake","payload":{"data":"\#(Base64URL.encode(message1))"}}"#)[0]), at: 5)
        let reply = try server.openJSON(answer)
        #expect(reply.count == 1, "message 2 leaves under the current keys")

        let time = session.sendTime(at: 6)
        let state = session.sendState(available: true, player: nil)
        let command = session.sendCommand(ControllerCommand(command: .next))
        #expect(time.isEmpty && state.isEmpty && command.isEmpty, "nothing leaves while the server switches keys")
        #expect(session.isActive)

        let data = try JSONDecoder().decode(IncomingEnvelope<HandshakePayload>.self, from: Data(reply[0].utf8)).payload.data
        _ = try initiator.readMessage2(try #require(Base64URL.decode(data)), psk: SendspinPSK.sentinel)
        (server.send, server.receive) = initiator.state.split()
        let first = session.receive(.binary(server.json(#"{"type":"server/time","payload":{"client_transmitted":1,"server_received":2,"server_transmitted":3}}"#)[0]), at: 7)
        #expect(first.events == [.handshakeComplete(serverID: server.serverID, pskCategory: .sentinel),
                                 .serverTime(ServerTime(clientTransmitted: 1, serverReceived: 2, serverTransmitted: 3), receivedAt: 7)])
        let sealed = session.sendTime(at: 8)
        #expect(try server.openJSON(sealed).first?.contains(#""client_transmitted":8"#) == true, "sealed under the new keys")
    }

    /// The user opens the pairing window while a static-code attempt is held and the server is
    /// re-keying: nothing may leave until the server speaks under the new keys (a pair-init
    /// sealed under the old ones would not decrypt there). Only the window opens; the pairing
    /// activation under the new keys then finds it open and starts the code exchange at once.
    @Test func thePairingWindowOpenedDuringARehandshakeSendsNothingUntilTheNewKeys() throws {
        var configuration = SendspinSession.Configuration(name: "Test Player", formats: [AudioFormatSpec(codec: "pcm", channels: 2, sampleRate: 48000, bitDepth: 16)])
        configuration.staticPairingCode = Array("12345678".utf8)
        var session = SendspinSession(configuration: configuration, identity: Curve25519.KeyAgreement.PrivateKey())
        var server = FakeServer()
        _ = try server.handshake(&session)
        _ = try server.openJSON(session.receive(.binary(server.json(#"{"type":"server/hello","payload":{"name":"Fake"}}"#)[0]), at: 3))
        let pairing = #"{"type":"server/activate","payload":{"activities":["pairing"],"pairing":{"method":"static_pairing_code"}}}"#
        let held = try server.openJSON(session.receive(.binary(server.json(pairing)[0]), at: 4))
        #expect(held.count == 1 && held[0].contains("client/pair-pending"), "\(held)")

        let clientKey = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: try #require(Base64URL.decode(session.clientID)))
        var initiator = NoiseInitiator(suite: .chaChaPoly, localStatic: server.identity, remoteStatic: clientKey,
                                       prologue: try #require(session.handshakeHash))
        let message1 = initiator.writeMessage1(payload: Array(#"{"psk_id":"\#(SendspinPSK.identifier(of: SendspinPSK.sentinel))","psk_category":"sn"}"#.utf8))
        let reply = try server.openJSON(session.receive(.binary(server.json(#"{"type":"noise/handshake","payload":{"data":"\#(Base64URL.encode(message1))"}}"#)[0]), at: 5))
        #expect(reply.count == 1, "message 2 leaves under the current keys")

        let opened = session.openPairingWindow(until: 1_000_000, now: 6)
        #expect(opened.isEmpty, "nothing leaves while the server switches keys: \(opened)")

        let data = try JSONDecoder().decode(IncomingEnvelope<HandshakePayload>.self, from: Data(reply[0].utf8)).payload.data
        _ = try initiator.readMessage2(try #require(Base64URL.decode(data)), psk: SendspinPSK.sentinel)
        (server.send, server.receive) = initiator.state.split()
        let started = try server.openJSON(session.receive(.binary(server.json(pairing)[0]), at: 7))
        #expect(started.count == 1 && started[0].contains("client/pair-init"), "the window was open: the code exchange starts at once (\(started))")
    }

    @Test func aMessageUnderNeitherKeyEndsTheSession() throws {
        var (session, _) = try SessionTests.activeSession()
        var stranger = FakeServer()
        var other = SessionTests.makeSession()
        _ = try stranger.handshake(&other)
        let actions = session.receive(.binary(stranger.json(#"{"type":"server/time","payload":{}}"#)[0]), at: 1)
        #expect(actions.closeReason == .some(.decryptionFailed))
        #expect(session.isClosed && session.sendTime(at: 2).isEmpty)
    }
}
