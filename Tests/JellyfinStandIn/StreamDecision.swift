import Foundation
import Jellyfin

/// How the stand-in decides how a media source plays on a device profile, the way a real
/// server's StreamBuilder does for video (written from what the server's own tests establish:
/// Tests/JellyfinTests/Fixtures/stream-decisions.json holds every case of upstream
/// StreamBuilderTests re-expressed as facts, and StreamDecisionTests run them through
/// `POST /StandIn/Decide`).
///
/// In order: streams are chosen (audio, subtitles, the audio streams a profile may take
/// instead); the source's bitrate is held against the ceiling; if it may play directly, each
/// video direct-play profile is scored (container, codecs, codec and container conditions,
/// subtitles) and the best playable one wins, or the mildest failure gives the reasons; else
/// the best-ranked streaming transcoding profile makes the output (its container and protocol,
/// the codecs kept, whether the audio can be copied) and adds its own reasons.
///
/// Not modelled: the caps a transcode puts on level, profile and bitrate (they steer the
/// encoder, not the decision), language preferences, DVD/BluRay folders, the audio-only path.
enum StreamDecision {
    /// TranscodeReason, as flags in the server's bit order (their names are the API's).
    struct Reasons: OptionSet, Hashable, Sendable {
        let rawValue: Int
        static let names = ["ContainerNotSupported", "VideoCodecNotSupported", "AudioCodecNotSupported", "SubtitleCodecNotSupported",
                            "AudioIsExternal", "SecondaryAudioNotSupported", "VideoProfileNotSupported", "VideoLevelNotSupported",
                            "VideoResolutionNotSupported", "VideoBitDepthNotSupported", "VideoFramerateNotSupported", "RefFramesNotSupported",
                            "AnamorphicVideoNotSupported", "InterlacedVideoNotSupported", "AudioChannelsNotSupported", "AudioProfileNotSupported",
                            "AudioSampleRateNotSupported", "AudioBitDepthNotSupported", "ContainerBitrateExceedsLimit", "VideoBitrateNotSupported",
                            "AudioBitrateNotSupported", "UnknownVideoStreamInfo", "UnknownAudioStreamInfo", "DirectPlayError",
                            "VideoRangeTypeNotSupported", "VideoCodecTagNotSupported", "StreamCountExceedsLimit", "VideoRotationNotSupported"]
        init(rawValue: Int) { self.rawValue = rawValue }
        init(named name: String) { rawValue = Self.names.firstIndex(of: name).map { 1 << $0 } ?? 0 }
        static func named(_ name: String) -> Reasons { Reasons(named: name) }

        static let container = named("ContainerNotSupported"), videoCodec = named("VideoCodecNotSupported")
        static let audioCodec = named("AudioCodecNotSupported"), subtitleCodec = named("SubtitleCodecNotSupported")
        static let audioExternal = named("AudioIsExternal"), secondaryAudio = named("SecondaryAudioNotSupported")
        static let audioChannels = named("AudioChannelsNotSupported"), containerBitrate = named("ContainerBitrateExceedsLimit")
        static let directPlayError = named("DirectPlayError"), videoRange = named("VideoRangeTypeNotSupported")
        static let videoCodecTag = named("VideoCodecTagNotSupported")
        static let containerGroup: Reasons = [container, containerBitrate]
        static let audioConstraints: Reasons = [named("AudioBitrateNotSupported"), audioChannels, named("AudioProfileNotSupported"),
                                                named("AudioSampleRateNotSupported"), secondaryAudio, named("AudioBitDepthNotSupported"), audioExternal]
        static let audioGroup: Reasons = audioConstraints.union(audioCodec)
        static let videoConstraints: Reasons = [named("VideoResolutionNotSupported"), named("AnamorphicVideoNotSupported"),
                                                named("InterlacedVideoNotSupported"), named("VideoBitDepthNotSupported"),
                                                named("VideoBitrateNotSupported"), named("VideoFramerateNotSupported"),
                                                named("VideoLevelNotSupported"), named("RefFramesNotSupported"), videoRange,
                                                named("VideoProfileNotSupported"), named("VideoRotationNotSupported")]
        static let videoGroup: Reasons = videoConstraints.union(videoCodec)
        /// What still lets the same video go out in another container (a remux).
        static let remuxable: Reasons = audioGroup.union([container, videoCodecTag])

        var list: [String] { Self.names.indices.filter { rawValue & (1 << $0) != 0 }.map { Self.names[$0] } }

        /// The reason a failed condition on `property` gives (none for properties that decide nothing).
        static func forProperty(_ property: String) -> Reasons {
            switch property {
            case "Width", "Height": return named("VideoResolutionNotSupported")
            case "IsAnamorphic": return named("AnamorphicVideoNotSupported")
            case "IsInterlaced": return named("InterlacedVideoNotSupported")
            case "IsSecondaryAudio": return secondaryAudio
            case "NumStreams": return named("StreamCountExceedsLimit")
            case "RefFrames": return named("RefFramesNotSupported")
            case "VideoBitDepth": return named("VideoBitDepthNotSupported")
            case "VideoBitrate": return named("VideoBitrateNotSupported")
            case "VideoCodecTag": return videoCodecTag
            case "VideoFramerate": return named("VideoFramerateNotSupported")
            case "VideoLevel": return named("VideoLevelNotSupported")
            case "VideoProfile": return named("VideoProfileNotSupported")
            case "VideoRangeType": return videoRange
            case "VideoRotation": return named("VideoRotationNotSupported")
            case "AudioChannels": return audioChannels
            case "AudioBitrate": return named("AudioBitrateNotSupported")
            case "AudioProfile": return named("AudioProfileNotSupported")
            case "AudioSampleRate": return named("AudioSampleRateNotSupported")
            case "AudioBitDepth": return named("AudioBitDepthNotSupported")
            default: return []
            }
        }
    }

    struct Options: Sendable {
        var maxBitrate: Int?
        var audioStreamIndex: Int?
        var subtitleStreamIndex: Int?
        var enableDirectPlay = true
        var enableDirectStream = true
        var allowVideoCopy = true
        var allowAudioCopy = true
        /// Whether the server can take subtitles out of a file for delivery beside a transcode.
        var canExtractSubtitles = true
    }

    struct Decision: Sendable {
        /// DirectPlay, DirectStream or Transcode.
        var method: String
        var reasons: Reasons = []
        var container: String?
        /// http or hls.
        var subProtocol = "http"
        var audioStreamIndex: Int?
        var subtitleStreamIndex: Int?
        var videoCodecs: [String] = []
        var audioCodecs: [String] = []
        var maxAudioChannels: Int?
        /// The chosen audio stream's channels as the output has them.
        var audioChannels: Int?
        /// How the chosen subtitles reach the player (Embed, External, Hls, Encode), if any.
        var subtitleDelivery: String?
        /// The transcoding profile used (for the URL's segment settings).
        var transcoding: Components.Schemas.TranscodingProfile?
    }

    typealias Profile = Components.Schemas.DeviceProfile
    typealias Source = Components.Schemas.MediaSourceInfo
    typealias Stream = Components.Schemas.MediaStream
    typealias Condition = Components.Schemas.ProfileCondition

    // MARK: - Matching

    static func items(_ list: String?) -> [String] {
        (list ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
    }

    /// Whether `value` (itself a comma list) is among `list`: an empty list takes anything, a
    /// list starting with `-` is one of exclusions; no value matches nothing (or, excluded
    /// against, everything).
    static func listMatches(_ list: String?, _ value: String?, allowExclusion: Bool = true) -> Bool {
        var text = list ?? ""
        let excluding = allowExclusion && text.hasPrefix("-")
        if excluding { text.removeFirst() }
        let values = items(value)
        guard !values.isEmpty else { return excluding }
        let allowed = items(text)
        if allowed.isEmpty { return true }
        let hit = values.contains(where: allowed.contains)
        return excluding ? !hit : hit
    }

    static func kind(_ stream: Stream) -> String { stream._type?.value1 ?? "Audio" }

    // MARK: - Conditions

    /// What conditions are evaluated against: the video and one audio stream of the source.
    struct Subject {
        var video: Stream?
        var audio: Stream?
        var secondaryAudio: Bool?
        var streamCount: Int
        var audioCount: Int
        var videoCount: Int
    }

    enum Value { case number(Double), text(String), flag(Bool), range(String) }

    static func value(_ property: String, _ s: Subject) -> Value? {
        let v = s.video, a = s.audio
        func number<T: BinaryInteger>(_ x: T?) -> Value? { x.map { .number(Double($0)) } }
        switch property {
        case "Width": return number(v?.width)
        case "Height": return number(v?.height)
        case "VideoBitDepth": return number(v?.bitDepth)
        case "VideoBitrate": return number(v?.bitRate)
        case "RefFrames": return number(v?.refFrames)
        case "VideoLevel": return v?.level.map { .number($0) }
        case "VideoFramerate": return v.map { .number($0.referenceFrameRate ?? 0) }
        case "VideoProfile": return v?.profile.flatMap { $0.isEmpty ? nil : .text($0) }
        case "VideoCodecTag": return v?.codecTag.flatMap { $0.isEmpty ? nil : .text($0) }
        case "VideoRangeType":
            guard let range = v?.videoRangeType?.value1, range != "Unknown", !range.isEmpty else { return nil }
            return .range(range)
        case "VideoRotation": return number(v?.rotation)
        case "IsAnamorphic": return v?.isAnamorphic.map { .flag($0) }
        case "IsInterlaced": return v.map { .flag($0.isInterlaced ?? false) }
        case "IsAvc": return v?.isAVC.map { .flag($0) }
        case "NumStreams": return .number(Double(s.streamCount))
        case "NumAudioStreams": return .number(Double(s.audioCount))
        case "NumVideoStreams": return .number(Double(s.videoCount))
        case "AudioChannels": return number(a?.channels)
        case "AudioBitrate": return number(a?.bitRate)
        case "AudioSampleRate": return number(a?.sampleRate)
        case "AudioBitDepth": return number(a?.bitDepth)
        case "AudioProfile": return a?.profile.flatMap { $0.isEmpty ? nil : .text($0) }
        case "IsSecondaryAudio": return s.secondaryAudio.map { .flag($0) }
        default: return nil
        }
    }

    static func holds(_ condition: Condition, _ subject: Subject) -> Bool {
        let property = condition.property?.value1 ?? ""
        let comparison = condition.condition?.value1 ?? ""
        let wanted = condition.value ?? ""
        guard let actual = value(property, subject) else { return condition.isRequired == false }
        switch actual {
        case .number(let x):
            let integral = !["VideoLevel", "VideoFramerate"].contains(property)
            func parse(_ text: String) -> Double? {
                integral ? Int(text.trimmingCharacters(in: .whitespaces)).map(Double.init) : Double(text.trimmingCharacters(in: .whitespaces))
            }
            let x = integral ? x.rounded(.towardZero) : x
            switch comparison {
            case "EqualsAny": return wanted.split(separator: "|").contains { parse(String($0)) == x }
            default:
                guard let y = parse(wanted) else { return false }
                switch comparison {
                case "Equals": return x == y
                case "NotEquals": return x != y
                case "LessThanEqual": return x <= y
                case "GreaterThanEqual": return x >= y
                default: return false
                }
            }
        case .text(let x):
            let x = x.lowercased()
            switch comparison {
            case "Equals": return x == wanted.lowercased()
            case "NotEquals": return x != wanted.lowercased()
            case "EqualsAny": return wanted.lowercased().split(separator: "|", omittingEmptySubsequences: false).contains { String($0) == x }
            default: return false
            }
        case .flag(let x):
            guard let y = Bool(wanted.lowercased()) else { return false }
            switch comparison {
            case "Equals": return x == y
            case "NotEquals": return x != y
            default: return false
            }
        case .range(let x):
            func test(_ range: String) -> Bool {
                let names = wanted.split(separator: "|").map { $0.lowercased() }
                switch comparison {
                case "Equals": return range.lowercased() == wanted.lowercased()
                case "NotEquals": return range.lowercased() != wanted.lowercased()
                case "EqualsAny": return names.contains(range.lowercased())
                default: return false
                }
            }
            // HDR10+ plays wherever HDR10 does.
            return test(x) || (x == "HDR10Plus" && test("HDR10"))
        }
    }

    /// The reasons the failed `conditions` give.
    static func failures(_ conditions: [Condition]?, _ subject: Subject) -> Reasons {
        var reasons: Reasons = []
        for condition in conditions ?? [] where !holds(condition, subject) {
            reasons.formUnion(Reasons.forProperty(condition.property?.value1 ?? ""))
        }
        return reasons
    }

    /// The reasons codec profiles of `kind` that apply to (codec, container) give.
    static func codecFailures(_ profile: Profile, kind: String, codec: String?, container: String?, _ subject: Subject) -> Reasons {
        var reasons: Reasons = []
        for codecProfile in profile.codecProfiles ?? [] where codecProfile._type?.value1 == kind {
            guard listMatches(codecProfile.container, container), listMatches(codecProfile.codec, codec, allowExclusion: false),
                  (codecProfile.applyConditions ?? []).allSatisfy({ holds($0, subject) }) else { continue }
            reasons.formUnion(failures(codecProfile.conditions, subject))
        }
        return reasons
    }

    // MARK: - Deciding

    static func decide(_ source: Source, _ profile: Profile, _ options: Options) -> Decision {
        let streams = source.mediaStreams ?? []
        let audios = streams.filter { kind($0) == "Audio" }
        let video = streams.first { kind($0) == "Video" }
        let subtitleProfiles = profile.subtitleProfiles ?? []

        // The subtitles: asked for, or the best-scored (ties to one the player takes as a file).
        let subtitleIndex = options.subtitleStreamIndex ?? defaultSubtitleIndex(source, subtitleProfiles)
        let subtitle = subtitleIndex.flatMap { index in streams.first { kind($0) == "Subtitle" && Int($0.index ?? 0) == index } }
        // The audio: asked for, else the source's default, else the first default, else the first.
        let audioIndex = options.audioStreamIndex ?? source.defaultAudioStreamIndex.map(Int.init)
        let audio = audioIndex.flatMap { index in audios.first { Int($0.index ?? 0) == index } }
            ?? audios.first { $0.isDefault == true } ?? audios.first
        // The audio streams a profile may take instead of it.
        var candidates = audios
        if let asked = options.audioStreamIndex, asked >= 0 {
            candidates = audio.map { [$0] } ?? []
        } else if audio?.isDefault == true {
            candidates = audios.filter { $0.isDefault == true }
        }
        let firstInternalAudio = audios.first { $0.isExternal != true }
        func subject(_ audio: Stream?, secondary: Bool?) -> Subject {
            Subject(video: video, audio: audio, secondaryAudio: secondary, streamCount: streams.count, audioCount: audios.count,
                    videoCount: streams.filter { kind($0) == "Video" }.count)
        }
        func isSecondary(_ stream: Stream) -> Bool {
            stream.isExternal != true && firstInternalAudio.map { $0.index != stream.index } == true
        }

        var decision = Decision(method: "Transcode")
        decision.audioStreamIndex = audio.map { Int($0.index ?? 0) }
        decision.subtitleStreamIndex = subtitle.map { Int($0.index ?? 0) }
        decision.audioChannels = audio?.channels.map(Int.init)

        // The bitrate: a local source above the ceiling plays neither directly nor remuxed.
        var limit = options.maxBitrate ?? profile.maxStreamingBitrate.map(Int.init)
        if let l = limit, l <= 0 { limit = nil }
        let exceeds = source.isRemote != true && limit.map { Int(source.bitrate ?? 40_000_000) > $0 } == true
        if exceeds { decision.reasons.insert(.containerBitrate) }
        let directPlayAllowed = options.enableDirectPlay && !exceeds
        let directStreamAllowed = options.enableDirectStream && !exceeds

        if directPlayAllowed || directStreamAllowed {
            let outcome = directPlay(source, profile, video: video, candidates: candidates, subtitle: subtitle, options: options,
                                     subject: subject, isSecondary: isSecondary,
                                     playAllowed: directPlayAllowed, streamAllowed: directStreamAllowed)
            switch outcome {
            case .plays(let method, let container, let selected, let reasons):
                decision.method = method
                decision.reasons.formUnion(reasons)
                decision.container = container
                decision.audioStreamIndex = selected.map { Int($0.index ?? 0) } ?? decision.audioStreamIndex
                decision.videoCodecs = video?.codec.map { [$0] } ?? []
                decision.audioCodecs = (selected ?? audio)?.codec.map { [$0] } ?? []
                decision.audioChannels = (selected ?? audio)?.channels.map(Int.init)
                if let subtitle {
                    decision.subtitleDelivery = delivery(subtitle, subtitleProfiles, playMethod: method, canExtract: options.canExtractSubtitles,
                                                         container: container, subProtocol: nil)
                }
                return decision
            case .refused(let reasons):
                decision.reasons.formUnion(reasons)
            }
        }

        transcode(&decision, source, profile, video: video, audio: audio, candidates: candidates, options: options, subject: subject)
        if let subtitle {
            decision.subtitleDelivery = delivery(subtitle, subtitleProfiles, playMethod: "Transcode", canExtract: options.canExtractSubtitles,
                                                 container: decision.container, subProtocol: decision.subProtocol)
        }
        return decision
    }

    static func defaultSubtitleIndex(_ source: Source, _ profiles: [Components.Schemas.SubtitleProfile]) -> Int? {
        let subtitles = (source.mediaStreams ?? []).filter { kind($0) == "Subtitle" && $0.score != nil }
        if let best = subtitles.map({ $0.score ?? 0 }).max() {
            let top = subtitles.filter { $0.score == best }
            if top.count > 1, let pick = top.first(where: { stream in
                profiles.contains { $0.method?.value1 == "External" && $0.format?.lowercased() == stream.codec?.lowercased() }
            }) {
                return Int(pick.index ?? 0)
            }
        }
        return source.defaultSubtitleStreamIndex.map(Int.init)
    }

    /// A direct stream carries what kept it from playing directly (its container, its audio).
    enum DirectOutcome { case plays(method: String, container: String?, audio: Stream?, reasons: Reasons), refused(Reasons) }

    static func directPlay(_ source: Source, _ profile: Profile, video: Stream?, candidates: [Stream], subtitle: Stream?, options: Options,
                           subject: (Stream?, Bool?) -> Subject, isSecondary: (Stream) -> Bool,
                           playAllowed: Bool, streamAllowed: Bool) -> DirectOutcome {
        let container = source.container
        var containerConstraint: Reasons = []
        for containerProfile in profile.containerProfiles ?? [] where containerProfile._type?.value1 == "Video" {
            if listMatches(containerProfile.container, container) { containerConstraint.formUnion(failures(containerProfile.conditions, subject(nil, nil))) }
        }
        let videoConstraint = codecFailures(profile, kind: "Video", codec: video?.codec, container: container, subject(nil, nil))
        func audioConstraint(_ stream: Stream) -> Reasons {
            var reasons = codecFailures(profile, kind: "VideoAudio", codec: stream.codec, container: container, subject(stream, isSecondary(stream)))
            if stream.isExternal == true { reasons.insert(.audioExternal) }
            return reasons
        }
        var subtitleProblem: Reasons = []
        if let subtitle {
            let method = delivery(subtitle, profile.subtitleProfiles ?? [], playMethod: "DirectPlay", canExtract: options.canExtractSubtitles,
                                  container: container, subProtocol: nil)
            if method == "Encode" || method == "Hls" { subtitleProblem = .subtitleCodec }
        }

        struct Scored { var order: Int; var failure: Reasons; var audio: Stream?; var method: String?; var rank: Int; var takesContainer: Bool; var entry: Components.Schemas.DirectPlayProfile }
        var scored: [Scored] = []
        var anyTakesContainer = false
        for (order, entry) in (profile.directPlayProfiles ?? []).enumerated() where entry._type?.value1 == "Video" {
            var failure: Reasons = []
            let takesContainer = listMatches(entry.container, container)
            if takesContainer { anyTakesContainer = true } else { failure.insert(.container) }
            if !listMatches(entry.videoCodec, video?.codec) { failure.insert(.videoCodec) }
            let selected = candidates.first { listMatches(entry.audioCodec, $0.codec) }
            if selected == nil, !candidates.isEmpty { failure.insert(.audioCodec) }
            failure.formUnion(containerConstraint.union(subtitleProblem))
            if !failure.contains(.videoCodec) { failure.formUnion(videoConstraint) }
            if !failure.contains(.audioCodec), let selected { failure.formUnion(audioConstraint(selected)) }
            var method: String?
            if failure.isEmpty, playAllowed, source.supportsDirectPlay != false {
                method = "DirectPlay"
            } else if failure.subtracting(.remuxable).isEmpty, streamAllowed, source.supportsDirectStream != false {
                method = "DirectStream"
            }
            // How mild the failure is: the first group it touches (later is milder).
            let groups: [Reasons] = [.videoCodec, .videoConstraints, .audioCodec, .audioConstraints, .containerGroup]
            let rank = (groups.firstIndex { !failure.isDisjoint(with: $0) } ?? groups.count) + 1
            scored.append(Scored(order: order, failure: failure, audio: selected, method: method, rank: rank, takesContainer: takesContainer, entry: entry))
        }
        func methodOrder(_ method: String?) -> Int { method == "DirectPlay" ? 0 : method == "DirectStream" ? 1 : 2 }
        scored.sort { a, b in
            if methodOrder(a.method) != methodOrder(b.method) { return methodOrder(a.method) < methodOrder(b.method) }
            if a.rank != b.rank { return a.rank > b.rank }
            return a.order < b.order
        }
        if let best = scored.first, let method = best.method {
            // The container as the player takes it: the first of the source's names the profile lists.
            let names = items(container)
            let chosen = names.count > 1 ? names.first { listMatches(best.entry.container, $0) } ?? container : container
            return .plays(method: method, container: chosen, audio: best.audio, reasons: method == "DirectStream" ? best.failure : [])
        }
        let considered = anyTakesContainer ? scored.filter(\.takesContainer) : scored
        guard let mildest = considered.first, !mildest.failure.isEmpty else { return .refused(.directPlayError) }
        return .refused(mildest.failure)
    }

    static func transcode(_ decision: inout Decision, _ source: Source, _ profile: Profile, video: Stream?, audio: Stream?, candidates: [Stream],
                          options: Options, subject: (Stream?, Bool?) -> Subject) {
        decision.method = "Transcode"
        let profiles = (profile.transcodingProfiles ?? []).filter {
            $0._type?.value1 == "Video" && ($0.context?.value1 ?? "Streaming") == "Streaming"
        }
        guard !profiles.isEmpty else { return }
        // The profile that keeps the most: the video as it is (and within its limits), then the audio.
        func videoRank(_ p: Components.Schemas.TranscodingProfile) -> Int {
            guard let video, options.allowVideoCopy else { return 3 }
            let codecs = items(p.videoCodec)
            guard codecs.isEmpty || codecs.contains((video.codec ?? "").lowercased()) else { return 3 }
            return codecFailures(profile, kind: "Video", codec: video.codec, container: p.container, subject(nil, nil)).isEmpty ? 1 : 2
        }
        func audioRank(_ p: Components.Schemas.TranscodingProfile) -> Int {
            guard let audio, options.allowAudioCopy else { return 3 }
            var rank = 3
            for codec in items(p.audioCodec) {
                guard codecFailures(profile, kind: "VideoAudio", codec: codec, container: p.container, subject(audio, false)).isEmpty else { continue }
                if codec == (audio.codec ?? "").lowercased() { return 1 }
                rank = min(rank, 2)
            }
            return rank
        }
        var best = profiles[0], bestRank = (videoRank(profiles[0]), audioRank(profiles[0]))
        for p in profiles.dropFirst() {
            let rank = (videoRank(p), audioRank(p))
            if rank < bestRank { (best, bestRank) = (p, rank) }
        }
        decision.transcoding = best
        decision.container = best.container
        let hls = best._protocol?.value1.lowercased() == "hls"
        decision.subProtocol = hls ? "hls" : "http"
        decision.maxAudioChannels = best.maxAudioChannels.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }

        var videoCodecs = items(best.videoCodec)
        if videoCodecs.isEmpty, let codec = video?.codec { videoCodecs = [codec.lowercased()] }
        if hls { videoCodecs = videoCodecs.filter { ["h264", "hevc", "vp9", "av1"].contains($0) } }
        if let codec = video?.codec?.lowercased(), !videoCodecs.contains(codec) { decision.reasons.insert(.videoCodec) }
        decision.videoCodecs = videoCodecs

        var audioCodecs = items(best.audioCodec)
        if audioCodecs.isEmpty, let codec = audio?.codec { audioCodecs = [codec.lowercased()] }
        if hls {
            let kept: Set<String> = best.container?.lowercased() == "mp4"
                ? ["aac", "ac3", "eac3", "mp3", "alac", "flac", "opus", "dts", "truehd"] : ["aac", "ac3", "eac3", "mp3"]
            audioCodecs = audioCodecs.filter { kept.contains($0) && $0 != "mp2" }
        }
        decision.audioCodecs = audioCodecs
        let copy = candidates.first { audioCodecs.contains(($0.codec ?? "").lowercased()) }
        if copy == nil, audio != nil { decision.reasons.insert(.audioCodec) }
        guard let copy else { return }
        var copyable = true
        if let most = decision.maxAudioChannels, let channels = copy.channels.map(Int.init), channels > most {
            decision.reasons.insert(.audioChannels)
            decision.audioChannels = most
            copyable = false
        }
        let limits = codecFailures(profile, kind: "VideoAudio", codec: copy.codec, container: best.container, subject(copy, false))
        decision.reasons.formUnion(limits)
        if copyable, limits.isEmpty, !decision.reasons.contains(.containerBitrate) {
            decision.audioStreamIndex = Int(copy.index ?? 0)
            decision.audioCodecs = [(copy.codec ?? "").lowercased()]
            decision.audioChannels = copy.channels.map(Int.init)
        }
    }

    // MARK: - Subtitles

    static func isText(_ codec: String?) -> Bool {
        let c = (codec ?? "").lowercased()
        if c.contains("microdvd") { return true }
        return !(c.contains("pgs") || c.contains("dvdsub") || c.contains("vobsub") || c.contains("dvbsub") || c == "sup" || c == "sub")
    }

    /// Whether text subtitles in `from` can be turned into `to` (ASS/SSA are kept as they are).
    static func convertible(_ from: String?, _ to: String?) -> Bool {
        let f = (from ?? "").lowercased(), t = (to ?? "").lowercased()
        guard isText(f), isText(t) else { return false }
        return !["ass", "ssa"].contains(f) && !["ass", "ssa"].contains(t)
    }

    /// How `stream` reaches the player: Embed (inside the stream), External (a file beside it),
    /// Hls (in the playlist) or Encode (burned into the picture).
    static func delivery(_ stream: Stream, _ profiles: [Components.Schemas.SubtitleProfile], playMethod: String, canExtract: Bool,
                         container: String?, subProtocol: String?) -> String {
        let codec = (stream.codec ?? "").lowercased()
        let external = stream.isExternal == true
        let transcoding = playMethod == "Transcode"
        let hls = subProtocol?.lowercased() == "hls"
        let language = (stream.language?.isEmpty == false ? stream.language! : "und").lowercased()
        func languageFits(_ p: Components.Schemas.SubtitleProfile) -> Bool {
            guard let languages = p.language, !languages.isEmpty else { return true }
            return items(languages).contains(language)
        }
        let output = (container ?? "").lowercased()
        let embeds = external ? (transcoding && !hls && ["mkv", "matroska"].contains(output)) : !(transcoding && hls)
        if embeds {
            let fitsContainer = !transcoding || (!["ts", "mpegts", "mp4"].contains(output) && ["mkv", "matroska"].contains(output))
            let embedProfiles = profiles.filter { $0.method?.value1 == "Embed" && languageFits($0) && (($0.container ?? "").isEmpty || listMatches($0.container, output)) }
            if fitsContainer {
                if embedProfiles.contains(where: { ($0.format ?? "").lowercased() == codec && isText($0.format) == isText(codec) }) { return "Embed" }
                if embedProfiles.contains(where: { convertible(codec, $0.format) }) { return "Embed" }
            }
        }
        let vobsub = codec == "vobsub" || codec == "dvdsub"
        let pgs = codec.contains("pgs")
        for allowConversion in [false, true] {
            for p in profiles where languageFits(p) {
                let method = p.method?.value1 ?? ""
                guard method == "External" || (method == "Hls" && transcoding && isText(codec)) else { continue }
                if !external, transcoding, !canExtract, !(pgs || vobsub) { continue }
                let format = (p.format ?? "").lowercased()
                if (format == "vobsub" || format == "dvdsub"), p.container?.lowercased() == "mks" {
                    // A VobSub profile for .mks files: the stream must be in the file or an .mks beside it.
                    guard vobsub, !external || (stream.path ?? "").lowercased().hasSuffix(".mks") else { continue }
                    return method
                }
                if !allowConversion {
                    if format == codec && isText(format) == isText(codec) { return method }
                } else if isText(codec), stream.supportsExternalStream == true, convertible(codec, format) {
                    return method
                }
            }
        }
        return "Encode"
    }
}
