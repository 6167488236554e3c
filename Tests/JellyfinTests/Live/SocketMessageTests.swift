import Testing
@testable import Jellyfin

/// The frames here are written from the shapes the server's own tests replay (a ForceKeepAlive,
/// a message cut short, one whole message followed by a cut one) and from the message types the
/// notes list; none is copied from upstream files.
struct SocketMessageTests {
    static let forceKeepAlive = #"{"MessageType":"ForceKeepAlive","MessageId":"00000000-0000-0000-0000-000000000000","ServerId":null,"Data":60}"#
    static let cutShort = #"{"MessageType":"KeepAlive","MessageId":"3f2a9c10-5b7e-4"# + "\n"

    @Test func decodesForceKeepAlive() throws {
        let split = SocketMessageSplitter.split(Self.forceKeepAlive + "\n")
        #expect(split.problem == nil)
        #expect(split.objects.count == 1)
        #expect(try LiveMessage.decode(split.objects[0]) == .forceKeepAlive(seconds: 60))
    }

    @Test func aMessageCutShortIsReportedNotGuessed() {
        let split = SocketMessageSplitter.split(Self.cutShort)
        #expect(split.objects.isEmpty)
        guard case .truncated = split.problem else { Issue.record("expected truncated, got \(String(describing: split.problem))"); return }
    }

    @Test func aWholeMessageBeforeACutOneIsStillDelivered() throws {
        let split = SocketMessageSplitter.split(Self.forceKeepAlive + Self.cutShort)
        #expect(split.objects.count == 1)
        #expect(try LiveMessage.decode(split.objects[0]) == .forceKeepAlive(seconds: 60))
        guard case .truncated = split.problem else { Issue.record("expected truncated"); return }
    }

    @Test func twoMessagesInOneFrameAreBothDelivered() throws {
        let second = #"{"MessageType":"UserDataChanged","MessageId":"a1","Data":{"UserId":"u1","UserDataList":[{"ItemId":"i1","Played":true,"IsFavorite":false,"PlaybackPositionTicks":0,"PlayCount":1}]}}"#
        let split = SocketMessageSplitter.split(Self.forceKeepAlive + second)
        #expect(split.problem == nil)
        #expect(split.objects.count == 2)
        #expect(try LiveMessage.decode(split.objects[1]) == .userDataChanged(userId: "u1", changes: [UserDataChange(itemId: "i1", played: true, isFavorite: false, playbackPositionTicks: 0, playCount: 1)]))
    }

    @Test func bracesInsideStringsDoNotSplit() throws {
        let text = #"{"MessageType":"GeneralCommand","Data":{"Name":"DisplayMessage","Arguments":{"Header":"} {","Text":"a \"quoted\" {brace}"}}}"#
        let split = SocketMessageSplitter.split(text)
        #expect(split.objects.count == 1)
        #expect(try LiveMessage.decode(split.objects[0]) == .generalCommand(GeneralCommand(name: "DisplayMessage", arguments: ["Header": "} {", "Text": "a \"quoted\" {brace}"])))
    }

    @Test func decodesTheRemoteControlMessages() throws {
        func decode(_ text: String) throws -> LiveMessage { try LiveMessage.decode(Array(text.utf8)) }
        #expect(try decode(#"{"MessageType":"Play","Data":{"ItemIds":["a","b"],"PlayCommand":"PlayNext","StartPositionTicks":50000000}}"#)
                == .play(PlayRequest(itemIds: ["a", "b"], playCommand: "PlayNext", startPositionTicks: 50_000_000)))
        #expect(try decode(#"{"MessageType":"Playstate","Data":{"Command":"Seek","SeekPositionTicks":10000000}}"#)
                == .playstate(PlaystateRequest(command: "Seek", seekPositionTicks: 10_000_000)))
        #expect(try decode(#"{"MessageType":"LibraryChanged","Data":{"ItemsAdded":["x"],"ItemsRemoved":[],"ItemsUpdated":["y","z"]}}"#)
                == .libraryChanged(LibraryChange(itemsAdded: ["x"], itemsUpdated: ["y", "z"])))
        #expect(try decode(#"{"MessageType":"Sessions","Data":[{"Id":"s1","UserName":"demo","Client":"Farcast","DeviceName":"box","NowPlayingItem":{"Name":"Pilot Tone"}}]}"#)
                == .sessions([LiveSessionSummary(id: "s1", userName: "demo", client: "Farcast", deviceName: "box", nowPlaying: "Pilot Tone")]))
        #expect(try decode(#"{"MessageType":"ServerRestarting"}"#) == .serverRestarting)
        // A type from a newer server is carried, not refused.
        #expect(try decode(#"{"MessageType":"SomethingNew","Data":{"X":1}}"#) == .other(type: "SomethingNew"))
    }

    @Test func wrongTypesAreTypedErrors() {
        for text in [#"{"MessageType":"ForceKeepAlive","Data":"sixty"}"#, #"{"Data":1}"#, #"{"MessageType":"Play","Data":{"ItemIds":"a"}}"#,
                     #"{"MessageType":5}"#] {
            #expect(throws: JellyfinSocketError.self, "\(text)") { try LiveMessage.decode(Array(text.utf8)) }
        }
    }

    @Test func garbageIsReportedWithoutACrash() {
        for text in ["hello", "[1,2]", "}", "{\"a\":" + String(repeating: "[", count: 100), "{} x"] {
            #expect(SocketMessageSplitter.split(text).problem != nil, "\(text)")
        }
    }

    /// A short fuzz run: random bytes and random cuts of real frames never crash the splitter or
    /// the decoder, and every object it hands out is balanced.
    @Test func fuzzedFramesNeverCrash() {
        var generator = SystemRandomNumberGenerator()
        let seeds = [Self.forceKeepAlive, Self.cutShort, #"{"MessageType":"Play","Data":{"ItemIds":["a"],"PlayCommand":"PlayNow"}}"#]
        for _ in 0..<3000 {
            var bytes = Array(seeds.randomElement(using: &generator)!.utf8)
            for _ in 0..<Int.random(in: 0...4, using: &generator) where !bytes.isEmpty {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0...2, using: &generator) {
                case 0: bytes[index] = UInt8.random(in: 0...255, using: &generator)
                case 1: bytes.removeSubrange(index...)
                default: bytes.insert(contentsOf: bytes[index...], at: index)
                }
            }
            let text = String(decoding: bytes, as: UTF8.self)
            for object in SocketMessageSplitter.split(text).objects {
                #expect(object.first == UInt8(ascii: "{") && object.last == UInt8(ascii: "}"))
                _ = try? LiveMessage.decode(object)
            }
        }
    }
}
