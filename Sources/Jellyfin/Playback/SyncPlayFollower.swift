internal import Foundation

/// A player that follows a SyncPlay group: it loads what the group's queue plays (paused, at the
/// group's position), says Ready when it is, and carries out the group's commands at the moment
/// the server names — Unpause at `When` on the server's clock (catching up by the time it is
/// late), Pause and Seek to the group's position (Ready again after a seek), Stop. Each item is a
/// playback session of its own, reported as `play` reports.
///
/// Feed it the live session's messages (`handle(_:)`) and the server's clock offset
/// (`JellyfinSession.serverClockOffset`); the group is made or joined by the caller
/// (`createSyncPlayGroup`, `syncPlay(.join)`), which also leaves it.
public actor SyncPlayFollower {
    public enum Event: Sendable, Equatable {
        case joined(SyncPlayGroup)
        case left
        case userJoined(String)
        case userLeft(String)
        /// The group's state (Idle, Waiting, Paused, Playing) and what moved it.
        case state(String, reason: String)
        /// An item of the group's queue is loading, to start at `atSeconds`.
        case loading(itemId: String, atSeconds: Double)
        /// This player said Ready at `atSeconds`.
        case ready(atSeconds: Double)
        /// A group command carried out: how far ahead of its moment it was received
        /// (negative: late), and where playback then was.
        case command(String, positionSeconds: Double, leadSeconds: Double)
        case playback(itemId: String, PlaybackProgress)
        case ended(itemId: String, PlaybackOutcome)
        /// Something went wrong or the server said no (not in a group, no such group…).
        case problem(String)
    }

    private let session: JellyfinSession
    private let request: PlaybackRequest
    private let options: PlaybackOptions
    private let makePlayer: @Sendable () -> any MediaPlayer
    private let sink: AsyncStream<Event>.Continuation
    public nonisolated let events: AsyncStream<Event>

    /// Server clock minus ours.
    private var offset: Duration = .zero
    private var entryId: String?
    private var itemId: String?
    private var player: (any MediaPlayer)?
    /// The command waiting for its moment (replaced by the next).
    private var pending: Task<Void, Never>?
    /// Bumped for every item loaded, so a late event of a replaced player changes nothing.
    private var generation = 0

    public init(session: JellyfinSession, request: PlaybackRequest, options: PlaybackOptions = .init(),
                makePlayer: @escaping @Sendable () -> any MediaPlayer) {
        (self.session, self.request, self.makePlayer) = (session, request, makePlayer)
        var options = options
        options.startPaused = true
        options.stopAfter = nil
        self.options = options
        (events, sink) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
    }

    /// How far the server's clock is ahead of ours (`JellyfinSession.serverClockOffset`).
    public func setClockOffset(_ offset: Duration) { self.offset = offset }

    private var serverNow: Date { Date().addingTimeInterval(Self.seconds(offset)) }
    private static func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

    /// Acts on one live-session message (others are ignored).
    public func handle(_ message: LiveMessage) async {
        switch message {
        case .syncPlayGroupUpdate(let update): await apply(update)
        case .syncPlayCommand(let command): await apply(command)
        default: break
        }
    }

    /// Stops what plays (its Stopped report is sent); the group is left by the caller.
    public func stop() async {
        pending?.cancel()
        generation += 1
        if let player { self.player = nil; await player.stop() }
        entryId = nil
    }

    private func apply(_ update: SyncPlayGroupUpdate) async {
        switch (update.type, update.payload) {
        case ("GroupJoined", .group(let group)): sink.yield(.joined(group))
        case ("UserJoined", .text(let name)): sink.yield(.userJoined(name))
        case ("UserLeft", .text(let name)): sink.yield(.userLeft(name))
        case ("GroupLeft", _):
            await stop()
            sink.yield(.left)
        case ("StateUpdate", .state(let state, let reason)): sink.yield(.state(state, reason: reason))
        case ("PlayQueue", .queue(let queue)):
            guard let playing = queue.playing else { return await stop() }
            if playing.playlistItemId != entryId || player == nil {
                await load(playing, atTicks: queue.startPositionTicks)
            } else if let player {
                // The same item again (a re-sync): to the group's position, paused, then Ready.
                pending?.cancel()
                await player.setPaused(true)
                await player.seek(to: Double(queue.startPositionTicks) / 10_000_000)
                await sayReady(entry: playing.playlistItemId, player: player, target: Double(queue.startPositionTicks) / 10_000_000)
            }
        case ("NotInGroup", _): sink.yield(.problem("this session is in no SyncPlay group"))
        case ("GroupDoesNotExist", _): sink.yield(.problem("no such SyncPlay group (it may have ended)"))
        case ("LibraryAccessDenied", _): sink.yield(.problem("this user may not see everything the group plays"))
        default: break
        }
    }

    /// Loads `entry` paused at `ticks`; Ready once it is open there.
    private func load(_ entry: SyncPlayQueue.Entry, atTicks ticks: Int64) async {
        pending?.cancel()
        generation += 1
        let mine = generation
        if let previous = player { player = nil; await previous.stop() }
        entryId = entry.playlistItemId
        itemId = entry.itemId
        let start = Double(ticks) / 10_000_000
        sink.yield(.loading(itemId: entry.itemId, atSeconds: start))
        let item: JellyfinItem
        let plan: PlaybackPlan
        do throws(PlaybackFailure) {
            do { item = try await session.item(entry.itemId) } catch { throw .server(error) }
            var request = request
            request.startSeconds = start
            plan = try await session.preparePlayback(item, request)
        } catch {
            sink.yield(.problem("\(entry.itemId): \(error.description)"))
            return
        }
        guard mine == generation else { return }
        let player = makePlayer()
        self.player = player
        let session = session, options = options, sink = sink, entryId = entry.playlistItemId
        sink.yield(.playback(itemId: item.id, .planned(plan)))
        Task {
            do throws(PlaybackFailure) {
                let outcome = try await session.play(plan, startSeconds: start, on: player, options: options) { progress in
                    sink.yield(.playback(itemId: item.id, progress))
                    if case .reported(.start, let at, _) = progress {
                        Task { await self.sayReady(entry: entryId, player: player, target: at, generation: mine) }
                    }
                }
                sink.yield(.ended(itemId: item.id, outcome))
            } catch {
                sink.yield(.problem("\(item.name): \(error.description)"))
            }
            self.finished(mine)
        }
    }

    private func finished(_ generation: Int) {
        guard generation == self.generation else { return }
        player = nil
    }

    /// Tells the group this player is paused at `target` (its own position once the player is
    /// there) and ready.
    private func sayReady(entry: String, player: any MediaPlayer, target: Double, generation: Int? = nil) async {
        if let generation, generation != self.generation { return }
        // A seek lands within moments; the position said is the player's own.
        for _ in 0..<40 where abs(player.position - target) > 0.25 { try? await Task.sleep(for: .milliseconds(50)) }
        let at = player.position
        do throws(JellyfinError) {
            try await session.syncPlay(.ready(when: serverNow, positionTicks: Int64((at * 10_000_000).rounded()), isPlaying: false, playlistItemId: entry))
            sink.yield(.ready(atSeconds: at))
        } catch {
            sink.yield(.problem("Ready did not reach the server: \(error.description)"))
        }
    }

    private func apply(_ command: SyncPlayCommand) async {
        guard let player, command.playlistItemId.isEmpty || command.playlistItemId == entryId || command.command == "Stop" else { return }
        pending?.cancel()
        let target = Double(command.positionTicks) / 10_000_000
        // The command's moment on our clock.
        // (A server's moments are under a few seconds ahead; one further off is held to 10 s, so
        // a wrong clock cannot stall the player.)
        let moment = min(command.when.addingTimeInterval(-Self.seconds(offset)), Date().addingTimeInterval(10))
        let lead = moment.timeIntervalSinceNow
        let entry = entryId ?? ""
        let sink = sink
        switch command.command {
        case "Unpause":
            // To the group's position while paused, then play at the moment (from further on,
            // by as much as the moment has passed).
            if abs(player.position - target) > 0.1 { await player.seek(to: target) }
            pending = Task {
                if lead > 0 { try? await Task.sleep(for: .seconds(lead)) }
                guard !Task.isCancelled else { return }
                let late = -moment.timeIntervalSinceNow
                if late > 0.05 { await player.seek(to: target + late) }
                await player.setPaused(false)
                sink.yield(.command("Unpause", positionSeconds: target + max(0, late), leadSeconds: lead))
            }
        case "Pause":
            pending = Task {
                if lead > 0 { try? await Task.sleep(for: .seconds(lead)) }
                guard !Task.isCancelled else { return }
                await player.setPaused(true)
                if abs(player.position - target) > 0.05 { await player.seek(to: target) }
                sink.yield(.command("Pause", positionSeconds: target, leadSeconds: lead))
            }
        case "Seek":
            await player.setPaused(true)
            await player.seek(to: target)
            sink.yield(.command("Seek", positionSeconds: target, leadSeconds: lead))
            await sayReady(entry: entry, player: player, target: target)
        case "Stop":
            sink.yield(.command("Stop", positionSeconds: player.position, leadSeconds: lead))
            await stop()
        default:
            break
        }
    }
}
