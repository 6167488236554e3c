import FarcastSupport
import Foundation
import Sendspin
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `--visualizer-json` and `--color-json`: one JSON object per line, written as each frame or
/// palette is delivered (when its sound plays), to a file or to stdout (`-`). Times are the
/// client's monotonic raw clock in µs, the clock `--trace` uses; `server_us` is the server time
/// the message carried.
final class JSONLinesOutput: Sendable {
    private let descriptor: Int32
    private let closes: Bool
    private let path: String
    private let failed = Atomic<Bool>(false)
    /// One encoder for every line, used under the lock (a new one per line costs more than the
    /// line is late by); the line types spell their keys in snake_case themselves.
    private let encoder: Mutex<JSONEncoder>

    /// Opens `path` (truncated), or stdout for `-`.
    init(path: String, what: String) throws {
        self.path = path
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        self.encoder = Mutex(encoder)
        if path == "-" {
            (descriptor, closes) = (STDOUT_FILENO, false)
            return
        }
        try OutputPath.check(path, what: what)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw CommandFailure(message: "cannot write the \(what) \(path): \(String(cString: strerror(errno)))") }
        (descriptor, closes) = (fd, true)
    }

    deinit { if closes { close(descriptor) } }

    /// Writes one line; a failed write is reported once (the player goes on).
    func write<T: Encodable>(_ line: T, onFailure: (String) -> Void) {
        write([line], onFailure: onFailure)
    }

    /// Writes lines with one system call (the frames of one instant leave together); a failed
    /// write is reported once (the player goes on).
    func write<T: Encodable>(_ lines: [T], onFailure: (String) -> Void) {
        guard !failed.load(ordering: .relaxed) else { return }
        let ok = encoder.withLock { encoder in
            var bytes: [UInt8] = []
            for line in lines {
                guard let encoded = try? encoder.encode(line) else { continue }
                bytes += encoded
                bytes.append(UInt8(ascii: "\n"))
            }
            var offset = 0
            while offset < bytes.count {
                let n = bytes[offset...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                offset += n
            }
            return true
        }
        if !ok, !failed.exchange(true, ordering: .relaxed) {
            onFailure("cannot write to \(path == "-" ? "stdout" : path): \(String(cString: strerror(errno))); no more lines are written")
        }
    }
}

/// One `--visualizer-json` line: a frame (`type` its kind, the fields of that kind), the
/// stream's setup (`stream`) or its end (`stream_end`).
struct VisualizerLine: Encodable {
    var type: String
    var serverUs: Int64?
    var dueUs: Int64?
    var deliveredUs: Int64?
    var loudness: UInt16?
    var downbeat: Bool?
    var frequencyHz: UInt16?
    var amplitude: UInt16?
    var bins: [UInt16]?
    var strength: UInt8?
    // The stream's setup.
    var types: [String]?
    var rateMax: Int?
    var tracksDownbeats: Bool?
    var spectrumBins: Int?
    var spectrumScale: String?
    var spectrumMinHz: Int?
    var spectrumMaxHz: Int?

    enum CodingKeys: String, CodingKey {
        case type, serverUs = "server_us", dueUs = "due_us", deliveredUs = "delivered_us", loudness, downbeat, frequencyHz = "frequency_hz"
        case amplitude, bins, strength, types, rateMax = "rate_max", tracksDownbeats = "tracks_downbeats", spectrumBins = "spectrum_bins"
        case spectrumScale = "spectrum_scale", spectrumMinHz = "spectrum_min_hz", spectrumMaxHz = "spectrum_max_hz"
    }

    init(type: String) { self.type = type }

    init(_ frame: VisualizerFrame, _ timing: DeliveryTiming) {
        type = frame.value.kind.rawValue
        (serverUs, dueUs, deliveredUs) = (timing.serverTime, timing.due, timing.delivered)
        switch frame.value {
        case .loudness(let value): loudness = value
        case .beat(let isDownbeat): downbeat = isDownbeat
        case .fPeak(let frequency, let strength): (frequencyHz, amplitude) = (frequency, strength)
        case .spectrum(let values): bins = values
        case .peak(let value): strength = value
        }
    }

    init(stream: VisualizerStream) {
        type = "stream"
        types = stream.kinds
        rateMax = stream.rateMax
        tracksDownbeats = stream.tracksDownbeats
        if let spectrum = stream.spectrum {
            (spectrumBins, spectrumScale, spectrumMinHz, spectrumMaxHz) = (spectrum.bins, spectrum.scale.rawValue, spectrum.minimumHz, spectrum.maximumHz)
        }
    }
}

/// One `--color-json` line: the palette (each color `[r, g, b]`; none: cleared) and its times.
struct ColorLine: Encodable {
    var type = "color"
    var serverUs: Int64
    var dueUs: Int64
    var deliveredUs: Int64
    var cleared: Bool
    var backgroundDark: [UInt8]?
    var backgroundLight: [UInt8]?
    var primary: [UInt8]?
    var accent: [UInt8]?
    var onDark: [UInt8]?
    var onLight: [UInt8]?

    enum CodingKeys: String, CodingKey {
        case type, serverUs = "server_us", dueUs = "due_us", deliveredUs = "delivered_us", cleared, backgroundDark = "background_dark"
        case backgroundLight = "background_light", primary, accent, onDark = "on_dark", onLight = "on_light"
    }

    init(_ palette: ColorPalette, _ timing: DeliveryTiming) {
        (serverUs, dueUs, deliveredUs) = (timing.serverTime, timing.due, timing.delivered)
        cleared = palette.isClear
        (backgroundDark, backgroundLight, primary, accent, onDark, onLight) =
            (palette.backgroundDark, palette.backgroundLight, palette.primary, palette.accent, palette.onDark, palette.onLight)
    }
}
