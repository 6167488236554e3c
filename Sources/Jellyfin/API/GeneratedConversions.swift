internal import Foundation

// From the generated layer's types to the readable ones. The generated types stay `package`:
// an app sees only what is converted here.

extension JellyfinItem {
    init(_ dto: Components.Schemas.BaseItemDto) {
        var tags = dto.imageTags?.additionalProperties ?? [:]
        // Jellyfin lists backdrops separately; expose the first under "Backdrop" for lookups.
        if tags["Backdrop"] == nil, let first = dto.backdropImageTags?.first { tags["Backdrop"] = first }
        self.init(
            id: dto.id ?? "", name: dto.name ?? "", kind: ItemKind(rawValue: dto._type?.value1 ?? ""),
            serverId: dto.serverId, parentId: dto.parentId, isFolder: dto.isFolder ?? false,
            collectionType: dto.collectionType?.value1, seriesName: dto.seriesName, seriesId: dto.seriesId, seasonId: dto.seasonId,
            seasonName: dto.seasonName, album: dto.album, albumId: dto.albumId, albumArtist: dto.albumArtist, artists: dto.artists ?? [],
            indexNumber: dto.indexNumber.map(Int.init), parentIndexNumber: dto.parentIndexNumber.map(Int.init),
            productionYear: dto.productionYear.map(Int.init), premiereDate: dto.premiereDate, dateCreated: dto.dateCreated,
            runTimeTicks: dto.runTimeTicks, overview: dto.overview, genres: dto.genres ?? [], officialRating: dto.officialRating,
            communityRating: dto.communityRating, childCount: dto.childCount.map(Int.init), container: dto.container,
            mediaType: dto.mediaType?.value1, path: dto.path, userData: dto.userData.map { UserItemData($0.value1) },
            imageTags: tags, backdropImageTags: dto.backdropImageTags ?? [],
            imageBlurHashes: dto.imageBlurHashes.map(Self.blurHashes) ?? [:],
            mediaStreams: (dto.mediaStreams ?? []).map(MediaStreamInfo.init))
        fileSize = dto.mediaSources?.first?.size
    }

    private static func blurHashes(_ payload: Components.Schemas.BaseItemDto.ImageBlurHashesPayload) -> [String: [String: String]] {
        var result: [String: [String: String]] = [:]
        func add(_ type: String, _ map: [String: String]?) { if let map, !map.isEmpty { result[type] = map } }
        add("Primary", payload.primary?.additionalProperties)
        add("Art", payload.art?.additionalProperties)
        add("Backdrop", payload.backdrop?.additionalProperties)
        add("Banner", payload.banner?.additionalProperties)
        add("Logo", payload.logo?.additionalProperties)
        add("Thumb", payload.thumb?.additionalProperties)
        add("Disc", payload.disc?.additionalProperties)
        add("Box", payload.box?.additionalProperties)
        add("Screenshot", payload.screenshot?.additionalProperties)
        add("Chapter", payload.chapter?.additionalProperties)
        add("Menu", payload.menu?.additionalProperties)
        add("Profile", payload.profile?.additionalProperties)
        add("BoxRear", payload.boxRear?.additionalProperties)
        return result
    }
}

extension MediaStreamInfo {
    init(_ dto: Components.Schemas.MediaStream) {
        self.init(index: dto.index.map(Int.init), type: dto._type?.value1 ?? "", codec: dto.codec, language: dto.language,
                  width: dto.width.map(Int.init), height: dto.height.map(Int.init), channels: dto.channels.map(Int.init),
                  sampleRate: dto.sampleRate.map(Int.init), bitRate: dto.bitRate.map(Int.init),
                  videoRangeType: dto.videoRangeType.map { VideoRangeType(rawValue: $0.value1) }, isDefault: dto.isDefault ?? false,
                  title: dto.title, isExternal: dto.isExternal ?? false, deliveryMethod: dto.deliveryMethod?.value1, deliveryUrl: dto.deliveryUrl)
    }
}

extension UserItemData {
    init(_ dto: Components.Schemas.UserItemDataDto) {
        self.init(played: dto.played ?? false, isFavorite: dto.isFavorite ?? false, playbackPositionTicks: dto.playbackPositionTicks ?? 0,
                  playCount: Int(dto.playCount ?? 0), lastPlayedDate: dto.lastPlayedDate, unplayedItemCount: dto.unplayedItemCount.map(Int.init))
    }
}

extension SearchHint {
    init(_ dto: Components.Schemas.SearchHint) {
        self.init(id: dto.id ?? dto.itemId ?? "", name: dto.name ?? "", kind: ItemKind(rawValue: dto._type?.value1 ?? ""),
                  productionYear: dto.productionYear.map(Int.init), series: dto.series, album: dto.album, runTimeTicks: dto.runTimeTicks,
                  primaryImageTag: dto.primaryImageTag)
    }
}

extension UserSummary {
    init(_ dto: Components.Schemas.UserDto) {
        self.init(id: dto.id ?? "", name: dto.name ?? "", hasPassword: dto.hasPassword ?? true,
                  isAdministrator: dto.policy?.value1.isAdministrator, lastLoginDate: dto.lastLoginDate)
    }
}
