import FarcastSupport
import Synchronization
import Testing
@testable import Jellyfin

struct ItemPageSequenceTests {
    /// A library of `total` items served in pages, recording each request.
    final class FakeServer: Sendable {
        let total: Int
        let requests = Mutex<[(start: Int, count: Int, wantTotal: Bool)]>([])
        init(total: Int) { self.total = total }

        func fetch(_ query: ItemQuery, _ start: Int, _ count: Int, _ wantTotal: Bool) async throws -> ItemPage {
            requests.withLock { $0.append((start, count, wantTotal)) }
            let end = min(total, start + count)
            let items = (start..<max(start, end)).map { JellyfinItem(id: String(format: "%032x", $0), name: "Item \($0)", kind: .movie) }
            return ItemPage(items: items, startIndex: start, totalRecordCount: wantTotal ? total : nil)
        }
    }

    func sequence(_ server: FakeServer, pageSize: Int, limit: Int? = nil, start: Int = 0) -> ItemPageSequence {
        var query = ItemQuery()
        query.pageSize = pageSize
        query.limit = limit
        query.startIndex = start
        return ItemPageSequence(query: query, fetch: server.fetch)
    }

    @Test func walksEveryPageAndAsksForTheTotalOnlyOnce() async throws {
        let server = FakeServer(total: 1050)
        var names: [String] = []
        for try await item in ItemSequence(pages: sequence(server, pageSize: 200)) { names.append(item.name) }
        #expect(names.count == 1050)
        #expect(names.first == "Item 0" && names.last == "Item 1049")
        let requests = server.requests.withLock { $0 }
        #expect(requests.map(\.start) == [0, 200, 400, 600, 800, 1000])
        #expect(requests.map(\.count) == [200, 200, 200, 200, 200, 50], "the last page asks only for what is left")
        #expect(requests.map(\.wantTotal) == [true, false, false, false, false, false])
    }

    @Test func stopsAtTheLimitWithoutOverFetching() async throws {
        let server = FakeServer(total: 1000)
        var count = 0
        var totals: [Int?] = []
        for try await page in sequence(server, pageSize: 30, limit: 75) {
            count += page.items.count
            totals.append(page.totalRecordCount)
        }
        #expect(count == 75)
        #expect(totals == [1000, 1000, 1000])
        #expect(server.requests.withLock { $0.map(\.count) } == [30, 30, 15])
    }

    @Test func anEmptyLibraryIsOneRequest() async throws {
        let server = FakeServer(total: 0)
        var pages = 0
        for try await _ in sequence(server, pageSize: 100) { pages += 1 }
        #expect(pages == 1)
        #expect(server.requests.withLock { $0.count } == 1)
    }

    @Test func startsWhereAsked() async throws {
        let server = FakeServer(total: 10)
        var ids: [String] = []
        for try await item in ItemSequence(pages: sequence(server, pageSize: 4, start: 7)) { ids.append(item.name) }
        #expect(ids == ["Item 7", "Item 8", "Item 9"])
    }

    @Test func aShortPageEndsTheListingEvenWithoutATotal() async throws {
        // A server that never reports a total (EnableTotalRecordCount ignored) still ends.
        let calls = Locked(0)
        let pages = ItemPageSequence(query: { var q = ItemQuery(); q.pageSize = 10; return q }()) { _, start, count, _ in
            calls.withLock { $0 += 1 }
            let n = start >= 20 ? 3 : count
            return ItemPage(items: (0..<n).map { JellyfinItem(id: "\(start + $0)", name: "", kind: .audio) }, startIndex: start, totalRecordCount: nil)
        }
        var seen = 0
        for try await page in pages { seen += page.items.count }
        #expect(seen == 23)
        #expect(calls.withLock { $0 } == 3)
    }

    @Test func anErrorReachesTheCaller() async throws {
        struct Boom: Error {}
        let pages = ItemPageSequence(query: ItemQuery()) { _, start, count, _ in
            if start > 0 { throw Boom() }
            return ItemPage(items: (0..<count).map { JellyfinItem(id: "\($0)", name: "", kind: .audio) }, startIndex: 0, totalRecordCount: 1000)
        }
        var seen = 0
        await #expect(throws: Boom.self) {
            for try await page in pages { seen += page.items.count }
        }
        #expect(seen == 200)
    }
}
