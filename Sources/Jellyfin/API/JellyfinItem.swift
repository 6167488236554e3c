public import Foundation

/// An item as an app shows it: the fields of the server's `BaseItemDto` that browsing needs,
/// with ticks kept as ticks (1 tick = 100 ns) and server enums as open strings.
public struct JellyfinItem: Sendable, Hashable, Identifiable {
    public var id: String
    public var name: String
    public var kind: ItemKind
    public var serverId: String?
    public var parentId: String?
    public var isFolder: Bool
    public var collectionType: String?
    public var seriesName: String?
    public var seriesId: String?
    public var seasonId: String?
    public var seasonName: String?
    public var album: String?
    public var albumId: String?
    public var albumArtist: String?
    public var artists: [String]
    /// Episode or track number.
    public var indexNumber: Int?
    /// Season or disc number.
    public var parentIndexNumber: Int?
    public var productionYear: Int?
    public var premiereDate: Date?
    public var dateCreated: Date?
    public var runTimeTicks: Int64?
    public var overview: String?
    public var genres: [String]
    public var officialRating: String?
    public var communityRating: Double?
    public var childCount: Int?
    public var container: String?
    public var mediaType: String?
    /// Music (a track, an audio book's part): what the server calls Audio media.
    public var isAudio: Bool { kind == .audio || mediaType == "Audio" }
    public var path: String?
    public var userData: UserItemData?
    /// Image type (`Primary`, `Backdrop`, …) → tag.
    public var imageTags: [String: String]
    public var backdropImageTags: [String]
    /// Image type → (tag → BlurHash).
    public var imageBlurHashes: [String: [String: String]]
    /// Present when the server was asked for `MediaStreams` (item detail always asks).
    public var mediaStreams: [MediaStreamInfo]
    /// The first media source's size in bytes, when the server was asked for `MediaSources`
    /// (item detail always asks).
    public var fileSize: Int64?

    public init(id: String, name: String, kind: ItemKind, serverId: String? = nil, parentId: String? = nil, isFolder: Bool = false,
                collectionType: String? = nil, seriesName: String? = nil, seriesId: String? = nil, seasonId: String? = nil,
                seasonName: String? = nil, album: String? = nil, albumId: String? = nil, albumArtist: String? = nil, artists: [String] = [],
                indexNumber: Int? = nil, parentIndexNumber: Int? = nil, productionYear: Int? = nil, premiereDate: Date? = nil,
                dateCreated: Date? = nil, runTimeTicks: Int64? = nil, overview: String? = nil, genres: [String] = [],
                officialRating: String? = nil, communityRating: Double? = nil, childCount: Int? = nil, container: String? = nil,
                mediaType: String? = nil, path: String? = nil, userData: UserItemData? = nil, imageTags: [String: String] = [:],
                backdropImageTags: [String] = [], imageBlurHashes: [String: [String: String]] = [:], mediaStreams: [MediaStreamInfo] = []) {
        self.id = id
        self.name = name
        self.kind = kind
        self.serverId = serverId
        self.parentId = parentId
        self.isFolder = isFolder
        self.collectionType = collectionType
        self.seriesName = seriesName
        self.seriesId = seriesId
        self.seasonId = seasonId
        self.seasonName = seasonName
        self.album = album
        self.albumId = albumId
        self.albumArtist = albumArtist
        self.artists = artists
        self.indexNumber = indexNumber
        self.parentIndexNumber = parentIndexNumber
        self.productionYear = productionYear
        self.premiereDate = premiereDate
        self.dateCreated = dateCreated
        self.runTimeTicks = runTimeTicks
        self.overview = overview
        self.genres = genres
        self.officialRating = officialRating
        self.communityRating = communityRating
        self.childCount = childCount
        self.container = container
        self.mediaType = mediaType
        self.path = path
        self.userData = userData
        self.imageTags = imageTags
        self.backdropImageTags = backdropImageTags
        self.imageBlurHashes = imageBlurHashes
        self.mediaStreams = mediaStreams
    }

    /// The BlurHash of the image of `type` this item's tag names, if the server sent one.
    public func blurHash(for type: ImageType) -> String? {
        guard let tag = imageTags[type.rawValue] else { return nil }
        return imageBlurHashes[type.rawValue]?[tag]
    }
}

/// One stream of a media file (video, audio, subtitle) as the server probed it.
public struct MediaStreamInfo: Sendable, Hashable {
    public var index: Int?
    /// `Video`, `Audio`, `Subtitle`, `EmbeddedImage`, … (as sent).
    public var type: String
    public var codec: String?
    public var language: String?
    public var width: Int?
    public var height: Int?
    public var channels: Int?
    public var sampleRate: Int?
    public var bitRate: Int?
    public var videoRangeType: VideoRangeType?
    public var isDefault: Bool
    public var title: String?
    /// A file beside the media (subtitles), not a stream inside it.
    public var isExternal: Bool
    /// Subtitles: how the player gets them, as the server decided (`Embed`, `External`, `Encode`, `Hls`).
    public var deliveryMethod: String?
    /// Subtitles delivered `External`: where to fetch them (a path on the server).
    public var deliveryUrl: String?

    public init(index: Int? = nil, type: String, codec: String? = nil, language: String? = nil, width: Int? = nil, height: Int? = nil,
                channels: Int? = nil, sampleRate: Int? = nil, bitRate: Int? = nil, videoRangeType: VideoRangeType? = nil, isDefault: Bool = false,
                title: String? = nil, isExternal: Bool = false, deliveryMethod: String? = nil, deliveryUrl: String? = nil) {
        self.title = title
        self.isExternal = isExternal
        self.deliveryMethod = deliveryMethod
        self.deliveryUrl = deliveryUrl
        self.index = index
        self.type = type
        self.codec = codec
        self.language = language
        self.width = width
        self.height = height
        self.channels = channels
        self.sampleRate = sampleRate
        self.bitRate = bitRate
        self.videoRangeType = videoRangeType
        self.isDefault = isDefault
    }
}

/// The signed-in user's state for one item.
public struct UserItemData: Sendable, Hashable {
    public var played: Bool
    public var isFavorite: Bool
    public var playbackPositionTicks: Int64
    public var playCount: Int
    public var lastPlayedDate: Date?
    public var unplayedItemCount: Int?

    public init(played: Bool = false, isFavorite: Bool = false, playbackPositionTicks: Int64 = 0, playCount: Int = 0,
                lastPlayedDate: Date? = nil, unplayedItemCount: Int? = nil) {
        self.played = played
        self.isFavorite = isFavorite
        self.playbackPositionTicks = playbackPositionTicks
        self.playCount = playCount
        self.lastPlayedDate = lastPlayedDate
        self.unplayedItemCount = unplayedItemCount
    }
}

/// One search result (`SearchHint`).
public struct SearchHint: Sendable, Hashable {
    public var id: String
    public var name: String
    public var kind: ItemKind
    public var productionYear: Int?
    public var series: String?
    public var album: String?
    public var runTimeTicks: Int64?
    public var primaryImageTag: String?
}

/// What `/System/Info/Public` says about a server.
public struct ServerInfo: Sendable, Hashable, Codable {
    public var id: String
    public var name: String
    public var version: String
    public var productName: String?
    public var localAddress: String?
    public var operatingSystem: String?
    public var startupWizardCompleted: Bool?
}

/// A user as the server lists it.
public struct UserSummary: Sendable, Hashable, Codable {
    public var id: String
    public var name: String
    public var hasPassword: Bool
    public var isAdministrator: Bool?
    public var lastLoginDate: Date?
}

/// A Quick Connect request in progress: show `code` to the person, keep `secret` private.
public struct QuickConnectRequest: Sendable, Hashable {
    public var code: String
    public var secret: String
    public var authenticated: Bool
}

/// What happens on the live session, in order.
public enum LiveEvent: Sendable, Equatable {
    /// The socket is open (to this URL, token redacted).
    case connected(String)
    case message(LiveMessage)
    /// Something the server sent could not be read; the session goes on.
    case problem(JellyfinSocketError)
    /// The socket closed; the next attempt comes after `retryIn`.
    case disconnected(reason: String, retryIn: Duration)
}
