@testable import Sendspin
import Testing

/// The now-playing display's model: progress from the metadata clock, keys to controller commands.
@Suite struct NowPlayingTests {
    func playing(progress: Int64 = 12_000, speed: Int64 = 1000, timestamp: Int64 = 5_000_000) -> NowPlaying {
        var n = NowPlaying()
        var m = Metadata()
        m.timestamp = timestamp
        m.title = "Song"
        m.artist = "Band"
        m.album = "Record"
        m.progress = TrackProgress(trackProgress: progress, trackDuration: 180_000, playbackSpeed: speed)
        n.metadata = m
        // Server time = client time + 1 s.
        n.offsetUs = 1_000_000
        return n
    }

    @Test func progressAdvancesFromTheMetadataTimestampOnTheServersClock() {
        let n = playing()
        // Client 4 s = server 5 s: the timestamp itself.
        #expect(n.positionMs(atClientUs: 4_000_000) == 12_000)
        #expect(n.positionMs(atClientUs: 6_500_000) == 14_500)
        // A scheduled update (timestamp ahead) holds its progress until then.
        #expect(n.positionMs(atClientUs: 1_000_000) == 12_000)
        // Half speed, and paused.
        #expect(playing(speed: 500).positionMs(atClientUs: 8_000_000) == 14_000)
        #expect(playing(speed: 0).positionMs(atClientUs: 90_000_000) == 12_000)
        // Never past the end.
        #expect(n.positionMs(atClientUs: 900_000_000) == 180_000)
    }

    @Test func keysBecomeTheCommandsTheServerOffers() {
        var n = playing()
        var state = ControllerState()
        state.volume = 100
        state.muted = false
        state.repeat = "all"
        state.shuffle = true
        state.supportedCommands = [.play, .pause, .next, .volume, .mute, .repeatOne, .unshuffle]
        n.controller = state
        n.groupState = .playing
        #expect(n.action(forKey: " ") == .send(ControllerCommand(command: .pause)))
        #expect(n.action(forKey: "n") == .send(ControllerCommand(command: .next)))
        #expect(n.action(forKey: "p") == nil, "previous is not offered")
        #expect(n.action(forKey: "+") == .send(ControllerCommand(command: .volume, volume: 100)))
        #expect(n.action(forKey: "-") == .send(ControllerCommand(command: .volume, volume: 95)))
        #expect(n.action(forKey: "m") == .send(ControllerCommand(command: .mute, mute: true)))
        #expect(n.action(forKey: "r") == .send(ControllerCommand(command: .repeatOne)), "all → one")
        #expect(n.action(forKey: "s") == .send(ControllerCommand(command: .unshuffle)))
        #expect(n.action(forKey: "q") == .quit)
        #expect(n.action(forKey: "x") == nil)
        n.groupState = .stopped
        #expect(n.action(forKey: " ") == .send(ControllerCommand(command: .play)))
    }

    @Test func linesFitTheWidthAndShowTheTrack() {
        var n = playing()
        n.metadata?.title = String(repeating: "Very long title ", count: 10)
        let lines = n.lines(width: 40, atClientUs: 4_000_000)
        #expect(lines.allSatisfy { $0.count <= 40 }, "\(lines)")
        #expect(lines[0].hasSuffix("…") && lines[1] == "Band — Record" && lines[2].hasSuffix(" 0:12 / 3:00"))
        #expect(NowPlaying().lines(width: 80, atClientUs: 0).first == "Nothing playing")
    }
}
