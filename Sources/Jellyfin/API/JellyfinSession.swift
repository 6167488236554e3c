public import Foundation
internal import OpenAPIRuntime
import HTTPTypes

/// A signed-in user on one server: browsing, search, user data, images, the live session.
///
/// Every call carries `Authorization: MediaBrowser …, Token="…"`; URLs that must carry the
/// token themselves (the WebSocket) use `ApiKey=`, which 10.10, 10.11 and 12.0 servers accept
/// (12.0 refuses `api_key=` by default). When the server answers 401 the token is gone (revoked,
/// signed out elsewhere): every call then throws `JellyfinError.signedOutByServer`.
public final class JellyfinSession: Sendable {
    public let server: JellyfinServer
    public let userId: String
    public let userName: String
    public let accessToken: String
    public let serverId: String?
    /// Items rated above this are left out of every listing and refused by `item(_:)`.
    public let ratingCeiling: RatingCeiling?
    let client: Client

    init(server: JellyfinServer, userId: String, userName: String, accessToken: String, serverId: String?, ratingCeiling: RatingCeiling? = nil) {
        self.server = server
        self.userId = userId
        self.userName = userName
        self.accessToken = accessToken
        self.serverId = serverId
        self.ratingCeiling = ratingCeiling
        client = server.client(token: accessToken)
    }

    /// `items` without those above the rating ceiling.
    func allowed(_ items: [JellyfinItem]) -> [JellyfinItem] {
        guard let ratingCeiling else { return items }
        return items.filter { ratingCeiling.allows($0.officialRating) }
    }

    /// Runs one generated operation with errors made readable.
    func perform<T>(_ operation: String, _ body: () async throws -> T) async throws(JellyfinError) -> T {
        try await server.perform(operation, body)
    }

    /// The error for an output other than the one asked for (401, 403, 404, 503, undocumented…).
    func failure(_ operation: String, _ output: some DocumentedOutput) -> JellyfinError {
        server.unexpected(operation, status: output.statusCode)
    }

    /// Nothing, for a request answered 204 No Content; the failure its status stands for otherwise.
    func expectNoContent(_ operation: String, _ output: some DocumentedOutput) throws(JellyfinError) {
        guard output.statusCode == 204 else { throw failure(operation, output) }
    }

    /// The fields a listing asks for beyond the defaults: enough for tables and detail.
    static let listFields: [Components.Schemas.ItemFields] = ["PrimaryImageAspectRatio", "ChildCount", "Genres", "DateCreated"]
    static let detailFields: [Components.Schemas.ItemFields] = ["Overview", "Genres", "MediaStreams", "MediaSources", "Path", "DateCreated",
                                                                "ChildCount", "PrimaryImageAspectRatio", "People", "Studios"]

    // MARK: user

    public func currentUser() async throws(JellyfinError) -> UserSummary {
        let operation = "read the signed-in user"
        let output = try await perform(operation) { try await client.getCurrentUser() }
        guard case .ok(let ok) = output else {
            throw failure(operation, output)
        }
        return UserSummary(try await perform(operation) { try ok.body.json })
    }

    // MARK: browse

    /// The user's libraries (Movies, Shows, Music, …).
    public func views() async throws(JellyfinError) -> [JellyfinItem] {
        let operation = "list libraries"
        let output = try await perform(operation) { try await client.getUserViews(query: .init(userId: userId)) }
        switch output {
        case .ok(let ok): return (try await perform(operation) { try ok.body.json }.items ?? []).map(JellyfinItem.init)
        default: throw failure(operation, output)
        }
    }

    /// The pages of a listing, fetched as they are consumed.
    public func itemPages(_ query: ItemQuery) -> ItemPageSequence {
        ItemPageSequence(query: query) { [self] query, start, count, wantTotal in
            try await self.page(query, start: start, count: count, wantTotal: wantTotal)
        }
    }

    /// The items of a listing one by one (pages fetched as they are consumed).
    public func items(_ query: ItemQuery) -> ItemSequence { ItemSequence(pages: itemPages(query)) }

    /// One page of `GET /Items`. The request is the generated operation's (same parameters,
    /// middlewares and transport); the answer is read by `ItemListDecoder` instead of the
    /// generated `BaseItemDto` decoder, which cost 80 % of a large listing's time
    /// (docs/architecture.md, "Jellyfin").
    func page(_ query: ItemQuery, start: Int, count: Int, wantTotal: Bool) async throws(JellyfinError) -> ItemPage {
        let operation = "list items"
        var q: [(String, String)] = [("userId", userId)]
        if let parentId = query.parentId { q.append(("parentId", parentId)) }
        q.append(("recursive", query.recursive ? "true" : "false"))
        q += query.types.map { ("includeItemTypes", $0.rawValue) }
        q += query.sortBy.map { ("sortBy", $0.rawValue) }
        if !query.sortBy.isEmpty { q.append(("sortOrder", query.descending ? "Descending" : "Ascending")) }
        if let term = query.searchTerm { q.append(("searchTerm", term)) }
        if query.favouritesOnly { q.append(("isFavorite", "true")) }
        if let played = query.played { q.append(("isPlayed", played ? "true" : "false")) }
        if let ratingCeiling { q.append(("maxOfficialRating", ratingCeiling.serverRating)) }
        q += (Self.listFields + query.fields).map { ("fields", $0) }
        q.append(("startIndex", String(Int32(clamping: start))))
        q.append(("limit", String(Int32(clamping: count))))
        q.append(("enableTotalRecordCount", wantTotal ? "true" : "false"))
        q += ["Primary", "Backdrop", "Thumb"].map { ("enableImageTypes", $0) }
        q.append(("imageTypeLimit", "1"))
        let (response, body) = try await perform(operation) {
            try await server.send(path: "/Items", query: q, token: accessToken, operationID: "getItems")
        }
        switch response.status.code {
        case 200:
            if let type = response.headerFields[.contentType], !type.lowercased().hasPrefix("application/json") {
                throw .malformedResponse(operation: operation, reason: "the server answered with \(type), not JSON")
            }
            let bytes = try await perform(operation) {
                try await Array(collecting: body ?? HTTPBody(), upTo: server.transport.maxResponseBytes)
            }
            do {
                let page = try ItemListDecoder.decodePage(bytes)
                return ItemPage(items: page.items, startIndex: page.startIndex ?? start, totalRecordCount: wantTotal ? page.total : nil)
            } catch {
                throw .malformedResponse(operation: operation, reason: error.description)
            }
        case 503:
            throw server.unexpected(operation, status: 503, retryAfter: response.headerFields[HTTPField.Name("Retry-After")!].flatMap { Int32($0) },
                                    message: response.headerFields[HTTPField.Name("Message")!])
        default:
            throw server.unexpected(operation, status: response.status.code)
        }
    }

    /// One item with everything a detail page shows (media streams, overview, genres, images).
    public func item(_ id: String) async throws(JellyfinError) -> JellyfinItem {
        let operation = "read item \(id)"
        let output = try await perform(operation) { try await client.getItem(path: .init(itemId: id), query: .init(userId: userId)) }
        switch output {
        case .ok(let ok):
            let item = JellyfinItem(try await perform(operation) { try ok.body.json })
            if let ratingCeiling, !ratingCeiling.allows(item.officialRating) {
                throw .aboveRatingCeiling(item: item.name, rating: item.officialRating ?? "", ceiling: ratingCeiling.text)
            }
            return item
        case .undocumented(let status, _):
            if status == 404 || status == 400 { throw .notFound(what: "item \(id)") }
            throw server.unexpected(operation, status: status)
        default: throw failure(operation, output)
        }
    }

    public func seasons(seriesId: String) async throws(JellyfinError) -> [JellyfinItem] {
        let operation = "list seasons"
        let output = try await perform(operation) {
            try await client.getSeasons(path: .init(seriesId: seriesId), query: .init(userId: userId, fields: Self.listFields))
        }
        switch output {
        case .ok(let ok): return allowed((try await perform(operation) { try ok.body.json }.items ?? []).map(JellyfinItem.init))
        default: throw failure(operation, output)
        }
    }

    public func episodes(seriesId: String, seasonId: String? = nil) async throws(JellyfinError) -> [JellyfinItem] {
        let operation = "list episodes"
        let output = try await perform(operation) {
            try await client.getEpisodes(path: .init(seriesId: seriesId), query: .init(userId: userId, fields: Self.listFields, seasonId: seasonId))
        }
        switch output {
        case .ok(let ok): return allowed((try await perform(operation) { try ok.body.json }.items ?? []).map(JellyfinItem.init))
        default: throw failure(operation, output)
        }
    }

    /// Started but unfinished items (Continue Watching).
    public func resumeItems(limit: Int = 20) async throws(JellyfinError) -> [JellyfinItem] {
        let operation = "list items to resume"
        let output = try await perform(operation) {
            try await client.getResumeItems(query: .init(userId: userId, limit: Int32(clamping: limit), fields: Self.listFields))
        }
        switch output {
        case .ok(let ok): return allowed((try await perform(operation) { try ok.body.json }.items ?? []).map(JellyfinItem.init))
        default: throw failure(operation, output)
        }
    }

    /// The next episode of each series in progress (or of one series).
    public func nextUp(limit: Int = 20, seriesId: String? = nil) async throws(JellyfinError) -> [JellyfinItem] {
        let operation = "list next-up episodes"
        let output = try await perform(operation) {
            try await client.getNextUp(query: .init(userId: userId, limit: Int32(clamping: limit), fields: Self.listFields, seriesId: seriesId))
        }
        switch output {
        case .ok(let ok): return allowed((try await perform(operation) { try ok.body.json }.items ?? []).map(JellyfinItem.init))
        default: throw failure(operation, output)
        }
    }

    /// The newest items of a library (a bare array on the wire, not a page).
    public func latest(parentId: String? = nil, limit: Int = 20) async throws(JellyfinError) -> [JellyfinItem] {
        let operation = "list the latest items"
        let output = try await perform(operation) {
            try await client.getLatestMedia(query: .init(userId: userId, parentId: parentId, fields: Self.listFields, limit: Int32(clamping: limit)))
        }
        switch output {
        case .ok(let ok): return allowed(try await perform(operation) { try ok.body.json }.map(JellyfinItem.init))
        default: throw failure(operation, output)
        }
    }

    /// Search hints: quick matches by name across the libraries.
    public func searchHints(_ text: String, limit: Int = 20) async throws(JellyfinError) -> [SearchHint] {
        // Hints carry no rating: under a ceiling, the search is a listing the server filters.
        if ratingCeiling != nil {
            var query = ItemQuery(recursive: true)
            query.searchTerm = text
            query.limit = limit
            var hints: [SearchHint] = []
            do {
                for try await item in items(query) where !item.isFolder || item.kind == .series || item.kind == .musicAlbum {
                    hints.append(SearchHint(id: item.id, name: item.name, kind: item.kind, productionYear: item.productionYear, series: item.seriesName,
                                            album: item.album, runTimeTicks: item.runTimeTicks, primaryImageTag: item.imageTags["Primary"]))
                }
            } catch let error as JellyfinError { throw error } catch { throw .malformedResponse(operation: "search", reason: "\(error)") }
            return hints
        }
        let operation = "search"
        let output = try await perform(operation) {
            try await client.getSearchHints(query: .init(limit: Int32(clamping: limit), userId: userId, searchTerm: text))
        }
        switch output {
        case .ok(let ok): return (try await perform(operation) { try ok.body.json }.searchHints ?? []).map(SearchHint.init)
        default: throw failure(operation, output)
        }
    }

    // MARK: user data

    /// Marks an item played or unplayed; returns the new user data.
    @discardableResult
    public func setPlayed(_ itemId: String, _ played: Bool) async throws(JellyfinError) -> UserItemData {
        let operation = played ? "mark played" : "mark unplayed"
        if played {
            let output = try await perform(operation) { try await client.markPlayedItem(path: .init(itemId: itemId), query: .init(userId: userId)) }
            switch output {
            case .ok(let ok): return UserItemData(try await perform(operation) { try ok.body.json })
            default: throw failure(operation, output)
            }
        } else {
            let output = try await perform(operation) { try await client.markUnplayedItem(path: .init(itemId: itemId), query: .init(userId: userId)) }
            switch output {
            case .ok(let ok): return UserItemData(try await perform(operation) { try ok.body.json })
            default: throw failure(operation, output)
            }
        }
    }

    /// Marks an item favourite or not; returns the new user data.
    @discardableResult
    public func setFavourite(_ itemId: String, _ favourite: Bool) async throws(JellyfinError) -> UserItemData {
        let operation = favourite ? "mark favourite" : "unmark favourite"
        if favourite {
            let output = try await perform(operation) { try await client.markFavoriteItem(path: .init(itemId: itemId), query: .init(userId: userId)) }
            switch output {
            case .ok(let ok): return UserItemData(try await perform(operation) { try ok.body.json })
            default: throw failure(operation, output)
            }
        } else {
            let output = try await perform(operation) { try await client.unmarkFavoriteItem(path: .init(itemId: itemId), query: .init(userId: userId)) }
            switch output {
            case .ok(let ok): return UserItemData(try await perform(operation) { try ok.body.json })
            default: throw failure(operation, output)
            }
        }
    }

    /// The user's data for one item (position, played, when last played).
    public func userData(_ itemId: String) async throws(JellyfinError) -> UserItemData {
        let operation = "read the user data of \(itemId)"
        let output = try await perform(operation) { try await client.getItemUserData(path: .init(itemId: itemId), query: .init(userId: userId)) }
        switch output {
        case .ok(let ok): return UserItemData(try await perform(operation) { try ok.body.json })
        case .notFound: throw .notFound(what: "item \(itemId)")
        default: throw failure(operation, output)
        }
    }

    /// Sets the user's data for one item as it is given (the fields left nil stay as they are),
    /// `lastPlayedDate` included: how progress made elsewhere (offline) is told with its own date.
    @discardableResult
    public func updateUserData(_ itemId: String, positionTicks: Int64? = nil, played: Bool? = nil, playCount: Int? = nil,
                               lastPlayedDate: Date? = nil) async throws(JellyfinError) -> UserItemData {
        let operation = "update the user data of \(itemId)"
        var update = Components.Schemas.UpdateUserItemDataDto()
        update.playbackPositionTicks = positionTicks
        update.played = played
        update.playCount = playCount.map { Int32(clamping: $0) }
        update.lastPlayedDate = lastPlayedDate
        let output = try await perform(operation) {
            try await client.updateItemUserData(path: .init(itemId: itemId), query: .init(userId: userId), body: .json(.init(value1: update)))
        }
        switch output {
        case .ok(let ok): return UserItemData(try await perform(operation) { try ok.body.json })
        case .notFound: throw .notFound(what: "item \(itemId)")
        default: throw failure(operation, output)
        }
    }

    // MARK: images

    /// An image's bytes and whether they came from the cache.
    public struct Image: Sendable {
        public var bytes: [UInt8]
        public var fromCache: Bool
    }

    /// An item's image by tag, through `cache` when one is given (images are immutable per tag).
    /// The image endpoint needs no token; the header is sent anyway, as clients do.
    public func image(itemId: String, type: ImageType = .primary, tag: String? = nil, maxWidth: Int? = nil,
                      cache: ImageCache? = nil) async throws(JellyfinError) -> Image {
        let key = tag.map { ImageCache.Key(itemId: itemId, imageType: type.rawValue, tag: $0, maxWidth: maxWidth) }
        if let cache, let key, let bytes = cache.bytes(for: key) { return Image(bytes: bytes, fromCache: true) }
        let operation = "fetch the \(type) image"
        let limit = server.transport.maxResponseBytes
        let output = try await perform(operation) {
            try await client.getItemImage(path: .init(itemId: itemId, imageType: .init(value1: type.rawValue)),
                                          query: .init(maxWidth: maxWidth.map { Int32(clamping: $0) }, tag: tag))
        }
        let bytes: [UInt8]
        switch output {
        case .ok(let ok):
            let body = try await perform(operation) { try ok.body.image_Ast_ }
            bytes = try await perform(operation) { try await [UInt8](collecting: body, upTo: limit) }
        case .notFound: throw .notFound(what: "the \(type) image of item \(itemId)")
        default: throw failure(operation, output)
        }
        if let cache, let key { try? cache.store(bytes, for: key) }
        return Image(bytes: bytes, fromCache: false)
    }

    // MARK: sessions

    /// Tells the server what this client can do, so it shows up as remote-controllable.
    public func postCapabilities(supportsMediaControl: Bool = true, playableMediaTypes: [String] = ["Audio", "Video"],
                                 supportedCommands: [String] = ["DisplayMessage", "SetVolume", "Mute", "Unmute", "ToggleMute"]) async throws(JellyfinError) {
        let operation = "post capabilities"
        var capabilities = Components.Schemas.ClientCapabilitiesDto()
        capabilities.playableMediaTypes = playableMediaTypes
        capabilities.supportedCommands = supportedCommands
        capabilities.supportsMediaControl = supportsMediaControl
        capabilities.supportsPersistentIdentifier = true
        try expectNoContent(operation, try await perform(operation) { try await client.postFullCapabilities(body: .json(.init(value1: capabilities))) })
    }

    /// The server's active sessions (what a remote-control picker lists).
    public func sessions() async throws(JellyfinError) -> [LiveSessionSummary] {
        let operation = "list sessions"
        let output = try await perform(operation) { try await client.getSessions() }
        switch output {
        case .ok(let ok):
            return try await perform(operation) { try ok.body.json }.map { dto in
                LiveSessionSummary(id: dto.id ?? "", userName: dto.userName, client: dto.client, deviceName: dto.deviceName,
                                   deviceId: dto.deviceId, nowPlaying: dto.nowPlayingItem?.value1.name,
                                   supportsRemoteControl: dto.supportsRemoteControl ?? false)
            }
        default: throw failure(operation, output)
        }
    }

    /// Signs out: the server revokes this token.
    public func signOut() async throws(JellyfinError) {
        let operation = "sign out"
        try expectNoContent(operation, try await perform(operation) { try await client.reportSessionEnded() })
    }

    /// A URL on this server that carries the token as `ApiKey=` (for players and sockets that
    /// cannot send headers). Never `api_key=`: 12.0 servers refuse it by default.
    public func authenticatedURL(path: String, query: [(String, String)] = [], webSocket: Bool = false) -> URL? {
        var components = URLComponents(string: (webSocket ? server.address.webSocketBase : server.address.description) + path)
        components?.queryItems = query.map { URLQueryItem(name: $0.0, value: $0.1) } + [URLQueryItem(name: "ApiKey", value: accessToken)]
        return components?.url
    }
}
