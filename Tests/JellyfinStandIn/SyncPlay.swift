import FarcastSupport
import Foundation
import Hummingbird
import Jellyfin
import NIOCore

/// SyncPlay in the stand-in: groups of sessions (one per device) that watch one queue together,
/// with a real server's state machine on the paths clients use — Idle, Waiting (for every
/// member's Ready), Paused, Playing — and its messages over `/socket`: `SyncPlayGroupUpdate`
/// (GroupJoined, UserJoined, UserLeft, GroupLeft, StateUpdate, PlayQueue, NotInGroup,
/// GroupDoesNotExist) and `SyncPlayCommand` (Unpause at a `When` a little ahead — twice the
/// highest member ping, at least 500 ms — Pause, Seek, Stop). Positions are clamped to the
/// item's runtime. Every message sent is logged (`GET /StandIn/SyncPlay`).
///
/// Not here: queue edits (Queue, Move, Remove, Next/Previous, shuffle, repeat), IgnoreWait,
/// library access checks, seeding a group from its creator's playback.
final class SyncPlayGroups: Sendable {
    enum GroupState: String, Sendable { case idle = "Idle", waiting = "Waiting", paused = "Paused", playing = "Playing" }

    struct Member: Sendable {
        var deviceId: String
        var userName: String
        var ping = 500
        var buffering = false
    }

    struct Group: Sendable {
        var id: String
        var name: String
        var members: [Member]
        var state: GroupState = .idle
        /// Waiting: whether everyone's Ready leads to Playing (else Paused).
        var resumePlaying = false
        var queue: [(itemId: String, entryId: String)] = []
        var playingIndex = -1
        var positionTicks: Int64 = 0
        var lastActivity = Date()
        var runTimeTicks: Int64 = 0
        var queueChanged = Date()

        var entryId: String { playingIndex >= 0 && playingIndex < queue.count ? queue[playingIndex].entryId : String(repeating: "0", count: 32) }
        func clamp(_ ticks: Int64) -> Int64 { max(0, runTimeTicks > 0 ? min(ticks, runTimeTicks) : ticks) }
        /// The position now (it runs on only while playing, from `lastActivity`).
        func position(at now: Date) -> Int64 {
            guard state == .playing else { return positionTicks }
            return clamp(positionTicks + Int64(max(0, now.timeIntervalSince(lastActivity)) * 10_000_000))
        }
    }

    struct Sent: Codable, Sendable {
        var to: String        // device id
        var type: String      // SyncPlayCommand or SyncPlayGroupUpdate
        var kind: String      // the command or update type
        var positionTicks: Int64?
        var when: Double?     // seconds since 1970
        var at: Double
    }

    private let groups = Locked<[String: Group]>([:])
    private let log = Locked<[Sent]>([])
    private let hub: SocketHub

    init(hub: SocketHub) { self.hub = hub }

    var sent: [Sent] { log.withLock { $0 } }

    // MARK: Sending

    static func time(_ date: Date) -> String { JellyfinDateTranscoder.format(date) }

    private func json(_ value: Any) -> String {
        String(decoding: (try? JSONSerialization.data(withJSONObject: value)) ?? Data("null".utf8), as: UTF8.self)
    }

    private func deliver(_ type: String, kind: String, data: String, to devices: [String], positionTicks: Int64? = nil, when: Date? = nil) {
        let text = SocketHub.envelope(type: type, dataJSON: data)
        let now = Date().timeIntervalSince1970
        for device in devices {
            _ = hub.send(text) { $0.deviceId == device }
            log.withLock { $0.append(Sent(to: device, type: type, kind: kind, positionTicks: positionTicks, when: when?.timeIntervalSince1970, at: now)) }
        }
    }

    private func update(_ group: Group?, _ type: String, _ data: Any, to devices: [String]) {
        let payload: [String: Any] = ["GroupId": group?.id ?? String(repeating: "0", count: 32), "Type": type, "Data": data]
        deliver("SyncPlayGroupUpdate", kind: type, data: json(payload), to: devices)
    }

    private func command(_ group: Group, _ command: String, to devices: [String]) {
        let payload: [String: Any] = ["GroupId": group.id, "PlaylistItemId": group.entryId, "When": Self.time(group.lastActivity),
                                      "PositionTicks": group.positionTicks, "Command": command, "EmittedAt": Self.time(Date())]
        deliver("SyncPlayCommand", kind: command, data: json(payload), to: devices, positionTicks: group.positionTicks, when: group.lastActivity)
    }

    private func stateUpdate(_ group: Group, reason: String) {
        update(group, "StateUpdate", ["State": group.state.rawValue, "Reason": reason], to: group.members.map(\.deviceId))
    }

    private func playQueue(_ group: Group, reason: String, to devices: [String]) {
        let playlist = group.queue.map { ["ItemId": $0.itemId, "PlaylistItemId": $0.entryId] }
        update(group, "PlayQueue", ["Reason": reason, "LastUpdate": Self.time(group.queueChanged), "Playlist": playlist,
                                    "PlayingItemIndex": group.playingIndex, "StartPositionTicks": group.position(at: Date()),
                                    "IsPlaying": group.state == .playing, "ShuffleMode": "Sorted", "RepeatMode": "RepeatNone"], to: devices)
    }

    func info(_ group: Group) -> Components.Schemas.GroupInfoDto {
        var names: [String] = []
        for member in group.members where !names.contains(member.userName) { names.append(member.userName) }
        return .init(groupId: group.id, groupName: group.name, lastUpdatedAt: Date(), participants: names, state: .init(value1: group.state.rawValue))
    }

    private func infoJSON(_ group: Group) -> [String: Any] {
        let dto = info(group)
        return ["GroupId": group.id, "GroupName": group.name, "State": group.state.rawValue, "Participants": dto.participants ?? [],
                "LastUpdatedAt": Self.time(Date())]
    }

    // MARK: Requests

    func list() -> [Components.Schemas.GroupInfoDto] { groups.withLock { Array($0.values) }.sorted { $0.name < $1.name }.map(info) }

    private func groupId(of device: String) -> String? {
        groups.withLock { $0.values.first { $0.members.contains { $0.deviceId == device } }?.id }
    }

    /// Runs `change` on the caller's group under the lock; a caller in no group hears NotInGroup.
    private func withGroup(_ device: String, _ change: (inout Group) -> Void) {
        let found: Bool = groups.withLock { groups in
            guard let id = groups.values.first(where: { $0.members.contains { $0.deviceId == device } })?.id, var group = groups[id] else { return false }
            change(&group)
            groups[id] = group
            return true
        }
        if !found { update(nil, "NotInGroup", "", to: [device]) }
    }

    func create(name: String, device: String, userName: String) -> Components.Schemas.GroupInfoDto {
        leave(device: device, quietly: true)
        var group = Group(id: StandInState.randomHex(16), name: String(name.trimmingCharacters(in: .whitespaces).prefix(200)),
                          members: [Member(deviceId: device, userName: userName)])
        group.lastActivity = Date()
        groups.withLock { $0[group.id] = group }
        update(group, "GroupJoined", infoJSON(group), to: [device])
        command(group, "Stop", to: [device])
        return info(group)
    }

    func join(groupId: String, device: String, userName: String) {
        let id = groupId.replacingOccurrences(of: "-", with: "").lowercased()
        guard groups.withLock({ $0[id] != nil }) else { return update(nil, "GroupDoesNotExist", "", to: [device]) }
        if self.groupId(of: device) != id { leave(device: device, quietly: false) }
        groups.withLock { groups in
            guard var group = groups[id] else { return }
            if !group.members.contains(where: { $0.deviceId == device }) { group.members.append(Member(deviceId: device, userName: userName)) }
            let others = group.members.map(\.deviceId).filter { $0 != device }
            update(group, "GroupJoined", infoJSON(group), to: [device])
            update(group, "UserJoined", userName, to: others)
            switch group.state {
            case .idle:
                command(group, "Stop", to: [device])
            case .playing, .paused, .waiting:
                // The group waits for the newcomer: frozen where it is, the others paused there.
                if group.state == .playing { group.resumePlaying = true }
                if group.state != .waiting { group.resumePlaying = group.state == .playing }
                group.positionTicks = group.position(at: Date())
                group.lastActivity = Date()
                group.state = .waiting
                playQueue(group, reason: "NewPlaylist", to: [device])
                if let index = group.members.firstIndex(where: { $0.deviceId == device }) { group.members[index].buffering = true }
                command(group, "Pause", to: group.members.filter { !$0.buffering }.map(\.deviceId))
            }
            groups[id] = group
        }
    }

    func leave(device: String, quietly: Bool = false) {
        var notInGroup = false
        groups.withLock { groups in
            guard let id = groups.values.first(where: { $0.members.contains { $0.deviceId == device } })?.id, var group = groups[id],
                  let index = group.members.firstIndex(where: { $0.deviceId == device }) else { notInGroup = true; return }
            let member = group.members.remove(at: index)
            update(group, "GroupLeft", Self.dashed(group.id), to: [device])
            update(group, "UserLeft", member.userName, to: group.members.map(\.deviceId))
            if group.members.isEmpty {
                groups.removeValue(forKey: id)
                return
            }
            if group.state == .waiting, !group.members.contains(where: \.buffering) { everyoneReady(&group, reason: "Ready", lastDelay: nil) }
            groups[id] = group
        }
        if notInGroup && !quietly { update(nil, "NotInGroup", "", to: [device]) }
    }

    static func dashed(_ id: String) -> String {
        let c = Array(id)
        guard c.count == 32 else { return id }
        return [String(c[0..<8]), String(c[8..<12]), String(c[12..<16]), String(c[16..<20]), String(c[20..<32])].joined(separator: "-")
    }

    func setQueue(device: String, itemIds: [String], index: Int, startTicks: Int64, runtime: (String) -> Int64?) {
        withGroup(device) { group in
            guard !itemIds.isEmpty, index >= 0, index < itemIds.count else { return }
            group.queue = itemIds.map { ($0.replacingOccurrences(of: "-", with: "").lowercased(), StandInState.randomHex(16)) }
            group.playingIndex = index
            group.runTimeTicks = runtime(group.queue[index].itemId) ?? 0
            group.positionTicks = group.clamp(startTicks)
            group.lastActivity = Date()
            group.queueChanged = Date()
            group.state = .waiting
            group.resumePlaying = true
            for n in group.members.indices { group.members[n].buffering = true }
            playQueue(group, reason: "NewPlaylist", to: group.members.map(\.deviceId))
        }
    }

    func ready(device: String, when: Date?, positionTicks: Int64, isPlaying: Bool, entryId: String?, buffering: Bool) {
        withGroup(device) { group in
            let now = Date()
            guard let index = group.members.firstIndex(where: { $0.deviceId == device }) else { return }
            if buffering {
                group.members[index].buffering = true
                switch group.state {
                case .playing:
                    group.positionTicks = group.position(at: now)
                    group.lastActivity = now
                    group.state = .waiting
                    group.resumePlaying = true
                    command(group, "Pause", to: group.members.filter { !$0.buffering }.map(\.deviceId))
                case .paused:
                    group.state = .waiting
                    group.resumePlaying = false
                    command(group, "Pause", to: [device])
                case .waiting:
                    if !group.resumePlaying { command(group, "Pause", to: [device]) }
                case .idle:
                    command(group, "Stop", to: [device])
                    return
                }
                stateUpdate(group, reason: "Buffer")
                return
            }
            switch group.state {
            case .idle: command(group, "Stop", to: [device])
            case .playing: command(group, "Unpause", to: [device])
            case .paused: command(group, "Pause", to: [device])
            case .waiting:
                if let entryId, entryId.replacingOccurrences(of: "-", with: "").lowercased() != group.entryId {
                    group.members[index].buffering = true
                    playQueue(group, reason: "SetCurrentItem", to: [device])
                    return
                }
                // Where the client is now, against where the group is.
                var elapsed = when.map { now.timeIntervalSince($0) } ?? 0
                if abs(elapsed) > 2 || !isPlaying { elapsed = 0 }
                let clientPosition = group.clamp(positionTicks) + Int64(elapsed * 10_000_000)
                let behind = Double(group.positionTicks - clientPosition) / 10_000_000
                if abs(behind) > 0.5 {
                    // Lost: sent back to the group's position, still waited for.
                    group.members[index].buffering = true
                    command(group, "Seek", to: [device])
                    stateUpdate(group, reason: "Ready")
                    return
                }
                group.members[index].buffering = false
                if group.members.contains(where: \.buffering) {
                    if group.resumePlaying { command(group, "Pause", to: [device]) }
                } else {
                    everyoneReady(&group, reason: "Ready", lastDelay: behind)
                }
            }
        }
    }

    /// Everyone is ready: play from the group's position a little ahead, or rest paused there.
    private func everyoneReady(_ group: inout Group, reason: String, lastDelay: Double?) {
        if group.resumePlaying {
            let highest = Double(group.members.map(\.ping).max() ?? 500) / 1000
            group.lastActivity = Date().addingTimeInterval(max(lastDelay ?? 0, max(2 * highest, 0.5)))
            group.state = .playing
            command(group, "Unpause", to: group.members.map(\.deviceId))
            stateUpdate(group, reason: reason)
        } else {
            group.state = .paused
            command(group, "Pause", to: group.members.map(\.deviceId))
            stateUpdate(group, reason: reason)
        }
    }

    func pause(device: String) {
        withGroup(device) { group in
            switch group.state {
            case .playing:
                let now = Date()
                group.positionTicks = group.position(at: now)
                group.lastActivity = now
                group.state = .paused
                command(group, "Pause", to: group.members.map(\.deviceId))
                stateUpdate(group, reason: "Pause")
            case .paused:
                command(group, "Pause", to: [device])
            case .waiting:
                group.resumePlaying = false
                stateUpdate(group, reason: "Pause")
            case .idle:
                command(group, "Stop", to: [device])
            }
        }
    }

    func unpause(device: String) {
        withGroup(device) { group in
            switch group.state {
            case .paused:
                group.resumePlaying = true
                everyoneReady(&group, reason: "Unpause", lastDelay: nil)
            case .playing:
                command(group, "Unpause", to: [device])
            case .waiting:
                if group.resumePlaying {
                    // Asked twice: start without the stragglers.
                    for n in group.members.indices { group.members[n].buffering = false }
                    everyoneReady(&group, reason: "Unpause", lastDelay: nil)
                } else {
                    group.resumePlaying = true
                    stateUpdate(group, reason: "Unpause")
                }
            case .idle:
                guard !group.queue.isEmpty else { return command(group, "Stop", to: [device]) }
                group.positionTicks = 0
                group.lastActivity = Date()
                group.state = .waiting
                group.resumePlaying = true
                for n in group.members.indices { group.members[n].buffering = true }
                playQueue(group, reason: "NewPlaylist", to: group.members.map(\.deviceId))
            }
        }
    }

    func seek(device: String, positionTicks: Int64) {
        withGroup(device) { group in
            guard group.state != .idle else { return command(group, "Stop", to: [device]) }
            if group.state == .playing { group.resumePlaying = true } else if group.state == .paused { group.resumePlaying = false }
            group.state = .waiting
            group.positionTicks = group.clamp(positionTicks)
            group.lastActivity = Date()
            for n in group.members.indices { group.members[n].buffering = true }
            command(group, "Seek", to: group.members.map(\.deviceId))
            stateUpdate(group, reason: "Seek")
        }
    }

    func stop(device: String) {
        withGroup(device) { group in
            guard group.state != .idle else { return command(group, "Stop", to: [device]) }
            group.positionTicks = group.position(at: Date())
            group.state = .idle
            command(group, "Stop", to: group.members.map(\.deviceId))
        }
    }

    func ping(device: String, milliseconds: Int64) {
        withGroup(device) { group in
            if let index = group.members.firstIndex(where: { $0.deviceId == device }) { group.members[index].ping = Int(clamping: max(0, milliseconds)) }
        }
    }
}

extension StandInAPI {
    // MARK: SyncPlay operations

    private var callerDevice: String { Caller.current?.deviceId ?? "" }
    private var callerName: String {
        let id = Caller.current?.token?.userId
        return state.users.first { $0.id == id }?.name ?? "someone"
    }

    func getUtcTime(_ input: Operations.GetUtcTime.Input) async throws -> Operations.GetUtcTime.Output {
        let received = Date()
        return .ok(.init(body: .json(.init(requestReceptionTime: received, responseTransmissionTime: Date()))))
    }

    func syncPlayGetGroups(_ input: Operations.SyncPlayGetGroups.Input) async throws -> Operations.SyncPlayGetGroups.Output {
        .ok(.init(body: .json(syncPlay.list())))
    }

    func syncPlayCreateGroup(_ input: Operations.SyncPlayCreateGroup.Input) async throws -> Operations.SyncPlayCreateGroup.Output {
        guard case .json(let body) = input.body else { return .undocumented(statusCode: 400, .init()) }
        let name = body.value1.groupName.flatMap { $0.isEmpty ? nil : $0 } ?? "\(callerName)'s group"
        return .ok(.init(body: .json(syncPlay.create(name: name, device: callerDevice, userName: callerName))))
    }

    func syncPlayJoinGroup(_ input: Operations.SyncPlayJoinGroup.Input) async throws -> Operations.SyncPlayJoinGroup.Output {
        guard case .json(let body) = input.body else { return .undocumented(statusCode: 400, .init()) }
        // A missing id is the empty one, as the server binds it: no such group.
        syncPlay.join(groupId: body.value1.groupId ?? String(repeating: "0", count: 32), device: callerDevice, userName: callerName)
        return .noContent(.init())
    }

    func syncPlayLeaveGroup(_ input: Operations.SyncPlayLeaveGroup.Input) async throws -> Operations.SyncPlayLeaveGroup.Output {
        syncPlay.leave(device: callerDevice)
        return .noContent(.init())
    }

    func syncPlaySetNewQueue(_ input: Operations.SyncPlaySetNewQueue.Input) async throws -> Operations.SyncPlaySetNewQueue.Output {
        guard case .json(let body) = input.body else { return .undocumented(statusCode: 400, .init()) }
        let request = body.value1
        syncPlay.setQueue(device: callerDevice, itemIds: request.playingQueue ?? [], index: Int(request.playingItemPosition ?? 0),
                          startTicks: request.startPositionTicks ?? 0) { library.item($0)?.entry?.runTimeTicks }
        return .noContent(.init())
    }

    func syncPlayReady(_ input: Operations.SyncPlayReady.Input) async throws -> Operations.SyncPlayReady.Output {
        guard case .json(let body) = input.body else { return .undocumented(statusCode: 400, .init()) }
        let r = body.value1
        syncPlay.ready(device: callerDevice, when: r.when, positionTicks: r.positionTicks ?? 0, isPlaying: r.isPlaying ?? false,
                       entryId: r.playlistItemId, buffering: false)
        return .noContent(.init())
    }

    func syncPlayBuffering(_ input: Operations.SyncPlayBuffering.Input) async throws -> Operations.SyncPlayBuffering.Output {
        guard case .json(let body) = input.body else { return .undocumented(statusCode: 400, .init()) }
        let r = body.value1
        syncPlay.ready(device: callerDevice, when: r.when, positionTicks: r.positionTicks ?? 0, isPlaying: r.isPlaying ?? false,
                       entryId: r.playlistItemId, buffering: true)
        return .noContent(.init())
    }

    func syncPlayPause(_ input: Operations.SyncPlayPause.Input) async throws -> Operations.SyncPlayPause.Output {
        syncPlay.pause(device: callerDevice)
        return .noContent(.init())
    }

    func syncPlayUnpause(_ input: Operations.SyncPlayUnpause.Input) async throws -> Operations.SyncPlayUnpause.Output {
        syncPlay.unpause(device: callerDevice)
        return .noContent(.init())
    }

    func syncPlaySeek(_ input: Operations.SyncPlaySeek.Input) async throws -> Operations.SyncPlaySeek.Output {
        guard case .json(let body) = input.body else { return .undocumented(statusCode: 400, .init()) }
        syncPlay.seek(device: callerDevice, positionTicks: body.value1.positionTicks ?? 0)
        return .noContent(.init())
    }

    func syncPlayStop(_ input: Operations.SyncPlayStop.Input) async throws -> Operations.SyncPlayStop.Output {
        syncPlay.stop(device: callerDevice)
        return .noContent(.init())
    }

    func syncPlayPing(_ input: Operations.SyncPlayPing.Input) async throws -> Operations.SyncPlayPing.Output {
        guard case .json(let body) = input.body else { return .undocumented(statusCode: 400, .init()) }
        syncPlay.ping(device: callerDevice, milliseconds: body.value1.ping ?? 500)
        return .noContent(.init())
    }
}
