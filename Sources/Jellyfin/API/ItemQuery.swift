/// What to list: the filters and order of a `GET /Items` call, and how to page through it.
public struct ItemQuery: Sendable, Hashable {
    /// List this folder's (library's, series', album's) items.
    public var parentId: String?
    /// Only these kinds (empty: all).
    public var types: [ItemKind] = []
    /// Descend into sub-folders.
    public var recursive = false
    public var sortBy: [ItemSortField] = [.sortName]
    public var descending = false
    public var searchTerm: String?
    public var favouritesOnly = false
    /// true: only played; false: only unplayed; nil: both.
    public var played: Bool?
    /// Extra `ItemFields` to ask for (`Overview`, `Genres`, `MediaStreams`, `Path`, …).
    public var fields: [String] = []
    /// Items per request (the server's cost and our memory both scale with it).
    public var pageSize = 200
    /// Stop after this many items in all (nil: everything).
    public var limit: Int?
    public var startIndex = 0

    public init(parentId: String? = nil, types: [ItemKind] = [], recursive: Bool = false) {
        self.parentId = parentId
        self.types = types
        self.recursive = recursive
    }

    /// The order a listing of a folder of `kind` takes when the user has not chosen one, as
    /// Jellyfin's own apps list it: a series' seasons, a season's episodes and an album's tracks
    /// by their numbers (season, then episode or disc, then track), everything else by name.
    public static func defaultSort(inside kind: ItemKind) -> [ItemSortField] {
        [.series, .season, .musicAlbum].contains(kind) ? [.parentIndexNumber, .indexNumber, .sortName] : [.sortName]
    }
}

/// One page of a listing: its items, where it starts, and the total the server reported on the
/// first page (nil when it was not asked for).
public struct ItemPage: Sendable {
    public var items: [JellyfinItem]
    public var startIndex: Int
    public var totalRecordCount: Int?
}

/// The pages of a listing, fetched as they are consumed: while the caller works on one page,
/// the next is already on its way (one request ahead, never more, so memory stays at two pages
/// whatever the library's size). Ends at the limit, at the total, or at a short page.
public struct ItemPageSequence: AsyncSequence, Sendable {
    public typealias Element = ItemPage
    let query: ItemQuery
    let fetch: @Sendable (ItemQuery, _ startIndex: Int, _ count: Int, _ wantTotal: Bool) async throws -> ItemPage

    public func makeAsyncIterator() -> Iterator { Iterator(sequence: self) }

    public struct Iterator: AsyncIteratorProtocol {
        let sequence: ItemPageSequence
        var nextIndex: Int
        var delivered = 0
        var total: Int?
        var finished = false
        var ahead: Prefetch?

        init(sequence: ItemPageSequence) {
            self.sequence = sequence
            nextIndex = sequence.query.startIndex
        }

        /// Cancels a request still in flight when the caller stops early.
        final class Prefetch: Sendable {
            let task: Task<ItemPage, any Error>
            let start: Int
            init(start: Int, _ task: Task<ItemPage, any Error>) {
                self.start = start
                self.task = task
            }
            deinit { task.cancel() }
        }

        private func count(from start: Int, deliveredBefore: Int) -> Int {
            var count = Swift.max(1, sequence.query.pageSize)
            if let limit = sequence.query.limit { count = Swift.min(count, limit - deliveredBefore) }
            if let total { count = Swift.min(count, total - start) }
            return count
        }

        private func request(start: Int, deliveredBefore: Int, wantTotal: Bool) -> Prefetch {
            let count = count(from: start, deliveredBefore: deliveredBefore)
            let fetch = sequence.fetch
            let query = sequence.query
            return Prefetch(start: start, Task { try await fetch(query, start, count, wantTotal) })
        }

        public mutating func next() async throws -> ItemPage? {
            guard !finished else { return nil }
            if let limit = sequence.query.limit, delivered >= limit { finished = true; return nil }
            if let total, nextIndex >= total { finished = true; return nil }
            let current = ahead ?? request(start: nextIndex, deliveredBefore: delivered, wantTotal: total == nil)
            ahead = nil
            let asked = count(from: current.start, deliveredBefore: delivered)
            var page = try await withTaskCancellationHandler {
                try await current.task.value
            } onCancel: {
                current.task.cancel()
            }
            if total == nil { total = page.totalRecordCount }
            if let limit = sequence.query.limit, delivered + page.items.count > limit {
                page.items.removeLast(delivered + page.items.count - limit)
            }
            page.totalRecordCount = total
            delivered += page.items.count
            nextIndex = current.start + page.items.count
            let short = page.items.count < asked || page.items.isEmpty
            if short || (total.map { nextIndex >= $0 } ?? false) || (sequence.query.limit.map { delivered >= $0 } ?? false) {
                finished = true
            } else {
                ahead = request(start: nextIndex, deliveredBefore: delivered, wantTotal: false)
            }
            return page
        }
    }
}

/// The items of a listing one by one, over `ItemPageSequence` (same paging and prefetch).
public struct ItemSequence: AsyncSequence, Sendable {
    public typealias Element = JellyfinItem
    let pages: ItemPageSequence

    public func makeAsyncIterator() -> Iterator { Iterator(pages: pages.makeAsyncIterator()) }

    public struct Iterator: AsyncIteratorProtocol {
        var pages: ItemPageSequence.Iterator
        var buffer: [JellyfinItem] = []
        var position = 0

        public mutating func next() async throws -> JellyfinItem? {
            while position >= buffer.count {
                guard let page = try await pages.next() else { return nil }
                buffer = page.items
                position = 0
            }
            defer { position += 1 }
            return buffer[position]
        }
    }
}
