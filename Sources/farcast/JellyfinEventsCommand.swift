import ArgumentParser
import FarcastSupport
import Foundation
import Hosts
import Jellyfin
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

struct JellyfinEventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Print the live session's messages (sessions, user data, library changes, remote-control commands).",
        discussion: """
            Connects the WebSocket (/socket with ApiKey=), posts this client's capabilities so it can be remote-controlled, keeps the connection alive as the server asks and reconnects with back-off when it drops. Runs until Ctrl-C, --count messages or --duration seconds. With --json one object whose items array holds every event is printed at the end.

            Examples:
              farcast jellyfin events
              farcast jellyfin events --count 5 --json
              farcast jellyfin events --duration 60 --sessions
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Option(help: ArgumentHelp("Stop after this many messages.", valueName: "n"))
    var count: Int?

    @Option(help: ArgumentHelp("Stop after this many seconds.", valueName: "seconds"))
    var duration: Double?

    @Flag(inversion: .prefixedNo, help: "Subscribe to the periodic Sessions message (every 1.5 s: who is watching what); off unless asked.")
    var sessions = false

    @Flag(name: .customLong("keep-alives"), help: "Also print ForceKeepAlive and KeepAlive messages.")
    var keepAlives = false

    func validate() throws {
        if let count { guard count > 0 else { throw ValidationError("--count must be positive") } }
        if let duration { guard duration > 0 else { throw ValidationError("--duration must be positive") } }
    }

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            var options = LiveSessionCore.Options()
            options.subscribeToSessions = sessions
            let stream = session.liveEvents(options: options)
            let collected = Locked<[EventRow]>([])
            let json = global.json
            let limit = count
            let showKeepAlives = keepAlives
            let failure = await JellyfinCLI.untilStopped(after: duration) {
                var delivered = 0
                do {
                    for try await event in stream {
                        let row = EventRow(event)
                        if case .message(let message) = event {
                            if !showKeepAlives, message == .keepAlive || message.messageType == "ForceKeepAlive" { continue }
                            delivered += 1
                        }
                        if json { collected.withLock { $0.append(row) } } else { printEvent(row) }
                        if let limit, delivered >= limit { return nil }
                    }
                    return nil
                } catch {
                    return describe(error)
                }
            }
            if json { try printJSONList(collected.value) }
            if let failure { throw CommandFailure(message: failure) }
        }
    }

    struct EventRow: Encodable {
        var event: String
        var messageType: String?
        var detail: String?
        var time: String

        init(_ event: LiveEvent) {
            time = JellyfinDateTranscoder.format(Date())
            switch event {
            case .connected(let url):
                self.event = "connected"
                detail = url
            case .disconnected(let reason, let retry):
                self.event = "disconnected"
                detail = "\(reason); reconnecting in \(retry.inSeconds) s"
            case .problem(let error):
                self.event = "problem"
                detail = error.description
            case .message(let message):
                self.event = "message"
                messageType = message.messageType
                detail = describe(message)
            }
        }
    }
}

private func describe(_ message: LiveMessage) -> String? {
    switch message {
    case .forceKeepAlive(let seconds): return "keep alive within \(seconds) s"
    case .keepAlive, .serverRestarting, .serverShuttingDown, .other: return nil
    case .sessions(let sessions):
        return sessions.map { "\($0.userName ?? "?")@\($0.deviceName ?? "?") (\($0.client ?? "?"))" + ($0.nowPlaying.map { " playing \($0)" } ?? "") }.joined(separator: "; ")
    case .userDataChanged(_, let changes):
        return changes.map { change in
            var parts = [change.itemId]
            if let played = change.played { parts.append(played ? "played" : "unplayed") }
            if let favourite = change.isFavorite { parts.append(favourite ? "favourite" : "not favourite") }
            return parts.joined(separator: " ")
        }.joined(separator: "; ")
    case .libraryChanged(let change):
        return "added \(change.itemsAdded.count), updated \(change.itemsUpdated.count), removed \(change.itemsRemoved.count)"
    case .play(let request): return "\(request.playCommand) \(request.itemIds.joined(separator: ","))"
    case .playstate(let request): return request.command + (request.seekPositionTicks.map { " to \(formatTicks($0))" } ?? "")
    case .generalCommand(let command):
        return command.name + (command.arguments.isEmpty ? "" : " " + command.arguments.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
    case .syncPlayCommand(let command):
        return "\(command.command) at \(formatTicks(command.positionTicks))"
    case .syncPlayGroupUpdate(let update):
        return update.type
    }
}

private func printEvent(_ row: JellyfinEventsCommand.EventRow) {
    var line = "\(row.time.prefix(19).replacingOccurrences(of: "T", with: " "))  \(row.messageType ?? row.event)"
    if let detail = row.detail, !detail.isEmpty { line += "  \(detail)" }
    // Unbuffered: a person (or a pipe) watching the stream sees each message as it arrives.
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
