import FarcastSupport
import Foundation
import Logging
import Sendspin
import Synchronization
import Testing

/// ALSA output, measured at "the DAC": aiosendspin streams short loud pulses, farcast plays them
/// through ALSA's pulse plugin into a private PulseAudio whose pipe sink is read by a scheduled
/// reader (`PulseAudioDAC`, which says why no ALSA plugin alone can serve). Each pulse's rising
/// edge leaves the oracle's DAC at a known time; farcast rendered it for a departure it computed
/// from the device's delay reports. The two must agree — that is the latency compensation — and
/// the engine's own record says the render matched the server's timestamp.
@Suite(.tags(.timing), .serialized, .timeLimit(.minutes(3)))
struct SendspinALSATests {
    /// Pulses of 2 ms every half second, 0.8 of full scale (stereo).
    static let pulses = "aevalsrc=exprs=if(lt(mod(n\\,24000)\\,96)\\,0.8\\,0):s=48000:c=stereo"

    /// Rising edges in what the player rendered, at the departures it rendered them for.
    final class RenderedEdges: Sendable {
        private let state = Mutex<(edges: [Double], loud: Bool, blocks: Int)>(([], true, 0))
        /// Called on the DAC thread with each block.
        let stall: (@Sendable (Int) -> Void)?
        init(stall: (@Sendable (Int) -> Void)? = nil) { self.stall = stall }

        func observe(departureUs: Double, frameUs: Double, frames: Int, channels: Int, samples: UnsafeBufferPointer<Int32>) {
            let block = state.withLock { s -> Int in
                for i in 0..<frames {
                    let loud = abs(Int64(samples[i * channels])) >= 1 << 30
                    if loud && !s.loud { s.edges.append(departureUs + Double(i) * frameUs) }
                    s.loud = loud
                }
                s.blocks += 1
                return s.blocks
            }
            stall?(block)
        }
        var edges: [Double] { state.withLock { $0.edges } }
    }

    struct Run {
        var report: SendspinPlayer.Report
        var rendered: [Double]
        var oracle: FIFOOracle.Outcome
        var pulseLog: String
    }

    /// Whether the oracle itself fell behind its clock (more than 2 % of its 0.5 ms reads over
    /// 1 ms late: 19–621 of about 76,000 in normal runs, 1,568–3,914 when CI's machine was
    /// loaded): it then timestamps departures late, and what it measured is not the player.
    static func disturbed(_ oracle: FIFOOracle.Outcome) -> Bool {
        oracle.lateReads * 24 * 50 > max(oracle.frames, 1)
    }

    /// Plays the pulses for `seconds` through ALSA into the oracle DAC running `ppm` fast; once
    /// more when the oracle was disturbed (the second run is judged whatever happens to it).
    static func play(seconds: Double, ppm: Double, stallAtBlock: Int? = nil) async throws -> Run {
        let run = try await playOnce(seconds: seconds, ppm: ppm, stallAtBlock: stallAtBlock)
        guard disturbed(run.oracle) else { return run }
        print("the oracle fell behind (\(run.oracle.lateReads) late reads of \(run.oracle.frames / 24)): measuring again")
        return try await playOnce(seconds: seconds, ppm: ppm, stallAtBlock: stallAtBlock)
    }

    static func playOnce(seconds: Double, ppm: Double, stallAtBlock: Int? = nil) async throws -> Run {
        let folder = try TemporaryFolder()
        // The oracle's schedule outlasts the player whatever the server's start-up costs; it is
        // stopped once the player is done and its last buffered pulse has left.
        let dac = try PulseAudioDAC(folder: folder.path, ppm: ppm, seconds: seconds + 20)
        defer { dac.stop() }
        let server = try SendspinServer(name: "alsa-test", source: pulses)
        let stall: (@Sendable (Int) -> Void)? = stallAtBlock.map { at in { @Sendable block in if block == at { usleep(300_000) } } }
        let edges = RenderedEdges(stall: stall)
        let sink = ALSASink(device: "oracle", configuration: dac.alsaConfiguration(device: "oracle"),
                            blockObserver: { departure, frameUs, frames, channels, samples in
            edges.observe(departureUs: departure, frameUs: frameUs, frames: frames, channels: channels, samples: samples)
        })
        var options = SendspinPlayer.Options()
        options.name = "farcast-alsa"
        options.duration = .milliseconds(Int(seconds * 1000))
        let report = try await SendspinPlayer(options: options).play(url: server.url, sink: sink, logger: Logger(label: "test"))
        try await Task.sleep(for: .milliseconds(500))
        dac.oracle.stop()
        let oracle = dac.oracle.wait()
        return Run(report: report, rendered: edges.edges, oracle: oracle, pulseLog: dac.pulseLog)
    }

    /// Seconds of playing before pulses are measured. The player follows the device's delay
    /// reports, and PulseAudio's own latency estimate for a new stream settles over its first
    /// seconds: on CI's fresh two-core machine one run's pulses left 2.8–3.6 ms early 3–5 s in,
    /// then converged to 0.1 ms by 12 s (the player's loop locks within a fraction of a second,
    /// so the drift was in the reports). Measuring from 5 s judges the compensation, not that.
    static let settle = 5.0

    /// Oracle departure minus rendered departure (µs) for each pulse that left the DAC, after
    /// the first `settle` seconds of playing.
    static func errors(_ run: Run, settle: Double = settle) -> [Double] {
        guard let first = run.rendered.first else { return [] }
        let rendered = run.rendered.sorted()
        return run.oracle.edges.compactMap { edge -> Double? in
            guard edge.departureUs >= first + settle * 1e6 else { return nil }
            // The nearest rendered edge (pulses are 500 ms apart; anything over 50 ms is no match).
            var low = 0, high = rendered.count
            while low < high { let mid = (low + high) / 2; if rendered[mid] < edge.departureUs { low = mid + 1 } else { high = mid } }
            let candidates = [low - 1, low].filter { $0 >= 0 && $0 < rendered.count }.map { edge.departureUs - rendered[$0] }
            guard let nearest = candidates.min(by: { abs($0) < abs($1) }), abs(nearest) < 50_000 else { return nil }
            return nearest
        }
    }

    static func describe(_ errors: [Double]) -> String {
        let sorted = errors.map(abs).sorted()
        let median = sorted.isEmpty ? .nan : sorted[sorted.count / 2]
        return String(format: "n=%d median |err| %.0f µs, max |err| %.0f µs, mean %.0f µs", errors.count, median, sorted.last ?? .nan,
                      errors.reduce(0, +) / Double(max(errors.count, 1)))
    }

    static func expectOnTime(_ run: Run, pulses expected: Int, missesAllowed: Int = 0, sourceLocation: SourceLocation = #_sourceLocation) {
        let errors = errors(run)
        let summary = describe(errors)
        #expect(run.oracle.error == nil, "oracle: \(run.oracle.error ?? "")", sourceLocation: sourceLocation)
        #expect(errors.count >= expected, "pulses measured at the DAC: \(summary)", sourceLocation: sourceLocation)
        // Every pulse the player rendered while the DAC was running (after the settling time) left
        // it on time; a deliberate stall may cost the pulse it delayed. The window's edges sit
        // between pulses (they are 500 ms apart), so a pulse rendered right at a boundary is not
        // counted on one side and missed on the other.
        if let first = run.rendered.first {
            let left = run.oracle.edges.map(\.departureUs)
            let window = run.rendered.filter { $0 >= first + (settle + 0.25) * 1e6 && $0 <= run.oracle.endUs - 250_000 }
            let missing = window.filter { rendered in !left.contains { abs($0 - rendered) < 50_000 } }
            #expect(missing.count <= missesAllowed, "\(missing.count) of \(window.count) pulses rendered never left the DAC on time: \(summary)",
                    sourceLocation: sourceLocation)
        }
        let sorted = errors.map(abs).sorted()
        if !sorted.isEmpty {
            // Half the pulses within 2 ms, nine in ten within 3 ms; none off by more than 5 ms.
            // On an idle machine the median is about 0.5 ms; these bounds hold on a two-core
            // machine under a parallel build (measured: median 1.5 ms, p90 2.1 ms), where the
            // sound server's own scheduling adds the rest. A broken compensation is tens of ms off.
            #expect(sorted[sorted.count / 2] <= 2000, "\(summary)", sourceLocation: sourceLocation)
            #expect(sorted[sorted.count * 9 / 10] <= 3000, "\(summary)", sourceLocation: sourceLocation)
            #expect(sorted.last! <= 5000, "\(summary)", sourceLocation: sourceLocation)
        }
        // The render itself followed the server's timestamps.
        #expect(run.report.maxOutputErrorUs <= 1000, "engine output error \(run.report.maxOutputErrorUs) µs", sourceLocation: sourceLocation)
        #expect(run.report.outputDevice?.hasPrefix("S16_LE 48000 Hz 2 ch") == true, "device: \(run.report.outputDevice ?? "none")",
                sourceLocation: sourceLocation)
        print("ALSA timing errors (µs, in order): \(errors.map { String(Int($0.rounded())) }.joined(separator: " "))")
        print("ALSA timing: \(summary); oracle late reads \(run.oracle.lateReads), device underruns \(run.report.outputUnderruns), \(run.report.outputDevice ?? "")")
    }

    @Test func eachPulseLeavesTheDACWhenItsTimestampSays() async throws {
        let run = try await Self.play(seconds: 16, ppm: 0)
        Self.expectOnTime(run, pulses: 16)
        #expect(run.report.outputUnderruns == 0)
        #expect(run.report.chunksLate == 0)
    }

    @Test func aDACCrystal300ppmFastIsFollowedAndAnUnderrunIsRecovered() async throws {
        // Block ~600 is about 6 s in (10 ms periods); the DAC thread stalls 300 ms, past the
        // 100 ms buffer: the device underruns, the player recovers and plays on in time.
        let run = try await Self.play(seconds: 18, ppm: 300, stallAtBlock: 600)
        Self.expectOnTime(run, pulses: 18, missesAllowed: 1)
        #expect(run.report.outputUnderruns >= 1, "the stall caused an underrun the player recovered from")
    }

    @Test func aFormatChangeReopensTheDeviceAndBothFormatsLeaveOnTime() async throws {
        // No server can be made to switch rates mid-stream on demand, so the test feeds the
        // player's core directly: its clock mapped 1:1 to ours, 5 s of pulses at 48 kHz, then
        // 5 s at 44.1 kHz. Every pulse's intended departure is then known exactly.
        for attempt in 1...2 {
            let folder = try TemporaryFolder()
            let dac = try PulseAudioDAC(folder: folder.path, seconds: 12)
            defer { dac.stop() }
            let clock = SystemClock(.monotonicRaw)
            var settings = PlaybackEngine.Settings()
            settings.bufferCapacity = 16_000_000
            let core = PlayerCore(settings: settings)
            let t0 = clock.now().microseconds
            for k in 0..<10 {
                let t = t0 - 1_000_000 + Int64(k) * 100_000
                core.updateFilter(t1: t, t2: t + 50, t3: t + 60, t4: t + 110)
            }
            let start = clock.now().microseconds + 700_000
            var intended: [Double] = []
            for (segment, rate) in [48000, 44100].enumerated() {
                let format = OutputFormat(sampleRate: rate, channels: 2, bitDepth: 16)
                let chunkFrames = rate / 50
                let segmentStart = start + Int64(segment) * 5_000_000
                for k in 0..<10 { intended.append(Double(segmentStart) + Double(k) * 500_000) }
                for c in 0..<250 {
                    var samples = [Int32](repeating: 0, count: chunkFrames * 2)
                    for i in 0..<chunkFrames where (c * chunkFrames + i) % (rate / 2) < rate / 500 {
                        samples[2 * i] = Int32(0.8 * Double(Int16.max))     // PCMBuffer holds samples at the stream's depth
                        samples[2 * i + 1] = samples[2 * i]
                    }
                    let now = clock.now().microseconds
                    core.enqueue(timestamp: segmentStart + Int64(c) * 20_000, buffer: PCMBuffer(samples: samples, channels: 2, bitDepth: 16),
                                 format: format, compressedBytes: samples.count * 2, arrival: now, now: now)
                }
            }
            let sink = ALSASink(device: "oracle", configuration: dac.alsaConfiguration(device: "oracle"))
            let output = try #require(sink.makeDAC(core: core, clock: clock))
            output.start()
            try await Task.sleep(for: .milliseconds(11_200))
            #expect(output.stop() == nil)
            let oracle = dac.oracle.wait()
            // A disturbed oracle measured itself, not the player: once more (the second is judged).
            if attempt == 1 && Self.disturbed(oracle) {
                print("the oracle fell behind (\(oracle.lateReads) late reads of \(oracle.frames / 24)): measuring again")
                continue
            }
            #expect(oracle.error == nil)
            // Each pulse that left, against the departure its timestamp asked for.
            var errors: [(Double, Double)] = []
            for edge in oracle.edges {
                guard let target = intended.min(by: { abs($0 - edge.departureUs) < abs($1 - edge.departureUs) }),
                      abs(edge.departureUs - target) < 50_000 else { continue }
                errors.append((target, edge.departureUs - target))
            }
            print("ALSA format change: \(errors.map { String(Int($0.1.rounded())) }.joined(separator: " ")); \(output.deviceDescription ?? "")")
            let first = errors.filter { $0.0 < Double(start) + 5_000_000 && $0.0 >= Double(start) + 2_000_000 }
            let second = errors.filter { $0.0 >= Double(start) + 5_500_000 }
            #expect(first.count >= 5 && second.count >= 8, "pulses measured: \(first.count) at 48 kHz, \(second.count) at 44.1 kHz")
            let all = (first + second).map { abs($0.1) }.sorted()
            #expect(!all.isEmpty && all[all.count / 2] <= 1000 && all[all.count * 9 / 10] <= 2000 && all.last! <= 5000,
                    "errors against the timestamps (µs): \(all)")
            #expect(output.deviceDescription?.hasPrefix("S16_LE 44100 Hz") == true, "the device was reopened at 44.1 kHz: \(output.deviceDescription ?? "")")
            #expect(core.statistics.chunksLate <= 10, "at most the switch's own gap is lost: \(core.statistics.chunksLate) late chunks")
        break
        }
    }

    @Test func alsasFilePluginRecordsWhatWasPlayed() async throws {
        // ALSA's `file` plugin in front of the clocked device: it writes every frame farcast
        // hands to ALSA into a WAV file, so the bytes that reached the device can be checked.
        let folder = try TemporaryFolder()
        let dac = try PulseAudioDAC(folder: folder.path, seconds: 10)
        defer { dac.stop() }
        let server = try SendspinServer(name: "alsa-file-test")
        let tapped = folder.path + "/tapped.wav"
        let configuration = dac.alsaConfiguration(device: "clocked")
            + "pcm.tapped { type file slave.pcm \"clocked\" file \"\(tapped)\" format \"wav\" }\n"
        var options = SendspinPlayer.Options()
        options.name = "farcast-alsa-file"
        options.duration = .seconds(6)
        let report = try await SendspinPlayer(options: options).play(url: server.url, sink: ALSASink(device: "tapped", configuration: configuration),
                                                                     logger: Logger(label: "test"))
        #expect(report.chunksPlayed > 150 && report.chunksLate == 0, "played \(report.chunksPlayed), late \(report.chunksLate)")
        try SendspinServerTests.expectUnbrokenTone(tapped)
    }

    @Test func aMissingDeviceFailsWithALSAsReason() throws {
        let sink = ALSASink(device: "no-such-device")
        #expect {
            try sink.check()
        } throws: { error in
            "\(error)".contains("cannot open ALSA device 'no-such-device'") && "\(error)".contains("aplay -L")
        }
    }
}
