import Crypto
import Foundation
import Jellyfin

/// The stand-in's in-memory library: three views (Movies, Shows, Music) over the catalog's
/// real files, plus any number of synthetic movies (for the benchmark's 20,000 items) that
/// reuse the first movie's probed media. Ids are dash-less MD5 hex, as Jellyfin's are; dates
/// carry 7-digit fractions on the wire; images have tags and real BlurHashes.
struct Library: Sendable {
    struct Item: Sendable {
        var id: String
        var name: String
        var sortName: String
        var kind: String
        var parentId: String?
        var collectionType: String?
        var isFolder: Bool
        var year: Int?
        var premiereDate: Date?
        var dateCreated: Date
        var indexNumber: Int?
        var parentIndexNumber: Int?
        var seriesId: String?
        var seriesName: String?
        var seasonId: String?
        var seasonName: String?
        var albumId: String?
        var album: String?
        var albumArtist: String?
        var overview: String?
        var genres: [String]
        var entry: MediaCatalog.Entry?
        var posterTag: String?
        var posterPath: String?
        var posterBlurHash: String?
        var posterAspect: Double?
        var communityRating: Double?
        var officialRating: String?
    }

    let serverId: String
    let mediaDirectory: String
    private(set) var items: [Item] = []
    private(set) var byId: [String: Int] = [:]
    private(set) var children: [String: [Int]] = [:]
    let views: [Item]

    static func id(_ key: String) -> String {
        Insecure.MD5.hash(data: Array(key.utf8)).map { String(format: "%02x", $0) }.joined()
    }

    /// Items that live outside the listings (Live TV's channels and recordings), found by id.
    let extraItems: @Sendable (String) -> Item?

    init(catalog: MediaCatalog, mediaDirectory: String, serverId: String, syntheticMovies: Int,
         extraItems: @escaping @Sendable (String) -> Item? = { _ in nil }) {
        self.serverId = serverId
        self.extraItems = extraItems
        self.mediaDirectory = mediaDirectory
        let base = Date(timeIntervalSince1970: 1_700_000_000.1234567)
        func view(_ name: String, _ type: String) -> Item {
            Item(id: Self.id("view/\(type)"), name: name, sortName: name.lowercased(), kind: "CollectionFolder", collectionType: type,
                 isFolder: true, dateCreated: base, genres: [])
        }
        views = [view("Movies", "movies"), view("Shows", "tvshows"), view("Music", "music")]
        var all = views
        var keyToId: [String: String] = [:]
        for entry in catalog.entries { keyToId[entry.key] = Self.id(entry.key) }
        var posterTags: [String: String] = [:]
        for (n, entry) in catalog.entries.enumerated() {
            let id = keyToId[entry.key]!
            var item = Item(id: id, name: entry.name, sortName: entry.name.lowercased(), kind: entry.kind, isFolder: ["Series", "Season", "MusicAlbum"].contains(entry.kind),
                            year: entry.year, premiereDate: entry.year.map { Self.date(year: $0) }, dateCreated: base.addingTimeInterval(Double(n) * 3600),
                            indexNumber: entry.indexNumber, parentIndexNumber: entry.parentIndexNumber, overview: entry.overview, genres: entry.genres,
                            entry: entry, communityRating: entry.kind == "Movie" ? 6.5 + Double(n % 3) : nil, officialRating: Self.rating(entry))
            if let poster = entry.poster {
                let tag = Self.id("poster/\(poster)/\(FileManager.default.contents(atPath: mediaDirectory + "/" + poster)?.count ?? 0)")
                item.posterTag = tag
                item.posterPath = mediaDirectory + "/" + poster
                item.posterBlurHash = entry.posterBlurHash
                if let w = entry.posterWidth, let h = entry.posterHeight { item.posterAspect = Double(w) / Double(h) }
                posterTags[entry.key] = tag
            }
            switch entry.kind {
            case "Movie": item.parentId = views[0].id
            case "Series": item.parentId = views[1].id
            case "MusicAlbum":
                item.parentId = views[2].id
                item.albumArtist = entry.artist
            case "Season":
                item.parentId = entry.parentKey.flatMap { keyToId[$0] }
                item.seriesId = item.parentId
                item.seriesName = catalog.entries.first { $0.key == entry.parentKey }?.name
                item.parentIndexNumber = nil
            case "Episode":
                item.parentId = entry.parentKey.flatMap { keyToId[$0] }
                item.seasonId = item.parentId
                let season = catalog.entries.first { $0.key == entry.parentKey }
                item.seasonName = season?.name
                item.seriesId = season?.parentKey.flatMap { keyToId[$0] }
                item.seriesName = catalog.entries.first { $0.key == season?.parentKey }?.name
            case "Audio":
                item.parentId = entry.parentKey.flatMap { keyToId[$0] }
                item.albumId = item.parentId
                item.album = catalog.entries.first { $0.key == entry.parentKey }?.name
                item.albumArtist = entry.artist
            default: break
            }
            all.append(item)
        }
        if syntheticMovies > 0, let template = all.first(where: { $0.kind == "Movie" }) {
            for n in 0..<syntheticMovies {
                var item = template
                item.id = Self.id("synthetic/\(n)")
                item.name = String(format: "Synthetic Movie %05d", n)
                item.sortName = item.name.lowercased()
                item.year = 1950 + n % 75
                item.premiereDate = Self.date(year: item.year!)
                item.dateCreated = base.addingTimeInterval(Double(100 + n) * 60)
                item.overview = "A generated entry (\(n)) that stands for a large library."
                all.append(item)
            }
        }
        items = all
        for (index, item) in all.enumerated() {
            byId[item.id] = index
            if let parent = item.parentId { children[parent, default: []].append(index) }
        }
    }

    static func date(year: Int) -> Date {
        Date(timeIntervalSince1970: Double(JellyfinDateTranscoder.daysFromCivil(year: year, month: 6, day: 15)) * 86_400)
    }

    func item(_ id: String) -> Item? { byId[id.replacingOccurrences(of: "-", with: "").lowercased()].map { items[$0] } ?? extraItems(id) }

    /// Every item under `id`, depth first (for recursive listings).
    func descendants(of id: String) -> [Item] {
        var result: [Item] = []
        var stack = [id]
        while let next = stack.popLast() {
            for index in children[next] ?? [] {
                result.append(items[index])
                if items[index].isFolder { stack.append(items[index].id) }
            }
        }
        return result
    }

    func childItems(of id: String) -> [Item] { (children[id] ?? []).map { items[$0] } }

    /// The playable (non-folder) leaves, for recursive counts.
    func childCount(_ item: Item) -> Int? {
        guard item.isFolder else { return nil }
        return children[item.id]?.count ?? 0
    }

    /// The item as the server's DTO. `fields` are the extra `ItemFields` asked for; `detail`
    /// (single-item reads) includes everything.
    func dto(_ item: Item, userData: StandInState.ItemData?, fields: Set<String>, detail: Bool) -> Components.Schemas.BaseItemDto {
        var dto = Components.Schemas.BaseItemDto()
        dto.name = item.name
        dto.serverId = serverId
        dto.id = item.id
        dto._type = .init(value1: item.kind)
        dto.isFolder = item.isFolder
        dto.parentId = (detail || fields.contains("ParentId")) ? item.parentId : nil
        dto.collectionType = item.collectionType.map { .init(value1: $0) }
        dto.productionYear = item.year.map { Int32($0) }
        dto.premiereDate = item.premiereDate
        dto.indexNumber = item.indexNumber.map { Int32($0) }
        dto.parentIndexNumber = item.parentIndexNumber.map { Int32($0) }
        dto.seriesId = item.seriesId
        dto.seriesName = item.seriesName
        dto.seasonId = item.seasonId
        dto.seasonName = item.seasonName
        dto.albumId = item.albumId
        dto.album = item.album
        dto.albumArtist = item.albumArtist
        dto.communityRating = item.communityRating
        dto.officialRating = item.officialRating
        dto.channelId = nil
        if let entry = item.entry, entry.path != nil {
            dto.runTimeTicks = entry.runTimeTicks
            dto.container = entry.container
            dto.locationType = .init(value1: "FileSystem")
            let isAudio = item.kind == "Audio"
            dto.mediaType = .init(value1: isAudio ? "Audio" : "Video")
            if !isAudio { dto.videoType = .init(value1: "VideoFile") }
        } else {
            dto.locationType = .init(value1: "FileSystem")
            dto.mediaType = .init(value1: "Unknown")
        }
        if item.isFolder, detail || fields.contains("ChildCount") { dto.childCount = childCount(item).map { Int32($0) } }
        if let tag = item.posterTag {
            dto.imageTags = .init(additionalProperties: ["Primary": tag])
            if let hash = item.posterBlurHash { dto.imageBlurHashes = .init(primary: .init(additionalProperties: [tag: hash])) }
            if detail || fields.contains("PrimaryImageAspectRatio") { dto.primaryImageAspectRatio = item.posterAspect }
        } else {
            dto.imageTags = .init(additionalProperties: [:])
        }
        dto.backdropImageTags = []
        if detail || fields.contains("Overview") { dto.overview = item.overview }
        if detail || fields.contains("Genres") { dto.genres = item.genres }
        if detail || fields.contains("DateCreated") { dto.dateCreated = item.dateCreated }
        if detail || fields.contains("SortName") { dto.sortName = item.sortName }
        if detail || fields.contains("Path") { dto.path = item.entry?.path.map { mediaDirectory + "/" + $0 } }
        if detail || fields.contains("MediaStreams") || fields.contains("MediaSources"), let entry = item.entry, entry.path != nil {
            let streams = entry.streams.map(Self.stream)
            if detail || fields.contains("MediaStreams") { dto.mediaStreams = streams }
            if detail || fields.contains("MediaSources") { dto.mediaSources = mediaSource(item).map { [$0] } }
        }
        let data = userData ?? StandInState.ItemData()
        var userDto = Components.Schemas.UserItemDataDto()
        userDto.playbackPositionTicks = data.positionTicks
        userDto.playCount = Int32(data.playCount)
        userDto.isFavorite = data.favorite
        userDto.played = data.played
        userDto.lastPlayedDate = data.lastPlayed
        userDto.key = item.id
        userDto.itemId = item.id
        if let runtime = item.entry?.runTimeTicks, data.positionTicks > 0, runtime > 0 {
            userDto.playedPercentage = Double(data.positionTicks) / Double(runtime) * 100
        }
        dto.userData = .init(value1: userDto)
        return dto
    }

    /// The item's one media source (its file), as items and PlaybackInfo show it.
    func mediaSource(_ item: Item) -> Components.Schemas.MediaSourceInfo? {
        guard let entry = item.entry, let path = entry.path else { return nil }
        var source = Components.Schemas.MediaSourceInfo()
        source.id = item.id
        source.path = mediaDirectory + "/" + path
        source.container = entry.container
        source.size = entry.size.map { Int64($0) }
        source.name = item.name
        source._protocol = .init(value1: "File")
        source._type = .init(value1: "Default")
        source.runTimeTicks = entry.runTimeTicks
        source.bitrate = entry.bitrate.map { Int32($0) }
        source.supportsDirectPlay = true
        source.supportsDirectStream = true
        source.supportsTranscoding = true
        source.isRemote = false
        source.mediaStreams = entry.streams.map { stream in
            var dto = Self.stream(stream)
            // Subtitles: those in the file go to the player inside it (Embed); a file beside it
            // is fetched from its DeliveryUrl (External), as a real server decides for a player
            // whose profile takes both.
            if stream.type == "Subtitle" {
                dto.deliveryMethod = .init(value1: stream.externalFile == nil ? "Embed" : "External")
                if stream.externalFile != nil {
                    dto.deliveryUrl = "/Videos/\(item.id)/\(item.id)/Subtitles/\(stream.index)/0/Stream.srt"
                    dto.supportsExternalStream = true
                }
            }
            return dto
        }
        let audio = entry.streams.filter { $0.type == "Audio" }
        source.defaultAudioStreamIndex = (audio.first { $0.isDefault == true } ?? audio.first).map { Int32($0.index) }
        return source
    }

    /// Films rated from G up (Test Pattern G, Colour Bars PG, Mandelbrot Zoom PG-13), the series
    /// and its episodes TV-PG, music unrated: enough to test a parental ceiling.
    static func rating(_ entry: MediaCatalog.Entry) -> String? {
        switch entry.kind {
        case "Movie": return ["Test Pattern": "G", "Colour Bars": "PG", "Mandelbrot Zoom": "PG-13"][entry.name] ?? "PG"
        case "Series", "Season", "Episode": return "TV-PG"
        default: return nil
        }
    }

    static func stream(_ s: MediaCatalog.Stream) -> Components.Schemas.MediaStream {
        var stream = Components.Schemas.MediaStream()
        stream.index = Int32(s.index)
        stream._type = .init(value1: s.type)
        stream.codec = s.codec
        stream.isDefault = s.isDefault ?? true
        stream.isExternal = s.externalFile != nil
        stream.isInterlaced = false
        stream.language = s.language ?? "und"
        stream.title = s.title
        stream.bitRate = s.bitRate.map { Int32($0) }
        if s.type == "Video" {
            stream.width = s.width.map { Int32($0) }
            stream.height = s.height.map { Int32($0) }
            stream.videoRange = .init(value1: "SDR")
            stream.videoRangeType = .init(value1: "SDR")
            stream.aspectRatio = "4:3"
        } else if s.type == "Audio" {
            stream.channels = s.channels.map { Int32($0) }
            stream.sampleRate = s.sampleRate.map { Int32($0) }
            stream.channelLayout = s.channels == 1 ? "mono" : "stereo"
        }
        return stream
    }
}
