@testable import Sendspin
import Testing

/// Scheduling and sync correction with virtual time: a simulated DAC asks the engine for 5 ms
/// blocks; chunks are 25 ms of a ramp so every frame is identifiable.
@Suite struct PlaybackEngineTests {
    static let rate = 48_000
    static let format = OutputFormat(sampleRate: rate, channels: 1, bitDepth: 16)
    static let frameUs = 1e6 / Double(rate)
    /// Client time = server time (one host, zero offset).
    static let identity = ClockMapping(synchronized: true) { $0 }

    /// Chunk k holds frames whose 16-bit values count up from k × 1200 (mod 30000).
    static func chunk(_ k: Int, frames: Int = 1200) -> PCMBuffer {
        PCMBuffer(samples: (0..<frames).map { Int32((k * frames + $0) % 30000 + 1) }, channels: 1, bitDepth: 16)
    }

    struct DAC {
        var departure: Double
        var frameUs = PlaybackEngineTests.frameUs
        var output: [Int32] = []

        mutating func run(_ engine: inout PlaybackEngine, milliseconds: Int, mapping: ClockMapping = PlaybackEngineTests.identity) {
            var block = [Int32]()
            for _ in 0..<(milliseconds / 5) {
                _ = engine.render(into: &block, frameCount: 240, format: PlaybackEngineTests.format, departureUs: departure,
                                  frameDurationUs: frameUs, mapping: mapping)
                output += block.prefix(240).map { $0 >> 16 }
                departure += 240 * frameUs
            }
        }
    }

    private func enqueue(_ engine: inout PlaybackEngine, chunks: Range<Int>, start: Int64, now: Int64 = 0) {
        for k in chunks {
            engine.enqueue(timestamp: start + Int64(k) * 25_000, buffer: Self.chunk(k), format: Self.format, compressedBytes: 2400,
                           arrival: now, now: now, mapping: Self.identity, filterOffset: 0, filterError: 10)
        }
    }

    @Test func startsExactlyOnTimeWithSilenceBefore() {
        var engine = PlaybackEngine()
        enqueue(&engine, chunks: 0..<8, start: 300_000)
        var dac = DAC(departure: 0)
        dac.run(&engine, milliseconds: 400)
        // 300 ms of silence, then the ramp from its first frame.
        let firstSound = dac.output.firstIndex { $0 != 0 }!
        #expect(firstSound == 14_400)
        #expect(Array(dac.output[14_400..<14_405]) == [1, 2, 3, 4, 5])
        #expect(engine.statistics.snaps == 1)
        #expect(engine.statistics.chunksPlayed == 4)
    }

    @Test func joiningLateSkipsWhatShouldAlreadyHavePlayed() {
        var engine = PlaybackEngine()
        enqueue(&engine, chunks: 0..<8, start: 300_000)
        // The DAC starts 10 ms after the first chunk was due: 480 frames are skipped.
        var dac = DAC(departure: 310_000)
        dac.run(&engine, milliseconds: 50)
        #expect(dac.output.first == 481)
        #expect(engine.statistics.framesDropped == 480)
    }

    @Test func steadyStateNeedsNoCorrection() {
        var settings = PlaybackEngine.Settings()
        settings.convergenceUs = 0
        var engine = PlaybackEngine(settings: settings)
        enqueue(&engine, chunks: 0..<100, start: 100_000)
        var dac = DAC(departure: 0)
        dac.run(&engine, milliseconds: 2500)
        #expect(engine.statistics.chunksPlayed == 96)
        #expect(engine.statistics.framesDropped == 0 && engine.statistics.framesInserted == 4800)   // only the initial silence
        #expect(engine.statistics.maxOutputErrorUs < Self.frameUs / 2)
        // Continuous: after the start, every frame follows its predecessor.
        let audio = Array(dac.output[4800...])
        #expect(zip(audio, audio.dropFirst()).allSatisfy { $1 == $0 + 1 || ($0 == 30000 && $1 == 1) })
    }

    @Test(arguments: [300.0, -300.0, 2000.0, -2000.0])
    func driftingDACIsPulledBackWithinTheSpec(ppm: Double) {
        var settings = PlaybackEngine.Settings()
        settings.convergenceUs = 0
        var engine = PlaybackEngine(settings: settings)
        enqueue(&engine, chunks: 0..<400, start: 100_000)
        // A DAC crystal off by `ppm`: each frame lasts a little more or less than nominal.
        var dac = DAC(departure: 0, frameUs: Self.frameUs / (1 + ppm * 1e-6))
        dac.run(&engine, milliseconds: 9_000)
        let stats = engine.statistics
        #expect(stats.snaps == 1, "no re-snap needed: \(stats)")
        #expect(stats.maxOutputErrorUs < 150, "max error \(stats.maxOutputErrorUs) µs")
        // Corrections happened in the right direction, at most 0.5 % of the frames played.
        let played = Double(stats.chunksPlayed * 1200)
        if ppm > 0 {
            #expect(stats.framesInserted - 4800 > 0)
            #expect(Double(stats.framesInserted - 4800) / played <= 0.005)
        } else {
            #expect(stats.framesDropped > 0)
            #expect(Double(stats.framesDropped) / played <= 0.005)
        }
    }

    @Test func lateAndFarFutureChunksAreRefusedOnArrival() {
        var engine = PlaybackEngine()
        // Ends at 25 ms, now is 30 ms: late.
        engine.enqueue(timestamp: 0, buffer: Self.chunk(0), format: Self.format, compressedBytes: 10, arrival: 30_000, now: 30_000,
                       mapping: Self.identity, filterOffset: 0, filterError: 1)
        // Two minutes ahead: refused.
        engine.enqueue(timestamp: 120_000_000, buffer: Self.chunk(1), format: Self.format, compressedBytes: 10, arrival: 0, now: 0,
                       mapping: Self.identity, filterOffset: 0, filterError: 1)
        #expect(engine.statistics.chunksLate == 1)
        #expect(engine.statistics.chunksDropped == 1)
        #expect(engine.nextFormat == nil)
    }

    /// An empty chunk (a zero-byte PCM payload decodes to no frames) arriving just ahead of its
    /// moment mid-stream: queued, the gentle correction would repeat its first frame, which does
    /// not exist. It is dropped on arrival and the stream plays on.
    @Test func aChunkWithNoFramesIsDroppedAndPlaybackGoesOn() {
        var engine = PlaybackEngine()
        enqueue(&engine, chunks: 0..<2, start: 50_000)                  // 50–100 ms
        engine.enqueue(timestamp: 100_500, buffer: PCMBuffer(samples: [], channels: 1, bitDepth: 16), format: Self.format,
                       compressedBytes: 0, arrival: 0, now: 0, mapping: Self.identity, filterOffset: 0, filterError: 10)
        enqueue(&engine, chunks: 3..<4, start: 50_000)                  // 125–150 ms
        var dac = DAC(departure: 0)
        dac.run(&engine, milliseconds: 200)
        #expect(engine.statistics.chunksDropped == 1)
        #expect(engine.statistics.chunksPlayed == 3)
        #expect(dac.output[6_000] == 3 * 1200 + 1, "chunk 3 starts at 125 ms")
    }

    @Test func bufferCapacityIsEnforced() {
        var settings = PlaybackEngine.Settings()
        settings.bufferCapacity = 10_000
        var engine = PlaybackEngine(settings: settings)
        enqueue(&engine, chunks: 0..<6, start: 100_000)      // 2400 bytes each: 4 fit
        #expect(engine.statistics.chunksDropped == 2)
        #expect(engine.statistics.chunksReceived == 6)
    }

    @Test func clearDropsTheQueueAndTheNextChunkSnaps() {
        var engine = PlaybackEngine()
        enqueue(&engine, chunks: 0..<4, start: 50_000)
        var dac = DAC(departure: 0)
        dac.run(&engine, milliseconds: 60)
        engine.clear()
        #expect(engine.bufferedMilliseconds == 0)
        // After a seek the server restarts at a new timeline position.
        enqueue(&engine, chunks: 100..<104, start: -2_400_000)    // chunk 100 due at 100 ms
        dac.run(&engine, milliseconds: 100)
        #expect(engine.statistics.snaps == 2)
        let index = dac.output[2880...].firstIndex(of: Int32((100 * 1200) % 30000 + 1))
        #expect(index == 4800, "the new stream starts exactly at its time (frame \(String(describing: index)))")
    }

    @Test func underrunIsCountedAndPlaybackResnaps() {
        var engine = PlaybackEngine()
        enqueue(&engine, chunks: 0..<2, start: 50_000)
        enqueue(&engine, chunks: 4..<6, start: 50_000)            // chunks 2 and 3 never arrive
        var dac = DAC(departure: 0)
        dac.run(&engine, milliseconds: 200)
        #expect(engine.statistics.chunksPlayed == 4)
        // Chunk 4 starts exactly at 50 ms + 100 ms despite the hole.
        #expect(dac.output.firstIndex(of: Int32(4 * 1200 + 1)) == 7200)
    }

    @Test func gainRampsToTheTarget() {
        var engine = PlaybackEngine()
        engine.targetGain = 0.5
        enqueue(&engine, chunks: 0..<4, start: 0)
        var dac = DAC(departure: 0)
        dac.run(&engine, milliseconds: 80)
        // After the ~10 ms ramp every sample is half its source value (±1 for rounding).
        let late = dac.output[1000]
        #expect(abs(Int(late) - Int((1001.0 * 0.5).rounded())) <= 1)
    }

    @Test func aFormatChangeStopsTheBlockForTheDAC() {
        var engine = PlaybackEngine()
        enqueue(&engine, chunks: 0..<1, start: 0)
        let other = OutputFormat(sampleRate: 44_100, channels: 1, bitDepth: 16)
        engine.enqueue(timestamp: 25_000, buffer: Self.chunk(1, frames: 1102), format: other, compressedBytes: 10, arrival: 0, now: 0,
                       mapping: Self.identity, filterOffset: 0, filterError: 1)
        var block = [Int32]()
        let audible = engine.render(into: &block, frameCount: 2000, format: Self.format, departureUs: 0, frameDurationUs: Self.frameUs, mapping: Self.identity)
        #expect(audible == 1200)
        #expect(engine.nextFormat == other)
    }

    @Test func nothingPlaysBeforeTheClockIsSynchronised() {
        var engine = PlaybackEngine()
        enqueue(&engine, chunks: 0..<4, start: 0)
        var block = [Int32]()
        let unsynced = ClockMapping(synchronized: false) { $0 }
        #expect(engine.render(into: &block, frameCount: 240, format: Self.format, departureUs: 0, frameDurationUs: Self.frameUs, mapping: unsynced) == 0)
    }
}
