/// Items played one after another — an episode and the ones after it, an album's tracks, what
/// another client sends with Play — each as a playback session of its own (`JellyfinSession.play`)
/// on a player made for it. Commands (pause, seek, next, stop, volume) reach the current player;
/// an item that plays to its end starts the next.
///
/// Music plays gapless: once a track plays, the queue asks the server about the next one and
/// queues it on the same player (`MediaPlayer.playNext`), which goes on into it with no gap;
/// its playback session begins when the one before has reported Stopped.
public actor PlayQueue {
    /// Where new items go (the Play message's PlayCommand).
    public enum Placement: String, Sendable { case now = "PlayNow", next = "PlayNext", last = "PlayLast" }

    public enum Command: Sendable, Equatable {
        /// Plays `itemIds` from `startIndex`, the first at `startSeconds` (nil: its resume point).
        case play(itemIds: [String], startIndex: Int, startSeconds: Double?, placement: Placement)
        case pause, unpause, playPause, stop, next, previous
        case seek(toSeconds: Double)
        case seekBy(seconds: Double)
        case setVolume(Int)
        /// nil: toggle.
        case mute(Bool?)
    }

    public enum Event: Sendable, Equatable {
        case started(itemId: String, name: String, plan: PlaybackPlan)
        case progress(itemId: String, PlaybackProgress)
        case ended(itemId: String, name: String, PlaybackOutcome)
        /// An item could not play (the queue goes on with the next): why.
        case failed(itemId: String, reason: String)
        /// Nothing is playing and nothing is queued.
        case idle
    }

    private let session: JellyfinSession
    private let makePlayer: @Sendable () -> any MediaPlayer
    private let request: PlaybackRequest
    private let options: PlaybackOptions
    private let sink: AsyncStream<Event>.Continuation
    /// What the queue does, in order.
    public nonisolated let events: AsyncStream<Event>

    private var items: [String] = []
    private var index = 0
    private var player: (any MediaPlayer)?
    /// Bumped for every item started, so a late end of a replaced player changes nothing.
    private var generation = 0
    /// The item after the current one, already queued on the current player (gapless audio).
    private var queued: Queued?
    /// The generation whose next item is being asked about (asked once).
    private var preparing = 0
    /// When `options.stopAfter` runs out, counted from the first item's start.
    private var deadline: ContinuousClock.Instant?

    private struct Queued {
        var index: Int
        var item: JellyfinItem
        var plan: PlaybackPlan
        var player: any MediaPlayer
    }
    private var muted = false
    private var volume = 100

    /// `request`: the profile and stream choices every item is asked for (its start is set per
    /// item). `options.stopAfter` counts from the first item's start over the whole queue.
    /// `makePlayer`: a new player for each item (not asked for an item queued gapless).
    public init(session: JellyfinSession, request: PlaybackRequest, options: PlaybackOptions = .init(),
                makePlayer: @escaping @Sendable () -> any MediaPlayer) {
        self.session = session
        self.request = request
        self.options = options
        self.makePlayer = makePlayer
        (events, sink) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
    }

    /// The items queued, and which one plays (or would play next). `playing` turns false only
    /// after the item's Stopped report.
    public var state: (items: [String], index: Int, playing: Bool) { (items, index, player != nil) }

    public func handle(_ command: Command) async {
        switch command {
        case .play(let ids, let startIndex, let startSeconds, let placement):
            guard !ids.isEmpty else { return }
            switch placement {
            case .now:
                items = ids
                index = min(max(0, startIndex), ids.count - 1)
                await start(startSeconds: startSeconds)
            case .next:
                items.insert(contentsOf: ids, at: min(items.count, player == nil ? index : index + 1))
                if player == nil { await start(startSeconds: startSeconds) }
            case .last:
                items += ids
                if player == nil { index = items.count - ids.count; await start(startSeconds: startSeconds) }
            }
        case .pause: await player?.setPaused(true)
        case .unpause: await player?.setPaused(false)
        case .playPause:
            if let player { await player.setPaused(!player.isPaused) }
        case .stop:
            // The item's session reports Stopped and then says idle (`ended`).
            items = []
            index = 0
            if let player { await player.stop() } else { sink.yield(.idle) }
        case .next:
            guard player != nil || index < items.count else { return }
            index += 1
            await start(startSeconds: 0)
        case .previous:
            // Within the first seconds: the item before; later: this one from its start.
            if let player, player.position > 5 { await player.seek(to: 0); return }
            index = max(0, index - 1)
            await start(startSeconds: 0)
        case .seek(let seconds): await player?.seek(to: seconds)
        case .seekBy(let delta):
            if let player { await player.seek(to: max(0, player.position + delta)) }
        case .setVolume(let level):
            volume = min(100, max(0, level))
            await player?.setVolume(volume)
        case .mute(let wanted):
            muted = wanted ?? !muted
            await player?.setMuted(muted)
        }
    }

    /// Stops what plays and starts `items[index]` (or goes idle past the end).
    private func start(startSeconds: Double?) async {
        generation += 1
        let mine = generation
        if let previous = player {
            player = nil
            await previous.stop()
        }
        await dropQueued()
        guard index < items.count else {
            sink.yield(.idle)
            return
        }
        let id = items[index]
        let item: JellyfinItem
        do { item = try await session.item(id) } catch {
            sink.yield(.failed(itemId: id, reason: error.description))
            await advance(after: mine)
            return
        }
        guard mine == generation else { return }
        var request = request
        request.startSeconds = startSeconds ?? item.userData.map { Double($0.playbackPositionTicks) / 10_000_000 } ?? 0
        launch(item, request, plan: nil, on: makePlayer(), generation: mine)
    }

    /// Runs the playback session of `item` on `player` (with `plan` when it was asked ahead).
    private func launch(_ item: JellyfinItem, _ request: PlaybackRequest, plan: PlaybackPlan?, on player: any MediaPlayer, generation mine: Int) {
        self.player = player
        var options = options
        // `stopAfter` counts from the first item's start, over the items after it too.
        if let deadline { options.stopAfter = max(.milliseconds(1), deadline - .now) }
        let session = session, sink = sink, volume = volume, muted = muted
        Task {
            let observe: @Sendable (PlaybackProgress) -> Void = { progress in
                switch progress {
                case .planned(let plan):
                    sink.yield(.started(itemId: item.id, name: item.name, plan: plan))
                case .reported(.start, _, _):
                    // The queue's volume and mute carry over from item to item.
                    if volume != 100 || muted { Task { await player.setVolume(volume); await player.setMuted(muted) } }
                    sink.yield(.progress(itemId: item.id, progress))
                    Task { await self.playing(generation: mine) }
                    if item.isAudio, player.playsGapless { Task { await self.prepareNext(after: mine, player: player) } }
                default:
                    sink.yield(.progress(itemId: item.id, progress))
                }
            }
            do throws(PlaybackFailure) {
                let outcome: PlaybackOutcome
                if let plan {
                    observe(.planned(plan))
                    outcome = try await session.play(plan, startSeconds: request.startSeconds, on: player, options: options, observe: observe)
                } else {
                    outcome = try await session.play(item, request, on: player, options: options, observe: observe)
                }
                sink.yield(.ended(itemId: item.id, name: item.name, outcome))
                if outcome.end == .finished { await self.advance(after: mine) } else { await self.ended(mine) }
            } catch {
                sink.yield(.failed(itemId: item.id, reason: error.description))
                await self.advance(after: mine)
            }
        }
    }

    /// Asks about the track after the one of `generation` and queues it on `player` so it
    /// follows with no gap. Anything that goes wrong leaves it to be started the usual way.
    private func prepareNext(after generation: Int, player: any MediaPlayer) async {
        guard generation == self.generation, preparing != generation, queued == nil, index + 1 < items.count else { return }
        preparing = generation
        let next = index + 1, id = items[next]
        guard let item = try? await session.item(id), item.isAudio else { return }
        var request = request
        request.startSeconds = 0
        guard let plan = try? await session.preparePlayback(item, request),
              generation == self.generation, index + 1 == next, items.count > next, items[next] == id else { return }
        guard let follower = await player.playNext(plan.url, tracks: plan.tracks) else { return }
        guard generation == self.generation, index + 1 == next, items.count > next, items[next] == id else {
            await follower.stop()
            return
        }
        queued = Queued(index: next, item: item, plan: plan, player: follower)
    }

    /// An item of `generation` plays: the first to play starts the `stopAfter` clock.
    private func playing(generation: Int) {
        guard deadline == nil, let stopAfter = options.stopAfter else { return }
        deadline = .now + stopAfter
    }

    /// Forgets the item queued ahead, stopping it should it play.
    private func dropQueued() async {
        guard let dropped = queued else { return }
        queued = nil
        await dropped.player.stop()
    }

    /// The item of `generation` played to its end (or could not play): the next one starts —
    /// already playing when it was queued ahead on the same player.
    private func advance(after generation: Int) async {
        guard generation == self.generation else { return }
        player = nil
        index += 1
        if let next = queued, next.index == index, index < items.count, items[index] == next.item.id {
            queued = nil
            self.generation += 1
            var request = request
            request.startSeconds = 0
            launch(next.item, request, plan: next.plan, on: next.player, generation: self.generation)
        } else {
            await start(startSeconds: 0)
        }
    }

    /// The item of `generation` was stopped (in its player, by --duration): the queue rests.
    private func ended(_ generation: Int) async {
        guard generation == self.generation else { return }
        player = nil
        await dropQueued()
        sink.yield(.idle)
    }
}

extension PlayQueue.Command {
    /// The command a live-session message asks of a remote-controlled player (nil: none):
    /// Play, Playstate (Rewind 10 s, FastForward 30 s, as Jellyfin's own clients step) and the
    /// SetVolume/Mute/Unmute/ToggleMute general commands.
    public init?(_ message: LiveMessage) {
        switch message {
        case .play(let request):
            self = .play(itemIds: request.itemIds, startIndex: request.startIndex ?? 0,
                         startSeconds: request.startPositionTicks.map { Double($0) / 10_000_000 },
                         placement: PlayQueue.Placement(rawValue: request.playCommand) ?? .now)
        case .playstate(let request):
            switch request.command {
            case "Stop": self = .stop
            case "Pause": self = .pause
            case "Unpause": self = .unpause
            case "PlayPause": self = .playPause
            case "NextTrack": self = .next
            case "PreviousTrack": self = .previous
            case "Seek":
                guard let ticks = request.seekPositionTicks else { return nil }
                self = .seek(toSeconds: Double(ticks) / 10_000_000)
            case "Rewind": self = .seekBy(seconds: -10)
            case "FastForward": self = .seekBy(seconds: 30)
            default: return nil
            }
        case .generalCommand(let command):
            switch command.name {
            case "SetVolume":
                guard let level = command.arguments["Volume"].flatMap({ Int($0) }) else { return nil }
                self = .setVolume(level)
            case "Mute": self = .mute(true)
            case "Unmute": self = .mute(false)
            case "ToggleMute": self = .mute(nil)
            default: return nil
            }
        default:
            return nil
        }
    }
}
