import FarcastSupport
import Foundation
import Logging
import Sendspin
import Testing

/// The Sendspin player against aiosendspin 10.2.1's `sendspin serve` (encrypted wire) on
/// loopback inside the test namespace. Both ends read CLOCK_MONOTONIC_RAW on one host, so the
/// true clock offset is zero and the player's timing can be judged absolutely.
/// Serialized: each test runs its own Python server, and two cores cannot run them all at once
/// without starving the players' clocks.
@Suite(.tags(.timing), .serialized, .timeLimit(.minutes(3)))
struct SendspinServerTests {
    static func play(_ server: SendspinServer, codec: String, seconds: Double, suite: NoiseSuite = .chaChaPoly,
                     wav: String) async throws -> SendspinPlayer.Report {
        var options = SendspinPlayer.Options()
        options.name = "farcast-test-\(codec)"
        options.formats = SendspinPlayer.formats(preferring: codec)
        options.duration = .milliseconds(Int(seconds * 1000))
        options.suite = suite
        let player = SendspinPlayer(options: options)
        return try await player.play(url: server.url, sink: WAVSink(path: wav), logger: Logger(label: "test"))
    }

    /// Checks that the WAV holds an unbroken 440 Hz tone after its start.
    static func expectUnbrokenTone(_ path: String, rate: Int = 48000, tolerance: Double = 1.0,
                                   sourceLocation: SourceLocation = #_sourceLocation) throws {
        let wav = try WAVFile(path: path)
        #expect(wav.sampleRate == rate, sourceLocation: sourceLocation)
        guard let start = wav.firstSound() else {
            Issue.record("the WAV is silent", sourceLocation: sourceLocation)
            return
        }
        let frequency = wav.frequency(from: start)
        #expect(abs(frequency - 440) <= tolerance, "tone at \(frequency) Hz", sourceLocation: sourceLocation)
        // A 440 Hz sine crosses zero every ~55 samples; a run of near-silence longer than a
        // few samples means a gap (a dropped chunk or an underrun). The first 50 ms are left
        // out: a lossy codec fades its first frame in.
        let quiet = wav.longestQuietRun(from: start + rate / 20, threshold: 64)
        #expect(quiet <= 8, "a gap of \(quiet) near-silent samples", sourceLocation: sourceLocation)
        #expect(wav.firstChannel.count - start > rate, "less than a second of audio", sourceLocation: sourceLocation)
    }

    @Test func pcmPlaysThirtySecondsInSyncWithoutLateChunks() async throws {
        let folder = try TemporaryFolder()
        let server = try SendspinServer()
        let report = try await Self.play(server, codec: "pcm", seconds: 30, wav: folder.path + "/pcm.wav")
        #expect(report.codec == "pcm" && report.sampleRate == 48000)
        #expect(report.chunksLate == 0, "late chunks: \(report.chunksLate)")
        #expect(report.chunksDropped == 0)
        #expect(report.underruns == 0)
        #expect(report.chunksPlayed > 1000, "played \(report.chunksPlayed) chunks")
        // The filter, once settled: standard deviation of its offset under 100 µs.
        let stddev = try #require(report.offsetStddevUs)
        #expect(stddev < 100, "offset stddev \(stddev) µs")
        // Output timing after convergence within ±1 ms of the prediction.
        #expect(report.outputErrorsMeasured > 100)
        #expect(report.maxOutputErrorUs <= 1000, "max output error \(report.maxOutputErrorUs) µs")
        try Self.expectUnbrokenTone(folder.path + "/pcm.wav")
        #expect(server.complianceComplaints.isEmpty, "the reference server flagged: \(server.complianceComplaints)")
    }

    @Test func flacIsNegotiatedAndDecoded() async throws {
        let folder = try TemporaryFolder()
        let server = try SendspinServer()
        let report = try await Self.play(server, codec: "flac", seconds: 8, wav: folder.path + "/flac.wav")
        #expect(report.codec == "flac")
        #expect(report.chunksLate == 0 && report.chunksDropped == 0)
        #expect(report.chunksPlayed > 40)
        try Self.expectUnbrokenTone(folder.path + "/flac.wav")
    }

    @Test func opusIsNegotiatedAndDecoded() async throws {
        let folder = try TemporaryFolder()
        let server = try SendspinServer()
        let report = try await Self.play(server, codec: "opus", seconds: 8, wav: folder.path + "/opus.wav")
        #expect(report.codec == "opus")
        #expect(report.chunksLate == 0 && report.chunksDropped == 0)
        #expect(report.chunksPlayed > 200)
        // Opus is lossy: the tone's frequency survives, a little less exactly.
        try Self.expectUnbrokenTone(folder.path + "/opus.wav", tolerance: 2)
    }

    @Test func aesGCMSuiteWorksToo() async throws {
        let folder = try TemporaryFolder()
        let server = try SendspinServer()
        let report = try await Self.play(server, codec: "pcm", seconds: 3, suite: .aesGCM, wav: folder.path + "/aes.wav")
        #expect(report.chunksPlayed > 20)
    }

    @Test func theCommandLinePlayerWritesStatsAndATraceAndSaysGoodbye() async throws {
        let folder = try TemporaryFolder()
        let server = try SendspinServer(logLevel: "DEBUG")
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = folder.path + "/state"
        let stats = folder.path + "/stats.json", trace = folder.path + "/trace.jsonl"
        let result = try run(try farcastBinary(), ["sendspin", "play", server.url, "--duration", "4", "--stats-json", stats,
                                                   "--trace", trace, "--output", "wav:\(folder.path)/cli.wav", "--name", "cli-test"],
                             environment: env, timeout: 40)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("offset"), "a telemetry line each second")
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: stats))) as! [String: Any]
        for key in ["chunks_received", "chunks_played", "chunks_late", "chunks_dropped", "codec", "sample_rate", "max_output_error_us"] {
            #expect(object[key] != nil, "stats lack \(key)")
        }
        #expect(object["codec"] as? String == "pcm")
        let lines = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
        #expect(lines.count > 20)
        let record = try JSONSerialization.jsonObject(with: Data(lines[10].utf8)) as! [String: Any]
        #expect(record["outcome"] as? String == "played")
        for key in ["server_timestamp_us", "arrival_us", "predicted_play_us", "first_sample_out_us", "filter_offset_us", "filter_error_us"] {
            #expect(record[key] != nil, "trace lacks \(key): \(record)")
        }
        // The identity persisted, private.
        #expect(try StateDirectory(path: folder.path + "/state/farcast").permissions(of: "sendspin/identity.key") == 0o600)
        // The server saw a clean goodbye, not a dropped connection, and nothing non-compliant.
        let log = server.process.log
        #expect(log.contains("Received client/goodbye with reason") && log.lowercased().contains("user_request"), "server log: \(log.suffix(2000))")
        #expect(server.complianceComplaints.isEmpty, "the reference server flagged: \(server.complianceComplaints)")
    }

    @Test func interruptingThePlayerEndsCleanly() async throws {
        let folder = try TemporaryFolder()
        let server = try SendspinServer()
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = folder.path + "/state"
        let process = try BackgroundProcess(try farcastBinary(), ["sendspin", "play", server.url, "--stats-json", folder.path + "/s.json"],
                                            environment: env, logName: "farcast-sendspin")
        try await Task.sleep(for: .seconds(3))
        process.signal(SIGINT)
        for _ in 0..<100 where process.isRunning { try await Task.sleep(for: .milliseconds(50)) }
        #expect(!process.isRunning)
        #expect(process.terminationStatus == 0, "log: \(process.log)")
        #expect(FileManager.default.fileExists(atPath: folder.path + "/s.json"))
    }

    @Test func aServerThatIsNotSendspinGivesAClearError() throws {
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = (try TemporaryFolder()).path
        let refused = try run(try farcastBinary(), ["sendspin", "play", "ws://127.0.0.1:9/sendspin", "--duration", "2"], environment: env, timeout: 30)
        #expect(refused.status == 1)
        #expect(refused.stderr.hasPrefix("farcast: "), "stderr: \(refused.stderr)")
        #expect(refused.stderr.contains("connect"), "stderr: \(refused.stderr)")
    }
}
