import Crypto
import Foundation
@testable import Sendspin
import Testing

/// The legacy wire in the session core, message by message (the real server is in
/// IntegrationTests/SendspinLegacyTests).
@Suite struct LegacySessionTests {
    static func session(encryptedServerIDs: Set<String> = []) -> SendspinSession {
        var configuration = SendspinSession.Configuration(name: "Old Friend", formats: [AudioFormatSpec(codec: "pcm", channels: 2, sampleRate: 48000, bitDepth: 16)])
        configuration.legacyWire = true
        configuration.legacyClientID = "legacy-1"
        configuration.encryptedServerIDs = encryptedServerIDs
        return SendspinSession(configuration: configuration, identity: Curve25519.KeyAgreement.PrivateKey())
    }

    static func texts(_ actions: [SendspinSession.Action]) -> [[String: Any]] {
        actions.compactMap { if case .sendText(let t) = $0 { try? JSONSerialization.jsonObject(with: Data(t.utf8)) as? [String: Any] } else { nil } }
    }

    static let hello = #"{"payload":{"server_id":"srv-1","name":"Old Server","version":1,"active_roles":["player@v1"],"connection_reason":"playback"},"type":"server/hello"}"#

    @Test func helloAndStateGoFirstInClearAndTheServersHelloActivates() throws {
        var s = Self.session()
        let first = Self.texts(s.start())
        #expect(first.map { $0["type"] as? String } == ["client/hello", "client/state"])
        let hello = try #require(first.first?["payload"] as? [String: Any])
        #expect(hello["client_id"] as? String == "legacy-1" && hello["version"] as? Int == 1)
        #expect(hello["supported_roles"] as? [String] == ["player@v1"])
        let support = try #require(hello["player@v1_support"] as? [String: Any])
        #expect(support["supported_commands"] as? [String] == ["volume", "mute"])
        let actions = s.receive(.text(Self.hello), at: 10)
        #expect(actions.contains(.event(.hello(ServerHello(name: "Old Server", languages: nil)))))
        #expect(actions.contains(.event(.activated(activities: ["playback"], roles: ["player@v1"]))))
        #expect(s.isActive && s.serverID == "srv-1")
        // State and time go out in clear; controller commands, unknown to such servers, not at all.
        let state = Self.texts(s.sendState(available: true, player: PlayerStateReport(volume: 40, muted: false, outputDelayMs: 12, requiredLeadTimeMs: 250,
                                                                                     minBufferMs: 250, supportedCommands: [], format: nil)))
        let payload = try #require(state.first?["payload"] as? [String: Any])
        #expect(payload["state"] as? String == "synchronized")
        #expect((payload["player"] as? [String: Any])?["static_delay_ms"] as? Int == 12)
        #expect(Self.texts(s.sendTime(at: 99)).first?["type"] as? String == "client/time")
        #expect(s.sendCommand(ControllerCommand(command: "next")).isEmpty)
    }

    @Test func audioHasANineByteHeader() {
        var s = Self.session()
        _ = s.start()
        _ = s.receive(.text(Self.hello), at: 10)
        let actions = s.receive(.binary([4, 0, 0, 0, 0, 0, 0, 0x01, 0x02, 0xAA, 0xBB]), at: 20)
        #expect(actions == [.event(.audioChunk(AudioChunk(timestamp: 0x0102, sendAhead: 0, payload: [0xAA, 0xBB], arrival: 20)))])
        let short = s.receive(.binary([4, 0, 0]), at: 21)
        #expect(short.count == 1 && { if case .event(.malformedAudio) = short[0] { true } else { false } }())
    }

    @Test func audioBeforeHelloAndAServerKnownAsEncryptedAreRefused() {
        var early = Self.session()
        _ = early.start()
        #expect(early.receive(.binary([4, 0, 0, 0, 0, 0, 0, 0, 1]), at: 1).contains { if case .close(.some) = $0 { true } else { false } })
        var known = Self.session(encryptedServerIDs: ["srv-1"])
        _ = known.start()
        let actions = known.receive(.text(Self.hello), at: 1)
        #expect(actions.contains { if case .close(.handshakeFailed(let m)) = $0 { m.contains("refusing the downgrade") } else { false } })
        #expect(!known.isActive)
    }
}
