import ArgumentParser
import FarcastSupport
import Foundation
import Jellyfin

struct JellyfinOfflineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "offline",
        abstract: "What is downloaded: list it, remove it, sync what was played offline.",
        discussion: """
            `farcast jellyfin download` records every file it completes in the offline index ($XDG_DATA_HOME/farcast/jellyfin-offline.sqlite, else ~/.local/share/farcast/…), with the item's description and primary image, so downloads are listed here and played with `farcast jellyfin play --offline ITEM` with no server and no network.

            Where offline playback stopped is kept in the index and sent to the server the next time any `farcast jellyfin` command reaches it for the same user (or now, with `offline sync`). When the server's own last playback of an item is later than the offline one, the server's stays.
            """,
        subcommands: [JellyfinOfflineListCommand.self, JellyfinOfflineRemoveCommand.self, JellyfinOfflineSyncCommand.self]
    )
}

struct JellyfinOfflineListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List the downloads (no server needed).",
        discussion: """
            One row per downloaded file: the item, its size, where offline playback resumes, whether playback made offline waits to reach the server, and the file (marked missing when it was moved or deleted).

            Examples:
              farcast jellyfin offline ls
              farcast jellyfin offline ls "Signal Tests" --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var rating: RatingOptions

    @Argument(help: ArgumentHelp("Only these: an item, series, season or album (name or id).", valueName: "ITEM"))
    var item: String?

    func run() async throws {
        try await reportingFailures {
            let entries: [OfflineEntry]
            if let library = try JellyfinCLI.existingOfflineLibrary() {
                do { entries = try item.map { try library.find($0) } ?? library.entries() } catch { throw CommandFailure(message: describe(error)) }
            } else if let item {
                throw CommandFailure(message: describe(OfflineError.notDownloaded(item)))
            } else {
                entries = []
            }
            let ceiling = try rating.ceiling
            let rows = entries.filter { ceiling?.allows($0.item.officialRating) ?? true }.map(OfflineRow.init)
            if global.json { return try printJSONList(rows) }
            if rows.isEmpty {
                if !global.quiet { print("Nothing downloaded yet (farcast jellyfin download ITEM -o DIR).") }
                return
            }
            printTable(["NAME", "TYPE", "SERIES/ALBUM", "SIZE", "RESUME", "SYNC", "FILE"], rows.map { row in
                [row.label, row.type, row.group ?? "", DownloadError.size(row.bytes), row.played ? "played" : formatTicks(Int64(row.resumeSeconds * 10_000_000)),
                 row.pending == nil ? "" : "pending", row.filePresent ? row.path : "missing: \(row.path)"]
            }, maxWidth: 120)
        }
    }
}

/// One download as `offline ls` shows it.
struct OfflineRow: Encodable {
    var id: String
    var name: String
    var type: String
    var series: String?
    var season: Int?
    var episode: Int?
    var album: String?
    var track: Int?
    var runtimeSeconds: Double?
    var server: String
    var user: String
    var path: String
    var bytes: Int64
    var filePresent: Bool
    var image: String?
    var downloadedAt: Date
    /// Where `play --offline` starts.
    var resumeSeconds: Double
    /// Played: offline to the end, or as the server last said.
    var played: Bool
    /// Offline playback not yet on the server.
    var pending: Pending?

    struct Pending: Encodable {
        var positionSeconds: Double
        var finished: Bool
        var playedAt: Date
    }

    init(_ entry: OfflineEntry) {
        let item = entry.item
        (id, name, type, series, album) = (item.id, item.name, item.kind.rawValue, item.seriesName, item.album)
        switch item.kind {
        case .episode: (season, episode) = (item.parentIndexNumber, item.indexNumber)
        case .audio: track = item.indexNumber
        default: break
        }
        runtimeSeconds = item.runTimeTicks.map { Double($0) / 10_000_000 }
        (server, user) = (entry.account.serverName, entry.account.userName)
        (path, bytes, filePresent, image, downloadedAt) = (entry.filePath, entry.fileBytes, entry.fileIsPresent, entry.imagePath, entry.downloadedAt)
        resumeSeconds = entry.resumeSeconds
        played = entry.isPlayed
        pending = entry.pending.map { Pending(positionSeconds: Double($0.positionTicks) / 10_000_000, finished: $0.finished, playedAt: $0.updatedAt) }
    }

    /// The name as a list shows it: "S01E02 Name", "03. Name".
    var label: String {
        if let season, let episode { return String(format: "S%02dE%02d ", season, episode) + name }
        if let track { return String(format: "%02d. ", track) + name }
        return name
    }

    var group: String? { series ?? album }
}

struct JellyfinOfflineRemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Remove downloads: the files and their entries (no server needed).",
        discussion: """
            Removes what ITEM names (an item, or a series', season's or album's downloads). Playback made offline and not yet synced is kept and still syncs.

            Examples:
              farcast jellyfin offline rm "Pilot Tone"
              farcast jellyfin offline rm "Signal Tests" --keep-files
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("What to remove: an item, series, season or album (name or id).", valueName: "ITEM"))
    var item: String

    @Flag(help: "Forget the downloads but leave their files where they are.")
    var keepFiles = false

    func run() async throws {
        try await reportingFailures {
            guard let library = try JellyfinCLI.existingOfflineLibrary() else { throw CommandFailure(message: describe(OfflineError.notDownloaded(item))) }
            let removed: [OfflineEntry]
            do {
                removed = try library.find(item)
                for entry in removed { try library.remove(entry, deleteFile: !keepFiles) }
            } catch {
                throw CommandFailure(message: describe(error))
            }
            if global.json { return try printJSONList(removed.map(OfflineRow.init)) }
            if !global.quiet {
                for entry in removed { print(keepFiles ? "forgot   \(entry.filePath) (the file stays)" : "removed  \(entry.filePath)") }
            }
        }
    }
}

struct JellyfinOfflineSyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Send the playback made offline to the server now.",
        discussion: """
            Every `farcast jellyfin` command that reaches the server does this on the way; this one does only this, and says what became of each position: sent (the server applies its own resume and played rules, and keeps the offline playback's date), kept the server's (its own playback was later), or dropped (the item is gone). What fails to reach the server stays for the next time.

            Examples:
              farcast jellyfin offline sync
              farcast jellyfin offline sync --server home --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    func run() async throws {
        try await reportingFailures {
            let (session, account) = try await target.connect(syncOffline: false)
            var results: [OfflineSyncResult] = []
            if let library = try JellyfinCLI.existingOfflineLibrary() {
                do { results = try await session.syncOfflineProgress(library, serverId: account.serverId) } catch {
                    throw CommandFailure(message: describe(error))
                }
            }
            if global.json {
                try printJSONList(results.map(SyncRow.init))
            } else if !global.quiet {
                if results.isEmpty { print("Nothing played offline waits for \(account.serverName).") }
                for line in JellyfinCLI.syncLines(results) { print(line) }
            }
            if let failed = results.first(where: { if case .failed = $0.outcome { true } else { false } }), case .failed(let reason) = failed.outcome {
                throw CommandFailure(message: "offline playback not synced: \(reason)")
            }
        }
    }

    struct SyncRow: Encodable {
        var id: String
        var name: String?
        var positionSeconds: Double
        var playedAt: Date
        /// sent, server-newer, item-gone or failed.
        var outcome: String
        /// The server's user data after the sync.
        var serverPositionSeconds: Double?
        var serverPlayed: Bool?
        var serverLastPlayed: Date?
        var error: String?

        init(_ result: OfflineSyncResult) {
            (id, name, positionSeconds, playedAt) = (result.itemId, result.name, Double(result.positionTicks) / 10_000_000, result.playedAt)
            var data: UserItemData?
            switch result.outcome {
            case .sent(let now): (outcome, data) = ("sent", now)
            case .serverNewer(let now): (outcome, data) = ("server-newer", now)
            case .itemGone: outcome = "item-gone"
            case .failed(let reason): (outcome, error) = ("failed", reason)
            }
            serverPositionSeconds = data.map { Double($0.playbackPositionTicks) / 10_000_000 }
            serverPlayed = data?.played
            serverLastPlayed = data?.lastPlayedDate
        }
    }
}
