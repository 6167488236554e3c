import Foundation
@testable import Sendspin
import Testing

/// artwork@v1: channel specs, the transfer rules (announce, parts, cancel) with every way a
/// server can break them, the image headers read for format and size, and the role through a
/// whole session (client/state carries the channels; pictures, stream start and end reported).
@Suite struct ArtworkTests {
    static func announce(_ channel: Int, timestamp: Int64, size: UInt32) -> (UInt8, [UInt8]) {
        var body: [UInt8] = [0x02]
        withUnsafeBytes(of: timestamp.bigEndian) { body += $0 }
        withUnsafeBytes(of: size.bigEndian) { body += $0 }
        return (UInt8(8 + channel), body)
    }

    @Test func specsParseWithDefaultsAndSayWhatIsWrong() throws {
        #expect(try ArtworkChannel.parse("album").get() == ArtworkChannel(source: .album, format: .jpeg, width: 300, height: 300))
        #expect(try ArtworkChannel.parse("artist:png:16x32").get() == ArtworkChannel(source: .artist, format: .png, width: 16, height: 32))
        #expect(try ArtworkChannel.parse("none").get() == ArtworkChannel(source: .none))
        for (bad, reason) in [("cover", "album, artist or none"), ("album:gif", "jpeg or png"), ("album:jpeg:0x10", "1–4096"),
                              ("album:jpeg:10", "WIDTHxHEIGHT"), ("none:jpeg", "no format"), ("album:jpeg:1x1:x", "SOURCE[")] {
            guard case .failure(let error) = ArtworkChannel.parse(bad) else { Issue.record("\(bad) parsed"); continue }
            #expect(error.description.contains(reason), "\(bad): \(error)")
        }
    }

    @Test func aPictureArrivesWholeAfterItsParts() throws {
        var transfers = ArtworkTransfers()
        let picture = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let (type, body) = Self.announce(2, timestamp: 5_000_000, size: UInt32(picture.count))
        #expect(try transfers.receive(type: type, body: body) == nil)
        var outcome: ArtworkTransfers.Outcome?
        for start in stride(from: 0, to: picture.count, by: 65_000) {
            outcome = try transfers.receive(type: 10, body: [0x00] + picture[start..<min(start + 65_000, picture.count)])
        }
        #expect(outcome == .image(ArtworkImage(channel: 2, timestamp: 5_000_000, data: picture)))
        // Size 0 clears at once; a cancel is reported; another transfer may follow.
        let (clearType, clearBody) = Self.announce(0, timestamp: 7, size: 0)
        #expect(try transfers.receive(type: clearType, body: clearBody) == .image(ArtworkImage(channel: 0, timestamp: 7, data: [])))
        let (t, b) = Self.announce(1, timestamp: 9, size: 10)
        _ = try transfers.receive(type: t, body: b)
        #expect(try transfers.receive(type: 9, body: [0x01]) == .cancelled(channel: 1))
        #expect(throws: SendspinError.self, "a part after the cancel has no transfer") { try transfers.receive(type: 9, body: [0x00, 1]) }
    }

    @Test func everyBrokenRuleClosesTheSession() {
        let (announceType, announceBody) = Self.announce(0, timestamp: 1, size: 10)
        let cases: [(String, [(UInt8, [UInt8])])] = [
            ("a message of one byte", [(8, [])]),
            ("reserved flag bits", [(8, [0x04])]),
            ("announce and cancel at once", [(8, [0x03])]),
            ("an announce of the wrong length", [(8, [0x02, 0, 0])]),
            ("a cancel with a body", [(8, [0x01, 0])]),
            ("a part with nothing announced", [(8, [0x00, 1, 2])]),
            ("an announce while one is in flight", [(announceType, announceBody), (9, Self.announce(1, timestamp: 1, size: 1).1)]),
            ("a part for another channel", [(announceType, announceBody), (9, [0x00, 1])]),
            ("parts beyond the size", [(announceType, announceBody), (8, [0x00] + [UInt8](repeating: 1, count: 11))]),
            ("a picture too large to hold", [(8, Self.announce(0, timestamp: 1, size: UInt32(ArtworkTransfers.maximumImage + 1)).1)]),
            ("a message over one transport message", [(announceType, Self.announce(0, timestamp: 1, size: 70_000).1),
                                                      (8, [0x00] + [UInt8](repeating: 0, count: ArtworkTransfers.maximumMessage))]),
        ]
        for (name, messages) in cases {
            var transfers = ArtworkTransfers()
            #expect(throws: SendspinError.self, "\(name)") { for (type, body) in messages { _ = try transfers.receive(type: type, body: body) } }
        }
    }

    @Test func randomMessagesNeverCrashOrHoldMoreThanAnnounced() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            var transfers = ArtworkTransfers()
            for _ in 0..<4 {
                let type = UInt8.random(in: 8...11, using: &generator)
                var body = (0..<Int.random(in: 0...20, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                if !body.isEmpty { body[0] = [0x00, 0x01, 0x02, body[0]].randomElement(using: &generator)! }
                do {
                    if case .image(let image)? = try transfers.receive(type: type, body: body) { #expect(image.data.count <= 20) }
                } catch {
                    break
                }
            }
        }
    }

    @Test func formatAndSizeComeFromThePicturesOwnHeader() {
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13] + Array("IHDR".utf8)
        png += [0, 0, 0, 16, 0, 0, 0, 9, 8, 2, 0, 0, 0]
        let image = ArtworkImage(channel: 0, timestamp: 0, data: png)
        #expect(image.format == .png && image.width == 16 && image.height == 9)
        // JFIF APP0, a DQT, then SOF0 with height 32 and width 64.
        var jpeg: [UInt8] = [0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x10] + Array("JFIF\0".utf8) + [1, 1, 0, 0, 1, 0, 1, 0, 0]
        jpeg += [0xFF, 0xDB, 0x00, 0x04, 0x00, 0x01]
        jpeg += [0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00, 0x20, 0x00, 0x40, 0x03, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]
        let photo = ArtworkImage(channel: 1, timestamp: 0, data: jpeg)
        #expect(photo.format == .jpeg && photo.width == 64 && photo.height == 32)
        let other = ArtworkImage(channel: 1, timestamp: 0, data: Array("GIF89a....".utf8))
        #expect(other.format == nil && other.width == nil)
        #expect(ArtworkImage(channel: 0, timestamp: 0, data: [0xFF, 0xD8, 0xFF, 0xC0]).format == nil, "a truncated JPEG")
    }

    @Test func theRoleThroughASession() throws {
        let channels = [ArtworkChannel(source: .album, format: .jpeg, width: 64, height: 32), ArtworkChannel(source: .none)]
        var (session, server) = try SessionTests.activeSession(artwork: channels)
        let player = PlayerStateReport(volume: 50, muted: false, outputDelayMs: 0, requiredLeadTimeMs: 250, minBufferMs: 250, supportedCommands: [], format: nil)
        let state = try server.openJSON(session.sendState(available: true, player: player))
        let payload = (try JSONSerialization.jsonObject(with: Data(state[0].utf8)) as! [String: Any])["payload"] as! [String: Any]
        let sent = (payload["artwork"] as? [String: Any])?["channels"] as? [[String: Any]]
        #expect(sent?.count == 2 && sent?[0]["source"] as? String == "album" && sent?[0]["format"] as? String == "jpeg"
                && sent?[0]["width"] as? Int == 64 && sent?[0]["height"] as? Int == 32, "\(state)")
        #expect(sent?[1].keys.sorted() == ["source"], "a none channel has nothing else: \(state)")

        var actions = session.receive(.binary(server.json(#"{"type":"stream/start","payload":{"server_transmitted":1,"artwork":{"channels":[{"source":"album","format":"jpeg","width":64,"height":32}]}}}"#)[0]), at: 10)
        #expect(actions.events == [.streamStart(nil), .artworkStream([channels[0]])])
        let (type, body) = Self.announce(0, timestamp: 42, size: 3)
        actions = session.receive(.binary(server.seal([type] + body)), at: 11)
        actions += session.receive(.binary(server.seal([8, 0x00, 1, 2, 3])), at: 12)
        #expect(actions.events == [.artwork(ArtworkImage(channel: 0, timestamp: 42, data: [1, 2, 3]))])
        actions = session.receive(.binary(server.json(#"{"type":"stream/end","payload":{"roles":["artwork"]}}"#)[0]), at: 13)
        #expect(actions.events == [.artworkEnded])
        // A broken transfer closes the session.
        actions = session.receive(.binary(server.seal([8, 0x00, 1])), at: 14)
        #expect(actions.closeReason != nil && session.isClosed)

        // Without the role, artwork messages are unknown and stream/end says nothing of artwork.
        var (plain, plainServer) = try SessionTests.activeSession()
        actions = plain.receive(.binary(plainServer.seal([8, 0x02] + [UInt8](repeating: 0, count: 12))), at: 20)
        actions += plain.receive(.binary(plainServer.json(#"{"type":"stream/end","payload":{}}"#)[0]), at: 21)
        #expect(actions.events == [.unknownMessage("binary type 8"), .streamEnd])
    }
}
