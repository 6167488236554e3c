import Foundation
import Testing
@testable import Jellyfin

/// SyncPlay's two live messages, written from the shapes a 10.11 server sends (PascalCase, dates
/// with 1 to 7 fraction digits, the group id dashed in GroupLeft alone); none copied from
/// upstream files. Broken ones are typed errors, never a crash.
struct SyncPlayMessageTests {
    static func decode(_ text: String) throws -> LiveMessage { try LiveMessage.decode(Array(text.utf8)) }

    @Test func aCommandCarriesItsMomentOnTheServersClock() throws {
        let message = try Self.decode(#"{"MessageType":"SyncPlayCommand","MessageId":"0f1e2d3c4b5a69788796a5b4c3d2e1f0","Data":{"GroupId":"9b1c2d3e4f5a46b7889900aabbccddee","PlaylistItemId":"5a5b5c5d5e5f40418243444546474849","When":"2026-08-23T10:00:05.5Z","PositionTicks":120000000,"Command":"Unpause","EmittedAt":"2026-08-23T10:00:05.46Z"}}"#)
        guard case .syncPlayCommand(let command) = message else { Issue.record("\(message)"); return }
        #expect(command.command == "Unpause" && command.positionTicks == 120_000_000 && command.playlistItemId == "5a5b5c5d5e5f40418243444546474849")
        #expect(abs(command.when.timeIntervalSince1970 - 1_787_479_205.5) < 0.001)
        let seven = try Self.decode(#"{"MessageType":"SyncPlayCommand","Data":{"GroupId":"g","PlaylistItemId":"p","When":"2026-08-23T10:00:05.1234567Z","PositionTicks":0,"Command":"Pause"}}"#)
        guard case .syncPlayCommand(let pause) = seven else { Issue.record("\(seven)"); return }
        #expect(pause.command == "Pause" && abs(pause.when.timeIntervalSince1970 - 1_787_479_205.1234567) < 0.000_001)
    }

    @Test func groupUpdatesCarryTheirPayloads() throws {
        let joined = try Self.decode(#"{"MessageType":"SyncPlayGroupUpdate","MessageId":"a","Data":{"GroupId":"9b1c","Type":"GroupJoined","Data":{"GroupId":"9b1c","GroupName":"Movie night","State":"Idle","Participants":["alice"],"LastUpdatedAt":"2026-08-23T10:00:00.1234567Z"}}}"#)
        #expect(joined == .syncPlayGroupUpdate(.init(groupId: "9b1c", type: "GroupJoined", payload: .group(.init(id: "9b1c", name: "Movie night", state: "Idle", participants: ["alice"])))))
        let state = try Self.decode(#"{"MessageType":"SyncPlayGroupUpdate","Data":{"GroupId":"9b1c","Type":"StateUpdate","Data":{"State":"Waiting","Reason":"Seek"}}}"#)
        #expect(state == .syncPlayGroupUpdate(.init(groupId: "9b1c", type: "StateUpdate", payload: .state("Waiting", reason: "Seek"))))
        let queue = try Self.decode(#"{"MessageType":"SyncPlayGroupUpdate","Data":{"GroupId":"9b1c","Type":"PlayQueue","Data":{"Reason":"NewPlaylist","LastUpdate":"2026-08-23T10:00:02.25Z","Playlist":[{"ItemId":"aa11","PlaylistItemId":"5a5b"}],"PlayingItemIndex":0,"StartPositionTicks":30000000,"IsPlaying":false,"ShuffleMode":"Sorted","RepeatMode":"RepeatNone"}}}"#)
        guard case .syncPlayGroupUpdate(let update) = queue, case .queue(let q) = update.payload else { Issue.record("\(queue)"); return }
        #expect(q.playing?.itemId == "aa11" && q.playing?.playlistItemId == "5a5b" && q.startPositionTicks == 30_000_000 && !q.isPlaying)
        let left = try Self.decode(#"{"MessageType":"SyncPlayGroupUpdate","Data":{"GroupId":"9b1c2d3e4f5a46b7889900aabbccddee","Type":"GroupLeft","Data":"9b1c2d3e-4f5a-46b7-8899-00aabbccddee"}}"#)
        #expect(left == .syncPlayGroupUpdate(.init(groupId: "9b1c2d3e4f5a46b7889900aabbccddee", type: "GroupLeft", payload: .text("9b1c2d3e-4f5a-46b7-8899-00aabbccddee"))))
        let empty = try Self.decode(#"{"MessageType":"SyncPlayGroupUpdate","Data":{"GroupId":"00000000000000000000000000000000","Type":"NotInGroup","Data":""}}"#)
        #expect(empty == .syncPlayGroupUpdate(.init(groupId: "00000000000000000000000000000000", type: "NotInGroup", payload: .text(""))))
        // A type a newer server adds arrives as itself.
        let newer = try Self.decode(#"{"MessageType":"SyncPlayGroupUpdate","Data":{"GroupId":"9b1c","Type":"SomethingNew","Data":{"X":1}}}"#)
        #expect(newer == .syncPlayGroupUpdate(.init(groupId: "9b1c", type: "SomethingNew", payload: .none)))
    }

    @Test func brokenMessagesAreTypedErrors() {
        for broken in [
            #"{"MessageType":"SyncPlayCommand","Data":{"GroupId":"g","When":"yesterday","PositionTicks":0,"Command":"Pause"}}"#,
            #"{"MessageType":"SyncPlayCommand","Data":{"GroupId":"g","PositionTicks":0,"Command":"Pause"}}"#,
            #"{"MessageType":"SyncPlayCommand"}"#,
            #"{"MessageType":"SyncPlayGroupUpdate","Data":{"GroupId":"g","Type":"PlayQueue","Data":"nope"}}"#,
            #"{"MessageType":"SyncPlayGroupUpdate","Data":{"GroupId":"g","Type":"StateUpdate","Data":[1,2]}}"#,
            #"{"MessageType":"SyncPlayGroupUpdate","Data":{"GroupId":"g"}}"#,
        ] {
            #expect(throws: JellyfinSocketError.self, "\(broken)") { try Self.decode(broken) }
        }
    }
}
