import ArgumentParser
import FarcastSupport
import Foundation
import Jellyfin

/// `farcast jellyfin tv …`: the server's Live TV — channels, the guide, watching, recording.
struct JellyfinTVCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tv",
        abstract: "Live TV: channels, the guide, watching a channel, recordings and timers.",
        discussion: """
            Works with a server that has Live TV set up (a tuner or an M3U list, and a guide). A channel is named by its number, its name or its id; a programme by its id (`tv guide` lists them) or by its name as the guide shows it.

            Examples:
              farcast jellyfin tv channels
              farcast jellyfin tv guide 1 --hours 6
              farcast jellyfin tv play "Farcast One"
              farcast jellyfin tv record "News at the Top"
              farcast jellyfin tv timers
              farcast jellyfin tv recordings
            """,
        subcommands: [Channels.self, Guide.self, Play.self, Record.self, Timers.self, Cancel.self, Recordings.self]
    )

    /// The channel `name` stands for: its number, its name (any case) or its id.
    static func channel(_ name: String, in channels: [TVChannel]) throws -> TVChannel {
        let wanted = name.trimmingCharacters(in: .whitespaces)
        if let found = channels.first(where: { $0.number == wanted || $0.id == wanted.replacingOccurrences(of: "-", with: "").lowercased() })
            ?? channels.first(where: { $0.name.caseInsensitiveCompare(wanted) == .orderedSame }) {
            return found
        }
        let close = channels.filter { $0.name.localizedCaseInsensitiveContains(wanted) }
        if close.count == 1 { return close[0] }
        let list = channels.map { "\($0.number ?? "–") \($0.name)" }.joined(separator: ", ")
        throw CommandFailure(message: channels.isEmpty ? "the server has no Live TV channels (set up a tuner and a guide in its dashboard)"
            : close.isEmpty ? "no channel is called \(name) (channels: \(list))" : "\(name) could be \(close.map(\.name).joined(separator: ", ")): give its number")
    }

    static func time(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.dateFormat = "EEE HH:mm"
        return formatter.string(from: date)
    }

    struct ProgrammeRow: Encodable {
        var id: String
        var name: String
        var channelId: String
        var channel: String?
        var start: Date
        var end: Date
        var airing: Bool
        var overview: String?

        init(_ p: TVProgramme) {
            (id, name, channelId, channel, start, end, airing, overview) = (p.id, p.name, p.channelId, p.channelName, p.start, p.end, p.isAiring(), p.overview)
        }
    }

    struct TimerRow: Encodable {
        var id: String
        var name: String
        var programmeId: String?
        var channel: String?
        var start: Date?
        var end: Date?
        var status: String

        init(_ t: RecordingTimer) {
            (id, name, programmeId, channel, start, end, status) = (t.id, t.name, t.programmeId, t.channelName, t.start, t.end, t.status)
        }
    }

    struct Channels: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the channels, each with what is on now.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget

        struct Row: Encodable {
            var id: String
            var number: String?
            var name: String
            var onNow: ProgrammeRow?
        }

        func run() async throws {
            try await reportingFailures {
                let channels = try await target.session().liveTVChannels()
                if global.json { return try printJSONList(channels.map { Row(id: $0.id, number: $0.number, name: $0.name, onNow: $0.onNow.map(ProgrammeRow.init)) }) }
                if channels.isEmpty { return print("No Live TV channels on this server.") }
                printTable(["NUMBER", "CHANNEL", "ON NOW", "UNTIL", "ID"], channels.map { c in
                    [c.number ?? "", c.name, c.onNow?.name ?? "", c.onNow.map { JellyfinTVCommand.time($0.end) } ?? "", c.id]
                })
            }
        }
    }

    struct Guide: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The guide: what is on and what follows, on every channel or one.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget

        @Argument(help: ArgumentHelp("Only this channel: number, name or id.", valueName: "CHANNEL"))
        var channel: String?

        @Option(help: ArgumentHelp("How far ahead, in hours.", valueName: "hours"))
        var hours: Double = 3

        func validate() throws {
            guard hours > 0, hours <= 24 * 14 else { throw ValidationError("--hours must be more than 0 and at most 336 (two weeks)") }
        }

        func run() async throws {
            try await reportingFailures {
                let session = try await target.session()
                var ids: [String] = []
                if let channel { ids = [try JellyfinTVCommand.channel(channel, in: try await session.liveTVChannels()).id] }
                let now = Date()
                let programmes = try await session.liveTVGuide(channelIds: ids, from: now, to: now.addingTimeInterval(hours * 3600))
                if global.json { return try printJSONList(programmes.map(ProgrammeRow.init)) }
                if programmes.isEmpty { return print("Nothing in the guide for the next \(hours.formatted()) hours.") }
                printTable(["START", "END", "CHANNEL", "PROGRAMME", "ID"], programmes.map { p in
                    [JellyfinTVCommand.time(p.start) + (p.isAiring(at: now) ? " *" : ""), JellyfinTVCommand.time(p.end), p.channelName ?? p.channelId, p.name, p.id]
                })
            }
        }
    }

    struct Play: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Watch a channel in mpv.",
            discussion: """
                Asks the server for the channel as this machine's mpv can play it; the server opens a live stream (a tuner) that is closed again when mpv ends — closing its window, Ctrl-C or --duration. Progress is reported as for any playback.
                """
        )
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget

        @Argument(help: ArgumentHelp("The channel: number, name or id.", valueName: "CHANNEL"))
        var channel: String

        @OptionGroup var player: MPVPlayerOptions

        func run() async throws {
            try await reportingFailures {
                let decoders = try await player.decoders()
                let session = try await target.session()
                let channel = try JellyfinTVCommand.channel(channel, in: try await session.liveTVChannels())
                let item = try await session.item(channel.id)
                let request = PlaybackRequest(profile: player.profile(decoders))
                try await JellyfinPlayCommand.play([item], session: session, request: request, player: player, start: 0, duration: player.duration, global: global)
            }
        }
    }

    struct Record: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Record a programme (by id or name), or what a channel shows now.",
            discussion: """
                PROGRAMME is a programme id from `tv guide`, a programme's name (the next airing of it in the coming day), or a channel (number or name) to record what it shows now. The server records with its default padding; `tv timers` lists what it will record, `tv recordings` what it has.
                """
        )
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget

        @Argument(help: ArgumentHelp("A programme id or name, or a channel.", valueName: "PROGRAMME"))
        var programme: String

        func run() async throws {
            try await reportingFailures {
                let session = try await target.session()
                let now = Date()
                let wanted = programme.trimmingCharacters(in: .whitespaces)
                let programmeId: String
                if wanted.count == 32, wanted.allSatisfy(\.isHexDigit) {
                    programmeId = wanted.lowercased()
                } else if let channel = try? JellyfinTVCommand.channel(wanted, in: try await session.liveTVChannels()) {
                    // A channel: what it shows now.
                    let airing = try await session.liveTVGuide(channelIds: [channel.id], from: now, to: now.addingTimeInterval(1))
                    guard let onNow = airing.first(where: { $0.isAiring(at: now) }) else { throw CommandFailure(message: "the guide has nothing on \(channel.name) now") }
                    programmeId = onNow.id
                } else {
                    let guide = try await session.liveTVGuide(from: now, to: now.addingTimeInterval(86_400))
                    guard let named = guide.first(where: { $0.name.caseInsensitiveCompare(wanted) == .orderedSame }) else {
                        throw CommandFailure(message: "nothing called \(programme) airs in the next 24 hours (see `farcast jellyfin tv guide`)")
                    }
                    programmeId = named.id
                }
                let timer = try await session.record(programmeId: programmeId)
                if global.json { return try printJSON(TimerRow(timer)) }
                if !global.quiet {
                    let when = [timer.start, timer.end].compactMap { $0.map(JellyfinTVCommand.time) }.joined(separator: "–")
                    print("Recording \(timer.name)\(timer.channelName.map { " on \($0)" } ?? "")\(when.isEmpty ? "" : ", \(when)")" + (timer.id.isEmpty ? "" : " (timer \(timer.id))"))
                }
            }
        }
    }

    struct Timers: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the recordings the server is set to make.")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget

        func run() async throws {
            try await reportingFailures {
                let timers = try await target.session().recordingTimers()
                if global.json { return try printJSONList(timers.map(TimerRow.init)) }
                if timers.isEmpty { return print("No recordings are set.") }
                printTable(["START", "END", "CHANNEL", "PROGRAMME", "STATUS", "ID"], timers.map { t in
                    [t.start.map(JellyfinTVCommand.time) ?? "", t.end.map(JellyfinTVCommand.time) ?? "", t.channelName ?? "", t.name, t.status, t.id]
                })
            }
        }
    }

    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Cancel a recording timer (its id from `tv timers`).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget

        @Argument(help: ArgumentHelp("The timer's id.", valueName: "TIMER"))
        var timer: String

        func run() async throws {
            try await reportingFailures {
                try await target.session().cancelRecording(timerId: timer)
                if !global.quiet && !global.json { print("Cancelled.") }
            }
        }
    }

    struct Recordings: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the recordings the server has made (play one with `farcast jellyfin play ID`).")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var target: JellyfinTarget

        struct Row: Encodable {
            var id: String
            var name: String
            var recorded: Date?
            var runtimeSeconds: Double?
        }

        func run() async throws {
            try await reportingFailures {
                let items = try await target.session().liveTVRecordings()
                let rows = items.map { Row(id: $0.id, name: $0.name, recorded: $0.premiereDate, runtimeSeconds: $0.runTimeTicks.map { Double($0) / 10_000_000 }) }
                if global.json { return try printJSONList(rows) }
                if rows.isEmpty { return print("No recordings yet.") }
                printTable(["RECORDED", "NAME", "LENGTH", "ID"], rows.map { r in
                    [r.recorded.map(JellyfinTVCommand.time) ?? "", r.name, r.runtimeSeconds.map(JellyfinPlayCommand.clock) ?? "", r.id]
                })
            }
        }
    }
}
