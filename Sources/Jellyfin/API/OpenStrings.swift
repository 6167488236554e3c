/// A string the server uses as an enum, kept open: the known values are constants, and a
/// value a newer server adds is carried as itself (`isKnown` false) instead of failing the
/// page it came in. The generated layer reads these fields as plain strings for that reason.
public protocol OpenString: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible, ExpressibleByStringLiteral
where RawValue == String {
    init(rawValue: String)
    static var known: [Self] { get }
}

extension OpenString {
    public init(stringLiteral value: String) { self.init(rawValue: value) }
    public var description: String { rawValue }
    public var isKnown: Bool { Self.known.contains(self) }
    /// The known value whose name matches `text` ignoring case, `-`, `_` and spaces, else nil.
    public static func matching(_ text: String) -> Self? {
        let wanted = text.lowercased().filter { $0 != "-" && $0 != "_" && $0 != " " }
        return known.first { $0.rawValue.lowercased() == wanted }
    }
}

/// `BaseItemKind`: what an item is.
public struct ItemKind: OpenString {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let movie: Self = "Movie"
    public static let series: Self = "Series"
    public static let season: Self = "Season"
    public static let episode: Self = "Episode"
    public static let audio: Self = "Audio"
    public static let musicAlbum: Self = "MusicAlbum"
    public static let musicArtist: Self = "MusicArtist"
    public static let musicVideo: Self = "MusicVideo"
    public static let video: Self = "Video"
    public static let boxSet: Self = "BoxSet"
    public static let playlist: Self = "Playlist"
    public static let folder: Self = "Folder"
    public static let collectionFolder: Self = "CollectionFolder"
    public static let userView: Self = "UserView"
    public static let audioBook: Self = "AudioBook"
    public static let book: Self = "Book"
    public static let photo: Self = "Photo"
    public static let trailer: Self = "Trailer"
    public static let tvChannel: Self = "TvChannel"

    public static let known: [Self] = [.movie, .series, .season, .episode, .audio, .musicAlbum, .musicArtist, .musicVideo, .video,
                                       .boxSet, .playlist, .folder, .collectionFolder, .userView, .audioBook, .book, .photo, .trailer, .tvChannel]

    /// Also accepts the short names people type: `album` → MusicAlbum, `artist` → MusicArtist,
    /// `show` → Series, `song`/`track` → Audio.
    public static func parse(_ text: String) -> ItemKind? {
        switch text.lowercased() {
        case "album": return .musicAlbum
        case "artist": return .musicArtist
        case "show", "shows", "tv": return .series
        case "song", "track": return .audio
        case "movies": return .movie
        case "episodes": return .episode
        default: return matching(text)
        }
    }
}

/// `ItemSortBy`: what a listing is ordered by.
public struct ItemSortField: OpenString {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let sortName: Self = "SortName"
    public static let name: Self = "Name"
    public static let productionYear: Self = "ProductionYear"
    public static let premiereDate: Self = "PremiereDate"
    public static let dateCreated: Self = "DateCreated"
    public static let datePlayed: Self = "DatePlayed"
    public static let playCount: Self = "PlayCount"
    public static let communityRating: Self = "CommunityRating"
    public static let runtime: Self = "Runtime"
    public static let random: Self = "Random"
    /// An episode's season, a track's disc.
    public static let parentIndexNumber: Self = "ParentIndexNumber"
    /// An episode's or a track's number.
    public static let indexNumber: Self = "IndexNumber"

    public static let known: [Self] = [.sortName, .name, .productionYear, .premiereDate, .dateCreated, .datePlayed, .playCount,
                                       .communityRating, .runtime, .random, .parentIndexNumber, .indexNumber]

    /// Also accepts `name`, `year`, `added`, `played`, `rating`.
    public static func parse(_ text: String) -> ItemSortField? {
        switch text.lowercased() {
        case "name", "title": return .sortName
        case "year": return .productionYear
        case "added", "date-added", "created": return .dateCreated
        case "played", "last-played": return .datePlayed
        case "rating": return .communityRating
        case "length", "duration": return .runtime
        case "index", "number", "episode", "track": return .indexNumber
        default: return matching(text)
        }
    }
}

/// `VideoRangeType`: SDR, HDR10, the Dolby Vision variants, … (servers add more often).
public struct VideoRangeType: OpenString {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let unknown: Self = "Unknown"
    public static let sdr: Self = "SDR"
    public static let hdr10: Self = "HDR10"
    public static let hlg: Self = "HLG"
    public static let dovi: Self = "DOVI"
    public static let doviWithHDR10: Self = "DOVIWithHDR10"
    public static let doviWithHLG: Self = "DOVIWithHLG"
    public static let doviWithSDR: Self = "DOVIWithSDR"
    public static let doviWithEL: Self = "DOVIWithEL"
    public static let doviWithHDR10Plus: Self = "DOVIWithHDR10Plus"
    public static let doviWithELHDR10Plus: Self = "DOVIWithELHDR10Plus"
    public static let doviInvalid: Self = "DOVIInvalid"
    public static let hdr10Plus: Self = "HDR10Plus"

    public static let known: [Self] = [.unknown, .sdr, .hdr10, .hlg, .dovi, .doviWithHDR10, .doviWithHLG, .doviWithSDR, .doviWithEL,
                                       .doviWithHDR10Plus, .doviWithELHDR10Plus, .doviInvalid, .hdr10Plus]
}

/// `ImageType`: which of an item's images.
public struct ImageType: OpenString {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let primary: Self = "Primary"
    public static let backdrop: Self = "Backdrop"
    public static let thumb: Self = "Thumb"
    public static let logo: Self = "Logo"
    public static let banner: Self = "Banner"
    public static let art: Self = "Art"
    public static let disc: Self = "Disc"
    public static let screenshot: Self = "Screenshot"

    public static let known: [Self] = [.primary, .backdrop, .thumb, .logo, .banner, .art, .disc, .screenshot]
}
