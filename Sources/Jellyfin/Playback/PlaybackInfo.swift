public import Foundation
internal import OpenAPIRuntime

/// How the server delivers a media source: the file as it is (direct play), the same streams
/// in another container (direct stream, a remux), or re-encoded (transcode).
public enum PlayMethod: String, Sendable, Codable {
    case directPlay = "DirectPlay", directStream = "DirectStream", transcode = "Transcode"
}

/// What to ask the server for.
public struct PlaybackRequest: Sendable {
    public var profile: DeviceProfile
    public var startSeconds: Double
    /// The audio to play (nil: the server's default, which follows the user's language settings).
    public var audio: TrackChoice?
    /// The subtitles to show (nil: the server's default; `.none`: none).
    public var subtitles: TrackChoice?
    /// Bits per second (nil: the profile's ceiling).
    public var maxBitrate: Int?

    public init(profile: DeviceProfile, startSeconds: Double = 0, audio: TrackChoice? = nil, subtitles: TrackChoice? = nil,
                maxBitrate: Int? = nil) {
        (self.profile, self.startSeconds, self.audio, self.subtitles, self.maxBitrate) = (profile, startSeconds, audio, subtitles, maxBitrate)
    }
}

/// The server's answer made playable: where the media comes from and what to report.
public struct PlaybackPlan: Sendable, Equatable {
    public var itemId: String
    public var mediaSourceId: String
    public var playSessionId: String?
    public var method: PlayMethod
    /// What the player opens (carries the token as `ApiKey=`).
    public var url: URL
    public var container: String?
    public var runtimeSeconds: Double?
    /// The server's indices of the audio and subtitles played (-1: no subtitles).
    public var audioStreamIndex: Int?
    public var subtitleStreamIndex: Int?
    /// The source's streams, as the server listed them for this playback.
    public var streams: [MediaStreamInfo] = []
    /// What the player opens beside the media and which tracks it selects.
    public var tracks = PlayerTracks()
    /// The item's media segments (intro, credits…), for skipping.
    public var segments: [MediaSegment] = []
    /// A live stream the server opened for this playback (Live TV): closed when it ends.
    public var liveStreamId: String?
}

/// One playback report (`Sessions/Playing`, `/Progress`, `/Stopped`): what "resume", "continue
/// watching" and other clients' now-playing views are made from.
public struct PlaybackReport: Sendable, Equatable {
    public enum Kind: String, Sendable { case start, progress, stopped }
    public var kind: Kind
    public var plan: PlaybackPlan
    public var positionSeconds: Double
    public var isPaused = false
    public var isMuted = false
    /// 0…100.
    public var volume: Int?
    /// Stopped reports only: playback ended by an error.
    public var failed = false

    public init(_ kind: Kind, plan: PlaybackPlan, positionSeconds: Double, isPaused: Bool = false, isMuted: Bool = false, volume: Int? = nil,
                failed: Bool = false) {
        (self.kind, self.plan, self.positionSeconds, self.isPaused, self.isMuted, self.volume, self.failed) =
            (kind, plan, positionSeconds, isPaused, isMuted, volume, failed)
    }

    var positionTicks: Int64 { Int64((max(0, positionSeconds) * 10_000_000).rounded()) }
}

extension JellyfinSession {
    /// Asks the server how `item` plays on a player with `request.profile` (PlaybackInfo) and
    /// picks the stream: the file itself when the server allows direct play or direct stream,
    /// else the server's transcoding URL. Throws `noPlayableStream` with the server's reason when
    /// it offers neither.
    public func playbackPlan(for item: JellyfinItem, _ request: PlaybackRequest) async throws(JellyfinError) -> PlaybackPlan {
        let operation = "ask how to play \(item.name)"
        // Choices by language need the item's streams (a listing does not carry them).
        var streams = item.mediaStreams
        if streams.isEmpty, request.audio != nil || request.subtitles != nil { streams = try await self.item(item.id).mediaStreams }
        let audio = try TrackSelection.resolve(request.audio, kind: "Audio", in: streams, item: item.name)
        let subtitle = try TrackSelection.resolve(request.subtitles, kind: "Subtitle", in: streams, item: item.name)
        var dto = Components.Schemas.PlaybackInfoDto()
        dto.userId = userId
        dto.deviceProfile = .init(value1: request.profile.generated)
        dto.maxStreamingBitrate = (request.maxBitrate ?? request.profile.maxStreamingBitrate).map { Int32(clamping: $0) }
        dto.startTimeTicks = Int64((max(0, request.startSeconds) * 10_000_000).rounded())
        dto.audioStreamIndex = audio.map { Int32(clamping: $0) }
        dto.subtitleStreamIndex = subtitle.map { Int32(clamping: $0) }
        dto.enableDirectPlay = true
        dto.enableDirectStream = true
        dto.enableTranscoding = true
        dto.allowVideoStreamCopy = true
        dto.allowAudioStreamCopy = true
        dto.autoOpenLiveStream = true
        let output = try await perform(operation) {
            try await client.getPostedPlaybackInfo(path: .init(itemId: item.id), query: .init(userId: userId), body: .json(.init(value1: dto)))
        }
        let response: Components.Schemas.PlaybackInfoResponse
        switch output {
        case .ok(let ok): response = try await perform(operation) { try ok.body.json }
        case .notFound: throw .notFound(what: "item \(item.id)")
        default: throw failure(operation, output)
        }
        var plan = try plan(for: item, response: response, audio: audio, subtitle: subtitle)
        // Audio plays through the universal endpoint, as music players ask for it: the server
        // decides again from the same profile (the file, a redirect to remote media, or a
        // stream it encodes) and nothing is left running when the connection ends.
        if item.isAudio, request.audio == nil,
           let url = universalAudioURL(itemId: item.id, mediaSourceId: plan.mediaSourceId, request) {
            plan.url = url
        }
        return plan
    }

    /// `/Audio/{id}/universal` for a player with `request.profile`: the containers (each with the
    /// codecs it may hold, `flac|flac`) it plays as they are, what to encode to otherwise (the
    /// profile's first HTTP audio transcoding), the bitrate ceiling; remote media answered with
    /// a redirect to where it lives.
    public func universalAudioURL(itemId: String, mediaSourceId: String?, _ request: PlaybackRequest) -> URL? {
        let profile = request.profile
        let containers = profile.directPlay.filter { $0.kind == .audio }.flatMap { entry in
            entry.containers.map { ([$0] + entry.audioCodecs).joined(separator: "|") }
        }
        var query: [(String, String)] = [("UserId", userId), ("DeviceId", server.identity.deviceId)]
        if let mediaSourceId { query.append(("MediaSourceId", mediaSourceId)) }
        if !containers.isEmpty { query.append(("Container", containers.joined(separator: ","))) }
        if let transcoding = profile.transcoding.first(where: { $0.kind == .audio && $0.delivery == .http }) {
            query += [("TranscodingContainer", transcoding.container), ("TranscodingProtocol", "http"),
                      ("AudioCodec", transcoding.audioCodecs.first ?? transcoding.container)]
            if let channels = transcoding.maxAudioChannels { query.append(("TranscodingAudioChannels", "\(channels)")) }
        }
        if let ceiling = request.maxBitrate ?? profile.maxStreamingBitrate { query.append(("MaxStreamingBitrate", "\(ceiling)")) }
        query += [("EnableRedirection", "true"), ("EnableRemoteMedia", "true")]
        return authenticatedURL(path: "/Audio/\(itemId)/universal", query: query)
    }

    /// The stream a PlaybackInfo answer leads to (pure: no request).
    func plan(for item: JellyfinItem, response: Components.Schemas.PlaybackInfoResponse, audio chosenAudio: Int? = nil,
              subtitle chosenSubtitle: Int? = nil) throws(JellyfinError) -> PlaybackPlan {
        let sources = response.mediaSources ?? []
        guard let source = sources.first(where: { $0.supportsDirectPlay == true || $0.supportsDirectStream == true || $0.transcodingUrl != nil })
                ?? nil else {
            let code = response.errorCode?.value1
            let reason: String
            switch code {
            case "NotAllowed": reason = "this user may not play it (NotAllowed)"
            case "RateLimitExceeded": reason = "too many streams at once on this account (RateLimitExceeded)"
            case "NoCompatibleStream": reason = "the server has no stream this player can play (NoCompatibleStream)"
            case let other?: reason = "the server refused (\(other))"
            case nil: reason = sources.isEmpty ? "the server lists no media source for it" : "the server offers neither the file nor a transcode"
            }
            throw .noPlayableStream(item: item.name, reason: reason)
        }
        let sourceId = source.id ?? item.id
        let audio = chosenAudio ?? source.defaultAudioStreamIndex.map(Int.init)
        let subtitle = chosenSubtitle ?? source.defaultSubtitleStreamIndex.map(Int.init)
        let method: PlayMethod
        let url: URL?
        if source.supportsDirectPlay == true || source.supportsDirectStream == true {
            method = source.supportsDirectPlay == true ? .directPlay : .directStream
            let kind = item.isAudio ? "Audio" : "Videos"
            var query: [(String, String)] = [("static", "true"), ("mediaSourceId", sourceId), ("deviceId", server.identity.deviceId)]
            if let id = response.playSessionId { query.append(("playSessionId", id)) }
            if let tag = source.eTag { query.append(("tag", tag)) }
            if let live = source.liveStreamId { query.append(("LiveStreamId", live)) }
            url = authenticatedURL(path: "/\(kind)/\(item.id)/stream", query: query)
        } else {
            method = .transcode
            // Relative, and carries the token and play session already.
            url = URL(string: server.address.description + (source.transcodingUrl ?? ""))
        }
        guard let url else { throw .malformedResponse(operation: "ask how to play \(item.name)", reason: "the stream address is not a URL") }
        let streams = (source.mediaStreams ?? []).map(MediaStreamInfo.init)
        let tracks = TrackSelection.playerTracks(streams: streams, method: method, audio: audio, subtitle: subtitle) { path in
            self.authenticatedURL(path: path)
        }
        var plan = PlaybackPlan(itemId: item.id, mediaSourceId: sourceId, playSessionId: response.playSessionId, method: method, url: url,
                                container: method == .transcode ? source.transcodingContainer ?? source.container : source.container, runtimeSeconds: source.runTimeTicks.map { Double($0) / 10_000_000 },
                                audioStreamIndex: audio, subtitleStreamIndex: subtitle, streams: streams, tracks: tracks)
        plan.liveStreamId = source.liveStreamId
        return plan
    }

    /// Sends one playback report.
    public func report(_ report: PlaybackReport) async throws(JellyfinError) {
        let operation = "report playback \(report.kind.rawValue)"
        let plan = report.plan
        switch report.kind {
        case .start:
            var info = Components.Schemas.PlaybackStartInfo()
            info.fill(from: report)
            try expectNoContent(operation, try await perform(operation) { try await client.reportPlaybackStart(body: .json(.init(value1: info))) })
        case .progress:
            var info = Components.Schemas.PlaybackProgressInfo()
            info.fill(from: report)
            try expectNoContent(operation, try await perform(operation) { try await client.reportPlaybackProgress(body: .json(.init(value1: info))) })
        case .stopped:
            var info = Components.Schemas.PlaybackStopInfo()
            info.itemId = plan.itemId
            info.mediaSourceId = plan.mediaSourceId
            info.playSessionId = plan.playSessionId
            info.positionTicks = report.positionTicks
            info.failed = report.failed
            info.liveStreamId = plan.liveStreamId
            try expectNoContent(operation, try await perform(operation) { try await client.reportPlaybackStopped(body: .json(.init(value1: info))) })
        }
    }

    /// Keeps a transcode alive (the server stops idle encodings).
    public func pingPlayback(playSessionId: String) async throws(JellyfinError) {
        let operation = "keep the transcode alive"
        try expectNoContent(operation, try await perform(operation) { try await client.pingPlaybackSession(query: .init(playSessionId: playSessionId)) })
    }

    /// Ends the server's encoding for a play session (a transcode no one watches any more).
    public func stopEncoding(playSessionId: String) async throws(JellyfinError) {
        let operation = "stop the server's encoding"
        try expectNoContent(operation, try await perform(operation) {
            try await client.stopEncodingProcess(query: .init(deviceId: server.identity.deviceId, playSessionId: playSessionId))
        })
    }
}

/// The fields Playing and Progress reports share (two generated types of one shape).
protocol PlaybackStateReport {
    var itemId: String? { get set }
    var mediaSourceId: String? { get set }
    var playSessionId: String? { get set }
    var positionTicks: Int64? { get set }
    var isPaused: Bool? { get set }
    var isMuted: Bool? { get set }
    var volumeLevel: Int32? { get set }
    var canSeek: Bool? { get set }
    var audioStreamIndex: Int32? { get set }
    var subtitleStreamIndex: Int32? { get set }
    var liveStreamId: String? { get set }
    mutating func setEnums(playMethod: String, repeatMode: String, playbackOrder: String)
}

extension PlaybackStateReport {
    mutating func fill(from report: PlaybackReport) {
        let plan = report.plan
        itemId = plan.itemId
        mediaSourceId = plan.mediaSourceId
        playSessionId = plan.playSessionId
        positionTicks = report.positionTicks
        isPaused = report.isPaused
        isMuted = report.isMuted
        volumeLevel = report.volume.map { Int32($0) }
        canSeek = true
        audioStreamIndex = plan.audioStreamIndex.map { Int32(clamping: $0) }
        subtitleStreamIndex = plan.subtitleStreamIndex.map { Int32(clamping: $0) }
        setEnums(playMethod: plan.method.rawValue, repeatMode: "RepeatNone", playbackOrder: "Default")
        liveStreamId = plan.liveStreamId
    }
}

extension Components.Schemas.PlaybackStartInfo: PlaybackStateReport {
    mutating func setEnums(playMethod: String, repeatMode: String, playbackOrder: String) {
        (self.playMethod, self.repeatMode, self.playbackOrder) = (.init(value1: playMethod), .init(value1: repeatMode), .init(value1: playbackOrder))
    }
}

extension Components.Schemas.PlaybackProgressInfo: PlaybackStateReport {
    mutating func setEnums(playMethod: String, repeatMode: String, playbackOrder: String) {
        (self.playMethod, self.repeatMode, self.playbackOrder) = (.init(value1: playMethod), .init(value1: repeatMode), .init(value1: playbackOrder))
    }
}

extension DeviceProfile {
    /// The profile as the API states it.
    var generated: Components.Schemas.DeviceProfile {
        var profile = Components.Schemas.DeviceProfile()
        profile.name = name
        profile.maxStreamingBitrate = maxStreamingBitrate.map { Int32(clamping: $0) }
        profile.maxStaticBitrate = maxStaticBitrate.map { Int32(clamping: $0) }
        profile.musicStreamingTranscodingBitrate = musicTranscodingBitrate.map { Int32(clamping: $0) }
        profile.directPlayProfiles = directPlay.map { entry in
            var out = Components.Schemas.DirectPlayProfile()
            out._type = .init(value1: entry.kind.rawValue)
            out.container = entry.containers.joined(separator: ",")
            if !entry.videoCodecs.isEmpty { out.videoCodec = entry.videoCodecs.joined(separator: ",") }
            if !entry.audioCodecs.isEmpty { out.audioCodec = entry.audioCodecs.joined(separator: ",") }
            return out
        }
        profile.transcodingProfiles = transcoding.map { entry in
            var out = Components.Schemas.TranscodingProfile()
            out._type = .init(value1: entry.kind.rawValue)
            out.container = entry.container
            if !entry.videoCodecs.isEmpty { out.videoCodec = entry.videoCodecs.joined(separator: ",") }
            out.audioCodec = entry.audioCodecs.joined(separator: ",")
            out._protocol = .init(value1: entry.delivery.rawValue)
            out.context = .init(value1: "Streaming")
            out.maxAudioChannels = entry.maxAudioChannels.map(String.init)
            out.minSegments = entry.minSegments.map { Int32($0) }
            out.breakOnNonKeyFrames = entry.breakOnNonKeyFrames
            return out
        }
        profile.codecProfiles = codecLimits.map { entry in
            var out = Components.Schemas.CodecProfile()
            out._type = .init(value1: entry.kind.rawValue)
            out.codec = entry.codec
            out.conditions = entry.conditions.map { condition in
                var c = Components.Schemas.ProfileCondition()
                c.condition = .init(value1: condition.comparison.rawValue)
                c.property = .init(value1: condition.property)
                c.value = condition.value
                c.isRequired = condition.required
                return c
            }
            return out
        }
        profile.subtitleProfiles = subtitles.map { entry in
            var out = Components.Schemas.SubtitleProfile()
            out.format = entry.format
            out.method = .init(value1: entry.method.rawValue)
            return out
        }
        return profile
    }
}
