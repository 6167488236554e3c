import Foundation
@testable import Sendspin
import Testing

/// source@v1 through a session (the hello's support object, the state's source object, the
/// server's start and stop, the stream's start, chunks and end on the wire) and the capture
/// clock that steadies a line-in's timestamps.
@Suite struct SourceTests {
    @Test func theRoleThroughASession() throws {
        var session = SessionTests.makeSession { $0.roles.append("source@v1") }
        var server = FakeServer()
        _ = try server.handshake(&session)
        var actions: [SendspinSession.Action] = []
        for m in server.json(#"{"type":"server/hello","payload":{"name":"Fake","source@v1_support":{"supported_codecs":["flac","pcm","opus"]}}}"#) {
            actions += session.receive(.binary(m), at: 3)
        }
        #expect(actions.events == [.hello(ServerHello(name: "Fake", sourceSupport: ServerSourceSupport(supportedCodecs: ["flac", "pcm", "opus"])))])
        let hello = (try JSONSerialization.jsonObject(with: Data(try server.openJSON(actions)[0].utf8)) as! [String: Any])["payload"] as! [String: Any]
        #expect((hello["source@v1_support"] as? [String: Any])?.isEmpty == true, "no optional features: \(hello)")
        actions = []
        for m in server.json(#"{"type":"server/activate","payload":{"activities":[],"active_roles":["player@v1","source@v1"]}}"#) { actions += session.receive(.binary(m), at: 4) }
        let state = (try JSONSerialization.jsonObject(with: Data(try server.openJSON(session.sendState(available: true, player: nil))[0].utf8)) as! [String: Any])["payload"] as! [String: Any]
        #expect((state["source"] as? [String: Any])?.isEmpty == true, "every client/state carries the source object: \(state)")

        actions = session.receive(.binary(server.json(#"{"type":"server/command","payload":{"source":{"command":"start"}}}"#)[0]), at: 5)
        #expect(actions.events == [.sourceCommand(.start)])
        let start = try server.openJSON(session.sendSourceStart(SourceFormat(codec: "pcm", channels: 2, sampleRate: 48000, bitDepth: 16)))
        let announced = try JSONSerialization.jsonObject(with: Data(start[0].utf8)) as? [String: Any]
        #expect(announced?["type"] as? String == "client-stream/start", "\(start)")
        let format = (announced?["payload"] as? [String: Any])?["source"] as? [String: Any]
        #expect(format?["codec"] as? String == "pcm" && format?["channels"] as? Int == 2 && format?["sample_rate"] as? Int == 48000
                && format?["bit_depth"] as? Int == 16 && format?["codec_header"] == nil, "\(start)")
        // A chunk: type 12, the server time of its first sample's capture (big-endian), the samples.
        let sealed = session.sendSourceAudio(timestamp: 0x0102_0304_0506_0708, payload: [9, 8, 7, 6])
        let plaintexts = try sealed.compactMap { action -> [UInt8]? in
            guard case .sendBinary(let frame) = action else { return nil }
            return try server.open(frame)
        }
        #expect(plaintexts == [[12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 8, 7, 6]])
        let end = try server.openJSON(session.sendSourceEnd())
        let ended = end.first.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(end.count == 1 && ended?["type"] as? String == "client-stream/end", "\(end)")
        actions = session.receive(.binary(server.json(#"{"type":"server/command","payload":{"source":{"command":"stop"}}}"#)[0]), at: 6)
        #expect(actions.events == [.sourceCommand(.stop)])

        // Without the role: the command means nothing to the client, and nothing is sent.
        var (plain, plainServer) = try SessionTests.activeSession()
        actions = plain.receive(.binary(plainServer.json(#"{"type":"server/command","payload":{"source":{"command":"start"}}}"#)[0]), at: 7)
        #expect(actions.events.isEmpty)
        #expect(plain.sendSourceStart(SourceFormat(codec: "pcm", channels: 2, sampleRate: 48000, bitDepth: 16)).isEmpty)
        #expect(plain.sendSourceAudio(timestamp: 1, payload: [1]).isEmpty)
    }

    @Test func theCaptureClockTakesTheEarliestReadingAsTheLine() {
        var clock = CaptureClock(blockUs: 20_000, window: 50)
        // Readings late by 0–3 ms at random; one true line at 1_000_000 + n × 20 ms.
        var generator = SystemRandomNumberGenerator()
        var stamps: [Int64] = []
        for n in 0..<200 {
            let late = n == 3 ? 0 : Int64.random(in: 200...3_000, using: &generator)
            stamps.append(clock.stamp(block: Int64(n), measured: 1_000_000 + Int64(n) * 20_000 + late))
        }
        // From the exact reading on, every stamp is on the line, until it leaves the window.
        for n in 3..<53 { #expect(stamps[n] == 1_000_000 + Int64(n) * 20_000, "block \(n): \(stamps[n])") }
        #expect(stamps.allSatisfy { $0 >= 1_000_000 }, "never earlier than a reading allows")
        // A device clock 100 ppm slow: followed within the window's spread.
        var drifting = CaptureClock(blockUs: 20_000, window: 50)
        var last: Int64 = 0
        for n in 0..<3_000 { last = drifting.stamp(block: Int64(n), measured: Int64(Double(n) * 20_002) + 500) }
        #expect(abs(last - (Int64(Double(2_999) * 20_002) + 500)) < 200, "drift followed: \(last)")
    }
}
