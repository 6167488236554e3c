import Foundation
import Testing

/// visualizer@v1 and color@v1 against aiosendspin 10.2.1's server
/// (scripts/lib/sendspin_visualizer_server.py): the server's own visualizer role computes the
/// frames from a known pattern (silence, 1 kHz, silence, 3 kHz, silence), its beat schedule and
/// two palettes (one now, one scheduled) go through its color role.
/// `farcast sendspin play --visualizer-json --color-json` must write what the server computed,
/// each frame when its sound leaves the software DAC (checked against the player's own
/// --trace of when each audio chunk left) and each palette from its time.
@Suite(.tags(.timing), .serialized, .timeLimit(.minutes(2)))
struct SendspinVisualizerTests {
    struct Line: Decodable {
        var type: String
        var serverUs: Int64?
        var dueUs: Int64?
        var deliveredUs: Int64?
        var loudness: Int?
        var downbeat: Bool?
        var frequencyHz: Int?
        var bins: [Int]?
        var strength: Int?
        var types: [String]?
        var tracksDownbeats: Bool?
        var spectrumBins: Int?
        var cleared: Bool?
        var primary: [Int]?
        var accent: [Int]?
    }

    struct Chunk: Decodable {
        var serverTimestampUs: Int64
        var firstSampleOutUs: Int64?
    }

    static func lines<T: Decodable>(_ path: String, as: T.Type) throws -> [T] {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        let text = try String(contentsOfFile: path, encoding: .utf8)
        return try text.split(separator: "\n").map { try decoder.decode(T.self, from: Data($0.utf8)) }
    }

    @Test func framesAndPalettesGoOutWhenTheirSoundPlays() throws {
        let folder = try TemporaryFolder()
        let record = folder.path + "/server", visualizer = folder.path + "/visualizer.jsonl", color = folder.path + "/color.jsonl"
        let trace = folder.path + "/trace.jsonl", stats = folder.path + "/stats.json"
        let port = SendspinServer.reservePort()
        let server = try SendspinServer.script("sendspin_visualizer_server.py", port: port, ["--record", record, "--settle", "2", "--segment", "1.5", "--lead", "1.5"],
                                               logName: "sendspin-visualizer-server")
        defer { server.stop() }
        let player = try BackgroundProcess(try farcastBinary(), ["sendspin", "play", "ws://127.0.0.1:\(port)/sendspin", "--output", "null", "--duration", "14",
                                                                 "--visualizer-json", visualizer, "--visualizer-spectrum", "16:log:40-16000",
                                                                 "--color-json", color, "--trace", trace, "--stats-json", stats, "-v"],
                                           environment: ["XDG_STATE_HOME": folder.path + "/state"].merging(ProcessInfo.processInfo.environment) { a, _ in a },
                                           logName: "farcast-visualizer")
        defer { player.stop() }
        let logs = { "\(player.log.suffix(3000))\n\(server.log.suffix(2000))" }
        #expect(player.waitForExit(timeout: 40) && player.terminationStatus == 0, "\(logs())")
        let serverLog = try String(contentsOfFile: record + "/log", encoding: .utf8).split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        let segments = serverLog.filter { $0[0] == "segment" }.map { (hz: Int($0[2])!, start: Int64($0[3])!, end: Int64($0[4])!) }
        let beats = serverLog.filter { $0[0] == "beat" }.map { (at: Int64($0[1])!, downbeat: $0[2] == "1") }
        let scheduled = try #require(serverLog.first { $0[0] == "color" && $0[1] == "2" }.map { Int64($0[2])! }, "the server scheduled a palette: \(logs())")
        try #require(segments.count == 5, "the server played the whole pattern: \(logs())")
        let streamEnd = segments.last!.end

        let lines = try Self.lines(visualizer, as: Line.self)
        let setups = lines.filter { $0.type == "stream" }
        let frames = lines.filter { $0.serverUs != nil }
        try #require(!setups.isEmpty && !frames.isEmpty, "\(logs())")
        #expect(Set(setups[0].types ?? []).isSuperset(of: ["loudness", "f_peak", "spectrum", "peak"]) && setups[0].spectrumBins == 16, "\(setups[0])")
        #expect(setups.contains { $0.types?.contains("beat") == true && $0.tracksDownbeats == true }, "beat joins once the schedule landed: \(setups)")
        #expect(lines.last?.type == "stream_end", "the stream's end is written")

        // What the frames say matches what played: loud with the 1 kHz and 3 kHz peak in the
        // tones, silent in between (the first 300 ms after a change left to the analysis).
        func inside(_ segment: (hz: Int, start: Int64, end: Int64), _ type: String) -> [Line] {
            frames.filter { $0.type == type && $0.serverUs! >= segment.start + 300_000 && $0.serverUs! < segment.end - 100_000 }
        }
        var peakBand: [Int: Int] = [:]
        for segment in segments {
            let loudness = inside(segment, "loudness").map { $0.loudness! }.sorted()
            try #require(loudness.count >= 20, "loudness frames at 30/s over the segment: \(loudness.count)")
            let median = loudness[loudness.count / 2]
            if segment.hz == 0 {
                #expect(median < 2_000, "silence at \(segment.start) has loudness \(median)")
            } else {
                #expect(median > 30_000, "the \(segment.hz) Hz tone has loudness \(median)")
                let peaks = inside(segment, "f_peak").map { $0.frequencyHz! }
                let near = peaks.filter { abs($0 - segment.hz) <= segment.hz / 50 }.count
                #expect(near * 10 >= peaks.count * 9, "f_peak near \(segment.hz) Hz in \(near) of \(peaks.count): \(peaks.prefix(10))")
                let bands = inside(segment, "spectrum").map { bins in bins.bins!.indices.max { bins.bins![$0] < bins.bins![$1] }! }
                #expect(bands.allSatisfy { $0 == bands.first }, "one strongest band during the tone: \(bands)")
                peakBand[segment.hz] = bands.first
                #expect(frames.contains { $0.type == "peak" && abs($0.serverUs! - segment.start) < 150_000 }, "a peak at the \(segment.hz) Hz onset")
            }
            #expect(inside(segment, "spectrum").allSatisfy { $0.bins?.count == 16 })
        }
        #expect((peakBand[3000] ?? 0) > (peakBand[1000] ?? 0), "3 kHz lies in a higher band than 1 kHz: \(peakBand)")

        // Every beat the server scheduled within the stream, with its downbeat mark, and no other
        // (one due as the stream ends may or may not go out before it does).
        let delivered = frames.filter { $0.type == "beat" }.map { (at: $0.serverUs!, downbeat: $0.downbeat!) }
        let scheduledBeats = Set(beats.map { "\($0.at) \($0.downbeat)" })
        #expect(delivered.allSatisfy { scheduledBeats.contains("\($0.at) \($0.downbeat)") }, "beats not scheduled: \(delivered)")
        let inside = { (at: Int64) in at < streamEnd - 100_000 }
        let expected = beats.filter { inside($0.at) }.map { "\($0.at) \($0.downbeat)" }
        #expect(delivered.filter { inside($0.at) }.map { "\($0.at) \($0.downbeat)" } == expected, "beats: got \(delivered), scheduled \(expected)")

        // Timing: each instant's frames against when its sound left the DAC (the chunk holding
        // it left at first_sample_out; the instant lies (T − chunk) later).
        let chunks = try Self.lines(trace, as: Chunk.self).compactMap { c in c.firstSampleOutUs.map { (c.serverTimestampUs, $0) } }.sorted { $0.0 < $1.0 }
        func soundLeaves(_ serverTime: Int64) -> Int64? {
            guard let chunk = chunks.last(where: { $0.0 <= serverTime }), serverTime - chunk.0 < 40_000 else { return nil }
            return chunk.1 + (serverTime - chunk.0)
        }
        var instants: [Int64: Int64] = [:]
        for frame in frames { instants[frame.serverUs!] = frame.deliveredUs! }
        let errors = instants.compactMap { at, out in soundLeaves(at).map { abs(out - $0) } }.sorted()
        try #require(errors.count > 100, "instants matched to played audio: \(errors.count)")
        let p50 = errors[errors.count / 2], p95 = errors[errors.count * 95 / 100], worst = errors.last!
        print("visualizer timing against the audio: \(errors.count) instants, |error| p50 \(p50) µs, p95 \(p95) µs, max \(worst) µs")
        #expect(p95 <= 1_000, "frames go out within 1 ms of their sound (p95 \(p95) µs, p50 \(p50), max \(worst))")

        // Palettes: the empty one the color role starts with, the one set now, the scheduled one
        // at its time (not before), each as sent.
        let palettes = try Self.lines(color, as: Line.self)
        try #require(palettes.count == 3, "\(palettes)")
        #expect(palettes[0].cleared == true)
        #expect(palettes[1].primary == [200, 30, 40] && palettes[1].accent == [20, 160, 220] && palettes[1].cleared == false)
        #expect(palettes[2].primary == [30, 200, 60] && palettes[2].serverUs == scheduled)
        if let out = soundLeaves(scheduled), let at = palettes[2].deliveredUs {
            #expect(abs(at - out) <= 1_000, "the scheduled palette applied \(at - out) µs from its sound")
        } else {
            Issue.record("the scheduled palette's time fell outside the played audio")
        }

        // The summary counts what was written.
        let summary = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: stats))) as! [String: Any]
        let counts = summary["visualization"] as? [String: Any]
        #expect(counts?["frames_delivered"] as? Int == frames.count && counts?["palettes_applied"] as? Int == 3, "\(String(describing: counts))")
    }
}
