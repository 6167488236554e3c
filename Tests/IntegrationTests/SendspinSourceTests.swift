import Foundation
import Testing

/// source@v1 against aiosendspin 10.2.1's server (scripts/lib/sendspin_source_server.py, on its
/// source role): `farcast sendspin play --source alsa:linein` streams a line-in — ALSA's `file`
/// plugin reading a 1 kHz tone, the test ALSA input the issue names — when the server asks; the
/// server logs each chunk's capture timestamp and its arrival on its own clock and plays the
/// input to the group, where two more farcast players (and the source itself) play it in sync.
@Suite(.tags(.timing), .serialized, .timeLimit(.minutes(2)))
struct SendspinSourceTests {
    @Test(arguments: ["flac", "opus", "pcm"])
    func aLineInIsStampedOnTheServersClockAndPlayedToTheGroupInSync(codec: String) throws {
        let folder = try TemporaryFolder()
        // 40 s of a 1 kHz tone, 48 kHz 16-bit stereo, as the line-in's samples.
        var tone = [UInt8]()
        tone.reserveCapacity(48_000 * 40 * 4)
        for i in 0..<(48_000 * 40) {
            let v = UInt16(bitPattern: Int16(12_000 * sin(2 * Double.pi * 1000 * Double(i) / 48_000)))
            let (lo, hi) = (UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: v >> 8))
            tone += [lo, hi, lo, hi]
        }
        try Data(tone).write(to: URL(fileURLWithPath: folder.path + "/tone.raw"))
        let home = folder.path + "/home"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        try "pcm.linein { type file slave.pcm null file \"/dev/null\" infile \"\(folder.path)/tone.raw\" format raw }\n"
            .write(toFile: home + "/.asoundrc", atomically: true, encoding: .utf8)

        let record = folder.path + "/server"
        let port = SendspinServer.reservePort()
        let server = try SendspinServer.script("sendspin_source_server.py", port: port, ["--record", record, "--clients", "3", "--settle", "5", "--seconds", "6", "--delay", "0.6"],
                                               logName: "sendspin-source-server")
        defer { server.stop() }
        func player(_ name: String, _ extra: [String]) throws -> BackgroundProcess {
            var environment = ProcessInfo.processInfo.environment
            environment["HOME"] = home
            environment["XDG_STATE_HOME"] = "\(folder.path)/state-\(name)"
            return try BackgroundProcess(try farcastBinary(), ["sendspin", "play", "ws://127.0.0.1:\(port)/sendspin", "--name", name, "--duration", "16",
                                                               "--trace", "\(folder.path)/\(name).trace", "--stats-json", "\(folder.path)/\(name).json", "-v"] + extra,
                                         environment: environment, logName: "farcast-\(name)")
        }
        let lineIn = try player("linein", ["--source", "alsa:linein", "--source-codec", codec, "--output", "null"])
        defer { lineIn.stop() }
        let listener = try player("listener", ["--output", "wav:\(folder.path)/listener.wav"])
        defer { listener.stop() }
        let kitchen = try player("kitchen", ["--output", "null"])
        defer { kitchen.stop() }
        let logs = { "line-in:\n\(lineIn.log.suffix(2000))\nlistener:\n\(listener.log.suffix(1000))\nserver:\n\(server.log.suffix(2000))" }
        #expect(lineIn.waitForExit(timeout: 40) && lineIn.terminationStatus == 0, "\(logs())")
        #expect(listener.waitForExit(timeout: 20) && listener.terminationStatus == 0, "\(logs())")
        #expect(kitchen.waitForExit(timeout: 20) && kitchen.terminationStatus == 0, "\(kitchen.log.suffix(1000))")
        #expect(lineIn.log.contains("source: streaming \(codec) 48000 Hz 16-bit 2 ch to the server, as it asked")
                && lineIn.log.contains("source: stopped, as the server asked"), "\(logs())")

        // Timestamps: 20 ms apart as the samples are, each a capture time before the chunk
        // arrived on the server's clock, and not long before (the 20 ms block, the device, the
        // loopback).
        let lines = try String(contentsOfFile: record + "/log", encoding: .utf8).split(separator: "\n").map { $0.split(separator: " ") }
        #expect(lines.first == ["format", "48000", "16", "2"], "\(lines.prefix(2))")
        let chunks = lines.filter { $0[0] == "chunk" }.map { (at: Int64($0[1])!, arrived: Int64($0[2])!, frames: Int($0[3])!) }
        try #require(chunks.count >= 290, "6 s of 20 ms chunks: \(chunks.count)\n\(logs())")
        #expect(chunks.allSatisfy { $0.frames == 960 })
        let steps = zip(chunks, chunks.dropFirst()).map { $1.at - $0.at }
        let even = steps.filter { abs($0 - 20_000) <= 500 }.count
        #expect(even * 100 >= steps.count * 95, "chunks 20 ms apart: \(even) of \(steps.count); \(steps.prefix(20))")
        let span = Double(chunks.last!.at - chunks.first!.at) / Double(steps.count)
        #expect(abs(span - 20_000) < 20, "a chunk every \(span) µs on the server's clock")
        let transit = chunks.map { $0.arrived - $0.at }.sorted()
        #expect(transit.first! >= 20_000, "each chunk was captured whole before it arrived: \(transit.first!) µs")
        #expect(transit[transit.count * 95 / 100] <= 60_000, "arrived within 60 ms of capture (p95 \(transit[transit.count * 95 / 100]) µs)")
        let stats = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: folder.path + "/linein.json"))) as! [String: Any]
        #expect((stats["source_chunks_sent"] as? Int ?? 0) >= chunks.count, "\(stats["source_chunks_sent"] ?? "none")")

        // The group played the line-in: the tone, from the second player, in step with the first.
        let wav = try WAVFile(path: folder.path + "/listener.wav")
        let start = try #require(wav.firstSound(threshold: 2_000), "the listener played the line-in")
        // Rising zero crossings over 2 s of it (the file runs on in silence after the stream).
        let part = wav.firstChannel[(start + 4_800)..<min(wav.firstChannel.count, start + 4_800 + 96_000)]
        let hz = Double(zip(part, part.dropFirst()).filter { $0 < 0 && $1 >= 0 }.count) / (Double(part.count) / Double(wav.sampleRate))
        #expect(abs(hz - 1000) < 5, "the tone arrived at \(hz) Hz")
        func played(_ name: String) throws -> [Int64: Int64] {
            var out: [Int64: Int64] = [:]
            for line in try String(contentsOfFile: "\(folder.path)/\(name).trace", encoding: .utf8).split(separator: "\n") {
                let r = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
                if r["outcome"] as? String == "played", let at = r["server_timestamp_us"] as? Int64, let left = r["first_sample_out_us"] as? Int64 {
                    out[at] = left
                }
            }
            return out
        }
        /// How far apart two players played the chunks both played, after the first 2 s (the
        /// players' corrections settling on a new stream): sorted.
        func apart(_ one: String, _ other: String) throws -> [Int64] {
            let a = try played(one), b = try played(other)
            let both = Set(a.keys).intersection(b.keys).sorted()
            try #require(both.count >= 200, "6 s of chunks both \(one) and \(other) played: \(both.count)")
            return both.filter { $0 - both[0] >= 2_000_000 }.map { abs(a[$0]! - b[$0]!) }.sorted()
        }
        let players = try apart("listener", "kitchen"), withSource = try apart("linein", "listener")
        let median = players[players.count / 2], p95 = players[players.count * 95 / 100]
        print("source (\(codec)): \(chunks.count) chunks; transit p50 \(transit[transit.count / 2]) µs; the two other players apart p50 \(median) µs, p95 \(p95) µs; "
              + "the line-in's own playback from theirs p50 \(withSource[withSource.count / 2]) µs")
        #expect(median <= 100, "the group's other players play the line-in within 100 µs of each other (p50 \(median), p95 \(p95) µs)")
    }
}
