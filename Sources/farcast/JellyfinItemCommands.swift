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

struct JellyfinInfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show one item in detail: metadata, media streams, images, the user's state.",
        discussion: """
            Examples:
              farcast jellyfin info "Test Pattern"
              farcast jellyfin info 5d9c1e0f3a2b4c6d8e7f901a2b3c4d5e --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: ArgumentHelp("The item: name or id.", valueName: "ITEM"))
    var item: String

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            let item = try await JellyfinCLI.resolveItem(item, in: session)
            let detail = InfoResult(item)
            if global.json { try printJSON(detail); return }
            print("\(item.name)  [\(item.kind)]")
            var lines: [(String, String)] = [("id", item.id)]
            if let series = item.seriesName { lines.append(("series", series + (item.parentIndexNumber.map { ", season \($0)" } ?? "") + (item.indexNumber.map { ", episode \($0)" } ?? ""))) }
            if let album = item.album { lines.append(("album", album + (item.albumArtist.map { " by \($0)" } ?? ""))) }
            if let year = item.productionYear { lines.append(("year", String(year))) }
            if let ticks = item.runTimeTicks { lines.append(("runtime", formatTicks(ticks))) }
            if !item.genres.isEmpty { lines.append(("genres", item.genres.joined(separator: ", "))) }
            if let container = item.container { lines.append(("container", container)) }
            for stream in item.mediaStreams {
                var text = (stream.index.map { "\($0): " } ?? "") + "\(stream.type) \(stream.codec ?? "?")"
                if let w = stream.width, let h = stream.height { text += " \(w)×\(h)" }
                if let range = stream.videoRangeType, stream.type == "Video" { text += " \(range)" }
                if let channels = stream.channels { text += " \(channels) ch" }
                if let rate = stream.sampleRate { text += " \(rate) Hz" }
                if let language = stream.language, language != "und", stream.type != "Video" { text += " \(language)" }
                if let title = stream.title { text += " \"\(title)\"" }
                if stream.isExternal { text += " (external)" }
                lines.append(("stream", text))
            }
            for (type, tag) in item.imageTags.sorted(by: { $0.key < $1.key }) {
                lines.append(("image", "\(type) tag \(tag)" + (item.blurHash(for: ImageType(rawValue: type)).map { " blurhash \($0)" } ?? "")))
            }
            if let data = item.userData {
                var state = [data.played ? "played" : "not played"]
                if data.isFavorite { state.append("favourite") }
                if data.playbackPositionTicks > 0 { state.append("resume at \(formatTicks(data.playbackPositionTicks))") }
                if data.playCount > 0 { state.append("played \(data.playCount)×") }
                lines.append(("state", state.joined(separator: ", ")))
            }
            if let overview = item.overview { lines.append(("overview", overview)) }
            for (key, value) in lines { print("  \(key.padding(toLength: 10, withPad: " ", startingAt: 0)) \(value)") }
        }
    }

    /// `info --json`: the item as the listings print it (`ItemRow`: an episode's season and
    /// number, a track's disc and number), and what only the detail view shows.
    struct InfoResult: Encodable {
        var row: ItemRow
        var album: String?
        var albumArtist: String?
        var overview: String?
        var genres: [String]
        var container: String?
        var streams: [StreamRow]
        var images: [String: String]
        var blurHashes: [String: String]
        var playCount: Int?
        var lastPlayed: Date?
        var parentId: String?

        private enum CodingKeys: String, CodingKey {
            case album, albumArtist, overview, genres, container, streams, images, blurHashes, playCount, lastPlayed, parentId
        }

        init(_ item: JellyfinItem) {
            row = ItemRow(item)
            album = item.album
            albumArtist = item.albumArtist
            overview = item.overview
            genres = item.genres
            container = item.container
            streams = item.mediaStreams.map {
                StreamRow(index: $0.index, type: $0.type, codec: $0.codec, width: $0.width, height: $0.height, channels: $0.channels,
                          sampleRate: $0.sampleRate, videoRange: $0.videoRangeType?.rawValue, language: $0.language, title: $0.title,
                          external: $0.isExternal)
            }
            images = item.imageTags
            var hashes: [String: String] = [:]
            for type in item.imageTags.keys { if let hash = item.blurHash(for: ImageType(rawValue: type)) { hashes[type] = hash } }
            blurHashes = hashes
            playCount = item.userData?.playCount
            lastPlayed = item.userData?.lastPlayedDate
            parentId = item.parentId
        }

        /// One flat object: the row's keys, then these.
        func encode(to encoder: any Encoder) throws {
            try row.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encodeIfPresent(album, forKey: .album)
            try container.encodeIfPresent(albumArtist, forKey: .albumArtist)
            try container.encodeIfPresent(overview, forKey: .overview)
            try container.encode(genres, forKey: .genres)
            try container.encodeIfPresent(self.container, forKey: .container)
            try container.encode(streams, forKey: .streams)
            try container.encode(images, forKey: .images)
            try container.encode(blurHashes, forKey: .blurHashes)
            try container.encodeIfPresent(playCount, forKey: .playCount)
            try container.encodeIfPresent(lastPlayed, forKey: .lastPlayed)
            try container.encodeIfPresent(parentId, forKey: .parentId)
        }
    }

    struct StreamRow: Encodable {
        /// What `play --audio` and `--subtitle` take.
        var index: Int?
        var type: String
        var codec: String?
        var width: Int?
        var height: Int?
        var channels: Int?
        var sampleRate: Int?
        var videoRange: String?
        var language: String?
        var title: String?
        var external: Bool
    }
}

struct JellyfinMarkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mark",
        abstract: "Mark an item played, unplayed, favourite or not favourite.",
        discussion: """
            Examples:
              farcast jellyfin mark "Pilot Tone" played
              farcast jellyfin mark "Test Pattern" favourite
              farcast jellyfin mark 5d9c1e0f3a2b4c6d8e7f901a2b3c4d5e unfavourite --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: ArgumentHelp("The item: name or id.", valueName: "ITEM"))
    var item: String

    @Argument(help: ArgumentHelp("played, unplayed, favourite or unfavourite.", valueName: "STATE"))
    var state: String

    func validate() throws {
        guard ["played", "unplayed", "favourite", "favorite", "unfavourite", "unfavorite"].contains(state.lowercased()) else {
            throw ValidationError("STATE must be played, unplayed, favourite or unfavourite")
        }
    }

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            let resolved = try await JellyfinCLI.resolveItem(item, in: session)
            let data: UserItemData
            switch state.lowercased() {
            case "played": data = try await session.setPlayed(resolved.id, true)
            case "unplayed": data = try await session.setPlayed(resolved.id, false)
            case "favourite", "favorite": data = try await session.setFavourite(resolved.id, true)
            default: data = try await session.setFavourite(resolved.id, false)
            }
            if global.json {
                try printJSON(MarkResult(id: resolved.id, name: resolved.name, played: data.played, favourite: data.isFavorite, playCount: data.playCount))
            } else {
                print("\(resolved.name): \(data.played ? "played" : "not played")\(data.isFavorite ? ", favourite" : "")")
            }
        }
    }

    struct MarkResult: Encodable {
        var id: String
        var name: String
        var played: Bool
        var favourite: Bool
        var playCount: Int
    }
}

struct JellyfinImageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image",
        abstract: "Save an item's image (poster, backdrop, …) to a file.",
        discussion: """
            Images are kept in a cache bounded in size ($XDG_CACHE_HOME/farcast/jellyfin-images, else ~/.cache/…), keyed by the image's tag, which changes when the image does.

            Examples:
              farcast jellyfin image "Test Pattern" -o poster.jpg
              farcast jellyfin image "Signal Tests" --type Primary --max-width 300 -o show.jpg --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: ArgumentHelp("The item: name or id.", valueName: "ITEM"))
    var item: String

    @Option(name: .shortAndLong, help: ArgumentHelp("Where to write the image; '-' writes it to standard output.", valueName: "file"))
    var output: String

    @Option(name: .customLong("type"), help: ArgumentHelp("Primary, Backdrop, Thumb, Logo, Banner, Art, Disc or Screenshot.", valueName: "type"))
    var imageType: String = "Primary"

    @Option(name: .customLong("max-width"), help: ArgumentHelp("Ask the server to scale the image down to this width.", valueName: "pixels"))
    var maxWidth: Int?

    @Flag(name: .customLong("no-cache"), help: "Neither read nor fill the image cache.")
    var noCache = false

    @Option(name: .customLong("cache-size"), help: ArgumentHelp("The cache's bound in MiB.", valueName: "MiB"))
    var cacheMegabytes: Int = 256

    func validate() throws {
        guard ImageType.matching(imageType) != nil else { throw ValidationError("--type must be one of \(ImageType.known.map(\.rawValue).joined(separator: ", "))") }
        if let maxWidth { guard (1...20_000).contains(maxWidth) else { throw ValidationError("--max-width must be between 1 and 20000") } }
        guard (1...100_000).contains(cacheMegabytes) else { throw ValidationError("--cache-size must be between 1 and 100000 MiB") }
        do { try OutputPath.check(output, what: "image") } catch let failure as CommandFailure { throw ValidationError(failure.message) }
    }

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            let resolved = try await JellyfinCLI.resolveItem(item, in: session)
            let type = ImageType.matching(imageType) ?? .primary
            guard let tag = resolved.imageTags[type.rawValue] else {
                throw CommandFailure(message: "'\(resolved.name)' has no \(type) image")
            }
            let cache = noCache ? nil : try JellyfinCLI.imageCache(maxMegabytes: cacheMegabytes)
            let image = try await session.image(itemId: resolved.id, type: type, tag: tag, maxWidth: maxWidth, cache: cache)
            try OutputPath.save(image.bytes, to: output, what: "image")
            if output == "-" {
                // The image is the output; the report goes to stderr unless asked for nothing.
                if !global.quiet { FileHandleOutput.stderr("wrote \(image.bytes.count) bytes to standard output\(image.fromCache ? " (from the cache)" : "")\n") }
            } else if global.json {
                try printJSON(ImageResult(id: resolved.id, name: resolved.name, type: type.rawValue, tag: tag, bytes: image.bytes.count,
                                          file: output, fromCache: image.fromCache, blurHash: resolved.blurHash(for: type)))
            } else {
                print("wrote \(output) (\(image.bytes.count) bytes\(image.fromCache ? ", from the cache" : ""))")
            }
        }
    }

    struct ImageResult: Encodable {
        var id: String
        var name: String
        var type: String
        var tag: String
        var bytes: Int
        var file: String
        var fromCache: Bool
        var blurHash: String?
    }
}
