public import Foundation

/// Which audio or subtitle stream to play.
public enum TrackChoice: Sendable, Equatable, CustomStringConvertible {
    /// The server's stream index (as `farcast jellyfin info` lists it).
    case index(Int)
    /// The first stream in this language: an ISO 639 code, two letters or three (`de`, `ger`
    /// and `deu` are one language).
    case language(String)
    /// No subtitles.
    case none

    /// `2`, `eng`, `de`, `none` or `off`; nil for anything else.
    public init?(parsing text: String) {
        let text = text.trimmingCharacters(in: .whitespaces).lowercased()
        if let index = Int(text), index >= 0 {
            self = .index(index)
        } else if text == "none" || text == "off" {
            self = .none
        } else if (2...3).contains(text.count), text.allSatisfy({ $0.isASCII && $0.isLetter }) {
            self = .language(text)
        } else {
            return nil
        }
    }

    public var description: String {
        switch self {
        case .index(let index): return "\(index)"
        case .language(let code): return code
        case .none: return "none"
        }
    }
}

/// The tracks a player opens a media with, in the player's terms (mpv's `aid`/`sid`: the
/// N-th track of its kind in the media, counted from 1), and subtitle files to load beside it.
public struct PlayerTracks: Sendable, Equatable {
    /// A subtitle file the server delivers beside the media.
    public struct SubtitleFile: Sendable, Equatable {
        /// On the server, then (once fetched) a local file.
        public var url: URL
        public var language: String?
        public var title: String?
        /// Show this one (the media's own subtitles are then off).
        public var selected: Bool

        public init(url: URL, language: String? = nil, title: String? = nil, selected: Bool = false) {
            (self.url, self.language, self.title, self.selected) = (url, language, title, selected)
        }
    }

    /// nil: the player's own choice.
    public var audio: Int?
    /// The media's own subtitle track to show; nil: the player's own choice; 0: none of them.
    public var subtitle: Int?
    public var subtitleFiles: [SubtitleFile]

    public init(audio: Int? = nil, subtitle: Int? = nil, subtitleFiles: [SubtitleFile] = []) {
        (self.audio, self.subtitle, self.subtitleFiles) = (audio, subtitle, subtitleFiles)
    }
}

/// The audio and subtitle tracks a player is playing, as it says.
public struct PlayingTracks: Sendable, Equatable {
    public struct Track: Sendable, Equatable {
        /// The player's track number within its kind.
        public var id: Int
        public var language: String?
        public var title: String?
        public var codec: String?
        /// Loaded from a file beside the media.
        public var isExternal: Bool

        public init(id: Int, language: String? = nil, title: String? = nil, codec: String? = nil, isExternal: Bool = false) {
            (self.id, self.language, self.title, self.codec, self.isExternal) = (id, language, title, codec, isExternal)
        }
    }

    public var audio: Track?
    public var subtitle: Track?

    public init(audio: Track? = nil, subtitle: Track? = nil) { (self.audio, self.subtitle) = (audio, subtitle) }
}

/// Choices resolved against a media source's streams, and the server's stream indices turned
/// into the player's track numbers.
enum TrackSelection {
    /// The server index `choice` names among `streams` of `kind` (`Audio`, `Subtitle`); -1 for
    /// no subtitles; nil when there is no choice.
    static func resolve(_ choice: TrackChoice?, kind: String, in streams: [MediaStreamInfo], item: String) throws(JellyfinError) -> Int? {
        guard let choice else { return nil }
        let candidates = streams.filter { $0.type == kind && $0.index != nil }.sorted { $0.index! < $1.index! }
        let found: MediaStreamInfo?
        switch choice {
        case .none:
            guard kind == "Subtitle" else { throw .noSuchTrack(item: item, kind: kind, choice: "none", available: "audio cannot be turned off") }
            return -1
        case .index(let index): found = candidates.first { $0.index == index }
        case .language(let code): found = candidates.first { $0.language.map { sameLanguage($0, code) } ?? false }
        }
        guard let found, let index = found.index else {
            let listed = candidates.map { stream in
                ([String(stream.index!), stream.language, stream.title].compactMap { $0 } + (stream.isExternal ? ["(external)"] : [])).joined(separator: " ")
            }
            throw .noSuchTrack(item: item, kind: kind, choice: choice.description,
                               available: listed.isEmpty ? "it has none" : "it has " + listed.joined(separator: ", "))
        }
        return index
    }

    /// The player's tracks for a source played by `method` with the server's `audio` and
    /// `subtitle` indices (nil: the server's default was none; -1: none). Subtitles the server
    /// delivers `External` become files to load; those it burns in (`Encode`) or puts in the
    /// stream need nothing of the player. A transcode carries only the chosen audio.
    static func playerTracks(streams: [MediaStreamInfo], method: PlayMethod, audio: Int?, subtitle: Int?,
                             url: (String) -> URL?) -> PlayerTracks {
        let sorted = streams.filter { $0.index != nil }.sorted { $0.index! < $1.index! }
        let internalAudio = sorted.filter { $0.type == "Audio" && !$0.isExternal }
        // mpv counts every subtitle track inside the file, those the server also delivers as files included.
        let internalSubtitles = sorted.filter { $0.type == "Subtitle" && !$0.isExternal }
        var tracks = PlayerTracks()
        tracks.subtitleFiles = sorted.filter { $0.type == "Subtitle" && $0.deliveryMethod == "External" }.compactMap { stream in
            guard let path = stream.deliveryUrl, let address = url(path) else { return nil }
            return .init(url: address, language: stream.language.flatMap { $0 == "und" ? nil : $0 }, title: stream.title,
                         selected: stream.index == subtitle)
        }
        if method != .transcode, let audio, let at = internalAudio.firstIndex(where: { $0.index == audio }) {
            tracks.audio = at + 1
        }
        guard let subtitle, subtitle >= 0, let chosen = sorted.first(where: { $0.index == subtitle && $0.type == "Subtitle" }) else {
            tracks.subtitle = 0   // none chosen, or the server's default is none
            return tracks
        }
        if tracks.subtitleFiles.contains(where: \.selected) {
            tracks.subtitle = 0
        } else if method != .transcode, chosen.deliveryMethod != "Encode", let at = internalSubtitles.firstIndex(where: { $0.index == subtitle }) {
            tracks.subtitle = at + 1
        } else {
            tracks.subtitle = nil   // burnt into the picture, or inside the transcoded stream
        }
        return tracks
    }

    /// Whether two ISO 639 codes name one language: two letters or three, bibliographic
    /// (`ger`) or terminological (`deu`).
    static func sameLanguage(_ a: String, _ b: String) -> Bool {
        canonical(a) == canonical(b)
    }

    static func canonical(_ code: String) -> String {
        let code = code.lowercased()
        if let terminological = bibliographic[code] { return terminological }
        if code.count == 2, let three = twoToThree[code] { return three }
        return code
    }

    /// ISO 639-2/B → 639-2/T, where they differ.
    private static let bibliographic: [String: String] = [
        "alb": "sqi", "arm": "hye", "baq": "eus", "bur": "mya", "chi": "zho", "cze": "ces", "dut": "nld", "fre": "fra", "geo": "kat",
        "ger": "deu", "gre": "ell", "ice": "isl", "mac": "mkd", "mao": "mri", "may": "msa", "per": "fas", "rum": "ron", "slo": "slk",
        "tib": "bod", "wel": "cym",
    ]

    /// ISO 639-1 → 639-2/T for the languages media is most often tagged with.
    private static let twoToThree: [String: String] = [
        "ar": "ara", "bg": "bul", "ca": "cat", "cs": "ces", "cy": "cym", "da": "dan", "de": "deu", "el": "ell", "en": "eng", "es": "spa",
        "et": "est", "eu": "eus", "fa": "fas", "fi": "fin", "fr": "fra", "ga": "gle", "he": "heb", "hi": "hin", "hr": "hrv", "hu": "hun",
        "hy": "hye", "id": "ind", "is": "isl", "it": "ita", "ja": "jpn", "ka": "kat", "ko": "kor", "lt": "lit", "lv": "lav", "mk": "mkd",
        "ms": "msa", "nb": "nob", "nl": "nld", "nn": "nno", "no": "nor", "pl": "pol", "pt": "por", "ro": "ron", "ru": "rus", "sk": "slk",
        "sl": "slv", "sq": "sqi", "sr": "srp", "sv": "swe", "ta": "tam", "th": "tha", "tr": "tur", "uk": "ukr", "vi": "vie", "zh": "zho",
    ]
}
