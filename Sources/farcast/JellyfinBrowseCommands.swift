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

struct JellyfinLibrariesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "libraries",
        abstract: "List the user's libraries (views).",
        discussion: """
            Examples:
              farcast jellyfin libraries
              farcast jellyfin libraries --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    func run() async throws {
        try await reportingFailures {
            let views = try await target.session().views()
            if global.json { try printJSONList(views.map(ItemRow.init)); return }
            printTable(["ID", "NAME", "KIND"], views.map { [$0.id, $0.name, $0.collectionType ?? $0.kind.rawValue] })
        }
    }
}

struct JellyfinListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List a library, a folder, a series, a season or an album; or everything of a type.",
        discussion: """
            VIEW|ITEM is a library name (Movies), an item's name (a series, an album) or its id. Without it, items of every library are listed (use --type to narrow). Items are fetched page by page as they are printed.

            Examples:
              farcast jellyfin ls Movies
              farcast jellyfin ls --type episode --sort added --descending --limit 20
              farcast jellyfin ls "Signal Tests"              # its seasons
              farcast jellyfin ls Shows --type episode --recursive --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: ArgumentHelp("A library or item: name or id.", valueName: "VIEW|ITEM"))
    var parent: String?

    @Option(name: .customLong("type"), parsing: .upToNextOption,
            help: ArgumentHelp("Only items of these types: movie, series, season, episode, audio, album, artist, video, boxset, playlist, folder…", valueName: "type"))
    var types: [String] = []

    @Option(help: ArgumentHelp("Order by: name, year, added, premiere, played, rating, runtime, index, random (or a server field name). Default: a series' seasons, a season's episodes and an album's tracks by number, the rest by name.", valueName: "field"))
    var sort: String?

    @Flag(help: "Largest/newest first.")
    var descending = false

    @Flag(help: "Include items in sub-folders (implied by --type without VIEW|ITEM).")
    var recursive = false

    @Flag(help: "Only favourites.")
    var favourites = false

    @Option(help: ArgumentHelp("At most this many items (0: all).", valueName: "n"))
    var limit: Int = 100

    @Option(name: .customLong("page-size"), help: ArgumentHelp("Items fetched per request.", valueName: "n"))
    var pageSize: Int = 200

    func validate() throws {
        guard limit >= 0 else { throw ValidationError("--limit must be 0 or more") }
        guard (1...10_000).contains(pageSize) else { throw ValidationError("--page-size must be between 1 and 10000") }
        for type in types where ItemKind.parse(type) == nil {
            throw ValidationError("--type \(type): not an item type (movie, series, season, episode, audio, album, artist, video, boxset, playlist, folder)")
        }
        if let sort, ItemSortField.parse(sort) == nil {
            throw ValidationError("--sort \(sort): use name, year, added, premiere, played, rating, runtime, index or random")
        }
    }

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            var query = ItemQuery()
            query.types = types.compactMap(ItemKind.parse)
            if let sort { query.sortBy = [ItemSortField.parse(sort) ?? .sortName] }
            query.descending = descending
            query.favouritesOnly = favourites
            query.pageSize = pageSize
            query.limit = limit == 0 ? nil : limit
            if let parent {
                let item = try await JellyfinCLI.resolveItem(parent, in: session)
                guard item.isFolder else { throw CommandFailure(message: "'\(item.name)' is a \(item.kind) and holds nothing to list; try `farcast jellyfin info`") }
                query.parentId = item.id
                query.recursive = recursive
                if sort == nil { query.sortBy = ItemQuery.defaultSort(inside: item.kind) }
            } else {
                query.recursive = recursive || !query.types.isEmpty
            }
            // Streamed page by page (memory stays at a page or two whatever the library's size):
            // one JSON object written as the pages arrive, or table rows with fixed columns.
            var first = true
            var printed = 0
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            for try await page in session.itemPages(query) {
                if global.json {
                    if first { print("{\"total\":\(page.totalRecordCount.map(String.init) ?? "null"),\"items\":[", terminator: "") }
                    if !page.items.isEmpty {
                        // One encoding per page: its array's elements, without the brackets.
                        let rows = try encoder.encode(page.items.map(ItemRow.init)).dropFirst().dropLast()
                        print((printed == 0 ? "" : ",") + String(decoding: rows, as: UTF8.self), terminator: "")
                        printed += page.items.count
                    }
                } else {
                    if first && page.items.isEmpty {
                        print("(nothing)")
                        break
                    }
                    printItemRows(page.items, header: first)
                    printed += page.items.count
                    if let total = page.totalRecordCount, first, total > (query.limit ?? Int.max) {
                        FileHandleOutput.stderr("(\(min(total, query.limit ?? total)) of \(total); use --limit for more, 0 for all)\n")
                    }
                }
                first = false
            }
            if global.json { print("]}") }
        }
    }
}

struct JellyfinSearchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Search the server's libraries by name.",
        discussion: """
            Examples:
              farcast jellyfin search tone
              farcast jellyfin search "signal tests" --limit 5 --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: "What to look for.")
    var text: String

    @Option(help: ArgumentHelp("At most this many results.", valueName: "n"))
    var limit: Int = 20

    func validate() throws {
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("the search text is empty") }
        guard (1...1000).contains(limit) else { throw ValidationError("--limit must be between 1 and 1000") }
    }

    func run() async throws {
        try await reportingFailures {
            let hints = try await target.session().searchHints(text, limit: limit)
            if global.json {
                try printJSONList(hints.map { HintRow(id: $0.id, name: $0.name, type: $0.kind.rawValue, year: $0.productionYear, series: $0.series, album: $0.album) })
            } else if hints.isEmpty {
                print("(nothing matches '\(text)')")
            } else {
                printTable(["ID", "TYPE", "NAME", "YEAR", "IN"], hints.map { [$0.id, $0.kind.rawValue, $0.name, $0.productionYear.map(String.init) ?? "", $0.series ?? $0.album ?? ""] })
            }
        }
    }

    struct HintRow: Encodable {
        var id: String
        var name: String
        var type: String
        var year: Int?
        var series: String?
        var album: String?
    }
}

struct JellyfinResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "List items started but not finished (Continue Watching).",
        discussion: """
            Examples:
              farcast jellyfin resume
              farcast jellyfin resume --limit 5 --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Option(help: ArgumentHelp("At most this many items.", valueName: "n"))
    var limit: Int = 20

    func validate() throws { guard (1...1000).contains(limit) else { throw ValidationError("--limit must be between 1 and 1000") } }

    func run() async throws {
        try await reportingFailures {
            let items = try await target.session().resumeItems(limit: limit)
            if global.json { try printJSONList(items.map(ItemRow.init)) } else if items.isEmpty { print("(nothing to resume)") } else { itemTable(items) }
        }
    }
}

struct JellyfinNextUpCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "next-up",
        abstract: "List the next episode to watch in each series you have started.",
        discussion: """
            Examples:
              farcast jellyfin next-up
              farcast jellyfin next-up --series "Signal Tests" --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Option(help: ArgumentHelp("Only this series (name or id).", valueName: "series"))
    var series: String?

    @Option(help: ArgumentHelp("At most this many items.", valueName: "n"))
    var limit: Int = 20

    func validate() throws { guard (1...1000).contains(limit) else { throw ValidationError("--limit must be between 1 and 1000") } }

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            var seriesId: String?
            if let series { seriesId = try await JellyfinCLI.resolveItem(series, in: session).id }
            let items = try await session.nextUp(limit: limit, seriesId: seriesId)
            if global.json { try printJSONList(items.map(ItemRow.init)) } else if items.isEmpty { print("(nothing up next)") } else { itemTable(items) }
        }
    }
}
