import ArgumentParser
import FarcastSupport
import Foundation
import Jellyfin

/// `farcast jellyfin syncplay …`: watch together — groups whose members play the same thing at
/// the same moment.
struct JellyfinSyncPlayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "syncplay",
        abstract: "Watch together (SyncPlay): list, make or join a group and follow it in mpv; pause, seek or stop it.",
        discussion: """
            `new` and `join` follow the group in mpv until Ctrl-C or --duration, then leave it: what the group plays is loaded paused at the group's position, Ready is said when mpv is there, and the group's Unpause, Pause, Seek and Stop are carried out at the moment the server names (on its clock, measured when joining). `pause`, `unpause`, `seek` and `stop` ask the group for it on behalf of this device (run them beside a `new` or `join` of the same user, e.g. from another terminal); every member follows.

            Examples:
              farcast jellyfin syncplay new "Movie night" "Test Pattern"
              farcast jellyfin syncplay list
              farcast jellyfin syncplay join "Movie night"
              farcast jellyfin syncplay pause
              farcast jellyfin syncplay seek 90
            """,
        subcommands: [List.self, New.self, Join.self, Pause.self, Unpause.self, Seek.self, Stop.self, Leave.self]
    )

    struct GroupRow: Encodable {
        var id: String
        var name: String
        var state: String
        var participants: [String]
        init(_ g: SyncPlayGroup) { (id, name, state, participants) = (g.id, g.name, g.state, g.participants) }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the groups this user may join.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget

        func run() async throws {
            try await reportingFailures {
                let groups = try await target.session().syncPlayGroups()
                if global.json { return try printJSONList(groups.map(GroupRow.init)) }
                if groups.isEmpty { return print("No SyncPlay groups.") }
                printTable(["GROUP", "STATE", "WHO", "ID"], groups.map { [$0.name, $0.state, $0.participants.joined(separator: ", "), $0.id] })
            }
        }
    }

    /// What `new` and `join` share: follow the group in mpv until stopped, then leave it.
    struct Follow {
        var global: GlobalOptions
        var target: JellyfinTarget
        var player: MPVPlayerOptions
        var duration: Double?

        struct EventRow: Encodable {
            var time: Date
            var event: String
            var detail: String?
            var positionSeconds: Double?
        }

        func run(_ enter: @escaping @Sendable (JellyfinSession) async throws -> Void) async throws {
            let decoders = try await player.decoders()
            let session = try await target.session()
            let mpv = player.mpv, options = player.mpvOptions
            let follower = SyncPlayFollower(session: session, request: PlaybackRequest(profile: player.profile(decoders)),
                                            options: PlaybackOptions(progressInterval: JellyfinCLI.duration(player.progressInterval))) {
                MPVPlayer(program: mpv, options: options)
            }
            let clock = try await session.serverClockOffset()
            await follower.setClockOffset(clock.offset)
            let json = global.json, quiet = global.quiet
            let rows = Locked<[EventRow]>([])
            func note(_ event: String, _ detail: String? = nil, at: Double? = nil) {
                rows.withLock { $0.append(EventRow(time: Date(), event: event, detail: detail, positionSeconds: at)) }
                if !json && !quiet { print(event + (detail.map { ": \($0)" } ?? "") + (at.map { " at \(JellyfinPlayCommand.clock($0))" } ?? "")) }
            }
            let printer = Task {
                for await event in follower.events {
                    switch event {
                    case .joined(let group): note("joined", "\(group.name) (\(group.participants.joined(separator: ", ")))")
                    case .left: note("left")
                    case .userJoined(let name): note("joined by", name)
                    case .userLeft(let name): note("left by", name)
                    case .state(let state, let reason): note("group", "\(state.lowercased()) (\(reason.lowercased()))")
                    case .loading(let item, let at): note("loading", item, at: at)
                    case .ready(let at): note("ready", at: at)
                    case .command(let command, let at, let lead):
                        note(command.lowercased(), lead >= 0 ? String(format: "%.0f ms ahead", lead * 1000) : String(format: "%.0f ms late", -lead * 1000), at: at)
                    case .playback(_, .planned(let plan)): note("playing", "\(plan.method.rawValue)\(plan.container.map { ", \($0)" } ?? "")")
                    case .playback(_, .reportFailed(let kind, let reason)):
                        FileHandle.standardError.write(Data("farcast: note: the \(kind.rawValue) report did not reach the server: \(reason)\n".utf8))
                    case .playback: break
                    case .ended(_, let outcome): note("ended", outcome.end == .finished ? "finished" : "stopped", at: outcome.positionSeconds)
                    case .problem(let reason): FileHandle.standardError.write(Data("farcast: \(reason)\n".utf8))
                    }
                }
            }
            var live = LiveSessionCore.Options()
            live.subscribeToSessions = false
            let stream = session.liveEvents(options: live)
            let entered = Locked(false)
            let failure = await JellyfinCLI.untilStopped(after: duration) {
                do {
                    for try await event in stream {
                        switch event {
                        case .connected:
                            // In the group only once its messages can reach us.
                            if !entered.withLock({ $0 }) {
                                entered.withLock { $0 = true }
                                try await enter(session)
                                try? await session.syncPlay(.ping(milliseconds: Int64((Self.seconds(clock.roundTrip) * 1000).rounded())))
                            }
                        case .message(let message):
                            await follower.handle(message)
                        case .problem, .disconnected:
                            break
                        }
                    }
                    return nil
                } catch {
                    return describe(error)
                }
            }
            if entered.withLock({ $0 }) { try? await session.syncPlay(.leave) }
            await follower.stop()
            try? await Task.sleep(for: .milliseconds(200))
            printer.cancel()
            if json { try printJSONList(rows.withLock { $0 }) }
            if let failure { throw CommandFailure(message: failure) }
        }

        static func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }
    }

    struct New: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make a group (optionally playing ITEM) and follow it until Ctrl-C or --duration.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget

        @Argument(help: ArgumentHelp("The group's name.", valueName: "NAME"))
        var name: String

        @Argument(help: ArgumentHelp("What the group plays: a film, an episode (and the ones after it), an album… (name or id).", valueName: "ITEM"))
        var item: String?

        @Option(help: ArgumentHelp("Start ITEM here, in seconds.", valueName: "seconds"))
        var start: Double = 0

        @OptionGroup var player: MPVPlayerOptions
        var duration: Double? { player.duration }

        func validate() throws {
            guard !name.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("the group needs a name") }
            guard start >= 0, start.isFinite else { throw ValidationError("--start must be 0 or more seconds") }
        }

        func run() async throws {
            try await reportingFailures {
                var items: [String] = []
                if let item {
                    let session = try await target.session()
                    let resolved = try await JellyfinCLI.resolveItem(item, in: session)
                    items = try await JellyfinPlayCommand.queue(for: resolved, in: session, next: true).map(\.id)
                }
                let name = name, start = start, queue = items
                try await Follow(global: global, target: target, player: player, duration: duration).run { session in
                    try await session.createSyncPlayGroup(name: name)
                    if !queue.isEmpty { try await session.syncPlay(.setQueue(itemIds: queue, index: 0, startTicks: Int64(start * 10_000_000))) }
                }
            }
        }
    }

    struct Join: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Join a group (by name or id) and follow it until Ctrl-C or --duration.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget

        @Argument(help: ArgumentHelp("The group: its name or id (see `syncplay list`).", valueName: "GROUP"))
        var group: String

        @OptionGroup var player: MPVPlayerOptions
        var duration: Double? { player.duration }

        func run() async throws {
            try await reportingFailures {
                let groups = try await target.session().syncPlayGroups()
                let wanted = group.trimmingCharacters(in: .whitespaces)
                guard let found = groups.first(where: { $0.id == wanted.replacingOccurrences(of: "-", with: "").lowercased() })
                        ?? groups.first(where: { $0.name.caseInsensitiveCompare(wanted) == .orderedSame }) else {
                    throw CommandFailure(message: groups.isEmpty ? "there are no SyncPlay groups to join (make one with `farcast jellyfin syncplay new`)"
                        : "no SyncPlay group is called \(group) (groups: \(groups.map(\.name).joined(separator: ", ")))")
                }
                try await Follow(global: global, target: target, player: player, duration: duration).run { session in
                    try await session.syncPlay(.join(groupId: found.id))
                }
            }
        }
    }

    /// A one-shot request to this device's group.
    struct Request {
        static func send(_ request: JellyfinSession.SyncPlayRequest, target: JellyfinTarget, global: GlobalOptions, done: String) async throws {
            try await reportingFailures {
                try await target.session().syncPlay(request)
                if !global.quiet && !global.json { print(done) }
            }
        }
    }

    struct Pause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Pause the group (every member pauses at the same position).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget
        func run() async throws { try await Request.send(.pause, target: target, global: global, done: "Asked the group to pause.") }
    }

    struct Unpause: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Play the group on (every member starts at the same moment).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget
        func run() async throws { try await Request.send(.unpause, target: target, global: global, done: "Asked the group to play.") }
    }

    struct Seek: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Move the group to a position (it plays on when every member is there, if it was playing).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget
        @Argument(help: ArgumentHelp("The position, in seconds.", valueName: "SECONDS"))
        var seconds: Double
        func validate() throws { guard seconds >= 0, seconds.isFinite else { throw ValidationError("SECONDS must be 0 or more") } }
        func run() async throws {
            try await Request.send(.seek(ticks: Int64(seconds * 10_000_000)), target: target, global: global, done: "Asked the group to seek.")
        }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop the group's playback (the group stays).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget
        func run() async throws { try await Request.send(.stop, target: target, global: global, done: "Asked the group to stop.") }
    }

    struct Leave: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Leave the group this device is in.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget
        func run() async throws { try await Request.send(.leave, target: target, global: global, done: "Left the group.") }
    }
}
