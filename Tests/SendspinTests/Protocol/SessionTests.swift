import Crypto
import Foundation
@testable import Sendspin
import Testing

/// The session state machine against a scripted server: handshake, hello and activation,
/// message handling, framing, and every kind of bad input.
@Suite struct SessionTests {
    static func makeSession(unpaired: Bool = true, suite: NoiseSuite = .chaChaPoly, artwork: [ArtworkChannel] = [],
                            configure: (inout SendspinSession.Configuration) -> Void = { _ in }) -> SendspinSession {
        var configuration = SendspinSession.Configuration(name: "Test Player", formats: [AudioFormatSpec(codec: "pcm", channels: 2, sampleRate: 48000, bitDepth: 16)])
        configuration.unpairedAccess = unpaired
        configuration.suite = suite
        if !artwork.isEmpty {
            configuration.roles.append("artwork@v1")
            configuration.artworkChannels = artwork
        }
        configure(&configuration)
        return SendspinSession(configuration: configuration, identity: Curve25519.KeyAgreement.PrivateKey())
    }

    /// Handshake, hello and activation for playback.
    static func activeSession(artwork: [ArtworkChannel] = [], configure: (inout SendspinSession.Configuration) -> Void = { _ in }) throws -> (SendspinSession, FakeServer) {
        var session = makeSession(artwork: artwork, configure: configure)
        var server = FakeServer()
        _ = try server.handshake(&session)
        var actions: [SendspinSession.Action] = []
        for m in server.json(#"{"type":"server/hello","payload":{"name":"Fake"}}"#) { actions += session.receive(.binary(m), at: 3) }
        for m in server.json(#"{"type":"server/activate","payload":{"activities":["playback"],"active_roles":["player@v1"]}}"#) {
            actions += session.receive(.binary(m), at: 4)
        }
        guard session.isActive else { throw TestFailure("not active: \(actions)") }
        _ = try server.openJSON(actions)      // the client/hello, to keep the server's nonce in step
        return (session, server)
    }

    @Test(arguments: NoiseSuite.allCases)
    func handshakeHelloAndActivation(suite: NoiseSuite) throws {
        var session = Self.makeSession(suite: suite)
        var server = FakeServer()
        let handshake = try server.handshake(&session)
        #expect(handshake.events.contains(.handshakeComplete(serverID: server.serverID, pskCategory: "sn")))
        var actions: [SendspinSession.Action] = []
        for m in server.json(#"{"type":"server/hello","payload":{"name":"Fake","future_field":[1,2]}}"#) { actions += session.receive(.binary(m), at: 3) }
        #expect(actions.events == [.hello(ServerHello(name: "Fake", languages: nil))])
        let sent = try server.openJSON(actions)
        #expect(sent.count == 1)
        let hello = try JSONSerialization.jsonObject(with: Data(sent[0].utf8)) as! [String: Any]
        #expect(hello["type"] as? String == "client/hello")
        let payload = hello["payload"] as! [String: Any]
        #expect(payload["name"] as? String == "Test Player")
        #expect(payload["supported_roles"] as? [String] == ["player@v1", "metadata@v1", "controller@v1"])
        #expect((payload["unpaired_access"] as? [String: Any])?["enabled"] as? Bool == true)
        #expect((payload["supported_pair_methods"] as? [String: Any])?.keys.contains("pairing_psk") == true)
        let support = payload["player@v1_support"] as! [String: Any]
        #expect(support["buffer_capacity"] as? Int == 2_000_000)
        #expect(payload["client_id"] == nil && payload["version"] == nil, "ids travel only in client/init")
        #expect(support["supported_commands"] == nil, "supported_commands in hello marks a legacy client")

        actions = []
        for m in server.json(#"{"type":"server/activate","payload":{"activities":[],"active_roles":["player@v1","metadata@v1"]}}"#) {
            actions += session.receive(.binary(m), at: 4)
        }
        #expect(actions.events == [.activated(activities: [], roles: ["player@v1", "metadata@v1"])])
        // A later activation without active_roles keeps them.
        actions = []
        for m in server.json(#"{"type":"server/activate","payload":{"activities":["playback"]}}"#) { actions += session.receive(.binary(m), at: 5) }
        #expect(actions.events == [.activated(activities: ["playback"], roles: ["player@v1", "metadata@v1"])])
    }

    @Test func clientInitIsExactlyTheSpecifiedEnvelope() throws {
        var session = Self.makeSession()
        guard case .sendText(let text)? = session.start().first else { Issue.record("no client/init"); return }
        let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any]
        #expect(object["type"] as? String == "client/init")
        let payload = object["payload"] as! [String: Any]
        #expect(payload["version"] as? Int == 1)
        #expect(payload["suite"] as? String == "25519_ChaChaPoly_SHA256")
        #expect((payload["client_id"] as? String)?.count == 43)
        #expect(payload.count == 3)
    }

    @Test func serverErrorSurfacesTheReason() {
        var session = Self.makeSession()
        _ = session.start()
        let actions = session.receive(.text(#"{"payload":{"reason":"unsupported_suite"},"type":"server/error"}"#), at: 1)
        #expect(actions.closeReason == .some(.serverRefused(reason: "unsupported_suite")))
    }

    @Test func serverTimeStreamAudioAndState() throws {
        var (session, server) = try Self.activeSession()
        var actions = session.receive(.binary(server.json(#"{"type":"server/time","payload":{"client_transmitted":100,"server_received":250,"server_transmitted":260}}"#)[0]), at: 400)
        #expect(actions.events == [.serverTime(ServerTime(clientTransmitted: 100, serverReceived: 250, serverTransmitted: 260), receivedAt: 400)])
        actions = session.receive(.binary(server.json(#"{"type":"stream/start","payload":{"server_transmitted":5,"player":{"codec":"pcm","sample_rate":48000,"channels":2,"bit_depth":16}}}"#)[0]), at: 500)
        #expect(actions.events == [.streamStart(StreamFormat(codec: "pcm", sampleRate: 48000, channels: 2, bitDepth: 16))])
        actions = session.receive(.binary(server.audio(timestamp: 1_234_567, payload: [1, 2, 3, 4], sendAhead: 99)), at: 600)
        #expect(actions.events == [.audioChunk(AudioChunk(timestamp: 1_234_567, sendAhead: 99, payload: [1, 2, 3, 4], arrival: 600))])
        actions = session.receive(.binary(server.json(#"{"type":"server/state","payload":{"metadata":{"timestamp":1000000,"title":"Song","artist":"Band","progress":{"track_progress":1000,"track_duration":60000,"playback_speed":1000}},"controller":{"supported_commands":["next"],"volume":40,"muted":false}}}"#)[0]), at: 700)
        #expect(actions.events.count == 2)
        if case .metadata(let metadata) = actions.events.first {
            #expect(metadata.title == "Song")
            // 2.5 s later at normal speed: 1000 ms + 2500 ms.
            #expect(metadata.position(atServerTime: 3_500_000) == 3500)
        }
        actions = session.receive(.binary(server.json(#"{"type":"server/command","payload":{"player":{"command":"set_output_delay","output_delay_ms":120}}}"#)[0]), at: 800)
        #expect(actions.events == [.playerCommand(PlayerCommand(command: "set_output_delay", volume: nil, mute: nil, outputDelayMs: 120))])
        actions = session.receive(.binary(server.json(#"{"type":"stream/clear","payload":{"roles":["player"]}}"#)[0]), at: 900)
        actions += session.receive(.binary(server.json(#"{"type":"stream/end","payload":{}}"#)[0]), at: 901)
        #expect(actions.events == [.streamClear, .streamEnd])
    }

    @Test func clientMessagesAreEncryptedAndWellFormed() throws {
        var (session, server) = try Self.activeSession()
        let player = PlayerStateReport(volume: 50, muted: false, outputDelayMs: 0, requiredLeadTimeMs: 250, minBufferMs: 250,
                                       supportedCommands: ["volume"], format: nil)
        let texts = try server.openJSON(session.sendTime(at: 42) + session.sendState(available: true, player: player)
            + session.sendCommand(ControllerCommand(command: "next")))
        #expect(texts.count == 3)
        let time = try JSONSerialization.jsonObject(with: Data(texts[0].utf8)) as! [String: Any]
        #expect(time["type"] as? String == "client/time")
        #expect((time["payload"] as? [String: Any])?["client_transmitted"] as? Int == 42)
        let state = try JSONSerialization.jsonObject(with: Data(texts[1].utf8)) as! [String: Any]
        let statePayload = state["payload"] as! [String: Any]
        #expect(statePayload["available"] as? Bool == true)
        let playerObject = statePayload["player"] as! [String: Any]
        #expect(Set(playerObject.keys) == ["volume", "muted", "output_delay_ms", "required_lead_time_ms", "min_buffer_ms", "supported_commands"])
        #expect(texts[2].contains(#""command":"next""#))
        let goodbye = session.goodbye(reason: "shutdown")
        #expect(try server.openJSON(goodbye).first?.contains(#""reason":"shutdown""#) == true)
        #expect(goodbye.closeReason == .some(nil))
    }

    @Test func unknownMessagesAreReportedOnceAndTolerated() throws {
        var (session, server) = try Self.activeSession()
        var actions: [SendspinSession.Action] = []
        for _ in 0..<3 { actions += session.receive(.binary(server.json(#"{"type":"server/shiny","payload":{}}"#)[0]), at: 10) }
        actions += session.receive(.binary(server.seal([200, 1, 2])), at: 11)
        #expect(actions.events == [.unknownMessage("server/shiny"), .unknownMessage("binary type 200")])
        #expect(session.isActive)
    }

    @Test func fragmentedMessagesAreReassembled() throws {
        var (session, server) = try Self.activeSession()
        let title = String(repeating: "x", count: 150_000)
        let frames = server.json(#"{"type":"server/state","payload":{"metadata":{"title":"\#(title)"}}}"#)
        #expect(frames.count == 3)
        var actions: [SendspinSession.Action] = []
        for f in frames { actions += session.receive(.binary(f), at: 1) }
        guard case .metadata(let m)? = actions.events.first else { Issue.record("no metadata: \(actions)"); return }
        #expect(m.title?.count == 150_000)
    }

    @Test func framingViolationsClose() throws {
        let cases: [([UInt8], String)] = [
            ([1, 0x01, 7], "continuation"),                 // continuation with nothing in flight
            ([1, 0x06, 0, 1], "reserved"),                  // reserved flag bit
            ([1, 0x02, 1, 9], "'fragment'"),                // orig_type 1
            ([], "empty"),
        ]
        for (plaintext, expected) in cases {
            var (session, server) = try Self.activeSession()
            let actions = session.receive(.binary(server.seal(plaintext)), at: 1)
            guard case .some(.some(.protocolViolation(let detail))) = actions.closeReason else {
                Issue.record("\(plaintext): expected a protocol violation, got \(actions)")
                continue
            }
            #expect(detail.contains(expected), "\(detail)")
        }
        // A new message while a fragmented one is unfinished.
        var (session, server) = try Self.activeSession()
        _ = session.receive(.binary(server.seal([1, 0x02, 0] + Array("{\"type\":".utf8))), at: 1)
        let actions = session.receive(.binary(server.seal([0] + Array("{}".utf8))), at: 2)
        guard case .some(.some(.protocolViolation)) = actions.closeReason else { Issue.record("expected a violation: \(actions)"); return }
    }

    @Test func tamperedCiphertextAndCleartextAfterHandshakeClose() throws {
        var (session, server) = try Self.activeSession()
        var bad = server.json(#"{"type":"server/time","payload":{}}"#)[0]
        bad[3] ^= 0x40
        #expect(session.receive(.binary(bad), at: 1).closeReason == .some(.decryptionFailed))
        var (other, _) = try Self.activeSession()
        let actions = other.receive(.text(#"{"type":"server/hello","payload":{"name":"x"}}"#), at: 1)
        guard case .some(.some(.protocolViolation)) = actions.closeReason else { Issue.record("cleartext accepted: \(actions)"); return }
    }

    @Test func malformedJSONAndBadFieldsClose() throws {
        var (session, server) = try Self.activeSession()
        let actions = session.receive(.binary(server.seal([0] + Array("{not json".utf8))), at: 1)
        guard case .some(.some(.protocolViolation)) = actions.closeReason else { Issue.record("expected a violation: \(actions)"); return }
        var (second, server2) = try Self.activeSession()
        let missing = second.receive(.binary(server2.json(#"{"type":"server/time","payload":{"client_transmitted":"soon"}}"#)[0]), at: 1)
        guard case .some(.some(.protocolViolation(let detail))) = missing.closeReason else { Issue.record("expected a violation: \(missing)"); return }
        #expect(detail.contains("ServerTime"))
    }

    @Test func shortAudioIsDroppedNotFatal() throws {
        var (session, server) = try Self.activeSession()
        let actions = session.receive(.binary(server.seal([4, 0, 0, 1])), at: 1)
        guard case .malformedAudio? = actions.events.first else { Issue.record("expected malformedAudio: \(actions)"); return }
        #expect(session.isActive)
    }

    @Test func failingNoiseMessageOneClosesSilently() throws {
        var session = Self.makeSession()
        let server = FakeServer()
        _ = session.start()
        _ = session.receive(.text(#"{"payload":{"server_id":"\#(server.serverID)","version":1},"type":"server/init"}"#), at: 1)
        let junk = Base64URL.encode([UInt8](repeating: 9, count: 124))
        let actions = session.receive(.text(#"{"payload":{"data":"\#(junk)"},"type":"noise/handshake"}"#), at: 2)
        guard case .some(.some(.handshakeFailed)) = actions.closeReason else { Issue.record("expected handshakeFailed: \(actions)"); return }
        #expect(!actions.contains { if case .sendText = $0 { return true } else { return false } }, "handshake failures are silent")
    }

    @Test func wrongSentinelReferenceAndUnknownCategoryFail() throws {
        var session = Self.makeSession()
        var server = FakeServer()
        #expect(throws: TestFailure.self) { try server.handshake(&session, pskCategory: "sn", pskID: "AAAA") }
        var other = Self.makeSession()
        var server2 = FakeServer()
        #expect(throws: TestFailure.self) { try server2.handshake(&other, pskCategory: "zz") }
    }

    @Test func playbackWithoutUnpairedAccessSaysPairingRequired() throws {
        var session = Self.makeSession(unpaired: false)
        var server = FakeServer()
        _ = try server.handshake(&session)
        _ = try server.openJSON(session.receive(.binary(server.json(#"{"type":"server/hello","payload":{"name":"Fake"}}"#)[0]), at: 3))
        let actions = session.receive(.binary(server.json(#"{"type":"server/activate","payload":{"activities":["playback"],"active_roles":["player@v1"]}}"#)[0]), at: 4)
        #expect(try server.openJSON(actions).first?.contains("pairing_required") == true)
        #expect(actions.closeReason == .some(.notAdmitted(goodbyeReason: "pairing_required",
                                                           detail: "the server wants playback but unpaired access is off; pair this player first")))
    }

    @Test func aRehandshakeRotatesTheKeys() throws {
        var (session, server) = try Self.activeSession()
        // The server starts a new handshake under the current keys, prologue = previous h.
        let clientKey = try Curve25519.KeyAgreement.PublicKey(rawRepresentation: Base64URL.decode(session.clientID)!)
        var initiator = NoiseInitiator(suite: .chaChaPoly, localStatic: server.identity, remoteStatic: clientKey,
                                       prologue: sessionHandshakeHash(session))
        let message1 = initiator.writeMessage1(payload: Array(#"{"psk_id":"\#(SendspinPSK.identifier(of: SendspinPSK.sentinel))","psk_category":"sn"}"#.utf8))
        let actions = session.receive(.binary(server.json(#"{"type":"noise/handshake","payload":{"data":"\#(Base64URL.encode(message1))"}}"#)[0]), at: 5)
        let reply = try server.openJSON(actions)
        #expect(reply.count == 1)
        let data = try JSONDecoder().decode(IncomingEnvelope<HandshakePayload>.self, from: Data(reply[0].utf8)).payload.data
        _ = try initiator.readMessage2(Base64URL.decode(data)!, psk: SendspinPSK.sentinel)
        let (send, receive) = initiator.state.split()
        server.send = send
        server.receive = receive
        // The first message under the new keys (server/activate) is understood.
        let after = session.receive(.binary(server.json(#"{"type":"server/activate","payload":{"activities":["playback"]}}"#)[0]), at: 6)
        #expect(after.events.dropFirst() == [.activated(activities: ["playback"], roles: ["player@v1"])])
        #expect(after.events.first.map { if case .handshakeComplete(_, "sn") = $0 { true } else { false } } == true, "the re-handshake reports its completion")
        #expect(try server.openJSON(session.sendTime(at: 7)).count == 1)
    }

    private func sessionHandshakeHash(_ session: SendspinSession) -> [UInt8] {
        session.handshakeHash ?? []
    }
}
