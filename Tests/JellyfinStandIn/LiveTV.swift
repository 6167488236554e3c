import FarcastSupport
import Foundation
import HTTPTypes
import Hummingbird
import Jellyfin
import NIOCore

/// The stand-in's Live TV: two channels that ffmpeg makes live (a test card and a tone each,
/// H.264 and AAC in MPEG-TS, in real time), a guide of programmes in fixed slots aligned to the
/// clock (30 minutes, or `--programme-seconds`), recording timers, and recordings made for real
/// while their programme airs, which then play like any video.
///
/// Playing a channel opens a live stream: PlaybackInfo names a `LiveStreamId`, the stream is
/// `/Videos/{channel}/stream` (the client's connection gets its own ffmpeg, ended when it
/// leaves), and `POST /LiveStreams/Close` closes it (`GET /StandIn/LiveStreams` lists those
/// open). A timer whose programme is airing is recorded to `media/recordings/` until the
/// programme ends (from when it was set, if it was set late), then listed by
/// `/LiveTv/Recordings` and removed from `/LiveTv/Timers`.
final class LiveTV: Sendable {
    struct Channel: Sendable {
        var id: String
        var number: String
        var name: String
        /// ffmpeg's lavfi picture and tone.
        var picture: String
        var tone: Int
        var titles: [String]
    }

    struct Programme: Sendable {
        var id: String
        var channel: Channel
        var name: String
        var start: Date
        var end: Date
        var isNews: Bool
    }

    struct Timer: Sendable {
        var id: String
        var programme: Programme
        /// New, InProgress, Completed, Error.
        var status: String
    }

    private struct State {
        var timers: [Timer] = []
        var recordings: [Library.Item] = []
        var openStreams: [String: String] = [:]   // live stream id → channel id
    }

    let channels: [Channel]
    let slotSeconds: Int
    let mediaDirectory: String
    private let state = Locked(State())

    init(mediaDirectory: String, slotSeconds: Int) {
        self.mediaDirectory = mediaDirectory
        self.slotSeconds = max(1, slotSeconds)
        channels = [
            Channel(id: Library.id("channel/1"), number: "1", name: "Farcast One", picture: "testsrc2=size=320x240:rate=25", tone: 440,
                    titles: ["Morning Signal", "The Carrier Hour", "News at the Top", "Phase and Frequency"]),
            Channel(id: Library.id("channel/2"), number: "2", name: "Test Card", picture: "smptebars=size=320x240:rate=25", tone: 1000,
                    titles: ["Bars and Tone", "Night Test Card", "News in Brief", "Tone Poems"]),
        ]
        try? FileManager.default.createDirectory(atPath: mediaDirectory + "/recordings", withIntermediateDirectories: true)
    }

    func channel(_ id: String) -> Channel? {
        let id = id.replacingOccurrences(of: "-", with: "").lowercased()
        return channels.first { $0.id == id }
    }

    // MARK: The guide

    /// The programme of `channel` in the slot that starts at `start` (a multiple of the slot length).
    func programme(_ channel: Channel, slotStart start: Int) -> Programme {
        let slot = start / slotSeconds
        let name = channel.titles[((slot % channel.titles.count) + channel.titles.count) % channel.titles.count]
        // The id carries the channel and the start: 8 hex digits and 24.
        let id = String(format: "%08x", Int(channel.number) ?? 0) + String(String(repeating: "0", count: 24) + String(start, radix: 16)).suffix(24)
        return Programme(id: id, channel: channel, name: name, start: Date(timeIntervalSince1970: Double(start)),
                         end: Date(timeIntervalSince1970: Double(start + slotSeconds)), isNews: name.contains("News"))
    }

    func programme(_ id: String) -> Programme? {
        let id = id.lowercased()
        guard id.count == 32, let number = Int(id.prefix(8), radix: 16), let start = Int(id.suffix(24), radix: 16),
              start % slotSeconds == 0, let channel = channels.first(where: { Int($0.number) == number }) else { return nil }
        return programme(channel, slotStart: start)
    }

    /// The programmes of `channels` that end after `from` and start before `to`, by start. The
    /// guide holds a day back and two weeks ahead, as a real server's guide data does.
    func programmes(channels wanted: [Channel], from: Date, to: Date) -> [Programme] {
        var result: [Programme] = []
        let now = Date()
        let from = max(from, now.addingTimeInterval(-86_400)), to = min(to, now.addingTimeInterval(14 * 86_400))
        guard from < to else { return [] }
        let first = Int(from.timeIntervalSince1970) / slotSeconds * slotSeconds
        for channel in wanted {
            var start = first
            // At most a week of slots, however wide the window asked.
            while Double(start) < to.timeIntervalSince1970, start < first + 7 * 86_400 {
                let programme = programme(channel, slotStart: start)
                if programme.end > from { result.append(programme) }
                start += slotSeconds
            }
        }
        return result.sorted { ($0.start, $0.channel.number) < ($1.start, $1.channel.number) }
    }

    func onNow(_ channel: Channel) -> Programme {
        programme(channel, slotStart: Int(Date().timeIntervalSince1970) / slotSeconds * slotSeconds)
    }

    // MARK: Items

    /// A channel or a recording as a library item (what GetItem, PlaybackInfo and the stream see).
    func item(_ id: String) -> Library.Item? {
        if let channel = channel(id) {
            return Library.Item(id: channel.id, name: channel.name, sortName: channel.number, kind: "TvChannel", isFolder: false,
                                dateCreated: Date(timeIntervalSince1970: 1_700_000_000), genres: [])
        }
        let id = id.replacingOccurrences(of: "-", with: "").lowercased()
        return state.withLock { $0.recordings.first { $0.id == id } }
    }

    var recordings: [Library.Item] { state.withLock { $0.recordings } }

    // MARK: Live streams

    func open(channel: Channel) -> String {
        let id = StandInState.randomHex(16)
        state.withLock { $0.openStreams[id] = channel.id }
        return id
    }

    @discardableResult
    func close(liveStream id: String) -> Bool { state.withLock { $0.openStreams.removeValue(forKey: id) != nil } }

    var openStreams: [String] { state.withLock { Array($0.openStreams.keys).sorted() } }

    /// ffmpeg's arguments for `channel`, live (`-re`) or not, for `seconds` (nil: until stopped).
    func ffmpegArguments(_ channel: Channel, seconds: Double?, output: String) -> [String] {
        ["-v", "error", "-re", "-f", "lavfi", "-i", channel.picture, "-f", "lavfi", "-i", "sine=frequency=\(channel.tone):sample_rate=48000"]
            + (seconds.map { ["-t", String(format: "%.3f", $0)] } ?? [])
            + ["-map", "0:v", "-map", "1:a", "-c:v", "libx264", "-preset", "ultrafast", "-tune", "zerolatency", "-pix_fmt", "yuv420p",
               "-g", "25", "-c:a", "aac", "-b:a", "96k", "-ac", "2", "-f", "mpegts", output]
    }

    /// The channel as it airs: MPEG-TS from a live ffmpeg, for as long as the client reads.
    func stream(_ channel: Channel) throws -> Response {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Tool.find("ffmpeg"))
        process.arguments = ffmpegArguments(channel, seconds: nil, output: "pipe:1")
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let reader = pipe.fileHandleForReading
        var headers = HTTPFields()
        headers[.contentType] = "video/mp2t"
        return Response(status: .ok, headers: headers, body: ResponseBody { writer in
            defer { if process.isRunning { process.terminate() } }
            while true {
                let chunk = await Task.detached { reader.availableData }.value
                guard !chunk.isEmpty else { break }
                try await writer.write(ByteBuffer(bytes: chunk))
            }
            try await writer.finish(nil)
        })
    }

    // MARK: Timers and recording

    func timers() -> [Timer] { state.withLock { $0.timers } }

    func addTimer(for programme: Programme) -> Timer {
        state.withLock { s in
            if let existing = s.timers.first(where: { $0.programme.id == programme.id }) { return existing }
            let timer = Timer(id: StandInState.randomHex(16), programme: programme, status: "New")
            s.timers.append(timer)
            return timer
        }
    }

    func cancelTimer(_ id: String) -> Bool {
        state.withLock { s in
            guard let index = s.timers.firstIndex(where: { $0.id == id.lowercased() }) else { return false }
            s.timers.remove(at: index)
            return true
        }
    }

    /// Records what timers ask for as their programmes air, until the stand-in stops.
    func runRecorder() async {
        while !Task.isCancelled {
            let now = Date()
            let due = state.withLock { s -> [Timer] in
                var due: [Timer] = []
                for index in s.timers.indices where s.timers[index].status == "New" {
                    let programme = s.timers[index].programme
                    if programme.end <= now { s.timers[index].status = "Error" } else if programme.start <= now {
                        s.timers[index].status = "InProgress"
                        due.append(s.timers[index])
                    }
                }
                return due
            }
            for timer in due { Task.detached { self.record(timer) } }
            try? await Task.sleep(for: .milliseconds(250))
        }
    }

    private func record(_ timer: Timer) {
        let programme = timer.programme
        let relative = "recordings/\(timer.id).ts"
        let seconds = programme.end.timeIntervalSinceNow
        do {
            guard seconds > 0.2 else { throw CocoaError(.fileWriteUnknown) }
            try Tool.run(try Tool.find("ffmpeg"), ffmpegArguments(programme.channel, seconds: seconds, output: mediaDirectory + "/" + relative))
            var entry = MediaCatalog.Entry(key: "recording/\(timer.id)", kind: "Recording", name: programme.name, genres: programme.isNews ? ["News"] : [],
                                           path: relative, streams: [])
            entry = try MediaCatalog.probe(entry, ffprobe: try Tool.find("ffprobe"), mediaDirectory: mediaDirectory)
            let item = Library.Item(id: Library.id(entry.key), name: programme.name, sortName: programme.name.lowercased(), kind: "Recording",
                                    isFolder: false, premiereDate: programme.start, dateCreated: Date(),
                                    overview: "Recorded from \(programme.channel.name).", genres: entry.genres, entry: entry)
            state.withLock { s in
                s.recordings.append(item)
                s.timers.removeAll { $0.id == timer.id }
            }
        } catch {
            state.withLock { s in
                if let index = s.timers.firstIndex(where: { $0.id == timer.id }) { s.timers[index].status = "Error" }
            }
        }
    }

    // MARK: DTOs

    func dto(_ channel: Channel, serverId: String) -> Components.Schemas.BaseItemDto {
        var dto = Components.Schemas.BaseItemDto()
        dto.id = channel.id
        dto.name = channel.name
        dto.serverId = serverId
        dto._type = .init(value1: "TvChannel")
        dto.channelNumber = channel.number
        dto.number = channel.number
        dto.channelType = .init(value1: "TV")
        dto.mediaType = .init(value1: "Video")
        dto.isFolder = false
        dto.imageTags = .init(additionalProperties: [:])
        dto.backdropImageTags = []
        return dto
    }

    func dto(_ programme: Programme, serverId: String) -> Components.Schemas.BaseItemDto {
        var dto = Components.Schemas.BaseItemDto()
        dto.id = programme.id
        dto.name = programme.name
        dto.serverId = serverId
        dto._type = .init(value1: "Program")
        dto.channelId = programme.channel.id
        dto.channelName = programme.channel.name
        dto.startDate = programme.start
        dto.endDate = programme.end
        dto.runTimeTicks = Int64(slotSeconds) * 10_000_000
        dto.isNews = programme.isNews
        dto.isSeries = !programme.isNews
        dto.overview = "\(programme.name) on \(programme.channel.name)."
        dto.mediaType = .init(value1: "Video")
        dto.isFolder = false
        dto.imageTags = .init(additionalProperties: [:])
        return dto
    }

    func dto(_ timer: Timer, serverId: String) -> Components.Schemas.TimerInfoDto {
        var dto = Components.Schemas.TimerInfoDto()
        dto.id = timer.id
        dto._type = "Timer"
        dto.serverId = serverId
        dto.channelId = timer.programme.channel.id
        dto.channelName = timer.programme.channel.name
        dto.programId = timer.programme.id
        dto.name = timer.programme.name
        dto.startDate = timer.programme.start
        dto.endDate = timer.programme.end
        dto.status = .init(value1: timer.status)
        dto.prePaddingSeconds = 0
        dto.postPaddingSeconds = 0
        dto.isPrePaddingRequired = false
        dto.isPostPaddingRequired = false
        dto.priority = 0
        dto.runTimeTicks = Int64(timer.programme.end.timeIntervalSince(timer.programme.start) * 10_000_000)
        return dto
    }
}

extension StandInAPI {
    // MARK: Live TV operations

    func getLiveTvChannels(_ input: Operations.GetLiveTvChannels.Input) async throws -> Operations.GetLiveTvChannels.Output {
        let serverId = library.serverId
        var items = liveTV.channels.map { channel in
            var dto = liveTV.dto(channel, serverId: serverId)
            if input.query.addCurrentProgram != false { dto.currentProgram = .init(value1: liveTV.dto(liveTV.onNow(channel), serverId: serverId)) }
            return dto
        }
        let total = items.count
        items = Array(items.dropFirst(max(0, Int(input.query.startIndex ?? 0))).prefix(max(0, Int(input.query.limit ?? Int32(total)))))
        return .ok(.init(body: .json(.init(items: items, startIndex: input.query.startIndex ?? 0, totalRecordCount: Int32(total)))))
    }

    func getLiveTvPrograms(_ input: Operations.GetLiveTvPrograms.Input) async throws -> Operations.GetLiveTvPrograms.Output {
        let wanted = input.query.channelIds.map { ids in liveTV.channels.filter { ids.map { $0.replacingOccurrences(of: "-", with: "").lowercased() }.contains($0.id) } }
            ?? liveTV.channels
        let now = Date()
        let from = [input.query.minEndDate, input.query.minStartDate].compactMap { $0 }.max() ?? now
        let to = input.query.maxStartDate ?? from.addingTimeInterval(86_400)
        var programmes = liveTV.programmes(channels: wanted, from: from, to: to)
        if let minStart = input.query.minStartDate { programmes = programmes.filter { $0.start >= minStart } }
        let total = programmes.count
        programmes = Array(programmes.dropFirst(max(0, Int(input.query.startIndex ?? 0))).prefix(max(0, Int(input.query.limit ?? Int32(total)))))
        let items = programmes.map { liveTV.dto($0, serverId: library.serverId) }
        return .ok(.init(body: .json(.init(items: items, startIndex: input.query.startIndex ?? 0, totalRecordCount: Int32(total)))))
    }

    func getRecordings(_ input: Operations.GetRecordings.Input) async throws -> Operations.GetRecordings.Output {
        let userId = Caller.current?.token?.userId ?? ""
        let items = liveTV.recordings.map { library.dto($0, userData: state.itemData(userId: userId, itemId: $0.id), fields: [], detail: true) }
        return .ok(.init(body: .json(.init(items: items, startIndex: 0, totalRecordCount: Int32(items.count)))))
    }

    func getTimers(_ input: Operations.GetTimers.Input) async throws -> Operations.GetTimers.Output {
        var timers = liveTV.timers()
        if let channel = input.query.channelId { timers = timers.filter { $0.programme.channel.id == channel.replacingOccurrences(of: "-", with: "").lowercased() } }
        if input.query.isActive == true { timers = timers.filter { $0.status == "InProgress" } }
        let items = timers.map { liveTV.dto($0, serverId: library.serverId) }
        return .ok(.init(body: .json(.init(items: items, startIndex: 0, totalRecordCount: Int32(items.count)))))
    }

    func getDefaultTimer(_ input: Operations.GetDefaultTimer.Input) async throws -> Operations.GetDefaultTimer.Output {
        var dto = Components.Schemas.SeriesTimerInfoDto()
        dto.prePaddingSeconds = 0
        dto.postPaddingSeconds = 0
        dto.isPrePaddingRequired = false
        dto.isPostPaddingRequired = false
        dto.priority = 0
        dto.recordAnyChannel = false
        dto.recordAnyTime = false
        dto.recordNewOnly = false
        if let id = input.query.programId {
            guard let programme = liveTV.programme(id) else { return .undocumented(statusCode: 404, .init()) }
            dto.programId = programme.id
            dto.channelId = programme.channel.id
            dto.channelName = programme.channel.name
            dto.name = programme.name
            dto.startDate = programme.start
            dto.endDate = programme.end
            dto.serverId = library.serverId
        }
        return .ok(.init(body: .json(dto)))
    }

    func createTimer(_ input: Operations.CreateTimer.Input) async throws -> Operations.CreateTimer.Output {
        guard case .json(let body)? = input.body, let id = body.value1.programId, let programme = liveTV.programme(id) else {
            return .undocumented(statusCode: 400, .init())
        }
        guard programme.end > Date() else { return .undocumented(statusCode: 400, .init()) }
        _ = liveTV.addTimer(for: programme)
        return .noContent(.init())
    }

    func cancelTimer(_ input: Operations.CancelTimer.Input) async throws -> Operations.CancelTimer.Output {
        liveTV.cancelTimer(input.path.timerId) ? .noContent(.init()) : .undocumented(statusCode: 404, .init())
    }

    func closeLiveStream(_ input: Operations.CloseLiveStream.Input) async throws -> Operations.CloseLiveStream.Output {
        // As a real server: closing a stream that is not open does nothing.
        if liveTV.close(liveStream: input.query.liveStreamId) {
            playback.append(.init(kind: "close-live", itemId: nil, playSessionId: input.query.liveStreamId, deviceId: Caller.current?.deviceId,
                                  at: Date().timeIntervalSince1970))
        }
        return .noContent(.init())
    }

    /// PlaybackInfo for a channel: a live stream opened, direct-streamed as MPEG-TS when the
    /// profile takes it (the stand-in does not transcode live TV).
    func livePlaybackInfo(_ channel: LiveTV.Channel, profile: Components.Schemas.DeviceProfile?, maxBitrate: Int?) -> Operations.GetPostedPlaybackInfo.Output {
        let liveStream = liveTV.open(channel: channel)
        var source = Components.Schemas.MediaSourceInfo()
        source.id = channel.id
        source.name = channel.name
        source.container = "ts"
        source._protocol = .init(value1: "File")
        source._type = .init(value1: "Default")
        source.isInfiniteStream = true
        source.liveStreamId = liveStream
        source.supportsDirectPlay = false
        source.supportsDirectStream = true
        source.supportsTranscoding = false
        source.isRemote = false
        source.bitrate = 1_000_000
        var video = Components.Schemas.MediaStream()
        (video.index, video._type, video.codec, video.width, video.height, video.isDefault) = (0, .init(value1: "Video"), "h264", 320, 240, true)
        video.videoRangeType = .init(value1: "SDR")
        video.profile = "Constrained Baseline"
        video.isInterlaced = false
        var audio = Components.Schemas.MediaStream()
        (audio.index, audio._type, audio.codec, audio.channels, audio.sampleRate, audio.isDefault) = (1, .init(value1: "Audio"), "aac", 2, 48000, true)
        source.mediaStreams = [video, audio]
        source.defaultAudioStreamIndex = 1
        let playSession = StandInState.randomHex(16)
        playback.open(playSession: playSession, item: channel.id)
        var response = Components.Schemas.PlaybackInfoResponse()
        response.playSessionId = playSession
        var method = "None", reasons: [String] = []
        if let profile {
            var options = StreamDecision.Options()
            options.maxBitrate = maxBitrate
            let decision = StreamDecision.decide(source, profile, options)
            reasons = decision.reasons.list
            if decision.method == "DirectStream" { method = "DirectStream" }
        }
        source.supportsDirectStream = method == "DirectStream"
        if method == "None" {
            response.errorCode = .init(value1: "NoCompatibleStream")
            liveTV.close(liveStream: liveStream)
        }
        response.mediaSources = [source]
        playback.append(.init(kind: "decision", itemId: channel.id, mediaSourceId: channel.id, playSessionId: playSession, playMethod: method,
                              reasons: reasons, deviceId: Caller.current?.deviceId, at: Date().timeIntervalSince1970))
        return .ok(.init(body: .json(response)))
    }
}
