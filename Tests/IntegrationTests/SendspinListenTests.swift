import FarcastSupport
import Foundation
import Logging
import NIOCore
import Sendspin
import Synchronization
import Testing
import WSClient

/// Server-initiated Sendspin: farcast listens, aiosendspin's `sendspin serve --client URL` dials
/// it (loopback, inside the test namespace).
@Suite(.tags(.timing), .serialized, .timeLimit(.minutes(3)))
struct SendspinListenTests {
    /// A value several tasks share.
    final class Shared<Value: Sendable>: Sendable {
        let lock: Mutex<Value>
        init(_ value: Value) { lock = Mutex(value) }
        var value: Value { lock.withLock { $0 } }
        func set(_ value: Value) { lock.withLock { $0 = value } }
        func setIfNil<T>(_ value: T) where Value == T? { lock.withLock { if $0 == nil { $0 = value } } }
    }

    /// Collects log messages, to see what the player decided.
    final class LogRecorder: LogHandler, @unchecked Sendable {
        // @unchecked: the messages live behind their own lock; the rest is set once.
        let messages = Mutex<[String]>([])
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .debug
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let extra = event.metadata.map { $0.isEmpty ? "" : " \($0)" } ?? ""
            messages.withLock { $0.append(event.message.description + extra) }
        }
        var all: [String] { messages.withLock { $0 } }
    }

    /// Runs `listen` on a free port, starts the servers `dial` makes once it is up, and returns
    /// the report with what was logged.
    static func listen(seconds: Double, store: PlayerStore? = nil, wav: String, configure: (inout SendspinPlayer.Options) -> Void = { _ in },
                       dial: @escaping @Sendable (String) throws -> [SendspinServer]) async throws -> (SendspinPlayer.Report, [String], [SendspinServer]) {
        var options = SendspinPlayer.Options()
        options.name = "farcast-listener"
        options.duration = .milliseconds(Int(seconds * 1000))
        options.store = store
        configure(&options)
        let player = SendspinPlayer(options: options)
        let recorder = LogRecorder()
        let logger = Logger(label: "test") { _ in recorder }
        let port = Shared<Int?>(nil)
        async let report = player.listen(host: "127.0.0.1", port: 0, path: "/sendspin", sink: WAVSink(path: wav), logger: logger,
                                         ready: { bound in port.set(bound) })
        let deadline = ContinuousClock.now + .seconds(10)
        while port.value == nil && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let bound = try #require(port.value, "the listener never came up")
        // `dial` blocks (it starts processes, sleeps, waits): run it on a thread of its own so that
        // the cooperative pool (two threads on a two-core machine) stays free for the player's timers.
        let url = "ws://127.0.0.1:\(bound)/sendspin"
        let servers = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[SendspinServer], Error>) in
            Thread { continuation.resume(with: Result { try dial(url) }) }.start()
        }
        return (try await report, recorder.all, servers)
    }

    @Test func aDialingServerIsAdmittedAndPlaysInSync() async throws {
        let folder = try TemporaryFolder()
        let store = PlayerStore(directory: StateDirectory(path: folder.path + "/state"))
        let (report, log, servers) = try await Self.listen(seconds: 15, store: store, wav: folder.path + "/listen.wav") { url in
            [try SendspinServer(name: "dialer", dialing: [url])]
        }
        #expect(report.serverName == "dialer")
        #expect(report.codec == "pcm")
        #expect(report.chunksPlayed > 250, "played \(report.chunksPlayed)")
        #expect(report.chunksLate == 0 && report.chunksDropped == 0)
        #expect(report.outputErrorsMeasured > 50)
        #expect(report.maxOutputErrorUs <= 1000, "max output error \(report.maxOutputErrorUs) µs")
        try SendspinServerTests.expectUnbrokenTone(folder.path + "/listen.wav")
        #expect(store.settings().lastPlaybackServerID != nil, "the playing server is remembered")
        #expect(servers[0].complianceComplaints.isEmpty, "\(servers[0].complianceComplaints)")
        #expect(log.contains { $0.contains("listening for Sendspin servers") })
    }

    @Test func aServerThatWantsToPlayTakesOverAndTheHolderIsToldGoodbye() async throws {
        let folder = try TemporaryFolder()
        let (report, log, _) = try await Self.listen(seconds: 16, wav: folder.path + "/two.wav") { url in
            let first = try SendspinServer(name: "first", dialing: [url])
            Thread.sleep(forTimeInterval: 5)
            let second = try SendspinServer(name: "second", source: "sine=frequency=880:sample_rate=48000", dialing: [url])
            return [first, second]
        }
        #expect(report.serverName == "second", "the newcomer that wants to play holds the player at the end")
        #expect(log.contains { $0.contains("another_server") }, "the displaced server was told goodbye: \(log.suffix(20))")
        #expect(report.chunksLate == 0)
    }

    @Test func aConnectionThatNeverActivatesIsDropped() async throws {
        let folder = try TemporaryFolder()
        let firstMessage = Shared<String?>(nil)
        let closedAfter = Shared<Duration?>(nil)
        let (_, log, _) = try await Self.listen(seconds: 6, wav: folder.path + "/none.wav",
                                                configure: { $0.provisionalTimeout = .seconds(2) }) { url in
            // A "server" that opens the WebSocket, reads the listener's first message and then
            // says nothing: no server/init, so no handshake and no activation.
            let started = ContinuousClock.now
            let done = DispatchSemaphore(value: 0)
            Task {
                _ = try? await WebSocketClient.connect(url: url, logger: Logger(label: "silent-server")) { inbound, _, _ in
                    for try await message in inbound.messages(maxSize: 1 << 16) {
                        if case .text(let text) = message { firstMessage.setIfNil(text) }
                    }
                }
                closedAfter.set(ContinuousClock.now - started)
                done.signal()
            }
            _ = done.wait(timeout: .now() + 10)
            return []
        }
        let first = try #require(firstMessage.value)
        #expect(first.contains("client/init"), "the listening client speaks first: \(first)")
        let closed = try #require(closedAfter.value)
        #expect(closed >= .milliseconds(1800) && closed < .seconds(6), "dropped after \(closed)")
        #expect(log.contains { $0.contains("no server/activate") })
    }
}
