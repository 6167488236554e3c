import Crypto
import Foundation
@testable import Sendspin
import Testing

/// The legacy wire in the session core, message by message (the real server is in
/// IntegrationTests/SendspinLegacyTests).
@Suite struct LegacySessionTests {
    static func session(encryptedServerIDs: Set<String> = [], roles: [String]? = nil, artwork: [ArtworkChannel] = []) -> SendspinSession {
        var configuration = SendspinSession.Configuration(name: "Old Friend", formats: [AudioFormatSpec(codec: "pcm", channels: 2, sampleRate: 48000, bitDepth: 16)])
        if let roles { configuration.roles = roles }
        configuration.artworkChannels = artwork
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
        #expect(hello["supported_roles"] as? [String] == ["player@v1", "metadata@v1", "controller@v1"])
        #expect(hello["artwork@v1_support"] == nil)
        let support = try #require(hello["player@v1_support"] as? [String: Any])
        #expect(support["supported_commands"] as? [String] == ["volume", "mute"])
        let actions = s.receive(.text(Self.hello), at: 10)
        #expect(actions.contains(.event(.hello(ServerHello(name: "Old Server", languages: nil)))))
        #expect(actions.contains(.event(.activated(activities: ["playback"], roles: ["player@v1"]))))
        #expect(s.isActive && s.serverID == "srv-1")
        // State and time go out in clear; controller commands only to a server that activated
        // that role (this one did not: it would close on a type it does not expect).
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

    /// The roles the legacy wire carries are offered (artwork with its channels declared in the
    /// hello, as media_width/media_height); the ones it lacks are not. A picture is one binary
    /// message, `[8 + channel][timestamp]` and the image, empty to clear.
    @Test func metadataControllerAndArtworkRolesOverTheLegacyWire() throws {
        var s = Self.session(roles: ["metadata@v1", "controller@v1", "artwork@v1", "visualizer@v1", "source@v1"],
                             artwork: [ArtworkChannel(source: .album, format: .png, width: 256, height: 128), ArtworkChannel(source: .none)])
        let hello = try #require(Self.texts(s.start()).first?["payload"] as? [String: Any])
        #expect(hello["supported_roles"] as? [String] == ["metadata@v1", "controller@v1", "artwork@v1"])
        #expect(hello["player@v1_support"] == nil)
        let channels = try #require((hello["artwork@v1_support"] as? [String: Any])?["channels"] as? [[String: Any]])
        #expect(channels.count == 2)
        #expect(channels[0]["source"] as? String == "album" && channels[0]["format"] as? String == "png")
        #expect(channels[0]["media_width"] as? Int == 256 && channels[0]["media_height"] as? Int == 128)
        #expect(channels[1]["source"] as? String == "none")

        let serverHello = #"{"payload":{"server_id":"srv-2","name":"Old Server","version":1,"active_roles":["metadata@v1","controller@v1","artwork@v1"],"connection_reason":"playback"},"type":"server/hello"}"#
        _ = s.receive(.text(serverHello), at: 10)
        let command = Self.texts(s.sendCommand(ControllerCommand(command: "next")))
        #expect(command.first?["type"] as? String == "client/command")
        #expect((command.first?["payload"] as? [String: Any]).flatMap { $0["controller"] as? [String: Any] }?["command"] as? String == "next")

        let state = #"{"type":"server/state","payload":{"metadata":{"timestamp":5,"title":"T","repeat":"all","shuffle":false}}}"#
        let metadata = s.receive(.text(state), at: 11).compactMap { if case .event(.metadata(let m)) = $0 { m } else { nil } }
        #expect(metadata.first?.title == "T" && metadata.first?.repeat == "all" && metadata.first?.shuffle == false)

        let picture: [UInt8] = [0x89, 0x50, 0x4E, 0x47]
        let shown = s.receive(.binary([8, 0, 0, 0, 0, 0, 0, 0, 7] + picture), at: 12)
        #expect(shown == [.event(.artwork(ArtworkImage(channel: 0, timestamp: 7, data: picture)))])
        let cleared = s.receive(.binary([9, 0, 0, 0, 0, 0, 0, 0, 8]), at: 13)
        #expect(cleared == [.event(.artwork(ArtworkImage(channel: 1, timestamp: 8, data: [])))])
        let short = s.receive(.binary([8, 0, 0]), at: 14)
        #expect(short.contains { if case .close(.protocolViolation(let m)) = $0 { m.contains("9-byte header") } else { false } })
    }
}
