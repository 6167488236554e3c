#if canImport(CALSA)
import CALSA
import Foundation

/// Records from an ALSA capture device (a microphone: `alsa:DEVICE`) as 16-bit interleaved
/// samples at the rate and channels asked; alsa-lib converts and resamples where the device
/// differs. Beside the playback device because the package has one ALSA home. Not thread-safe:
/// one thread reads.
public final class ALSACapture {
    private var pcm: OpaquePointer?
    public let name: String
    public let sampleRate: Int
    public let channels: Int
    /// What the device granted per wake-up.
    public let periodFrames: Int
    /// Overruns (the reader was late and samples were lost), recovered from.
    public private(set) var overruns = 0

    public init(device name: String, configuration: String? = nil, sampleRate: Int = 48000, channels: Int = 2,
                periodMicroseconds: Int = 20_000) throws {
        self.name = name
        self.sampleRate = sampleRate
        self.channels = channels
        try ALSALibrary.load()
        calsa_quiet_errors()
        var handle: OpaquePointer?
        let err = configuration.map { text in text.withCString { calsa_open_capture(&handle, name, $0) } }
            ?? calsa_open_capture(&handle, name, nil)
        guard err >= 0, let handle else {
            throw SendspinError.audioDevice("cannot open ALSA capture device '\(name)': \(String(cString: calsa_error(err)))"
                + " (list them with `arecord -L`)")
        }
        var period: snd_pcm_uframes_t = 0
        let configured = calsa_configure_capture(handle, UInt32(channels), UInt32(sampleRate), UInt32(periodMicroseconds), &period)
        guard configured >= 0 else {
            snd_pcm_close(handle)
            throw SendspinError.audioDevice("ALSA capture device '\(name)' cannot record \(sampleRate) Hz, \(channels) channels: "
                + String(cString: calsa_error(configured)))
        }
        pcm = handle
        periodFrames = max(1, Int(period))
    }

    deinit { close() }

    /// Reads exactly `frames` frames into `samples` (interleaved), waiting for them; an overrun
    /// is recovered from and counted (the samples it lost are not there).
    public func read(frames: Int, into samples: inout [Int16]) throws {
        guard let pcm else { throw SendspinError.audioDevice("ALSA capture device '\(name)' is closed") }
        if samples.count < frames * channels { samples = [Int16](repeating: 0, count: frames * channels) }
        var done = 0
        while done < frames {
            let got = samples.withUnsafeMutableBufferPointer { buffer in
                snd_pcm_readi(pcm, buffer.baseAddress! + done * channels, snd_pcm_uframes_t(frames - done))
            }
            if got >= 0 {
                done += Int(got)
                continue
            }
            if got == -Int(EPIPE) || got == -Int(ESTRPIPE) || got == -Int(EINTR) {
                if got == -Int(EPIPE) { overruns += 1 }
                let err = snd_pcm_recover(pcm, Int32(got), 1)
                if err >= 0 { continue }
            }
            throw SendspinError.audioDevice("ALSA capture device '\(name)': \(String(cString: calsa_error(Int32(got))))")
        }
    }

    /// Frames captured but not yet read (the device's delay for capture), nil when the device
    /// cannot say.
    public func pendingFrames() -> Int? {
        guard let pcm else { return nil }
        var stamp: Int64 = 0, delay = 0, avail = 0
        var state: Int32 = 0
        guard calsa_status(pcm, &stamp, &delay, &avail, &state) >= 0 else { return nil }
        return max(0, delay)
    }

    public func close() {
        if let pcm { snd_pcm_close(pcm) }
        pcm = nil
    }
}
#endif
