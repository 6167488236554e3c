@testable import Sendspin
import Testing

/// The server's player commands as this player takes them, without a session or engine.
struct PlayerControlsTests {
    static func command(_ name: String, volume: Int? = nil, mute: Bool? = nil, delay: Int? = nil) -> PlayerCommand {
        PlayerCommand(command: name, volume: volume, mute: mute, outputDelayMs: delay)
    }

    @Test func valuesAreClampedToWhatThePlayerCanDo() {
        #expect(PlayerControls.effect(of: Self.command("volume", volume: 42)) == .volume(42))
        #expect(PlayerControls.effect(of: Self.command("volume", volume: 250)) == .volume(100))
        #expect(PlayerControls.effect(of: Self.command("volume", volume: -3)) == .volume(0))
        #expect(PlayerControls.effect(of: Self.command("mute", mute: true)) == .muted(true))
        #expect(PlayerControls.effect(of: Self.command("set_output_delay", delay: 120)) == .outputDelayMs(120))
        #expect(PlayerControls.effect(of: Self.command("set_output_delay", delay: 60_000)) == .outputDelayMs(5000))
        #expect(PlayerControls.effect(of: Self.command("set_output_delay", delay: -1)) == .outputDelayMs(0))
    }

    @Test func unknownCommandsAndMissingValuesChangeNothing() {
        #expect(PlayerControls.effect(of: Self.command("switch")) == nil)
        #expect(PlayerControls.effect(of: Self.command("VOLUME", volume: 10)) == nil)
        #expect(PlayerControls.effect(of: Self.command("volume")) == nil)
        #expect(PlayerControls.effect(of: Self.command("mute", volume: 10)) == nil)
        #expect(PlayerControls.effect(of: Self.command("set_output_delay", mute: true)) == nil)
    }

    @Test func theStateReportListsExactlyTheCommandsTaken() {
        #expect(PlayerControls.supportedCommands == ["volume", "mute", "set_output_delay"])
        for name in PlayerControls.supportedCommands {
            #expect(PlayerControls.effect(of: Self.command(name, volume: 1, mute: false, delay: 1)) != nil, "\(name) is listed but not taken")
        }
    }
}
