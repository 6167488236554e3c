import Foundation
import Synchronization
import RFB
import Sendspin

/// Where a VNC session's QEMU audio goes (`--audio`): an ALSA device (`alsa`, `alsa:DEVICE`)
/// or a WAV file (a path ending in .wav). Samples are asked for as 16-bit stereo at 48 kHz and
/// written on a queue of their own, so a device that blocks never holds up the session.
final class VNCAudioOutput: Sendable {
    static let format = RFBAudioFormat(sample: .s16, channels: 2, sampleRate: 48000)
    /// Logged when --audio was given and the server never confirmed audio.
    static let serverSentNone = "the server sent no audio: only QEMU's own VNC server has it (started with -vnc …,audiodev=ID)"

    enum Destination: Sendable, Equatable {
        case alsa(String)
        case wav(String)

        /// Parses `--audio`; the message says what is accepted.
        init(_ text: String) throws(CommandFailure) {
            if text == "alsa" {
                self = .alsa("default")
            } else if text.hasPrefix("alsa:"), text.count > 5 {
                self = .alsa(String(text.dropFirst(5)))
            } else if text.lowercased().hasSuffix(".wav") {
                self = .wav(text)
            } else {
                throw CommandFailure(message: "--audio takes alsa, alsa:DEVICE (see `aplay -L`) or a file name ending in .wav, not '\(text)'", exitCode: 2)
            }
        }
    }

    private let queue = DispatchQueue(label: "farcast.vnc.audio")
    private let play: @Sendable ([Int32], Int) throws -> Void
    private let finish: @Sendable () -> Void
    private let state = Mutex<(frames: Int, failure: String?)>((0, nil))

    init(_ destination: Destination) throws {
        let output = OutputFormat(sampleRate: Self.format.sampleRate, channels: Self.format.channels, bitDepth: 16)
        switch destination {
        case .alsa(let device):
            #if canImport(CALSA)
            let player = try ALSAStreamPlayer(device: device, format: output)
            play = { samples, frames in try player.play(samples, frames: frames) }
            finish = { player.close() }
            #else
            throw CommandFailure(message: "this build has no ALSA output; use --audio FILE.wav")
            #endif
        case .wav(let path):
            let sink = WAVSink(path: path)
            try sink.start(format: output)
            play = { samples, frames in try samples.withUnsafeBufferPointer { try sink.write($0, frames: frames) } }
            finish = { try? sink.finish() }
        }
    }

    /// Takes one audio event from the session.
    func handle(_ audio: RFBAudio) {
        guard case .samples(let bytes) = audio else { return }
        // S16 little-endian, interleaved → full-scale 32-bit.
        let count = bytes.count / 2
        let samples = (0..<count).map { i in Int32(Int16(bitPattern: UInt16(bytes[2 * i]) | UInt16(bytes[2 * i + 1]) << 8)) << 16 }
        let frames = count / Self.format.channels
        queue.async { [self] in
            guard state.withLock({ $0.failure == nil }) else { return }
            do {
                try play(samples, frames)
                state.withLock { $0.frames += frames }
            } catch {
                state.withLock { $0.failure = "\(describe(error))" }
            }
        }
    }

    /// Waits for what was handed over, closes the output; returns the seconds of sound written
    /// and the output's failure, if any.
    func close() -> (seconds: Double, failure: String?) {
        queue.sync {}
        finish()
        return state.withLock { (Double($0.frames) / Double(Self.format.sampleRate), $0.failure) }
    }
}
