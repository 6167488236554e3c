public import Foundation
internal import OpenAPIRuntime

/// A Live TV channel and what it shows now.
public struct TVChannel: Sendable, Hashable {
    public var id: String
    public var name: String
    /// The channel's number as the tuner or guide gives it ("1", "4.1").
    public var number: String?
    public var onNow: TVProgramme?
}

/// One programme in the guide.
public struct TVProgramme: Sendable, Hashable {
    public var id: String
    public var name: String
    public var channelId: String
    public var channelName: String?
    public var start: Date
    public var end: Date
    public var overview: String?
    public var isNews: Bool
    public var isSeries: Bool

    public func isAiring(at date: Date = Date()) -> Bool { start <= date && date < end }
}

/// A recording the server will make (or is making) of a programme.
public struct RecordingTimer: Sendable, Hashable {
    public var id: String
    public var name: String
    public var programmeId: String?
    public var channelId: String?
    public var channelName: String?
    public var start: Date?
    public var end: Date?
    /// New, InProgress, Completed, Cancelled, ConflictedOk, ConflictedNotOk, Error (or what a
    /// newer server adds).
    public var status: String
}

extension JellyfinSession {
    /// The Live TV channels this user may watch, by number, each with what is on now.
    public func liveTVChannels() async throws(JellyfinError) -> [TVChannel] {
        let operation = "list the Live TV channels"
        let output = try await perform(operation) {
            try await client.getLiveTvChannels(query: .init(userId: userId, enableUserData: false, sortBy: ["SortName"], addCurrentProgram: true))
        }
        switch output {
        case .ok(let ok):
            let result = try await perform(operation) { try ok.body.json }
            return (result.items ?? []).compactMap { dto -> TVChannel? in
                guard let id = dto.id else { return nil }
                return TVChannel(id: id, name: dto.name ?? id, number: dto.channelNumber ?? dto.number,
                                 onNow: dto.currentProgram.flatMap { Self.programme($0.value1) })
            }
        default: throw failure(operation, output)
        }
    }

    /// The guide: programmes of `channelIds` (all when empty) that end after `from` and start
    /// before `to`, by start time.
    public func liveTVGuide(channelIds: [String] = [], from: Date, to: Date) async throws(JellyfinError) -> [TVProgramme] {
        let operation = "read the Live TV guide"
        let output = try await perform(operation) {
            try await client.getLiveTvPrograms(query: .init(channelIds: channelIds.isEmpty ? nil : channelIds, userId: userId, maxStartDate: to,
                                                            minEndDate: from, sortBy: ["StartDate"], enableTotalRecordCount: false))
        }
        switch output {
        case .ok(let ok):
            let result = try await perform(operation) { try ok.body.json }
            return (result.items ?? []).compactMap(Self.programme).sorted { $0.start < $1.start }
        default: throw failure(operation, output)
        }
    }

    static func programme(_ dto: Components.Schemas.BaseItemDto) -> TVProgramme? {
        guard let id = dto.id, let start = dto.startDate, let end = dto.endDate, let channel = dto.channelId else { return nil }
        return TVProgramme(id: id, name: dto.name ?? "", channelId: channel, channelName: dto.channelName, start: start, end: end,
                           overview: dto.overview, isNews: dto.isNews ?? false, isSeries: dto.isSeries ?? false)
    }

    /// The recordings the server has made, as items that play like any video.
    public func liveTVRecordings() async throws(JellyfinError) -> [JellyfinItem] {
        let operation = "list the Live TV recordings"
        let output = try await perform(operation) { try await client.getRecordings(query: .init(userId: userId)) }
        switch output {
        case .ok(let ok):
            let result = try await perform(operation) { try ok.body.json }
            return (result.items ?? []).map(JellyfinItem.init)
        default: throw failure(operation, output)
        }
    }

    /// The recordings the server is set to make.
    public func recordingTimers() async throws(JellyfinError) -> [RecordingTimer] {
        let operation = "list the recording timers"
        let output = try await perform(operation) { try await client.getTimers(query: .init()) }
        switch output {
        case .ok(let ok):
            let result = try await perform(operation) { try ok.body.json }
            return (result.items ?? []).compactMap { dto -> RecordingTimer? in
                guard let id = dto.id else { return nil }
                return RecordingTimer(id: id, name: dto.name ?? "", programmeId: dto.programId, channelId: dto.channelId, channelName: dto.channelName,
                                      start: dto.startDate, end: dto.endDate, status: dto.status?.value1 ?? "New")
            }
        default: throw failure(operation, output)
        }
    }

    /// Sets the server to record `programmeId` with its default padding (as the server's own
    /// defaults for that programme say); returns the timer made.
    @discardableResult
    public func record(programmeId: String) async throws(JellyfinError) -> RecordingTimer {
        let operation = "set a recording"
        let defaults = try await perform(operation) { try await client.getDefaultTimer(query: .init(programId: programmeId)) }
        let template: Components.Schemas.SeriesTimerInfoDto
        switch defaults {
        case .ok(let ok): template = try await perform(operation) { try ok.body.json }
        case .undocumented(404, _): throw .notFound(what: "programme \(programmeId)")
        default: throw failure(operation, defaults)
        }
        var timer = Components.Schemas.TimerInfoDto()
        timer.programId = template.programId ?? programmeId
        timer.channelId = template.channelId
        timer.name = template.name
        timer.startDate = template.startDate
        timer.endDate = template.endDate
        timer.prePaddingSeconds = template.prePaddingSeconds
        timer.postPaddingSeconds = template.postPaddingSeconds
        timer.isPrePaddingRequired = template.isPrePaddingRequired
        timer.isPostPaddingRequired = template.isPostPaddingRequired
        timer.priority = template.priority
        timer.serviceName = template.serviceName
        let created = try await perform(operation) { try await client.createTimer(body: .json(.init(value1: timer))) }
        switch created {
        case .noContent: break
        case .undocumented(400, _):
            throw .refused(operation: "record \(template.name ?? programmeId)", reason: "it may have ended, or its channel cannot record")
        default: throw failure(operation, created)
        }
        let made = try await recordingTimers().first { $0.programmeId == timer.programId }
        return made ?? RecordingTimer(id: "", name: template.name ?? "", programmeId: timer.programId, channelId: template.channelId,
                                      channelName: template.channelName, start: template.startDate, end: template.endDate, status: "New")
    }

    /// Cancels a recording timer.
    public func cancelRecording(timerId: String) async throws(JellyfinError) {
        let operation = "cancel the recording"
        let output = try await perform(operation) { try await client.cancelTimer(path: .init(timerId: timerId)) }
        switch output {
        case .noContent: return
        case .undocumented(404, _): throw .notFound(what: "timer \(timerId)")
        default: throw failure(operation, output)
        }
    }

    /// Closes a live stream PlaybackInfo opened (the server frees the tuner).
    public func closeLiveStream(_ liveStreamId: String) async throws(JellyfinError) {
        let operation = "close the live stream"
        try expectNoContent(operation, try await perform(operation) { try await client.closeLiveStream(query: .init(liveStreamId: liveStreamId)) })
    }
}
