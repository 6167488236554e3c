public import Foundation
internal import OpenAPIRuntime

/// A SyncPlay group: sessions watching one queue together.
public struct SyncPlayGroup: Sendable, Equatable, Decodable {
    public var id: String
    public var name: String
    /// Idle, Waiting, Paused or Playing.
    public var state: String
    /// The members' user names.
    public var participants: [String]

    private enum CodingKeys: String, CodingKey { case id = "GroupId", name = "GroupName", state = "State", participants = "Participants" }

    public init(id: String, name: String, state: String, participants: [String]) {
        (self.id, self.name, self.state, self.participants) = (id, name, state, participants)
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        name = try c.decodeIfPresent(String.self, forKey: .name) ?? ""
        state = try c.decodeIfPresent(String.self, forKey: .state) ?? "Idle"
        participants = try c.decodeIfPresent([String].self, forKey: .participants) ?? []
    }
}

/// `SyncPlayCommand`: what every player of the group does, from which position, at which
/// moment of the server's clock.
public struct SyncPlayCommand: Sendable, Equatable, Decodable {
    public var groupId: String
    public var playlistItemId: String
    /// The moment it applies, on the server's clock (may be past or ahead).
    public var when: Date
    public var positionTicks: Int64
    /// Unpause, Pause, Seek, Stop (or what a newer server adds).
    public var command: String

    private enum CodingKeys: String, CodingKey {
        case groupId = "GroupId", playlistItemId = "PlaylistItemId", when = "When", positionTicks = "PositionTicks", command = "Command"
    }

    public init(groupId: String, playlistItemId: String, when: Date, positionTicks: Int64, command: String) {
        (self.groupId, self.playlistItemId, self.when, self.positionTicks, self.command) = (groupId, playlistItemId, when, positionTicks, command)
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        groupId = try c.decodeIfPresent(String.self, forKey: .groupId) ?? ""
        playlistItemId = try c.decodeIfPresent(String.self, forKey: .playlistItemId) ?? ""
        let text = try c.decode(String.self, forKey: .when)
        guard let when = JellyfinDateTranscoder.parse(text) else {
            throw DecodingError.dataCorruptedError(forKey: .when, in: c, debugDescription: "not a date: \(text)")
        }
        self.when = when
        positionTicks = try c.decodeIfPresent(Int64.self, forKey: .positionTicks) ?? 0
        command = try c.decode(String.self, forKey: .command)
    }
}

/// The group's queue as `PlayQueue` updates give it.
public struct SyncPlayQueue: Sendable, Equatable, Decodable {
    public struct Entry: Sendable, Equatable, Decodable {
        public var itemId: String
        /// This entry of the queue (the same item twice is two entries).
        public var playlistItemId: String
        private enum CodingKeys: String, CodingKey { case itemId = "ItemId", playlistItemId = "PlaylistItemId" }
    }
    /// NewPlaylist, SetCurrentItem, NextItem, … (why it was sent).
    public var reason: String
    public var playlist: [Entry]
    /// -1: nothing plays.
    public var playingItemIndex: Int
    public var startPositionTicks: Int64
    public var isPlaying: Bool

    private enum CodingKeys: String, CodingKey {
        case reason = "Reason", playlist = "Playlist", playingItemIndex = "PlayingItemIndex", startPositionTicks = "StartPositionTicks", isPlaying = "IsPlaying"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        reason = try c.decodeIfPresent(String.self, forKey: .reason) ?? ""
        playlist = try c.decodeIfPresent([Entry].self, forKey: .playlist) ?? []
        playingItemIndex = try c.decodeIfPresent(Int.self, forKey: .playingItemIndex) ?? -1
        startPositionTicks = try c.decodeIfPresent(Int64.self, forKey: .startPositionTicks) ?? 0
        isPlaying = try c.decodeIfPresent(Bool.self, forKey: .isPlaying) ?? false
    }

    /// The entry that plays, if any.
    public var playing: Entry? { playingItemIndex >= 0 && playingItemIndex < playlist.count ? playlist[playingItemIndex] : nil }
}

/// `SyncPlayGroupUpdate`: the group joined or left, someone joining or leaving, a new state,
/// a new queue, or why a request went nowhere.
public struct SyncPlayGroupUpdate: Sendable, Equatable, Decodable {
    public enum Payload: Sendable, Equatable {
        case group(SyncPlayGroup)
        case state(String, reason: String)
        case queue(SyncPlayQueue)
        case text(String)
        case none
    }
    public var groupId: String
    /// GroupJoined, UserJoined, UserLeft, GroupLeft, StateUpdate, PlayQueue, NotInGroup,
    /// GroupDoesNotExist, LibraryAccessDenied (or what a newer server adds).
    public var type: String
    public var payload: Payload

    private enum CodingKeys: String, CodingKey { case groupId = "GroupId", type = "Type", data = "Data" }

    public init(groupId: String, type: String, payload: Payload) { (self.groupId, self.type, self.payload) = (groupId, type, payload) }

    private struct StateData: Decodable { var State: String?; var Reason: String? }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        groupId = try c.decodeIfPresent(String.self, forKey: .groupId) ?? ""
        type = try c.decode(String.self, forKey: .type)
        switch type {
        case "GroupJoined": payload = .group(try c.decode(SyncPlayGroup.self, forKey: .data))
        case "StateUpdate":
            let state = try c.decode(StateData.self, forKey: .data)
            payload = .state(state.State ?? "", reason: state.Reason ?? "")
        case "PlayQueue": payload = .queue(try c.decode(SyncPlayQueue.self, forKey: .data))
        default: payload = (try? c.decodeIfPresent(String.self, forKey: .data)).flatMap { $0 }.map(Payload.text) ?? .none
        }
    }
}

extension JellyfinSession {
    /// The SyncPlay groups this user may join.
    public func syncPlayGroups() async throws(JellyfinError) -> [SyncPlayGroup] {
        let operation = "list the SyncPlay groups"
        let output = try await perform(operation) { try await client.syncPlayGetGroups() }
        switch output {
        case .ok(let ok):
            let groups = try await perform(operation) { try ok.body.json }
            return groups.compactMap { dto in
                dto.groupId.map { SyncPlayGroup(id: $0, name: dto.groupName ?? "", state: dto.state?.value1 ?? "Idle", participants: dto.participants ?? []) }
            }
        default: throw failure(operation, output)
        }
    }

    /// Makes a group with this session in it (the session leaves any other). Servers before
    /// 10.11 answer with no group: nil then (its GroupJoined update says which).
    @discardableResult
    public func createSyncPlayGroup(name: String) async throws(JellyfinError) -> SyncPlayGroup? {
        let operation = "make a SyncPlay group"
        let output = try await perform(operation) { try await client.syncPlayCreateGroup(body: .json(.init(value1: .init(groupName: name)))) }
        switch output {
        case .ok(let ok):
            let dto = try await perform(operation) { try ok.body.json }
            return dto.groupId.map { SyncPlayGroup(id: $0, name: dto.groupName ?? name, state: dto.state?.value1 ?? "Idle", participants: dto.participants ?? []) }
        case .noContent: return nil
        default: throw failure(operation, output)
        }
    }

    /// The requests that change the group; the server answers each at once and acts through
    /// the live session's SyncPlay messages.
    public enum SyncPlayRequest: Sendable, Equatable {
        case join(groupId: String)
        case leave
        case setQueue(itemIds: [String], index: Int, startTicks: Int64)
        case ready(when: Date, positionTicks: Int64, isPlaying: Bool, playlistItemId: String)
        case buffering(when: Date, positionTicks: Int64, isPlaying: Bool, playlistItemId: String)
        case pause, unpause, stop
        case seek(ticks: Int64)
        case ping(milliseconds: Int64)
    }

    public func syncPlay(_ request: SyncPlayRequest) async throws(JellyfinError) {
        let operation = "send SyncPlay \(request)"
        switch request {
        case .join(let id):
            try expectNoContent(operation, try await perform(operation) { try await client.syncPlayJoinGroup(body: .json(.init(value1: .init(groupId: id)))) })
        case .leave: try expectNoContent(operation, try await perform(operation) { try await client.syncPlayLeaveGroup() })
        case .setQueue(let ids, let index, let start):
            let body = Components.Schemas.PlayRequestDto(playingItemPosition: Int32(clamping: index), playingQueue: ids, startPositionTicks: start)
            try expectNoContent(operation, try await perform(operation) { try await client.syncPlaySetNewQueue(body: .json(.init(value1: body))) })
        case .ready(let when, let ticks, let playing, let entry):
            let body = Components.Schemas.ReadyRequestDto(isPlaying: playing, playlistItemId: entry, positionTicks: ticks, when: when)
            try expectNoContent(operation, try await perform(operation) { try await client.syncPlayReady(body: .json(.init(value1: body))) })
        case .buffering(let when, let ticks, let playing, let entry):
            let body = Components.Schemas.BufferRequestDto(isPlaying: playing, playlistItemId: entry, positionTicks: ticks, when: when)
            try expectNoContent(operation, try await perform(operation) { try await client.syncPlayBuffering(body: .json(.init(value1: body))) })
        case .pause: try expectNoContent(operation, try await perform(operation) { try await client.syncPlayPause() })
        case .unpause: try expectNoContent(operation, try await perform(operation) { try await client.syncPlayUnpause() })
        case .stop: try expectNoContent(operation, try await perform(operation) { try await client.syncPlayStop() })
        case .seek(let ticks):
            try expectNoContent(operation, try await perform(operation) { try await client.syncPlaySeek(body: .json(.init(value1: .init(positionTicks: ticks)))) })
        case .ping(let ms):
            try expectNoContent(operation, try await perform(operation) { try await client.syncPlayPing(body: .json(.init(value1: .init(ping: ms)))) })
        }
    }

    /// How far the server's clock is ahead of ours, and the round trip it was measured over:
    /// the best of `samples` `GetUtcTime` exchanges (the shortest round trip), the offset being
    /// the mean of the two one-way differences.
    public func serverClockOffset(samples: Int = 5) async throws(JellyfinError) -> (offset: Duration, roundTrip: Duration) {
        let operation = "read the server's clock"
        var best: (offset: Double, roundTrip: Double)?
        for _ in 0..<max(1, samples) {
            let sent = Date()
            let output = try await perform(operation) { try await client.getUtcTime() }
            let received = Date()
            guard case .ok(let ok) = output else {
                throw failure(operation, output)
            }
            let times = try await perform(operation) { try ok.body.json }
            guard let reception = times.requestReceptionTime, let transmission = times.responseTransmissionTime else {
                throw .malformedResponse(operation: operation, reason: "no times in the answer")
            }
            let roundTrip = received.timeIntervalSince(sent) - transmission.timeIntervalSince(reception)
            let offset = (reception.timeIntervalSince(sent) + transmission.timeIntervalSince(received)) / 2
            if best == nil || roundTrip < best!.roundTrip { best = (offset, roundTrip) }
        }
        return (.seconds(best!.offset), .seconds(max(0, best!.roundTrip)))
    }
}

