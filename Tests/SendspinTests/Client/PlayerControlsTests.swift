import Foundation
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

/// `PlayerCore` with a hardware volume (`--mixer`): the server's volume and mute go to it and the
/// samples keep unity gain; when it fails the samples are scaled again, for the rest of the run.
/// The hardware here is a double that records or refuses: the ALSA mixer itself is tested
/// against PulseAudio's control in the integration tests (SendspinMixerTests).
@Suite struct HardwareVolumeTests {
    final class Recorder: HardwareVolume, @unchecked Sendable {
        let lock = NSLock()
        var applied: [(Int, Bool)] = []
        var refuse = false
        var description: String { "recorder" }
        func apply(volume: Int, muted: Bool) throws {
            lock.lock()
            defer { lock.unlock() }
            if refuse { throw SendspinError.audioDevice("the control went away") }
            applied.append((volume, muted))
        }
    }

    @Test func volumeAndMuteGoToTheHardwareAndTheSamplesStayUntouched() {
        let hardware = Recorder()
        let core = PlayerCore(settings: PlaybackEngine.Settings(), hardwareVolume: hardware)
        _ = core.setVolume(40, muted: nil)
        #expect(core.withEngine { $0.targetGain } == 1)
        _ = core.setVolume(nil, muted: true)
        #expect(core.withEngine { $0.targetGain } == 1, "muted on the hardware, not by silencing the samples")
        #expect(hardware.applied.map { "\($0.0) \($0.1)" } == ["40 false", "40 true"])
        #expect(core.hardwareVolumeFailure == nil)
    }

    @Test func aFailingHardwareVolumeFallsBackToScalingTheSamples() {
        let hardware = Recorder()
        let core = PlayerCore(settings: PlaybackEngine.Settings(), hardwareVolume: hardware)
        hardware.refuse = true
        _ = core.setVolume(25, muted: false)
        #expect(abs(core.withEngine { $0.targetGain } - 0.125) < 1e-9, "(25/100)^1.5 on the samples")
        #expect(core.hardwareVolumeFailure?.contains("the control went away") == true)
        // Given up for the run: later commands are not tried on it again.
        hardware.refuse = false
        _ = core.setVolume(100, muted: nil)
        #expect(hardware.applied.isEmpty && core.withEngine { $0.targetGain } == 1)
    }
}
