import Foundation
import HTTPTypes
import Jellyfin
import OpenAPIRuntime
import FarcastSupport

/// The generated server protocol implemented over the in-memory library, with the real
/// server's rules where a client can tell: which calls need a token, what a missing item or a
/// wrong password answers, which user's data a call sees, and the live-session messages that
/// user-data changes push.
struct StandInAPI: APIProtocol {
    let library: Library
    let state: StandInState
    let hub: SocketHub
    let serverName: String
    let publicURL: @Sendable () -> String
    /// Bumped on every change a listing could show, so cached listings are never stale.
    let generation: Locked<Int>
    /// Transcodes by play session (Transcoding.swift).
    let transcodes: Transcodes
    /// Play sessions and the playback reports received (Playback.swift).
    let playback = PlaybackLog()
    /// Channels, the guide, timers and recordings (LiveTV.swift).
    let liveTV: LiveTV
    /// Watching together (SyncPlay.swift).
    let syncPlay: SyncPlayGroups

    static let notFound = Components.Schemas.ProblemDetails(status: 404, title: "Not Found")

    private var caller: Caller? { Caller.current }

    /// A paging number from the query, never negative (clients and fuzzers send anything).
    private func count(_ value: Int32?, default fallback: Int) -> Int { max(0, value.map(Int.init) ?? fallback) }
    private var userId: String { caller?.token?.userId ?? "" }

    private func fieldSet(_ fields: [String]?) -> Set<String> { Set(fields ?? []) }

    private func dto(_ item: Library.Item, fields: [String]?, detail: Bool = false) -> Components.Schemas.BaseItemDto {
        library.dto(item, userData: state.itemData(userId: userId, itemId: item.id), fields: fieldSet(fields), detail: detail)
    }

    // MARK: system and users

    func getPublicSystemInfo(_ input: Operations.GetPublicSystemInfo.Input) async throws -> Operations.GetPublicSystemInfo.Output {
        .ok(.init(body: .json(.init(id: state.serverId, localAddress: publicURL(), operatingSystem: "", productName: "Jellyfin Server",
                                    serverName: serverName, startupWizardCompleted: true, version: "10.11.0"))))
    }

    func getPingSystem(_ input: Operations.GetPingSystem.Input) async throws -> Operations.GetPingSystem.Output {
        .ok(.init(body: .json("Jellyfin Server")))
    }

    private func userDto(_ user: StandInState.User) -> Components.Schemas.UserDto {
        var dto = Components.Schemas.UserDto()
        dto.name = user.name
        dto.serverId = state.serverId
        dto.id = user.id
        dto.hasPassword = !user.password.isEmpty
        dto.hasConfiguredPassword = !user.password.isEmpty
        dto.hasConfiguredEasyPassword = false
        dto.enableAutoLogin = false
        dto.lastLoginDate = Date(timeIntervalSince1970: 1_732_223_089.1234567)
        dto.lastActivityDate = Date(timeIntervalSince1970: 1_732_223_089.1234567)
        var policy = Components.Schemas.UserPolicy(authenticationProviderId: "Jellyfin.Server.Implementations.Users.DefaultAuthenticationProvider",
                                                   passwordResetProviderId: "Jellyfin.Server.Implementations.Users.DefaultPasswordResetProvider")
        policy.isAdministrator = user.isAdministrator
        policy.isHidden = false
        policy.isDisabled = false
        policy.enableRemoteControlOfOtherUsers = user.isAdministrator
        dto.policy = .init(value1: policy)
        return dto
    }

    func getPublicUsers(_ input: Operations.GetPublicUsers.Input) async throws -> Operations.GetPublicUsers.Output {
        .ok(.init(body: .json(state.users.map(userDto))))
    }

    func getCurrentUser(_ input: Operations.GetCurrentUser.Input) async throws -> Operations.GetCurrentUser.Output {
        guard let user = state.user(id: userId) else { return .badRequest(.init(body: .json(.init()))) }
        return .ok(.init(body: .json(userDto(user))))
    }

    private func authenticationResult(user: StandInState.User, token: StandInState.Token) -> Components.Schemas.AuthenticationResult {
        var session = Components.Schemas.SessionInfoDto()
        session.id = Library.id("session/\(token.token)")
        session.userId = user.id
        session.userName = user.name
        session.client = token.client
        session.deviceName = token.device
        session.deviceId = token.deviceId
        session.applicationVersion = token.version
        session.lastActivityDate = token.lastActivity
        session.isActive = true
        session.supportsMediaControl = false
        session.supportsRemoteControl = false
        session.serverId = state.serverId
        return .init(accessToken: token.token, serverId: state.serverId, sessionInfo: .init(value1: session), user: .init(value1: userDto(user)))
    }

    func authenticateUserByName(_ input: Operations.AuthenticateUserByName.Input) async throws -> Operations.AuthenticateUserByName.Output {
        guard case .json(let body) = input.body, let caller, !caller.deviceId.isEmpty,
              let user = state.authenticate(name: body.value1.username ?? "", password: body.value1.pw ?? "") else {
            return .undocumented(statusCode: 401, .init())
        }
        return .ok(.init(body: .json(authenticationResult(user: user, token: state.issueToken(userId: user.id, caller: caller)))))
    }

    // MARK: Quick Connect

    func getQuickConnectEnabled(_ input: Operations.GetQuickConnectEnabled.Input) async throws -> Operations.GetQuickConnectEnabled.Output {
        .ok(.init(body: .json(true)))
    }

    private func result(_ request: StandInState.QuickConnect) -> Components.Schemas.QuickConnectResult {
        .init(appName: request.client, appVersion: request.version, authenticated: request.userId != nil, code: request.code,
              dateAdded: request.created, deviceId: request.deviceId, deviceName: request.device, secret: request.secret)
    }

    func initiateQuickConnect(_ input: Operations.InitiateQuickConnect.Input) async throws -> Operations.InitiateQuickConnect.Output {
        // The server needs all four identity fields (and no token) to start a request.
        guard let caller, !caller.client.isEmpty, !caller.device.isEmpty, !caller.deviceId.isEmpty, !caller.version.isEmpty else {
            return .undocumented(statusCode: 400, .init())
        }
        return .ok(.init(body: .json(result(state.initiateQuickConnect(caller: caller)))))
    }

    func getQuickConnectState(_ input: Operations.GetQuickConnectState.Input) async throws -> Operations.GetQuickConnectState.Output {
        guard let request = state.quickConnect(secret: input.query.secret) else { return .notFound(.init(body: .json(Self.notFound))) }
        return .ok(.init(body: .json(result(request))))
    }

    func authenticateWithQuickConnect(_ input: Operations.AuthenticateWithQuickConnect.Input) async throws -> Operations.AuthenticateWithQuickConnect.Output {
        guard case .json(let body) = input.body, let request = state.consumeQuickConnect(secret: body.value1.secret),
              let userId = request.userId, let user = state.user(id: userId) else {
            return .badRequest(.init())
        }
        let caller = Caller(client: request.client, device: request.device, deviceId: request.deviceId, version: request.version, token: nil)
        return .ok(.init(body: .json(authenticationResult(user: user, token: state.issueToken(userId: user.id, caller: caller)))))
    }

    func authorizeQuickConnect(_ input: Operations.AuthorizeQuickConnect.Input) async throws -> Operations.AuthorizeQuickConnect.Output {
        let approver = input.query.userId ?? userId
        guard approver == userId || state.user(id: userId)?.isAdministrator == true else { return .forbidden(.init(body: .json(.init(status: 403, title: "Forbidden")))) }
        return .ok(.init(body: .json(state.approveQuickConnect(code: input.query.code, userId: approver))))
    }

    // MARK: sessions

    func reportSessionEnded(_ input: Operations.ReportSessionEnded.Input) async throws -> Operations.ReportSessionEnded.Output {
        if let token = caller?.token?.token {
            state.revoke(token)
            hub.close(token: token)
        }
        return .noContent(.init())
    }

    func postFullCapabilities(_ input: Operations.PostFullCapabilities.Input) async throws -> Operations.PostFullCapabilities.Output {
        if let token = caller?.token?.token { state.setCapabilities(token: token) }
        return .noContent(.init())
    }

    func getSessions(_ input: Operations.GetSessions.Input) async throws -> Operations.GetSessions.Output {
        .ok(.init(body: .json(sessionList(deviceId: input.query.deviceId))))
    }

    func sessionList(deviceId: String? = nil) -> [Components.Schemas.SessionInfoDto] {
        let connected = hub.deviceIds
        return state.tokens.filter { deviceId == nil || $0.deviceId == deviceId }.sorted { $0.created < $1.created }.map { token in
            var session = Components.Schemas.SessionInfoDto()
            session.id = Library.id("session/\(token.token)")
            session.userId = token.userId
            session.userName = state.user(id: token.userId)?.name
            session.client = token.client
            session.deviceName = token.device
            session.deviceId = token.deviceId
            session.applicationVersion = token.version
            session.lastActivityDate = token.lastActivity
            session.isActive = true
            session.supportsMediaControl = token.capabilities
            session.supportsRemoteControl = token.capabilities && connected.contains(token.deviceId)
            session.serverId = state.serverId
            return session
        }
    }

    // MARK: browse

    func getUserViews(_ input: Operations.GetUserViews.Input) async throws -> Operations.GetUserViews.Output {
        .ok(.init(body: .json(views(fields: nil))))
    }

    func views(fields: [String]?) -> Components.Schemas.BaseItemDtoQueryResult {
        let items = library.views.map { dto($0, fields: (fields ?? []) + ["ChildCount", "PrimaryImageAspectRatio"]) }
        return .init(items: items, startIndex: 0, totalRecordCount: Int32(items.count))
    }

    /// The listing rules shared by `/Items` and the legacy `/Users/{id}/Items`.
    struct Listing {
        var parentId: String?
        var recursive = false
        var types: [String] = []
        var excludeTypes: [String] = []
        var searchTerm: String?
        var isFavorite: Bool?
        var isPlayed: Bool?
        var filters: [String] = []
        var sortBy: [String] = []
        var descending = false
        var startIndex = 0
        var limit: Int?
        var fields: [String] = []
        var ids: [String] = []
        var years: [Int] = []
        var enableTotalRecordCount = true
        var maxOfficialRating: String?
    }

    /// The scores a real server's US rating table gives (what `maxOfficialRating` compares);
    /// an item with a rating not listed here, or none, passes.
    static let ratingScores: [String: Int] = ["G": 0, "TV-G": 0, "TV-Y": 0, "TV-Y7": 7, "PG": 10, "TV-PG": 10, "PG-13": 13, "TV-14": 14,
                                              "R": 17, "TV-MA": 17, "NC-17": 18]

    func list(_ listing: Listing) -> Components.Schemas.BaseItemDtoQueryResult {
        var items: [Library.Item]
        if !listing.ids.isEmpty {
            items = listing.ids.compactMap(library.item)
        } else if let parent = listing.parentId {
            items = listing.recursive ? library.descendants(of: parent.replacingOccurrences(of: "-", with: "").lowercased())
                                      : library.childItems(of: parent.replacingOccurrences(of: "-", with: "").lowercased())
        } else if listing.recursive {
            items = library.items.filter { $0.kind != "CollectionFolder" }
        } else {
            items = library.views
        }
        let types = Set(listing.types.map { $0.lowercased() })
        if !types.isEmpty { items = items.filter { types.contains($0.kind.lowercased()) } }
        let excluded = Set(listing.excludeTypes.map { $0.lowercased() })
        if !excluded.isEmpty { items = items.filter { !excluded.contains($0.kind.lowercased()) } }
        if let term = listing.searchTerm?.trimmingCharacters(in: .whitespaces), !term.isEmpty {
            items = items.filter { $0.name.range(of: term, options: [.caseInsensitive, .diacriticInsensitive]) != nil }
        }
        if !listing.years.isEmpty { items = items.filter { $0.year.map(listing.years.contains) ?? false } }
        if let ceiling = listing.maxOfficialRating.flatMap({ Self.ratingScores[$0.uppercased()] }) {
            items = items.filter { item in item.officialRating.flatMap { Self.ratingScores[$0.uppercased()] }.map { $0 <= ceiling } ?? true }
        }
        let data = state.allItemData(userId: userId)
        var favourite = listing.isFavorite
        var played = listing.isPlayed
        for filter in listing.filters {
            switch filter {
            case "IsFavorite": favourite = true
            case "IsPlayed": played = true
            case "IsUnplayed": played = false
            case "IsResumable": items = items.filter { (data[$0.id]?.positionTicks ?? 0) > 0 }
            case "IsFolder": items = items.filter(\.isFolder)
            case "IsNotFolder": items = items.filter { !$0.isFolder }
            default: break
            }
        }
        if let favourite { items = items.filter { (data[$0.id]?.favorite ?? false) == favourite } }
        if let played { items = items.filter { (data[$0.id]?.played ?? false) == played } }
        let sort = listing.sortBy.first ?? "SortName"
        items.sort { a, b in
            let ordered: Bool
            switch sort {
            case "ProductionYear", "PremiereDate": ordered = (a.year ?? 0, a.sortName) < (b.year ?? 0, b.sortName)
            case "DateCreated": ordered = (a.dateCreated, a.sortName) < (b.dateCreated, b.sortName)
            case "DatePlayed": ordered = ((data[a.id]?.lastPlayed ?? .distantPast), a.sortName) < ((data[b.id]?.lastPlayed ?? .distantPast), b.sortName)
            case "CommunityRating": ordered = (a.communityRating ?? 0, a.sortName) < (b.communityRating ?? 0, b.sortName)
            case "Runtime": ordered = (a.entry?.runTimeTicks ?? 0, a.sortName) < (b.entry?.runTimeTicks ?? 0, b.sortName)
            case "IndexNumber", "ParentIndexNumber": ordered = (a.parentIndexNumber ?? 0, a.indexNumber ?? 0, a.sortName) < (b.parentIndexNumber ?? 0, b.indexNumber ?? 0, b.sortName)
            case "Random": ordered = a.id < b.id
            default: ordered = (a.sortName, a.id) < (b.sortName, b.id)
            }
            return listing.descending ? !ordered && (a.id != b.id) : ordered
        }
        let total = items.count
        let start = min(max(listing.startIndex, 0), total)
        let end = listing.limit.map { min(total, start + max($0, 0)) } ?? total
        let page = items[start..<end].map { dto($0, fields: listing.fields) }
        return .init(items: page, startIndex: Int32(start), totalRecordCount: listing.enableTotalRecordCount ? Int32(total) : 0)
    }

    func getItems(_ input: Operations.GetItems.Input) async throws -> Operations.GetItems.Output {
        let q = input.query
        var listing = Listing()
        listing.parentId = q.parentId
        listing.recursive = q.recursive ?? false
        listing.types = q.includeItemTypes ?? []
        listing.excludeTypes = q.excludeItemTypes ?? []
        listing.searchTerm = q.searchTerm
        listing.isFavorite = q.isFavorite
        listing.isPlayed = q.isPlayed
        listing.filters = q.filters ?? []
        listing.sortBy = q.sortBy ?? []
        listing.descending = q.sortOrder?.first == "Descending"
        listing.startIndex = Int(q.startIndex ?? 0)
        listing.limit = q.limit.map(Int.init)
        listing.fields = q.fields ?? []
        listing.ids = q.ids ?? []
        listing.years = (q.years ?? []).map(Int.init)
        listing.enableTotalRecordCount = q.enableTotalRecordCount ?? true
        listing.maxOfficialRating = q.maxOfficialRating
        if let parent = listing.parentId, library.item(parent) == nil, library.views.allSatisfy({ $0.id != parent }) {
            return .ok(.init(body: .json(.init(items: [], startIndex: 0, totalRecordCount: 0))))
        }
        return .ok(.init(body: .json(list(listing))))
    }

    func getItem(_ input: Operations.GetItem.Input) async throws -> Operations.GetItem.Output {
        guard let item = library.item(input.path.itemId) else { return .undocumented(statusCode: 404, .init()) }
        return .ok(.init(body: .json(dto(item, fields: nil, detail: true))))
    }

    func getSeasons(_ input: Operations.GetSeasons.Input) async throws -> Operations.GetSeasons.Output {
        guard let series = library.item(input.path.seriesId), series.kind == "Series" else { return .notFound(.init(body: .json(Self.notFound))) }
        let seasons = library.childItems(of: series.id).sorted { ($0.indexNumber ?? 0) < ($1.indexNumber ?? 0) }
        let items = seasons.map { dto($0, fields: input.query.fields) }
        return .ok(.init(body: .json(.init(items: items, startIndex: 0, totalRecordCount: Int32(items.count)))))
    }

    func getEpisodes(_ input: Operations.GetEpisodes.Input) async throws -> Operations.GetEpisodes.Output {
        guard let series = library.item(input.path.seriesId), series.kind == "Series" else { return .notFound(.init(body: .json(Self.notFound))) }
        var episodes = library.descendants(of: series.id).filter { $0.kind == "Episode" }
        if let seasonId = input.query.seasonId { episodes = episodes.filter { $0.seasonId == seasonId.replacingOccurrences(of: "-", with: "").lowercased() } }
        if let season = input.query.season { episodes = episodes.filter { $0.parentIndexNumber == Int(season) } }
        episodes.sort { ($0.parentIndexNumber ?? 0, $0.indexNumber ?? 0) < ($1.parentIndexNumber ?? 0, $1.indexNumber ?? 0) }
        let start = min(count(input.query.startIndex, default: 0), episodes.count)
        let end = input.query.limit.map { min(episodes.count, start + max(0, Int($0))) } ?? episodes.count
        let items = episodes[start..<end].map { dto($0, fields: input.query.fields) }
        return .ok(.init(body: .json(.init(items: items, startIndex: Int32(start), totalRecordCount: Int32(episodes.count)))))
    }

    func getResumeItems(_ input: Operations.GetResumeItems.Input) async throws -> Operations.GetResumeItems.Output {
        let data = state.allItemData(userId: userId)
        let resumable = library.items.filter { ($0.entry?.path != nil) && (data[$0.id]?.positionTicks ?? 0) > 0 && !(data[$0.id]?.played ?? false) }
            .sorted { (data[$0.id]?.lastPlayed ?? .distantPast) > (data[$1.id]?.lastPlayed ?? .distantPast) }
        let limited = resumable.prefix(count(input.query.limit, default: 100))
        return .ok(.init(body: .json(.init(items: limited.map { dto($0, fields: input.query.fields) }, startIndex: 0,
                                           totalRecordCount: Int32(resumable.count)))))
    }

    /// For each series: the episode after the most recently played one (series never started
    /// are left out, as the server does by default).
    func getNextUp(_ input: Operations.GetNextUp.Input) async throws -> Operations.GetNextUp.Output {
        let data = state.allItemData(userId: userId)
        var result: [Library.Item] = []
        for series in library.items where series.kind == "Series" {
            if let only = input.query.seriesId, only.replacingOccurrences(of: "-", with: "").lowercased() != series.id { continue }
            let episodes = library.descendants(of: series.id).filter { $0.kind == "Episode" }
                .sorted { ($0.parentIndexNumber ?? 0, $0.indexNumber ?? 0) < ($1.parentIndexNumber ?? 0, $1.indexNumber ?? 0) }
            guard let lastPlayed = episodes.lastIndex(where: { data[$0.id]?.played == true }) else { continue }
            if let next = episodes[(lastPlayed + 1)...].first(where: { data[$0.id]?.played != true }) { result.append(next) }
        }
        let limited = result.prefix(count(input.query.limit, default: 100))
        return .ok(.init(body: .json(.init(items: limited.map { dto($0, fields: input.query.fields) }, startIndex: 0,
                                           totalRecordCount: Int32(result.count)))))
    }

    func getLatestMedia(_ input: Operations.GetLatestMedia.Input) async throws -> Operations.GetLatestMedia.Output {
        var items = input.query.parentId.map { library.descendants(of: $0.replacingOccurrences(of: "-", with: "").lowercased()) }
            ?? library.items.filter { $0.kind != "CollectionFolder" }
        items = items.filter { ["Movie", "Episode", "Audio", "MusicAlbum", "Series"].contains($0.kind) }
        if let types = input.query.includeItemTypes, !types.isEmpty { items = items.filter { types.contains($0.kind) } }
        items.sort { $0.dateCreated > $1.dateCreated }
        return .ok(.init(body: .json(items.prefix(count(input.query.limit, default: 20)).map { dto($0, fields: input.query.fields) })))
    }

    func getSearchHints(_ input: Operations.GetSearchHints.Input) async throws -> Operations.GetSearchHints.Output {
        let term = input.query.searchTerm.trimmingCharacters(in: .whitespaces)
        var matches = term.isEmpty ? [] : library.items.filter { $0.kind != "CollectionFolder" && $0.name.range(of: term, options: [.caseInsensitive, .diacriticInsensitive]) != nil }
        if let types = input.query.includeItemTypes, !types.isEmpty { matches = matches.filter { types.contains($0.kind) } }
        // Names that start with the term first, then alphabetical, as the server ranks them.
        matches.sort { ($0.sortName.hasPrefix(term.lowercased()) ? 0 : 1, $0.sortName) < ($1.sortName.hasPrefix(term.lowercased()) ? 0 : 1, $1.sortName) }
        let start = min(count(input.query.startIndex, default: 0), matches.count)
        let end = min(matches.count, start + count(input.query.limit, default: 100))
        let hints = matches[start..<end].map { item -> Components.Schemas.SearchHint in
            var hint = Components.Schemas.SearchHint()
            hint.itemId = item.id
            hint.id = item.id
            hint.name = item.name
            hint.matchedTerm = term
            hint._type = .init(value1: item.kind)
            hint.isFolder = item.isFolder
            hint.productionYear = item.year.map { Int32($0) }
            hint.runTimeTicks = item.entry?.runTimeTicks
            hint.primaryImageTag = item.posterTag
            hint.series = item.seriesName
            hint.album = item.album
            hint.albumArtist = item.albumArtist
            hint.indexNumber = item.indexNumber.map { Int32($0) }
            hint.parentIndexNumber = item.parentIndexNumber.map { Int32($0) }
            hint.mediaType = .init(value1: item.entry?.path == nil ? "Unknown" : (item.kind == "Audio" ? "Audio" : "Video"))
            return hint
        }
        return .ok(.init(body: .json(.init(searchHints: hints, totalRecordCount: Int32(matches.count)))))
    }

    // MARK: user data

    private func changed(_ itemId: String, _ data: StandInState.ItemData) {
        generation.withLock { $0 += 1 }
        let change = #"{"UserId":"\#(userId)","UserDataList":[{"ItemId":"\#(itemId)","Key":"\#(itemId)","Played":\#(data.played),"IsFavorite":\#(data.favorite),"PlaybackPositionTicks":\#(data.positionTicks),"PlayCount":\#(data.playCount)}]}"#
        let user = userId
        _ = hub.send(SocketHub.envelope(type: "UserDataChanged", dataJSON: change)) { $0.userId == user }
    }

    private func userDataDto(_ itemId: String, _ data: StandInState.ItemData) -> Components.Schemas.UserItemDataDto {
        var dto = Components.Schemas.UserItemDataDto()
        dto.itemId = itemId
        dto.key = itemId
        dto.played = data.played
        dto.isFavorite = data.favorite
        dto.playCount = Int32(data.playCount)
        dto.playbackPositionTicks = data.positionTicks
        dto.lastPlayedDate = data.lastPlayed
        return dto
    }

    private func mark(_ itemId: String, _ change: @escaping (inout StandInState.ItemData) -> Void) -> Components.Schemas.UserItemDataDto? {
        guard let item = library.item(itemId) else { return nil }
        let data = state.updateItemData(userId: userId, itemId: item.id, change)
        changed(item.id, data)
        return userDataDto(item.id, data)
    }

    func markPlayedItem(_ input: Operations.MarkPlayedItem.Input) async throws -> Operations.MarkPlayedItem.Output {
        let when = input.query.datePlayed ?? Date()
        guard let dto = mark(input.path.itemId, { $0.played = true; $0.playCount += 1; $0.positionTicks = 0; $0.lastPlayed = when }) else { return .notFound(.init(body: .json(Self.notFound))) }
        return .ok(.init(body: .json(dto)))
    }

    func markUnplayedItem(_ input: Operations.MarkUnplayedItem.Input) async throws -> Operations.MarkUnplayedItem.Output {
        guard let dto = mark(input.path.itemId, { $0.played = false; $0.positionTicks = 0 }) else { return .notFound(.init(body: .json(Self.notFound))) }
        return .ok(.init(body: .json(dto)))
    }

    func markFavoriteItem(_ input: Operations.MarkFavoriteItem.Input) async throws -> Operations.MarkFavoriteItem.Output {
        guard let dto = mark(input.path.itemId, { $0.favorite = true }) else { return .undocumented(statusCode: 404, .init()) }
        return .ok(.init(body: .json(dto)))
    }

    func unmarkFavoriteItem(_ input: Operations.UnmarkFavoriteItem.Input) async throws -> Operations.UnmarkFavoriteItem.Output {
        guard let dto = mark(input.path.itemId, { $0.favorite = false }) else { return .undocumented(statusCode: 404, .init()) }
        return .ok(.init(body: .json(dto)))
    }

    func getItemUserData(_ input: Operations.GetItemUserData.Input) async throws -> Operations.GetItemUserData.Output {
        guard let item = library.item(input.path.itemId) else { return .notFound(.init(body: .json(Self.notFound))) }
        return .ok(.init(body: .json(userDataDto(item.id, state.itemData(userId: userId, itemId: item.id)))))
    }

    /// As the real server's UpdateUserItemData: every field given is set, the others stay
    /// (LastPlayedDate included, which is how a client tells progress made offline).
    func updateItemUserData(_ input: Operations.UpdateItemUserData.Input) async throws -> Operations.UpdateItemUserData.Output {
        guard case .json(let body) = input.body else { return .undocumented(statusCode: 400, .init()) }
        let update = body.value1
        guard let dto = mark(input.path.itemId, { data in
            if let ticks = update.playbackPositionTicks { data.positionTicks = ticks }
            if let played = update.played { data.played = played }
            if let count = update.playCount { data.playCount = Int(count) }
            if let favourite = update.isFavorite { data.favorite = favourite }
            if let date = update.lastPlayedDate { data.lastPlayed = date }
        }) else { return .notFound(.init(body: .json(Self.notFound))) }
        return .ok(.init(body: .json(dto)))
    }

    // MARK: media segments and lyrics

    /// Every episode has an intro (its first half second) and credits (from 0.8 s to its end);
    /// other items have none (an empty list, as a real server answers).
    func getItemSegments(_ input: Operations.GetItemSegments.Input) async throws -> Operations.GetItemSegments.Output {
        guard let item = library.item(input.path.itemId) else { return .notFound(.init(body: .json(Self.notFound))) }
        var segments: [Components.Schemas.MediaSegmentDto] = []
        if item.kind == "Episode", let runtime = item.entry?.runTimeTicks {
            for (n, (type, start, end)) in [("Intro", Int64(0), Int64(5_000_000)), ("Outro", Int64(8_000_000), runtime)].enumerated() where end > start {
                var dto = Components.Schemas.MediaSegmentDto()
                dto.id = String(format: "%@%08d", String(item.id.prefix(24)), n)
                dto.itemId = item.id
                dto._type = .init(value1: type)
                (dto.startTicks, dto.endTicks) = (start, end)
                segments.append(dto)
            }
        }
        let wanted = input.query.includeSegmentTypes.map(Set.init)
        segments = segments.filter { wanted?.contains($0._type?.value1 ?? "") ?? true }
        return .ok(.init(body: .json(.init(items: segments, startIndex: 0, totalRecordCount: Int32(segments.count)))))
    }

    /// The album's tracks have synced lyrics (their note, then how long it is held); anything
    /// else has none (404, as a real server answers).
    func getLyrics(_ input: Operations.GetLyrics.Input) async throws -> Operations.GetLyrics.Output {
        guard let item = library.item(input.path.itemId), item.kind == "Audio" else { return .notFound(.init(body: .json(Self.notFound))) }
        var metadata = Components.Schemas.LyricMetadata()
        (metadata.isSynced, metadata.title, metadata.artist) = (true, item.name, item.albumArtist)
        let lines = [(Int64(0), "\(item.name), steady"), (Int64(10_000_000), "held for a second more")].map { start, text in
            var line = Components.Schemas.LyricLine()
            (line.start, line.text) = (start, text)
            return line
        }
        var dto = Components.Schemas.LyricDto()
        (dto.metadata, dto.lyrics) = (.init(value1: metadata), lines)
        return .ok(.init(body: .json(dto)))
    }

    /// Test hook: sets a resume position (as progress reports would).
    func setPosition(userId: String, itemId: String, ticks: Int64) -> Bool {
        guard let item = library.item(itemId) else { return false }
        let data = state.updateItemData(userId: userId, itemId: item.id) { $0.positionTicks = ticks; $0.lastPlayed = Date() }
        generation.withLock { $0 += 1 }
        _ = hub.send(SocketHub.envelope(type: "UserDataChanged", dataJSON: #"{"UserId":"\#(userId)","UserDataList":[{"ItemId":"\#(item.id)","Played":\#(data.played),"IsFavorite":\#(data.favorite),"PlaybackPositionTicks":\#(ticks),"PlayCount":\#(data.playCount)}]}"#)) { $0.userId == userId }
        return true
    }

    // MARK: images

    func getItemImage(_ input: Operations.GetItemImage.Input) async throws -> Operations.GetItemImage.Output {
        guard let item = library.item(input.path.itemId), input.path.imageType.value1 == "Primary", let tag = item.posterTag, let path = item.posterPath,
              input.query.tag == nil || input.query.tag == tag, let bytes = FileManager.default.contents(atPath: path) else {
            return .notFound(.init(body: .json(Self.notFound)))
        }
        return .ok(.init(body: .image_Ast_(HTTPBody(Array(bytes)))))
    }
}
