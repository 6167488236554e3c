#if canImport(CALSA)
import CALSA
import Foundation
import Synchronization

/// Volume and mute on the hardware: an ALSA mixer control (a card's `Master`, `PCM`, a softvol
/// control, PulseAudio's), set instead of scaling samples so the PCM reaches the device
/// untouched (what snapclient users choose for bit-perfect output). Percent follows the
/// software volume's curve (amplitude (v/100)^1.5) when the control states its range in dB,
/// else its raw range linearly, as amixer shows percent. Mute uses the control's switch, or its
/// lowest volume when it has none.
public final class ALSAMixer: HardwareVolume, @unchecked Sendable {
    // @unchecked: the mixer handles are used only under `lock`.
    private let lock = Mutex<Void>(())
    private let mixer: OpaquePointer
    private let element: OpaquePointer
    public let description: String

    /// Opens `control` (index `index`) on the mixer of control device `device` ("default", "hw:1",
    /// "pulse"); `configuration` is ALSA configuration text `device` resolves in (tests).
    /// Throws `SendspinError.audioDevice` when the device or a control with a playback volume
    /// is not there.
    public init(control: String, index: UInt32 = 0, device: String = "default", configuration: String? = nil) throws {
        try ALSALibrary.load()
        calsa_quiet_errors()
        var mixer: OpaquePointer?, element: OpaquePointer?
        let err = calsa_mixer_open(&mixer, &element, device, configuration, control, index)
        guard err >= 0, let mixer, let element else {
            let why = err == -ENOENT ? "has no control '\(control)' with a playback volume" : "does not open: \(String(cString: calsa_error(err)))"
            throw SendspinError.audioDevice("the ALSA mixer of '\(device)' \(why) (see `amixer -D \(device) scontrols`)")
        }
        self.mixer = mixer
        self.element = element
        description = "ALSA mixer '\(control)'\(index > 0 ? ",\(index)" : "") on \(device)"
    }

    deinit { snd_mixer_close(mixer) }

    public func apply(volume: Int, muted: Bool) throws {
        let err = lock.withLock { _ in calsa_mixer_set(element, Int32(min(max(volume, 0), 100)), muted ? 1 : 0) }
        if err < 0 { throw SendspinError.audioDevice("setting \(description): \(String(cString: calsa_error(err)))") }
    }
}
#endif
