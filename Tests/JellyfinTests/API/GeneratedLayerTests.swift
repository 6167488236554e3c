import Foundation
import HTTPTypes
import OpenAPIRuntime
import Synchronization
import Testing
@testable import Jellyfin

/// The generated client through the readable API, with canned answers instead of a network:
/// what a newer server may add decodes, dates in all three forms decode, and broken answers are
/// typed errors (never a crash).
struct GeneratedLayerTests {
    /// Answers every request with one canned response and records the requests.
    final class CannedTransport: ClientTransport {
        let status: Int
        let body: [UInt8]
        let contentType: String
        let requests = Mutex<[HTTPRequest]>([])
        let baseURLs = Mutex<[URL]>([])

        init(status: Int = 200, json: String, contentType: String = "application/json; charset=utf-8") {
            self.status = status
            self.body = Array(json.utf8)
            self.contentType = contentType
        }

        func send(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String) async throws -> (HTTPResponse, HTTPBody?) {
            requests.withLock { $0.append(request) }
            baseURLs.withLock { $0.append(baseURL) }
            var response = HTTPResponse(status: .init(code: status))
            response.headerFields[.contentType] = contentType
            return (response, HTTPBody(self.body))
        }
    }

    func session(_ transport: CannedTransport, maxBytes: Int = 64 << 20) throws -> JellyfinSession {
        let server = JellyfinServer(address: try ServerAddress(parsing: "http://jellyfin.test:8096/jf"),
                                    identity: ClientIdentity(client: "Farcast", device: "Test Box", deviceId: "d1", version: "0.1.0"),
                                    transport: JellyfinTransport(clientTransport: transport, maxResponseBytes: maxBytes))
        return server.session(userId: "u1", userName: "demo", accessToken: "tok", serverId: "s1")
    }

    static let newerServerPage = #"""
    {"Items":[
      {"Name":"Future Film","Id":"fedcba9876543210fedcba9876543210","Type":"Movie","IsFolder":false,"ServerId":"s1",
       "DateCreated":"2024-11-21T21:04:49.1234567Z","PremiereDate":"2024-11-21T00:00:00Z",
       "MediaStreams":[{"Type":"Video","Codec":"hevc","VideoRange":"HDR","VideoRangeType":"DOVIWithSomethingNew","Width":3840,"Height":2160},
                       {"Type":"Audio","Codec":"eac3","Channels":6,"AudioSpatialFormat":"DolbyAtmosNext"}],
       "LocationType":"FileSystem","MediaType":"Video","VideoType":"VideoFile","PlayAccess":"Full",
       "ImageTags":{"Primary":"aaaa"},"ImageBlurHashes":{"Primary":{"aaaa":"LEHV6nWB2yk8pyo0adR*.7kCMdnj"}},
       "UserData":{"Played":true,"IsFavorite":false,"PlaybackPositionTicks":0,"PlayCount":2,"Key":"k","ItemId":"fedcba9876543210fedcba9876543210",
                   "LastPlayedDate":"2024-11-22T10:00:00.123Z"}},
      {"Name":"Odd Thing","Id":"0123456789abcdef0123456789abcdef","Type":"HolographicMovie","IsFolder":false,"CollectionType":"holograms",
       "ExtraType":"BehindTheHologram","Video3DFormat":"HolographicSBS","IsoType":"Bluray5D","ChannelType":"Quantum"}
    ],"TotalRecordCount":2,"StartIndex":0}
    """#

    @Test func aPageWithValuesFromANewerServerDecodes() async throws {
        let transport = CannedTransport(json: Self.newerServerPage)
        var items: [JellyfinItem] = []
        for try await item in try session(transport).items(ItemQuery(types: [.movie], recursive: true)) { items.append(item) }
        #expect(items.count == 2)
        #expect(items[0].mediaStreams[0].videoRangeType?.rawValue == "DOVIWithSomethingNew")
        #expect(items[0].mediaStreams[0].videoRangeType?.isKnown == false)
        #expect(items[0].userData?.played == true && items[0].userData?.playCount == 2)
        #expect(items[0].blurHash(for: .primary) == "LEHV6nWB2yk8pyo0adR*.7kCMdnj")
        // All three date forms on one item.
        #expect(abs((items[0].dateCreated?.timeIntervalSince1970 ?? 0) - 1_732_223_089.1234567) < 1e-6)
        #expect(items[0].premiereDate?.timeIntervalSince1970 == 1_732_147_200)
        #expect(abs((items[0].userData?.lastPlayedDate?.timeIntervalSince1970 ?? 0) - 1_732_269_600.123) < 1e-6)
        #expect(items[1].kind.rawValue == "HolographicMovie" && !items[1].kind.isKnown)
        #expect(items[1].collectionType == "holograms")
    }

    @Test func requestsCarryTheHeaderThePascalCaseAcceptAndTheBasePath() async throws {
        let transport = CannedTransport(json: #"{"Items":[],"TotalRecordCount":0,"StartIndex":0}"#)
        _ = try await session(transport).views()
        let request = try #require(transport.requests.withLock { $0.first })
        #expect(request.headerFields[.authorization] == #"MediaBrowser Client="Farcast", Device="Test%20Box", DeviceId="d1", Version="0.1.0", Token="tok""#)
        #expect(request.headerFields[.accept]?.contains("application/json") == true)
        #expect(request.headerFields[.accept]?.contains("CamelCase") == false)
        #expect(transport.baseURLs.withLock { $0.first?.absoluteString } == "http://jellyfin.test:8096/jf")
        #expect(request.path?.hasPrefix("/UserViews?") == true)
        #expect(request.path?.contains("userId=u1") == true)
    }

    @Test func theWebSocketURLUsesApiKeyNeverApiUnderscoreKey() throws {
        let url = try session(CannedTransport(json: "{}")).authenticatedURL(path: "/socket", query: [("deviceId", "d1")], webSocket: true)
        #expect(url?.absoluteString == "ws://jellyfin.test:8096/jf/socket?deviceId=d1&ApiKey=tok")
        #expect(url?.absoluteString.contains("api_key") == false)
    }

    @Test func brokenAnswersAreTypedErrors() async throws {
        let cases: [(String, String)] = [
            ("truncated", #"{"Items":[{"Name":"A","Id":"x"#),
            ("wrong types", #"{"Items":"none","TotalRecordCount":"many"}"#),
            ("an item of the wrong type", #"{"Items":[{"Name":5}],"TotalRecordCount":1}"#),
            ("not JSON", "<html>gateway timeout</html>"),
            ("a bad date", #"{"Items":[{"Name":"A","DateCreated":"last tuesday"}],"TotalRecordCount":1}"#),
        ]
        for (what, body) in cases {
            do {
                _ = try await session(CannedTransport(json: body)).views()
                Issue.record("\(what): expected an error")
            } catch let error as JellyfinError {
                guard case .malformedResponse(let operation, let reason) = error else { Issue.record("\(what): \(error)"); continue }
                #expect(operation == "list libraries", "\(what)")
                #expect(!reason.contains("DecodingError"), "\(what): \(reason)")
            }
        }
    }

    /// Listing reads its pages with `ItemListDecoder` outside the generated operation: the same
    /// request (path, parameters, header) and the same typed errors.
    @Test func listingRequestsAndErrorsMatchTheGeneratedOperations() async throws {
        let transport = CannedTransport(json: #"{"Items":[],"TotalRecordCount":0,"StartIndex":0}"#)
        var query = ItemQuery(types: [.movie, .series], recursive: true)
        query.searchTerm = "a b&c"
        for try await _ in try session(transport).items(query) {}
        let request = try #require(transport.requests.withLock { $0.first })
        #expect(request.headerFields[.authorization] == #"MediaBrowser Client="Farcast", Device="Test%20Box", DeviceId="d1", Version="0.1.0", Token="tok""#)
        #expect(request.headerFields[.accept] == "application/json")
        #expect(transport.baseURLs.withLock { $0.first?.absoluteString } == "http://jellyfin.test:8096/jf")
        let path = try #require(request.path)
        #expect(path.hasPrefix("/Items?userId=u1&recursive=true&includeItemTypes=Movie&includeItemTypes=Series&sortBy=SortName&sortOrder=Ascending&searchTerm=a%20b%26c&fields=PrimaryImageAspectRatio&fields=ChildCount"), "\(path)")
        #expect(path.contains("&startIndex=0&limit=200&enableTotalRecordCount=true&enableImageTypes=Primary&enableImageTypes=Backdrop&enableImageTypes=Thumb&imageTypeLimit=1"), "\(path)")

        func list(_ transport: CannedTransport, maxBytes: Int = 64 << 20) async throws {
            for try await _ in try session(transport, maxBytes: maxBytes).items(ItemQuery(types: [.movie], recursive: true)) {}
        }
        do {
            try await list(CannedTransport(json: #"{"Items":[{"Name":5}]}"#))
            Issue.record("a wrong type must fail")
        } catch let error as JellyfinError {
            guard case .malformedResponse(let operation, let reason) = error else { Issue.record("\(error)"); return }
            #expect(operation == "list items" && reason.contains("expected a string") && reason.contains("byte 18"), "\(reason)")
        }
        await #expect(throws: JellyfinError.malformedResponse(operation: "list items", reason: "the server answered with text/html, not JSON")) {
            try await list(CannedTransport(json: "<html></html>", contentType: "text/html"))
        }
        await #expect(throws: JellyfinError.signedOutByServer(url: "http://jellyfin.test:8096/jf")) {
            try await list(CannedTransport(status: 401, json: ""))
        }
        await #expect(throws: JellyfinError.forbidden(operation: "list items")) {
            try await list(CannedTransport(status: 403, json: ""))
        }
        await #expect(throws: JellyfinError.serverStarting(url: "http://jellyfin.test:8096/jf", retryAfter: nil, message: nil)) {
            try await list(CannedTransport(status: 503, json: ""))
        }
        let item = #"{"Name":"A","Id":"0123456789abcdef0123456789abcdef","Type":"Movie"},"#
        let huge = #"{"Items":["# + String(repeating: item, count: 20_000) + #"{}],"TotalRecordCount":20001}"#
        await #expect(throws: JellyfinError.responseTooLarge(operation: "getItems", limit: 256 << 10)) {
            try await list(CannedTransport(json: huge), maxBytes: 256 << 10)
        }
    }

    @Test func aHugeArrayIsRefusedAtTheBound() async throws {
        let item = #"{"Name":"A","Id":"0123456789abcdef0123456789abcdef","Type":"Movie"},"#
        let huge = #"{"Items":["# + String(repeating: item, count: 20_000) + #"{}],"TotalRecordCount":20001}"#
        await #expect(throws: JellyfinError.responseTooLarge(operation: "GetUserViews", limit: 256 << 10)) {
            _ = try await session(CannedTransport(json: huge), maxBytes: 256 << 10).views()
        }
    }

    @Test func statusesBecomeTheirErrors() async throws {
        await #expect(throws: JellyfinError.signedOutByServer(url: "http://jellyfin.test:8096/jf")) {
            _ = try await session(CannedTransport(status: 401, json: "")).views()
        }
        await #expect(throws: JellyfinError.forbidden(operation: "list libraries")) {
            _ = try await session(CannedTransport(status: 403, json: "")).views()
        }
        await #expect(throws: JellyfinError.notFound(what: "item abc")) {
            _ = try await session(CannedTransport(status: 404, json: "")).item("abc")
        }
        await #expect(throws: JellyfinError.unexpectedStatus(operation: "list libraries", status: 500)) {
            _ = try await session(CannedTransport(status: 500, json: "")).views()
        }
    }

    /// A short fuzz run over the page decoder: random cuts and byte flips of a real page never
    /// crash; each either decodes or is a typed error.
    @Test func fuzzedPagesNeverCrash() async throws {
        var generator = SystemRandomNumberGenerator()
        let page = Array(Self.newerServerPage.utf8)
        for _ in 0..<300 {
            var bytes = page
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                if Bool.random(using: &generator) { bytes[index] = UInt8.random(in: 0x20...0x7E, using: &generator) } else { bytes.removeSubrange(index...) }
                if bytes.isEmpty { break }
            }
            do {
                _ = try await session(CannedTransport(json: String(decoding: bytes, as: UTF8.self))).views()
            } catch let error as JellyfinError {
                // Reaching here without a trap is the point; the error reads as a sentence.
                #expect(!error.description.isEmpty)
            }
        }
    }
}
