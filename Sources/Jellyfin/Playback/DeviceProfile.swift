/// What a player can play, in the terms a Jellyfin server decides with: containers and codecs it
/// plays as they are (direct play), what it asks for when they must change (transcoding), limits
/// on codecs (profile, level, bit depth, channels) and how it takes subtitles. The server's
/// PlaybackInfo answer compares each media source against it and says whether the file plays
/// directly, remuxed or transcoded, and why.
///
/// Build one with `DeviceProfile(name:decoders:quality:)` from the decoders a player really has
/// (`LocalDecoders`), or field by field for another player.
public struct DeviceProfile: Sendable, Equatable {
    public enum MediaKind: String, Sendable { case video = "Video", audio = "Audio" }

    /// Files played as they are when the container and every stream's codec are listed
    /// (an empty codec list allows any).
    public struct DirectPlay: Sendable, Equatable {
        public var kind: MediaKind
        public var containers: [String]
        public var videoCodecs: [String]
        public var audioCodecs: [String]

        public init(kind: MediaKind, containers: [String], videoCodecs: [String] = [], audioCodecs: [String] = []) {
            (self.kind, self.containers, self.videoCodecs, self.audioCodecs) = (kind, containers, videoCodecs, audioCodecs)
        }
    }

    /// What to ask for when a file cannot play as it is.
    public struct Transcoding: Sendable, Equatable {
        public enum Delivery: String, Sendable { case http, hls }
        public var kind: MediaKind
        public var container: String
        public var videoCodecs: [String]
        public var audioCodecs: [String]
        public var delivery: Delivery
        public var maxAudioChannels: Int?
        public var minSegments: Int?
        public var breakOnNonKeyFrames: Bool

        public init(kind: MediaKind, container: String, videoCodecs: [String] = [], audioCodecs: [String], delivery: Delivery,
                    maxAudioChannels: Int? = nil, minSegments: Int? = nil, breakOnNonKeyFrames: Bool = false) {
            (self.kind, self.container, self.videoCodecs, self.audioCodecs, self.delivery) = (kind, container, videoCodecs, audioCodecs, delivery)
            (self.maxAudioChannels, self.minSegments, self.breakOnNonKeyFrames) = (maxAudioChannels, minSegments, breakOnNonKeyFrames)
        }
    }

    /// One limit on a stream property (`VideoBitDepth <= 10`, `AudioChannels <= 8`, …).
    public struct Condition: Sendable, Equatable {
        public enum Comparison: String, Sendable {
            case equals = "Equals", notEquals = "NotEquals", lessThanEqual = "LessThanEqual", greaterThanEqual = "GreaterThanEqual"
            case equalsAny = "EqualsAny"
        }
        public var comparison: Comparison
        public var property: String
        public var value: String
        public var required: Bool

        public init(_ property: String, _ comparison: Comparison, _ value: String, required: Bool = false) {
            (self.property, self.comparison, self.value, self.required) = (property, comparison, value, required)
        }
    }

    /// Conditions that apply to one codec (or every codec of a kind when `codec` is nil).
    public struct CodecLimits: Sendable, Equatable {
        public enum Kind: String, Sendable { case video = "Video", videoAudio = "VideoAudio", audio = "Audio" }
        public var kind: Kind
        public var codec: String?
        public var conditions: [Condition]

        public init(kind: Kind, codec: String? = nil, conditions: [Condition]) {
            (self.kind, self.codec, self.conditions) = (kind, codec, conditions)
        }
    }

    /// A subtitle format and how the player takes it.
    public struct Subtitle: Sendable, Equatable {
        public enum Method: String, Sendable { case encode = "Encode", embed = "Embed", external = "External", hls = "Hls", drop = "Drop" }
        public var format: String
        public var method: Method

        public init(_ format: String, _ method: Method) { (self.format, self.method) = (format, method) }
    }

    public var name: String
    /// Bits per second the server may send over a stream (nil: the server's own limit).
    public var maxStreamingBitrate: Int?
    /// Bits per second a file may have to be played or downloaded as it is.
    public var maxStaticBitrate: Int?
    public var musicTranscodingBitrate: Int?
    public var directPlay: [DirectPlay]
    public var transcoding: [Transcoding]
    public var codecLimits: [CodecLimits]
    public var subtitles: [Subtitle]

    public init(name: String, maxStreamingBitrate: Int? = nil, maxStaticBitrate: Int? = nil, musicTranscodingBitrate: Int? = nil,
                directPlay: [DirectPlay], transcoding: [Transcoding], codecLimits: [CodecLimits] = [], subtitles: [Subtitle] = []) {
        (self.name, self.maxStreamingBitrate, self.maxStaticBitrate, self.musicTranscodingBitrate) = (name, maxStreamingBitrate, maxStaticBitrate, musicTranscodingBitrate)
        (self.directPlay, self.transcoding, self.codecLimits, self.subtitles) = (directPlay, transcoding, codecLimits, subtitles)
    }
}

/// A streaming quality: a bitrate ceiling for what the server sends.
public enum PlaybackQuality: String, Sendable, CaseIterable {
    case maximum, high, medium, low

    /// Bits per second (nil: no ceiling of ours; the server's own limits apply).
    public var maxBitrate: Int? {
        switch self {
        case .maximum: return nil
        case .high: return 20_000_000
        case .medium: return 8_000_000
        case .low: return 3_000_000
        }
    }
}

/// The decoders a player really has, by the names Jellyfin profiles use (FFmpeg's, with `dca`
/// spelled `dts`).
public struct LocalDecoders: Sendable, Equatable {
    public var video: Set<String>
    public var audio: Set<String>

    public init(video: Set<String>, audio: Set<String>) { (self.video, self.audio) = (video, audio) }

    /// Reads mpv's `--vd=help` or `--ad=help` listing ("    h264 - H.264 / AVC …",
    /// "    libdav1d (av1) - dav1d …"): each line's codec, the one in parentheses when a
    /// decoder library names itself.
    public static func codecs(inMPVListing text: String) -> Set<String> {
        var codecs: Set<String> = []
        for line in text.split(separator: "\n") {
            guard line.hasPrefix("    "), let dash = line.range(of: " - ") else { continue }
            var name = line[line.startIndex..<dash.lowerBound].trimmingCharacters(in: .whitespaces)
            if let open = name.firstIndex(of: "("), let close = name.lastIndex(of: ")"), open < close {
                name = String(name[name.index(after: open)..<close])
            }
            guard !name.isEmpty, !name.contains(" ") else { continue }
            codecs.insert(name == "dca" ? "dts" : name)
        }
        return codecs
    }
}

extension DeviceProfile {
    /// Containers every libavformat build reads, as Jellyfin names them.
    static let videoContainers = ["mp4", "m4v", "mov", "mkv", "webm", "ts", "mpegts", "m2ts", "avi", "flv", "ogv", "3gp", "wmv", "asf"]
    static let audioContainers = ["mp3", "flac", "m4a", "m4b", "aac", "ogg", "oga", "opus", "wav", "wma", "webma", "mka", "alac", "ape", "wv"]
    /// Codecs a profile may list, in Jellyfin's names (the rest of a decoder list is left out).
    static let videoCodecNames = ["h264", "hevc", "av1", "vp9", "vp8", "mpeg2video", "mpeg4", "vc1", "msmpeg4v3", "theora"]
    static let audioCodecNames = ["aac", "mp3", "mp2", "ac3", "eac3", "dts", "truehd", "flac", "alac", "opus", "vorbis", "wmav2",
                                  "pcm_s16le", "pcm_s24le", "pcm_s32le", "pcm_f32le", "ape", "wavpack"]

    /// A profile for a player with these decoders: every container libavformat reads, every
    /// codec the decoders have; transcodes as HLS fMP4 with H.264/HEVC and AAC/AC-3 (segments
    /// the player seeks in), audio as AAC or MP3 over HTTP; text subtitles taken as files,
    /// image subtitles embedded. `quality` caps the streaming bitrate; `maxBitrate` (bits/s)
    /// overrides it.
    public init(name: String, decoders: LocalDecoders, quality: PlaybackQuality = .maximum, maxBitrate: Int? = nil) {
        let video = Self.videoCodecNames.filter(decoders.video.contains)
        let audio = Self.audioCodecNames.filter(decoders.audio.contains)
        let ceiling = maxBitrate ?? quality.maxBitrate
        let hlsVideo = ["h264", "hevc"].filter(decoders.video.contains)
        let hlsAudio = ["aac", "ac3", "eac3", "mp3"].filter(decoders.audio.contains)
        var transcoding: [Transcoding] = []
        if !hlsVideo.isEmpty, !hlsAudio.isEmpty {
            transcoding.append(Transcoding(kind: .video, container: "mp4", videoCodecs: hlsVideo, audioCodecs: hlsAudio, delivery: .hls,
                                           maxAudioChannels: 6, minSegments: 1, breakOnNonKeyFrames: true))
        }
        for codec in ["aac", "mp3"] where decoders.audio.contains(codec) {
            transcoding.append(Transcoding(kind: .audio, container: codec == "aac" ? "aac" : "mp3", audioCodecs: [codec], delivery: .http,
                                           maxAudioChannels: 2))
        }
        self.init(name: name, maxStreamingBitrate: ceiling, maxStaticBitrate: ceiling, musicTranscodingBitrate: 384_000,
                  directPlay: [DirectPlay(kind: .video, containers: Self.videoContainers, videoCodecs: video, audioCodecs: audio),
                               DirectPlay(kind: .audio, containers: Self.audioContainers, audioCodecs: audio)],
                  transcoding: transcoding,
                  codecLimits: [CodecLimits(kind: .videoAudio, conditions: [Condition("AudioChannels", .lessThanEqual, "8")])],
                  subtitles: ["srt", "subrip", "ass", "ssa", "vtt", "webvtt"].map { Subtitle($0, .external) }
                      + ["srt", "subrip", "ass", "ssa", "vtt", "webvtt", "pgssub", "dvdsub", "dvbsub", "sub"].map { Subtitle($0, .embed) })
    }
}
