import Foundation
@testable import Sendspin
import Testing

/// visualizer@v1 and color@v1: the settings' parsers, every frame kind read from its bytes and
/// every wrong size refused, and both roles through a session (hello, state, stream start,
/// clear and end, palettes, and what happens without the roles).
@Suite struct VisualizerTests {
    static func message(_ type: UInt8, timestamp: Int64, _ data: [UInt8]) -> [UInt8] {
        withUnsafeBytes(of: timestamp.bigEndian, Array.init) + data
    }

    @Test func settingsParseWithDefaultsAndSayWhatIsWrong() throws {
        #expect(try SpectrumLayout.parse("32").get() == SpectrumLayout(bins: 32, scale: .log, minimumHz: 40, maximumHz: 16_000))
        #expect(try SpectrumLayout.parse("64:MEL").get() == SpectrumLayout(bins: 64, scale: .mel))
        #expect(try SpectrumLayout.parse("8:lin:20-8000").get() == SpectrumLayout(bins: 8, scale: .lin, minimumHz: 20, maximumHz: 8000))
        for bad in ["0", "2000", "x", "16:cubic", "16:log:8000-20", "16:log:20", "16:log:a-b", "1:2:3:4"] {
            #expect(throws: VisualizerRequestError.self, "\(bad)") { try SpectrumLayout.parse(bad).get() }
        }
        #expect(try VisualizerRequest.parseKinds("all").get() == VisualizerKind.allCases)
        #expect(try VisualizerRequest.parseKinds("beat, f_peak,fpeak").get() == [.beat, .fPeak, .fPeak])
        #expect(throws: VisualizerRequestError.self) { try VisualizerRequest.parseKinds("loudness,pitch").get() }
        #expect(throws: VisualizerRequestError.self) { try VisualizerRequest.parseKinds(",").get() }
        // Duplicates go; a spectrum layout only with spectrum asked for.
        let request = VisualizerRequest(kinds: [.beat, .beat, .loudness], rateMax: 60, spectrum: SpectrumLayout(bins: 8))
        #expect(request.kinds == [.beat, .loudness] && request.spectrum == nil)
        #expect(VisualizerRequest(kinds: [.spectrum], spectrum: nil).spectrum == SpectrumLayout(bins: 32))
    }

    @Test func everyKindReadsFromItsBytes() throws {
        func parse(_ type: UInt8, _ data: [UInt8], bins: Int? = nil) -> Result<VisualizerFrame, MalformedVisualization> {
            VisualizerFrame.parse(type: type, body: Self.message(type, timestamp: 0x0102_0304_0506_0708, data), spectrumBins: bins)
        }
        let t: Int64 = 0x0102_0304_0506_0708
        #expect(try parse(16, [0x12, 0x34]).get() == VisualizerFrame(timestamp: t, value: .loudness(0x1234)))
        #expect(try parse(17, [0x01]).get().value == .beat(downbeat: true))
        #expect(try parse(17, [0xFE]).get().value == .beat(downbeat: false), "only bit 0 marks a downbeat")
        #expect(try parse(18, [0x03, 0xE8, 0xFF, 0xFF]).get().value == .fPeak(frequency: 1000, amplitude: 65535))
        #expect(try parse(19, [0, 1, 0, 2, 0xFF, 0xFF], bins: 3).get().value == .spectrum([1, 2, 65535]))
        #expect(try parse(20, [200]).get().value == .peak(200))
        #expect(try parse(20, [200]).get().wireSize == 10)
        #expect(try parse(19, [0, 1, 0, 2, 0xFF, 0xFF], bins: 3).get().wireSize == 15)

        // Every other size is refused with its reason, as is a spectrum on a stream without one.
        for (type, data, bins) in [(UInt8(16), [UInt8]([1]), nil), (16, [1, 2, 3], nil), (17, [], nil), (17, [1, 1], nil), (18, [1, 2, 3], nil),
                                   (19, [0, 1], 3), (19, [0, 1, 0, 2], nil), (20, [], nil), (21, [0], nil)] as [(UInt8, [UInt8], Int?)] {
            guard case .failure(let problem) = parse(type, data, bins: bins) else { Issue.record("type \(type) \(data) accepted"); continue }
            #expect(!problem.reason.isEmpty)
        }
        #expect(throws: MalformedVisualization.self) { try VisualizerFrame.parse(type: 16, body: [0, 0, 0], spectrumBins: nil).get() }
    }

    @Test func randomMessagesNeverCrash() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let body = (0..<Int.random(in: 0...40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            _ = VisualizerFrame.parse(type: UInt8.random(in: 16...20, using: &generator), body: body, spectrumBins: Int.random(in: 0...16, using: &generator))
        }
    }

    @Test func helloAndStateCarryTheRequest() throws {
        let request = VisualizerRequest(kinds: [.loudness, .spectrum], rateMax: 60, spectrum: SpectrumLayout(bins: 16, scale: .mel, minimumHz: 20, maximumHz: 8000))
        var session = SessionTests.makeSession { c in
            c.roles += ["visualizer@v1", "color@v1"]
            c.visualizer = request
            c.visualizerBufferCapacity = 4096
        }
        var server = FakeServer()
        _ = try server.handshake(&session)
        var actions: [SendspinSession.Action] = []
        for m in server.json(#"{"type":"server/hello","payload":{"name":"Fake"}}"#) { actions += session.receive(.binary(m), at: 3) }
        let hello = (try JSONSerialization.jsonObject(with: Data(try server.openJSON(actions)[0].utf8)) as! [String: Any])["payload"] as! [String: Any]
        #expect((hello["supported_roles"] as? [String])?.suffix(2) == ["visualizer@v1", "color@v1"])
        #expect(hello["visualizer@v1_support"] as? [String: Int] == ["buffer_capacity": 4096], "the request goes in client/state, not the hello")
        actions = []
        for m in server.json(#"{"type":"server/activate","payload":{"activities":["playback"],"active_roles":["player@v1","visualizer@v1"]}}"#) {
            actions += session.receive(.binary(m), at: 4)
        }
        let state = (try JSONSerialization.jsonObject(with: Data(try server.openJSON(session.sendState(available: true, player: nil))[0].utf8)) as! [String: Any])["payload"] as! [String: Any]
        let visualizer = state["visualizer"] as? [String: Any]
        #expect(visualizer?["types"] as? [String] == ["loudness", "spectrum"] && visualizer?["rate_max"] as? Int == 60)
        let spectrum = visualizer?["spectrum"] as? [String: Any]
        #expect(spectrum?["n_disp_bins"] as? Int == 16 && spectrum?["scale"] as? String == "mel" && spectrum?["f_min"] as? Int == 20
                && spectrum?["f_max"] as? Int == 8000 && spectrum?.count == 4, "\(String(describing: spectrum))")
    }

    @Test func theVisualizerRoleThroughASession() throws {
        var (session, server) = try SessionTests.activeSession { $0.roles.append("visualizer@v1") }
        // Before the stream is set up, frames mean nothing and are dropped.
        var actions = session.receive(.binary(server.seal([16] + Self.message(16, timestamp: 5, [0, 9]))), at: 10)
        #expect(actions.events.isEmpty)
        actions = session.receive(.binary(server.json(#"{"type":"stream/start","payload":{"server_transmitted":1,"visualizer":{"types":["loudness","spectrum"],"rate_max":30,"spectrum":{"n_disp_bins":2,"scale":"log","f_min":40,"f_max":16000}}}}"#)[0]), at: 11)
        let stream = VisualizerStream(kinds: ["loudness", "spectrum"], rateMax: 30, spectrum: SpectrumLayout(bins: 2))
        #expect(actions.events == [.streamStart(nil), .visualizerStream(stream)])
        actions = session.receive(.binary(server.seal([16] + Self.message(16, timestamp: 42, [0, 9]))), at: 12)
        actions += session.receive(.binary(server.seal([19] + Self.message(19, timestamp: 42, [0, 1, 0, 2]))), at: 12)
        #expect(actions.events == [.visualizer(VisualizerFrame(timestamp: 42, value: .loudness(9))), .visualizer(VisualizerFrame(timestamp: 42, value: .spectrum([1, 2])))])
        // A wrong size is dropped with its reason; the session goes on.
        actions = session.receive(.binary(server.seal([19] + Self.message(19, timestamp: 43, [0, 1]))), at: 13)
        #expect(actions.events == [.malformedVisualization("a spectrum message with 2 data bytes (4 expected)")] && !session.isClosed)
        actions = session.receive(.binary(server.json(#"{"type":"stream/clear","payload":{"roles":["visualizer"]}}"#)[0]), at: 14)
        #expect(actions.events == [.visualizerCleared], "a clear for the visualizer alone leaves the audio")
        actions = session.receive(.binary(server.json(#"{"type":"stream/end","payload":{"roles":["visualizer"]}}"#)[0]), at: 15)
        #expect(actions.events == [.visualizerEnded])
        actions = session.receive(.binary(server.seal([16] + Self.message(16, timestamp: 50, [0, 9]))), at: 16)
        #expect(actions.events.isEmpty, "after the end, frames are dropped")

        // Without the role, the messages are unknown and stream control says nothing of it.
        var (plain, plainServer) = try SessionTests.activeSession()
        actions = plain.receive(.binary(plainServer.seal([16] + Self.message(16, timestamp: 5, [0, 9]))), at: 20)
        actions += plain.receive(.binary(plainServer.json(#"{"type":"stream/end","payload":{}}"#)[0]), at: 21)
        #expect(actions.events == [.unknownMessage("binary type 16"), .streamEnd])
    }

    @Test func palettesThroughASession() throws {
        var (session, server) = try SessionTests.activeSession { $0.roles.append("color@v1") }
        var actions = session.receive(.binary(server.json(#"{"type":"server/state","payload":{"color":{"timestamp":77,"primary":[1,2,3],"on_dark":[250,250,250]}}}"#)[0]), at: 10)
        #expect(actions.events == [.color(ColorPalette(timestamp: 77, primary: [1, 2, 3], onDark: [250, 250, 250]))])
        actions = session.receive(.binary(server.json(#"{"type":"server/state","payload":{"color":{"timestamp":78}}}"#)[0]), at: 11)
        #expect(actions.events == [.color(ColorPalette(timestamp: 78))] && ColorPalette(timestamp: 78).isClear)
        // A palette that does not read costs only itself: the metadata beside it arrives.
        actions = session.receive(.binary(server.json(#"{"type":"server/state","payload":{"metadata":{"timestamp":1,"title":"T"},"color":{"timestamp":79,"primary":[1,2,3,4]}}}"#)[0]), at: 12)
        #expect(actions.events.first == .metadata(Metadata(timestamp: 1, title: "T")))
        #expect(actions.events.count == 2 && { if case .malformedVisualization = actions.events[1] { true } else { false } }(), "\(actions.events)")
        actions = session.receive(.binary(server.json(#"{"type":"server/state","payload":{"color":{"timestamp":80,"primary":[1,2,300]}}}"#)[0]), at: 13)
        #expect({ if case .malformedVisualization = actions.events.first { true } else { false } }() && !session.isClosed, "\(actions.events)")

        // Without the role, a palette is not reported.
        var (plain, plainServer) = try SessionTests.activeSession()
        actions = plain.receive(.binary(plainServer.json(#"{"type":"server/state","payload":{"color":{"timestamp":77,"primary":[1,2,3]}}}"#)[0]), at: 20)
        #expect(actions.events.isEmpty)
    }
}
