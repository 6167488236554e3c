import Foundation
import Hummingbird
import Jellyfin
import NIOCore

/// Routes real servers still answer but leave out of the spec (`[ApiExplorerSettings(IgnoreApi
/// = true)]`, "kept for backwards compatibility"): `/Users/{userId}/Views`,
/// `/Users/{userId}/Items` and `/Users/{userId}/Items/{itemId}`. Older clients, among them
/// jellyfin-apiclient-python, browse through them. Query names match case-insensitively, as
/// ASP.NET binds them.
enum LegacyRoutes {
    static func register(on router: Router<BasicRequestContext>, basePath: String, api: StandInAPI, state: StandInState) {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(JellyfinDateTranscoder.format(date))
        }
        @Sendable func json(_ value: Components.Schemas.BaseItemDtoQueryResult) throws -> Response {
            try jsonData(try encoder.encode(value))
        }
        @Sendable func json(_ value: Components.Schemas.BaseItemDto) throws -> Response {
            try jsonData(try encoder.encode(value))
        }
        @Sendable func jsonData(_ data: Data) throws -> Response {
            var headers = HTTPFields()
            headers[.contentType] = "application/json; charset=utf-8"
            return Response(status: .ok, headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
        }
        @Sendable func authorised(_ request: Request, _ body: @Sendable () async throws -> Response) async throws -> Response {
            let caller = StandInAuthMiddleware.caller(headers: request.headers, path: request.head.path ?? "", state: state)
            guard caller.token != nil else { return Response(status: .unauthorized) }
            return try await Caller.$current.withValue(caller) { try await body() }
        }
        @Sendable func query(_ request: Request) -> [String: String] {
            var result: [String: String] = [:]
            for (key, value) in request.uri.queryParameters { result[String(key).lowercased()] = String(value) }
            return result
        }
        @Sendable func list(_ text: String?) -> [String] { (text ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty } }
        @Sendable func bool(_ text: String?) -> Bool? { text.map { $0.lowercased() == "true" } }

        let prefix = basePath
        router.get("\(prefix)/Users/:userId/Views") { request, _ in
            try await authorised(request) { try json(api.views(fields: nil)) }
        }
        router.get("\(prefix)/Users/:userId/Items") { request, _ in
            try await authorised(request) {
                let q = query(request)
                var listing = StandInAPI.Listing()
                listing.parentId = q["parentid"].flatMap { $0.isEmpty ? nil : $0 }
                listing.recursive = bool(q["recursive"]) ?? false
                listing.types = list(q["includeitemtypes"])
                listing.excludeTypes = list(q["excludeitemtypes"])
                listing.searchTerm = q["searchterm"]
                listing.isFavorite = bool(q["isfavorite"])
                listing.isPlayed = bool(q["isplayed"])
                listing.filters = list(q["filters"])
                listing.sortBy = list(q["sortby"])
                listing.descending = q["sortorder"]?.lowercased().hasPrefix("desc") ?? false
                listing.startIndex = q["startindex"].flatMap { Int($0) } ?? 0
                listing.limit = q["limit"].flatMap { Int($0) }
                listing.fields = list(q["fields"])
                listing.ids = list(q["ids"])
                listing.years = list(q["years"]).compactMap { Int($0) }
                listing.enableTotalRecordCount = bool(q["enabletotalrecordcount"]) ?? true
                return try json(api.list(listing))
            }
        }
        router.get("\(prefix)/Users/:userId/Items/:itemId") { request, context in
            try await authorised(request) {
                guard let id = context.parameters.get("itemId"), let item = api.library.item(id) else { return Response(status: .notFound) }
                return try json(api.library.dto(item, userData: state.itemData(userId: Caller.current?.token?.userId ?? "", itemId: item.id),
                                                fields: [], detail: true))
            }
        }
    }
}
