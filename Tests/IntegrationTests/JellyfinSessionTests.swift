import FarcastSupport
import Foundation
import Jellyfin
import Synchronization
import Testing

/// The Jellyfin library against the stand-in (no real Jellyfin server can run here): the live
/// session's reconnects and sign-out, answers a newer server might send, and malformed answers.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct JellyfinSessionTests {
    static let identity = ClientIdentity(client: "Farcast Tests", device: "test box", deviceId: "0123456789abcdef0123456789abcdef", version: "0.1.0")

    func signIn(_ server: JellyfinStandInServer, transport: JellyfinTransport = JellyfinTransport(timeout: .seconds(20))) async throws -> JellyfinSession {
        let jellyfin = JellyfinServer(address: try ServerAddress(parsing: server.url), identity: Self.identity, transport: transport)
        return try await jellyfin.signIn(userName: "demo", password: try server.password)
    }

    /// Collects events in the background until `condition` holds or the timeout passes.
    final class EventLog: Sendable {
        let events: Locked<[LiveEvent]>
        let ended: Locked<Ended>
        let task: Task<Void, Never>

        struct Ended: Sendable {
            var done = false
            /// The stream's error, as the library's type when it is one.
            var error: JellyfinError?
            var otherError: String?
        }

        init(_ stream: AsyncThrowingStream<LiveEvent, any Error>) {
            let events = Locked<[LiveEvent]>([]), ended = Locked<Ended>(Ended())
            self.events = events
            self.ended = ended
            task = Task {
                do {
                    for try await event in stream { events.withLock { $0.append(event) } }
                    ended.withLock { $0 = Ended(done: true) }
                } catch let error as JellyfinError {
                    ended.withLock { $0 = Ended(done: true, error: error) }
                } catch {
                    ended.withLock { $0 = Ended(done: true, otherError: "\(error)") }
                }
            }
        }

        func wait(_ what: String, timeout: Double = 20, until condition: ([LiveEvent]) -> Bool) async throws {
            let deadline = Date().addingTimeInterval(timeout)
            while !condition(events.withLock { $0 }) {
                guard Date() < deadline else {
                    Issue.record("timed out waiting for \(what); saw \(events.withLock { $0 })")
                    throw CancellationError()
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }

        var connections: Int { events.withLock { $0.filter { if case .connected = $0 { true } else { false } }.count } }
        deinit { task.cancel() }
    }

    @Test func theSocketKeepsAliveAndReconnectsWhenTheServerComesBack() async throws {
        let server = try JellyfinStandInServer(keepAlive: 2)
        let session = try await signIn(server)
        var options = LiveSessionCore.Options(subscribeToSessions: true, sessionsInterval: (0, 500))
        options.initialBackoff = .milliseconds(200)
        options.maxBackoff = .seconds(1)
        let log = EventLog(session.liveEvents(options: options))
        try await log.wait("the first connection") { events in events.contains { if case .connected = $0 { true } else { false } } }
        try await log.wait("ForceKeepAlive and the server's answer to our KeepAlive") { events in
            events.contains(.message(.forceKeepAlive(seconds: 2))) && events.contains(.message(.keepAlive))
        }
        try await log.wait("a Sessions message listing this client as controllable") { events in
            events.contains { event in
                if case .message(.sessions(let sessions)) = event {
                    return sessions.contains { $0.deviceId == Self.identity.deviceId && $0.supportsRemoteControl }
                }
                return false
            }
        }
        // Several keep-alive periods pass without the server dropping us.
        try await Task.sleep(for: .seconds(5))
        #expect(log.connections == 1)

        server.stop()
        try await log.wait("the disconnect") { events in events.contains { if case .disconnected = $0 { true } else { false } } }
        try await Task.sleep(for: .seconds(1))
        try server.restart()
        try await log.wait("a second connection after the restart", timeout: 30) { _ in log.connections >= 2 }
        // The same token works after the restart (tokens are kept, as a real server's are).
        let views = try await session.views()
        #expect(views.count == 3)
        #expect(log.ended.withLock { $0.done } == false)
    }

    @Test func aRevokedTokenEndsTheLiveSessionWithSignedOut() async throws {
        let server = try JellyfinStandInServer(keepAlive: 60)
        let session = try await signIn(server)
        var options = LiveSessionCore.Options(subscribeToSessions: false)
        options.initialBackoff = .milliseconds(200)
        let log = EventLog(session.liveEvents(options: options))
        try await log.wait("the connection") { _ in log.connections == 1 }
        try server.hook("/StandIn/Revoke?user=demo")
        let deadline = Date().addingTimeInterval(20)
        while !log.ended.withLock({ $0.done }) && Date() < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let ended = log.ended.value
        guard case .signedOutByServer = ended.error else {
            Issue.record("expected signedOutByServer, got \(String(describing: ended.error)) \(ended.otherError ?? "")")
            return
        }
        #expect(ended.error?.description.contains("signed out by the server") == true)
        await #expect(throws: JellyfinError.signedOutByServer(url: server.url)) { _ = try await session.views() }
    }

    @Test func aPageWithValuesFromANewerServerDecodes() async throws {
        let server = try JellyfinStandInServer()
        let session = try await signIn(server)
        try server.hook("/StandIn/Fault?path=/Items&mode=unknown-enums")
        var items: [JellyfinItem] = []
        for try await item in session.items(ItemQuery(types: [.movie], recursive: true)) { items.append(item) }
        #expect(items.count == 2)
        let future = try #require(items.first)
        #expect(future.kind.rawValue == "HolographicMovie" && !future.kind.isKnown)
        #expect(future.mediaStreams.first?.videoRangeType == VideoRangeType(rawValue: "DOVIWithSomethingNew"))
        #expect(future.mediaStreams.first?.videoRangeType?.isKnown == false)
        #expect(future.mediaStreams.last?.type == "Lidar")
        #expect(future.dateCreated == Date(timeIntervalSince1970: 1_924_992_000))
    }

    @Test func malformedAnswersAreTypedErrors() async throws {
        let server = try JellyfinStandInServer()
        let session = try await signIn(server, transport: JellyfinTransport(timeout: .seconds(20), maxResponseBytes: 4 << 20))
        func listing() async throws -> Int {
            var count = 0
            for try await page in session.itemPages(ItemQuery(types: [.movie], recursive: true)) { count += page.items.count }
            return count
        }
        for mode in ["truncated", "wrong-types", "not-json"] {
            try server.hook("/StandIn/Fault?path=/Items&mode=\(mode)")
            do {
                _ = try await listing()
                Issue.record("\(mode): expected an error")
            } catch let error as JellyfinError {
                guard case .malformedResponse(let operation, let reason) = error else { Issue.record("\(mode): \(error)"); continue }
                #expect(operation == "list items")
                #expect(!reason.isEmpty)
                #expect(!error.description.contains("DecodingError"), "\(error.description)")
            }
        }
        try server.hook("/StandIn/Fault?path=/Items&mode=status-500")
        await #expect(throws: JellyfinError.unexpectedStatus(operation: "list items", status: 500)) { _ = try await listing() }

        for mode in ["huge", "huge-declared"] {
            try server.hook("/StandIn/Fault?path=/Items&mode=\(mode)")
            let started = Date()
            do {
                _ = try await listing()
                Issue.record("\(mode): expected an error")
            } catch let error as JellyfinError {
                guard case .responseTooLarge(_, let limit) = error else { Issue.record("\(mode): \(error)"); continue }
                #expect(limit == 4 << 20)
            }
            #expect(Date().timeIntervalSince(started) < 15, "\(mode) was refused quickly")
        }
        try server.hook("/StandIn/Fault?path=/Items&mode=clear")
        #expect(try await listing() == 3)
    }

    @Test func theAuthRulesOfA12ServerOnDefaults() throws {
        let server = try JellyfinStandInServer()
        let signIn = try run(try requireExecutable("curl", package: "curl"), [
            "-sS", "-X", "POST", "http://127.0.0.1:\(server.port)/Users/AuthenticateByName",
            "-H", "Content-Type: application/json",
            "-H", #"Authorization: MediaBrowser Client="curl", Device="test", DeviceId="curl-1", Version="1""#,
            "--data-binary", #"{"Username":"demo","Pw":"\#(try server.password)"}"#,
        ])
        let object = try JSONSerialization.jsonObject(with: Data(signIn.stdout.utf8)) as? [String: Any]
        let token = try #require(object?["AccessToken"] as? String, "\(signIn.stdout) \(signIn.stderr)")
        #expect(token.count == 32 && token.allSatisfy(\.isHexDigit))
        #expect((object?["User"] as? [String: Any])?["Id"] as? String == object?["User"].flatMap { ($0 as? [String: Any])?["Id"] as? String })

        #expect(try server.get("/UserViews").status == 401, "no token")
        #expect(try server.get("/UserViews", headers: ["Authorization": #"MediaBrowser Client="c", Device="d", DeviceId="e", Version="1", Token="\#(token)""#]).status == 200, "header")
        #expect(try server.get("/UserViews?ApiKey=\(token)").status == 200, "ApiKey=")
        #expect(try server.get("/UserViews?api_key=\(token)").status == 401, "api_key= is refused, as 12.0 does")
        #expect(try server.get("/UserViews", headers: ["X-Emby-Token": token]).status == 401, "legacy header refused")
        #expect(try server.get("/UserViews", headers: ["Authorization": #"Emby Token="\#(token)""#]).status == 401, "legacy scheme refused")
        #expect(try server.get("/System/Info/Public").status == 200, "public")
        // Real response shapes: 7-digit fractions and dash-less ids.
        let views = try server.get("/Items?ApiKey=\(token)&recursive=true&fields=DateCreated")
        #expect(views.body.range(of: #""DateCreated":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z""#, options: .regularExpression) != nil, "\(views.body.prefix(400))")
        #expect(views.body.range(of: #""Id":"[0-9a-f]{32}""#, options: .regularExpression) != nil)
    }
}
