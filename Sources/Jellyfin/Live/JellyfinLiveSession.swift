import FarcastNIO
import FarcastSupport
internal import Foundation
import HTTPTypes
import Logging
import NIOCore
import Synchronization
import WSClient

extension JellyfinSession {
    /// The live session: the WebSocket at `/socket?ApiKey=…&deviceId=…`, kept alive as the server
    /// asks, reconnected with back-off when it drops, with this client's capabilities posted on
    /// each connect. Events arrive in order; the stream ends when the consumer stops iterating
    /// (the socket is closed) or with `JellyfinError.signedOutByServer` once the token is refused.
    /// `clock` times the keep-alives and the server's silence (tests may pass a `ManualClock`).
    public func liveEvents(options: LiveSessionCore.Options = LiveSessionCore.Options(), clock: any MonotonicClock = SystemClock(),
                           logger: Logger = Logger(label: "farcast.jellyfin.socket")) -> AsyncThrowingStream<LiveEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: LiveEvent.self, throwing: (any Error).self)
        let task = Task {
            let runner = LiveSocketRunner(session: self, options: options, clock: clock, logger: logger, events: continuation)
            do {
                try await runner.run()
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }
}

/// Drives `LiveSessionCore` over WSClient connections, one after another.
struct LiveSocketRunner: Sendable {
    let session: JellyfinSession
    let options: LiveSessionCore.Options
    let clock: any MonotonicClock
    let logger: Logger
    let events: AsyncThrowingStream<LiveEvent, any Error>.Continuation

    /// Messages larger than this close the socket (the server's own frames are a few KiB).
    static let maxMessageBytes = 4 << 20

    func run() async throws {
        let core = Locked(LiveSessionCore(options: options))
        guard var url = session.authenticatedURL(path: "/socket", query: [("deviceId", session.server.identity.deviceId)], webSocket: true) else {
            throw JellyfinError.invalidAddress(session.server.address.description, reason: "cannot build the WebSocket URL")
        }
        let shownURL = url.absoluteString.replacingOccurrences(of: session.accessToken, with: "…")
        // Through a tunnel: dial its local end, still naming the server in TLS (SNI and the
        // certificate check) as the HTTP requests do.
        var sniHostname: String?
        if let host = url.host, let connectTo = session.server.transport.connectOverride[host],
           var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) {
            parts.host = connectTo
            if let rewritten = parts.url {
                url = rewritten
                sniHostname = host
            }
        }
        while !Task.isCancelled {
            var reason = "closed by the server"
            do {
                // Capabilities first: the server then lists this session as controllable.
                try await session.postCapabilities()
                var configuration = WebSocketClientConfiguration(maxFrameSize: Self.maxMessageBytes)
                configuration.closeTimeout = .seconds(2)
                configuration.sniHostname = sniHostname
                configuration.additionalHeaders[.authorization] = AuthorizationHeader.value(identity: session.server.identity, token: session.accessToken)
                let closeFrame = try await WebSocketClient.connect(url: url.absoluteString, configuration: configuration, logger: logger) { inbound, outbound, _ in
                    events.yield(.connected(shownURL))
                    try await self.runConnection(inbound: inbound, outbound: outbound, core: core, clock: clock)
                }
                if let closeFrame { reason = "closed by the server (\(closeFrame.closeCode))" }
            } catch let error as JellyfinError {
                if case .signedOutByServer = error { throw error }
                reason = error.description
            } catch is CancellationError {
                return
            } catch let error as StaleConnection {
                reason = error.description
            } catch {
                reason = JellyfinError.reason(of: error)
            }
            if Task.isCancelled { return }
            // A refused upgrade looks like any other failure: ask the REST API whether the token
            // still counts, so a revoked one ends the stream instead of retrying for ever.
            do {
                _ = try await session.currentUser()
            } catch .signedOutByServer(let url) {
                throw JellyfinError.signedOutByServer(url: url)
            } catch {
                // Unreachable or starting: retry below.
            }
            let delay = core.withLock { $0.disconnected() }
            events.yield(.disconnected(reason: reason, retryIn: delay))
            do { try await Task.sleep(for: delay) } catch { return }
        }
    }

    struct StaleConnection: Error, CustomStringConvertible {
        var description: String { "the server stopped answering keep-alives" }
    }

    private func runConnection(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, core: Locked<LiveSessionCore>,
                               clock: any MonotonicClock) async throws {
        let writer = OrderedWriter<String>()
        let events = self.events
        /// Runs the core under its lock and queues what it said in the same step — frames in
        /// the core's order, whichever task (reader or timer) ran it; a stale connection is
        /// thrown after the lock is let go.
        @Sendable func step(_ body: (inout LiveSessionCore) -> [LiveSessionCore.Action]) throws {
            let stale = core.withLock { c -> Bool in
                var stale = false
                for action in body(&c) {
                    switch action {
                    case .send(let text): try? writer.enqueue(text, bytes: text.utf8.count)
                    case .deliver(let message): events.yield(.message(message))
                    case .report(let problem): events.yield(.problem(problem))
                    case .closeStale: stale = true
                    }
                }
                return stale
            }
            if stale { throw StaleConnection() }
        }
        try step { $0.connected(at: clock.now()) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            // The one writer.
            group.addTask {
                try await writer.run { try await outbound.write(.text($0)) }
            }
            // The timer: wakes for the core's next deadline, at least every 250 ms (a message
            // can move the deadline earlier; a quarter second late is harmless for keep-alives).
            group.addTask {
                while !Task.isCancelled {
                    let wait = core.withLock { $0.nextDeadline }.map { max($0.nanoseconds(since: clock.now()), 0) } ?? 250_000_000
                    try await Task.sleep(for: .nanoseconds(min(wait, 250_000_000)))
                    try step { $0.tick(at: clock.now()) }
                }
            }
            // The reader.
            group.addTask {
                for try await message in inbound.messages(maxSize: Self.maxMessageBytes) {
                    guard case .text(let text) = message else { continue }
                    try step { $0.received(text, at: clock.now()) }
                }
            }
            // Whichever ends first (the reader at close, the timer on a stale socket) ends all.
            defer { writer.finish() }
            try await group.next()
            group.cancelAll()
        }
    }
}
