import FarcastSupport
import Foundation
import Logging
import Sendspin
import Synchronization
import Testing

/// The opt-in legacy wire against aiosendspin 5.3.0, a server that speaks only it: it closes
/// the connection on the encrypted protocol's client/init without a word.
@Suite(.tags(.timing), .serialized, .timeLimit(.minutes(3)))
struct SendspinLegacyTests {
    static func play(_ url: String, allowLegacy: Bool, codec: String = "pcm", store: PlayerStore? = nil, wav: String,
                     seconds: Double = 8, observer: SendspinPlayer.SessionObserver? = nil,
                     trace: (@Sendable ([ChunkTrace]) -> Void)? = nil) async throws -> SendspinPlayer.Report {
        var options = SendspinPlayer.Options()
        options.name = "farcast-legacy"
        options.formats = SendspinPlayer.formats(preferring: codec)
        options.duration = .milliseconds(Int(seconds * 1000))
        options.wire = allowLegacy ? .encryptedOrLegacy : .encrypted
        options.store = store
        options.observer = observer
        return try await SendspinPlayer(options: options).play(url: url, sink: WAVSink(path: wav), logger: Logger(label: "test"), trace: trace)
    }

    /// The late chunks of a trace that were the player's fault: those that arrived with at
    /// least `margin` µs to spare before their moment (their server timestamp on the clock the
    /// player converged to, taken from the last chunk played) and still missed it. A chunk the
    /// server sends after its own moment is late whatever the player does; aiosendspin 5.3.0
    /// sends such chunks within its 2 s grace when its first stream starts slowly.
    static func lateThroughThePlayer(_ traces: [ChunkTrace], margin: Int64 = 40_000) -> (faults: [String], serverLate: Int) {
        guard let last = traces.last(where: { $0.outcome == "played" }) else { return (["no chunk played"], 0) }
        let shift = last.predictedPlayUs - last.serverTimestampUs
        var faults: [String] = []
        var serverLate = 0
        for trace in traces where trace.outcome == "late" {
            let lead = trace.serverTimestampUs + shift - trace.arrivalUs
            if lead >= margin {
                faults.append("chunk \(trace.serverTimestampUs) arrived \(lead / 1000) ms ahead (filter error \(trace.filterErrorUs.map(String.init) ?? "none yet") µs) and was late")
            } else {
                serverLate += 1
            }
        }
        return (faults, serverLate)
    }

    @Test func allowLegacyFallsBackAndPlaysPCMInSync() async throws {
        let folder = try TemporaryFolder()
        let server = try LegacySendspinServer()
        let traces = Mutex<[ChunkTrace]>([])
        let report = try await Self.play(server.url, allowLegacy: true, wav: folder.path + "/legacy.wav", seconds: 12,
                                         trace: { all in traces.withLock { $0 = all } })
        #expect(report.serverName == "legacy-test")
        #expect(report.codec == "pcm" && report.sampleRate == 48000)
        #expect(report.chunksPlayed > 300, "played \(report.chunksPlayed)")
        #expect(report.chunksDropped == 0, "dropped \(report.chunksDropped)")
        // Every chunk that arrived in time played: none was late through the player (a clock
        // synchronized too slowly after the fallback's second connection, a stall). Chunks the
        // server itself sent after their moment are counted, not held against the player; a
        // cold server did that once in a CI run (10 chunks after a 2 s stall of its own).
        let late = Self.lateThroughThePlayer(traces.withLock { $0 })
        #expect(late.faults.isEmpty, "late through the player: \(late.faults.prefix(5)); sent late by the server: \(late.serverLate)")
        #expect(late.serverLate + late.faults.count == report.chunksLate, "every late chunk is in the trace")
        #expect(late.serverLate <= 25, "the server sent \(late.serverLate) chunks after their moment: it stalled for half a second or more")
        #expect(report.maxOutputErrorUs <= 1000, "max output error \(report.maxOutputErrorUs) µs")
        try SendspinServerTests.expectUnbrokenTone(folder.path + "/legacy.wav")
        #expect(server.process.log.contains("ready, roles"), "the server admitted the legacy hello: \(server.process.log.suffix(800))")
        #expect(server.process.log.contains("goodbye"), "the server saw the goodbye: \(server.process.log.suffix(800))")
    }

    /// A server that stalls right after greeting the player (as a cold aiosendspin did in CI,
    /// 2 s between its hello and its stream): the player's first time exchanges go unanswered
    /// while the player's state waits in the server's socket, and the stream starts when the
    /// server wakes. The clock must be synchronized before the first chunks are due: every
    /// chunk that arrived ahead of its moment plays. (Before, the unanswered bursts used up the
    /// two quick ones, the next came 500 ms after the stall, and the stream's first 10 chunks
    /// were lost.)
    @Test func aServerStallingAfterItsHelloLosesNoChunkOfTheStream() async throws {
        let folder = try TemporaryFolder()
        let server = try LegacySendspinServer()
        let pid = server.process.pid
        let traces = Mutex<[ChunkTrace]>([])
        var observer = SendspinPlayer.SessionObserver()
        observer.hello = { _, _ in
            kill(pid, SIGSTOP)
            DispatchQueue.global().asyncAfter(deadline: .now() + 1.5) { kill(pid, SIGCONT) }
        }
        let report = try await Self.play(server.url, allowLegacy: true, wav: folder.path + "/stall.wav", seconds: 6, observer: observer,
                                         trace: { all in traces.withLock { $0 = all } })
        #expect(report.chunksPlayed > 100, "played \(report.chunksPlayed)")
        let late = Self.lateThroughThePlayer(traces.withLock { $0 })
        #expect(late.faults.isEmpty, "late through the player: \(late.faults.prefix(5)); sent late by the server: \(late.serverLate)")
    }

    @Test func flacOverTheLegacyWire() async throws {
        let folder = try TemporaryFolder()
        let server = try LegacySendspinServer(codec: "flac")
        let traces = Mutex<[ChunkTrace]>([])
        let report = try await Self.play(server.url, allowLegacy: true, codec: "flac", wav: folder.path + "/legacy-flac.wav",
                                         trace: { all in traces.withLock { $0 = all } })
        #expect(report.codec == "flac")
        #expect(report.chunksPlayed > 40, "played \(report.chunksPlayed)")
        let late = Self.lateThroughThePlayer(traces.withLock { $0 })
        #expect(late.faults.isEmpty && late.serverLate <= 25, "late through the player: \(late.faults.prefix(5)); sent late by the server: \(late.serverLate)")
        try SendspinServerTests.expectUnbrokenTone(folder.path + "/legacy-flac.wav")
    }

    /// `farcast sendspin listen --legacy`: aiosendspin 5.3.0 dials the listener (the
    /// server-initiated mode, as the upstream conformance harness drives it) and the player
    /// plays its stream in time; roles the legacy wire lacks are refused up front.
    @Test func theListenerSpeaksTheLegacyWireToAServerThatDials() throws {
        let folder = try TemporaryFolder()
        let port = SendspinServer.reservePort() + 200
        let stats = folder.path + "/stats.json"
        let listener = try BackgroundProcess(try farcastBinary(), ["sendspin", "listen", "--legacy", "--host", "127.0.0.1", "--port", "\(port)",
                                                                   "--no-advertise", "--no-mpris", "--name", "farcast-legacy-listener",
                                                                   "--output", "wav:\(folder.path)/listen.wav", "--duration", "12", "--stats-json", stats],
                                             logName: "farcast-legacy-listen")
        defer { listener.stop() }
        try waitForTCPPort(port, timeout: 30, process: listener)
        let server = try LegacySendspinServer(dial: "ws://127.0.0.1:\(port)/sendspin")
        #expect(listener.waitForExit(timeout: 60), "the listener did not stop after its duration:\n\(listener.log.suffix(1500))")
        #expect(listener.terminationStatus == 0, "listener:\n\(listener.log.suffix(1500))\nserver:\n\(server.process.log.suffix(800))")
        #expect(listener.log.contains("(legacy wire)") && listener.log.contains("a server connected"), "listener:\n\(listener.log.suffix(1500))")
        #expect(server.process.log.contains("ready, roles"), "the server admitted the legacy hello: \(server.process.log.suffix(800))")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: stats))) as? [String: Any])
        let played = report["chunks_played"] as? Int ?? 0, late = report["chunks_late"] as? Int ?? -1
        #expect(report["server_name"] as? String == "legacy-test", "\(report)")
        #expect(played > 150, "played \(played) chunks: \(report)")
        // aiosendspin 5.3.0 may send a cold stream's first chunks after their moment (see above).
        #expect((0...25).contains(late), "\(late) chunks late: \(report)")
        try SendspinServerTests.expectUnbrokenTone(folder.path + "/listen.wav")

        let refused = try run(try farcastBinary(), ["sendspin", "listen", "--legacy", "--host", "127.0.0.1", "--port", "0", "--no-advertise",
                                                    "--visualizer-json", folder.path + "/v.jsonl"], timeout: 30)
        #expect(refused.status == 2 && refused.stderr.contains("--visualizer-json needs the encrypted protocol"), "stderr: \(refused.stderr)")
    }

    @Test func withoutTheFlagTheErrorPointsToIt() async throws {
        let folder = try TemporaryFolder()
        let server = try LegacySendspinServer()
        await #expect {
            _ = try await Self.play(server.url, allowLegacy: false, wav: folder.path + "/none.wav", seconds: 5)
        } throws: { error in
            "\(error)".contains("--allow-legacy")
        }
    }

    @Test func aServerKnownAsEncryptedIsNeverDowngraded() async throws {
        let folder = try TemporaryFolder()
        let store = PlayerStore(directory: StateDirectory(path: folder.path + "/state"))
        let server = try LegacySendspinServer()
        var settings = store.settings()
        settings.rememberEncrypted([server.url])   // as after an encrypted session with this URL
        try store.save(settings)
        await #expect {
            _ = try await Self.play(server.url, allowLegacy: true, store: store, wav: folder.path + "/none.wav", seconds: 5)
        } throws: { error in
            "\(error)".contains("refusing to fall back to the legacy wire")
        }
        #expect(!server.process.log.contains("ready, roles"), "no legacy hello reached the server: \(server.process.log.suffix(800))")
    }

    @Test func anEncryptedSessionIsRememberedSoTheURLIsNeverDowngraded() async throws {
        let folder = try TemporaryFolder()
        let store = PlayerStore(directory: StateDirectory(path: folder.path + "/state"))
        let server = try SendspinServer()
        _ = try await Self.play(server.url, allowLegacy: true, store: store, wav: folder.path + "/enc.wav", seconds: 4)
        #expect(store.settings().isKnownEncrypted(server.url))
    }
}
