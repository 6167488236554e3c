import FarcastSupport

/// visualizer@v1: what the server computes from the audio it plays (or, for beats, is told),
/// sent ahead as small binary messages, each stamped with the server time its sound plays.

/// The kinds of visualizer data the role defines, as the wire spells them.
public enum VisualizerKind: String, Codable, Sendable, CaseIterable, CustomStringConvertible {
    case loudness
    case beat
    case fPeak = "f_peak"
    case spectrum
    case peak

    /// The binary message type that carries the kind (16–20).
    public var messageType: UInt8 {
        switch self {
        case .loudness: 16
        case .beat: 17
        case .fPeak: 18
        case .spectrum: 19
        case .peak: 20
        }
    }

    public init?(messageType: UInt8) {
        guard let kind = Self.allCases.first(where: { $0.messageType == messageType }) else { return nil }
        self = kind
    }

    public var description: String { rawValue }
}

/// How the spectrum is binned: `bins` display bands spread over `minimumHz`…`maximumHz` on a
/// linear, logarithmic or mel scale.
public struct SpectrumLayout: Codable, Sendable, Equatable, CustomStringConvertible {
    public enum Scale: String, Codable, Sendable, CaseIterable { case lin, log, mel }

    public var bins: Int
    public var scale: Scale
    public var minimumHz: Int
    public var maximumHz: Int

    /// The server computes at most this many bands.
    public static let maximumBins = 1024

    public init(bins: Int, scale: Scale = .log, minimumHz: Int = 40, maximumHz: Int = 16_000) {
        self.bins = bins
        self.scale = scale
        self.minimumHz = minimumHz
        self.maximumHz = maximumHz
    }

    enum CodingKeys: String, CodingKey { case bins = "n_disp_bins", scale, minimumHz = "f_min", maximumHz = "f_max" }

    /// Parses `BINS[:SCALE[:FMIN-FMAX]]` (`32`, `64:mel`, `16:lin:20-8000`); scale log and
    /// 40–16000 Hz when left out.
    public static func parse(_ text: String) -> Result<SpectrumLayout, VisualizerRequestError> {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard (1...3).contains(parts.count), let bins = Int(parts[0]), (1...maximumBins).contains(bins) else {
            return .failure(VisualizerRequestError(text: text, reason: "BINS[:SCALE[:FMIN-FMAX]], BINS 1–\(maximumBins)"))
        }
        var layout = SpectrumLayout(bins: bins)
        if parts.count >= 2 {
            guard let scale = Scale(rawValue: parts[1].lowercased()) else {
                return .failure(VisualizerRequestError(text: text, reason: "the scale is lin, log or mel"))
            }
            layout.scale = scale
        }
        if parts.count == 3 {
            let range = parts[2].split(separator: "-", omittingEmptySubsequences: false)
            guard range.count == 2, let low = Int(range[0]), let high = Int(range[1]), low >= 0, high > low, high <= 96_000 else {
                return .failure(VisualizerRequestError(text: text, reason: "the range is FMIN-FMAX in Hz, FMIN below FMAX"))
            }
            (layout.minimumHz, layout.maximumHz) = (low, high)
        }
        return .success(layout)
    }

    public var description: String { "\(bins) \(scale.rawValue) bands \(minimumHz)–\(maximumHz) Hz" }
}

/// What the client asks for (`client/state.visualizer`, in every client/state): the kinds,
/// the highest rate of the periodic ones (loudness, f_peak, spectrum; beats and peaks come as
/// they happen), and the spectrum's layout when spectrum is asked for.
public struct VisualizerRequest: Codable, Sendable, Equatable {
    public var kinds: [VisualizerKind]
    public var rateMax: Int
    public var spectrum: SpectrumLayout?

    /// The server sends periodic frames at most this often.
    public static let maximumRate = 120

    public init(kinds: [VisualizerKind] = VisualizerKind.allCases, rateMax: Int = 30, spectrum: SpectrumLayout? = SpectrumLayout(bins: 32)) {
        var unique: [VisualizerKind] = []
        for kind in kinds where !unique.contains(kind) { unique.append(kind) }
        self.kinds = unique
        self.rateMax = rateMax
        self.spectrum = unique.contains(.spectrum) ? spectrum ?? SpectrumLayout(bins: 32) : nil
    }

    enum CodingKeys: String, CodingKey { case kinds = "types", rateMax = "rate_max", spectrum }

    /// Parses a comma-separated kind list (`loudness,beat`; `all` for every kind).
    public static func parseKinds(_ text: String) -> Result<[VisualizerKind], VisualizerRequestError> {
        if text.lowercased() == "all" { return .success(VisualizerKind.allCases) }
        var kinds: [VisualizerKind] = []
        for word in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) {
            guard let kind = VisualizerKind(rawValue: word == "fpeak" ? "f_peak" : word) else {
                return .failure(VisualizerRequestError(text: text, reason: "'\(word)' is not one of \(VisualizerKind.allCases.map(\.rawValue).joined(separator: ", ")) (or all)"))
            }
            kinds.append(kind)
        }
        guard !kinds.isEmpty else { return .failure(VisualizerRequestError(text: text, reason: "name at least one kind")) }
        return .success(kinds)
    }
}

public struct VisualizerRequestError: Error, Equatable, Sendable, CustomStringConvertible {
    public let text: String
    public let reason: String
    public var description: String { "invalid visualizer setting '\(text)': \(reason)" }
}

/// `visualizer@v1_support` in client/hello: how many bytes of visualizer messages the client
/// holds before their time (the server's budget; the request itself goes in client/state).
struct VisualizerSupport: Codable {
    var bufferCapacity: Int
    enum CodingKeys: String, CodingKey { case bufferCapacity = "buffer_capacity" }
}

/// The visualizer stream as the server set it up (`stream/start.visualizer`): the kinds it
/// will send (beat appears only once the server has beats to send), the periodic rate, whether
/// beats mark downbeats, and the spectrum's layout.
public struct VisualizerStream: Codable, Sendable, Equatable, CustomStringConvertible {
    public var kinds: [String]
    public var rateMax: Int?
    public var tracksDownbeats: Bool?
    public var spectrum: SpectrumLayout?

    public init(kinds: [String], rateMax: Int? = nil, tracksDownbeats: Bool? = nil, spectrum: SpectrumLayout? = nil) {
        self.kinds = kinds
        self.rateMax = rateMax
        self.tracksDownbeats = tracksDownbeats
        self.spectrum = spectrum
    }

    enum CodingKeys: String, CodingKey { case kinds = "types", rateMax = "rate_max", tracksDownbeats = "tracks_downbeats", spectrum }

    public var description: String {
        var parts = [kinds.isEmpty ? "no kinds" : kinds.joined(separator: ", ")]
        if let rateMax { parts.append("up to \(rateMax)/s") }
        if let spectrum { parts.append("spectrum \(spectrum)") }
        return parts.joined(separator: "; ")
    }
}

/// One visualizer message: the server time (µs) its sound plays, and its value.
public struct VisualizerFrame: Sendable, Equatable {
    public enum Value: Sendable, Equatable {
        /// Perceived loudness, 0–65535.
        case loudness(UInt16)
        /// A beat; `downbeat` at the start of a bar.
        case beat(downbeat: Bool)
        /// The strongest frequency (Hz; 0: none) and its strength (0–65535).
        case fPeak(frequency: UInt16, amplitude: UInt16)
        /// One 0–65535 value per display band, lowest band first.
        case spectrum([UInt16])
        /// A transient (an onset), its strength 0–255.
        case peak(UInt8)

        public var kind: VisualizerKind {
            switch self {
            case .loudness: .loudness
            case .beat: .beat
            case .fPeak: .fPeak
            case .spectrum: .spectrum
            case .peak: .peak
            }
        }
    }

    public var timestamp: Int64
    public var value: Value

    public init(timestamp: Int64, value: Value) {
        self.timestamp = timestamp
        self.value = value
    }

    /// Reads one message of `type` (16–20) from `body`, the bytes after the type:
    /// `[timestamp i64 BE][data]`, the data's size fixed by the kind (the spectrum's by the
    /// stream's band count). The reason when it is not that.
    static func parse(type: UInt8, body: [UInt8], spectrumBins: Int?) -> Result<VisualizerFrame, MalformedVisualization> {
        guard let kind = VisualizerKind(messageType: type) else { return .failure(MalformedVisualization("visualizer message type \(type) is not defined")) }
        guard body.count >= 8 else { return .failure(MalformedVisualization("a \(kind) message of \(body.count + 1) bytes, shorter than its 9-byte header")) }
        var reader = ByteReader(body)
        // Eight bytes are there: this read cannot fail.
        let timestamp = (try? reader.readInteger(as: Int64.self)) ?? 0
        let data = body[8...]
        func expect(_ size: Int) -> MalformedVisualization? {
            data.count == size ? nil : MalformedVisualization("a \(kind) message with \(data.count) data bytes (\(size) expected)")
        }
        func u16(_ offset: Int) -> UInt16 { UInt16(data[data.startIndex + offset]) << 8 | UInt16(data[data.startIndex + offset + 1]) }
        switch kind {
        case .loudness:
            if let problem = expect(2) { return .failure(problem) }
            return .success(VisualizerFrame(timestamp: timestamp, value: .loudness(u16(0))))
        case .beat:
            if let problem = expect(1) { return .failure(problem) }
            return .success(VisualizerFrame(timestamp: timestamp, value: .beat(downbeat: data[data.startIndex] & 0x01 != 0)))
        case .fPeak:
            if let problem = expect(4) { return .failure(problem) }
            return .success(VisualizerFrame(timestamp: timestamp, value: .fPeak(frequency: u16(0), amplitude: u16(2))))
        case .spectrum:
            guard let bins = spectrumBins, bins > 0 else { return .failure(MalformedVisualization("a spectrum message on a stream that set up no spectrum")) }
            if let problem = expect(bins * 2) { return .failure(problem) }
            return .success(VisualizerFrame(timestamp: timestamp, value: .spectrum((0..<bins).map { u16($0 * 2) })))
        case .peak:
            if let problem = expect(1) { return .failure(problem) }
            return .success(VisualizerFrame(timestamp: timestamp, value: .peak(data[data.startIndex])))
        }
    }

    /// Bytes the message took on the wire (for the buffer the client announced).
    var wireSize: Int {
        switch value {
        case .loudness: 11
        case .beat, .peak: 10
        case .fPeak: 13
        case .spectrum(let bins): 9 + bins.count * 2
        }
    }
}

/// Why a visualizer or color message was dropped.
public struct MalformedVisualization: Error, Equatable, Sendable, CustomStringConvertible {
    public let reason: String
    init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
