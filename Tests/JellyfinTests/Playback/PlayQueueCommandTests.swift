import Testing
@testable import Jellyfin

/// What a remote-controlled player makes of the live session's messages (decoded from the
/// frames a 10.11 server sends; the live path is IntegrationTests' cast-target test).
struct PlayQueueCommandTests {
    static func command(_ frame: String) throws -> PlayQueue.Command? {
        PlayQueue.Command(try LiveMessage.decode(Array(frame.utf8)))
    }

    @Test func playMessagesBecomeQueueCommands() throws {
        #expect(try Self.command(#"{"MessageType":"Play","Data":{"ItemIds":["a","b"],"PlayCommand":"PlayNow","StartPositionTicks":50000000,"StartIndex":1}}"#)
                == .play(itemIds: ["a", "b"], startIndex: 1, startSeconds: 5, placement: .now))
        #expect(try Self.command(#"{"MessageType":"Play","Data":{"ItemIds":["c"],"PlayCommand":"PlayNext"}}"#)
                == .play(itemIds: ["c"], startIndex: 0, startSeconds: nil, placement: .next))
        #expect(try Self.command(#"{"MessageType":"Play","Data":{"ItemIds":["c"],"PlayCommand":"PlayShuffle"}}"#)
                == .play(itemIds: ["c"], startIndex: 0, startSeconds: nil, placement: .now))
    }

    @Test func playstateAndVolumeCommands() throws {
        let cases: [(String, PlayQueue.Command?)] = [
            (#"{"Command":"Pause"}"#, .pause), (#"{"Command":"Unpause"}"#, .unpause), (#"{"Command":"PlayPause"}"#, .playPause),
            (#"{"Command":"Stop"}"#, .stop), (#"{"Command":"NextTrack"}"#, .next), (#"{"Command":"PreviousTrack"}"#, .previous),
            (#"{"Command":"Seek","SeekPositionTicks":12345678}"#, .seek(toSeconds: 1.2345678)), (#"{"Command":"Seek"}"#, nil),
            (#"{"Command":"Rewind"}"#, .seekBy(seconds: -10)), (#"{"Command":"FastForward"}"#, .seekBy(seconds: 30)),
            (#"{"Command":"SomethingNew"}"#, nil),
        ]
        for (data, expected) in cases {
            #expect(try Self.command(#"{"MessageType":"Playstate","Data":\#(data)}"#) == expected, "\(data)")
        }
        #expect(try Self.command(#"{"MessageType":"GeneralCommand","Data":{"Name":"SetVolume","Arguments":{"Volume":"35"}}}"#) == .setVolume(35))
        #expect(try Self.command(#"{"MessageType":"GeneralCommand","Data":{"Name":"SetVolume","Arguments":{"Volume":"loud"}}}"#) == nil)
        #expect(try Self.command(#"{"MessageType":"GeneralCommand","Data":{"Name":"ToggleMute"}}"#) == .mute(nil))
        #expect(try Self.command(#"{"MessageType":"GeneralCommand","Data":{"Name":"DisplayMessage","Arguments":{"Text":"hi"}}}"#) == nil)
        #expect(try Self.command(#"{"MessageType":"KeepAlive"}"#) == nil)
    }
}
