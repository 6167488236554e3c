import Foundation
import Testing
@testable import Jellyfin

/// Audio and subtitle choices against a source's streams, and the server's indices turned into
/// mpv's track numbers (the live path, mpv saying what it plays, is IntegrationTests'
/// JellyfinPlaybackTests.audioAndSubtitlesAreChosenByLanguageOrIndex).
struct TrackSelectionTests {
    static let streams = [
        MediaStreamInfo(index: 0, type: "Video", codec: "h264"),
        MediaStreamInfo(index: 1, type: "Audio", codec: "aac", language: "eng", title: "English"),
        MediaStreamInfo(index: 2, type: "Audio", codec: "ac3", language: "ger"),
        MediaStreamInfo(index: 3, type: "Subtitle", codec: "subrip", language: "eng", deliveryMethod: "Embed"),
        MediaStreamInfo(index: 4, type: "Subtitle", codec: "pgssub", language: "jpn", deliveryMethod: "Encode"),
        MediaStreamInfo(index: 5, type: "Subtitle", codec: "subrip", language: "fre", isExternal: true, deliveryMethod: "External",
                        deliveryUrl: "/Videos/a/a/Subtitles/5/0/Stream.srt"),
    ]

    func resolve(_ text: String, _ kind: String) throws(JellyfinError) -> Int? {
        try TrackSelection.resolve(TrackChoice(parsing: text), kind: kind, in: Self.streams, item: "Film")
    }

    @Test func choicesParse() {
        #expect(TrackChoice(parsing: "2") == .index(2))
        #expect(TrackChoice(parsing: " DE ") == .language("de"))
        #expect(TrackChoice(parsing: "off") == TrackChoice.none)
        for bad in ["", "-1", "english", "e1", "d"] { #expect(TrackChoice(parsing: bad) == nil, "\(bad)") }
    }

    @Test func languagesMatchInEveryISO639Form() throws {
        #expect(try resolve("de", "Audio") == 2)
        #expect(try resolve("deu", "Audio") == 2)
        #expect(try resolve("GER", "Audio") == 2)
        #expect(try resolve("fr", "Subtitle") == 5)
        #expect(try resolve("none", "Subtitle") == -1)
        #expect(try resolve("3", "Subtitle") == 3)
        #expect(throws: JellyfinError.noSuchTrack(item: "Film", kind: "Audio", choice: "3", available: "it has 1 eng English, 2 ger")) {
            try resolve("3", "Audio")
        }
        #expect(throws: JellyfinError.self) { try resolve("jpn", "Audio") }
        #expect(throws: JellyfinError.self) { try resolve("none", "Audio") }
    }

    func tracks(_ method: PlayMethod, audio: Int?, subtitle: Int?) -> PlayerTracks {
        TrackSelection.playerTracks(streams: Self.streams, method: method, audio: audio, subtitle: subtitle) { URL(string: "http://s" + $0) }
    }

    @Test func serverIndicesBecomeThePlayersTrackNumbers() {
        let direct = tracks(.directPlay, audio: 2, subtitle: 3)
        #expect(direct.audio == 2 && direct.subtitle == 1)
        #expect(direct.subtitleFiles.map(\.url.absoluteString) == ["http://s/Videos/a/a/Subtitles/5/0/Stream.srt"])
        #expect(direct.subtitleFiles.map(\.selected) == [false] && direct.subtitleFiles.first?.language == "fre")

        let external = tracks(.directPlay, audio: 1, subtitle: 5)
        #expect(external.audio == 1 && external.subtitle == 0 && external.subtitleFiles.first?.selected == true)
        #expect(tracks(.directPlay, audio: nil, subtitle: nil).subtitle == 0, "the server's default of none turns them off")
        #expect(tracks(.directPlay, audio: 1, subtitle: -1).subtitle == 0)
        #expect(tracks(.directPlay, audio: 1, subtitle: 4).subtitle == nil, "burnt in by the server: nothing for the player")
        // A transcode carries only the chosen audio; subtitles inside it are the stream's.
        let transcoded = tracks(.transcode, audio: 2, subtitle: 3)
        #expect(transcoded.audio == nil && transcoded.subtitle == nil)
        #expect(tracks(.transcode, audio: 2, subtitle: 5).subtitleFiles.first?.selected == true)
    }

    @Test func subtitlesInsideTheFileCountForMpvEvenWhenTheServerAlsoDeliversThem() {
        // A real server may deliver a text subtitle inside the file as a file too (External);
        // mpv still counts it among the file's own tracks.
        let streams = [
            MediaStreamInfo(index: 0, type: "Video"),
            MediaStreamInfo(index: 1, type: "Audio"),
            MediaStreamInfo(index: 2, type: "Subtitle", codec: "subrip", language: "eng", deliveryMethod: "External", deliveryUrl: "/s/2.srt"),
            MediaStreamInfo(index: 3, type: "Subtitle", codec: "pgssub", language: "ger", deliveryMethod: "Embed"),
        ]
        let second = TrackSelection.playerTracks(streams: streams, method: .directPlay, audio: 1, subtitle: 3) { URL(string: "http://s" + $0) }
        #expect(second.subtitle == 2 && second.subtitleFiles.map(\.selected) == [false])
        let first = TrackSelection.playerTracks(streams: streams, method: .directPlay, audio: 1, subtitle: 2) { URL(string: "http://s" + $0) }
        #expect(first.subtitle == 0 && first.subtitleFiles.map(\.selected) == [true], "the delivered file is shown")
    }

    @Test func mpvIsToldWhatToSelect() {
        #expect(MPVPlayer.arguments(for: PlayerTracks(audio: 2, subtitle: 0)) == ["--aid=2", "--sid=no"])
        #expect(MPVPlayer.arguments(for: PlayerTracks(subtitle: 3)) == ["--sid=3"])
        #expect(MPVPlayer.arguments(for: PlayerTracks()) == [])
        #expect(MPVPlayer.track(["id": 2, "lang": "fre", "external": true, "codec": "subrip"]) ==
                PlayingTracks.Track(id: 2, language: "fre", codec: "subrip", isExternal: true))
        #expect(MPVPlayer.track(nil) == nil && MPVPlayer.track(["lang": "x"]) == nil)
    }
}
