import FarcastSupport
@testable import Sendspin
import Synchronization
import Testing

/// A failing output tells the player at once: the player's supervisor sleeps until its
/// once-a-second work and is woken by the DAC's `onFailure`, not by looking.
@Suite struct SoftwareDACTests {
    /// A sink that refuses to start or to take samples (a device unplugged, a full disk).
    final class FailingSink: AudioSink {
        struct Refused: Error, CustomStringConvertible { var description: String { "the device is gone" } }
        let name = "failing"
        let failOnStart: Bool
        init(failOnStart: Bool) { self.failOnStart = failOnStart }
        func start(format: OutputFormat) throws { if failOnStart { throw Refused() } }
        func write(_ samples: UnsafeBufferPointer<Int32>, frames: Int) throws { throw Refused() }
        func finish() throws {}
    }

    @Test(arguments: [true, false])
    func aFailingSinkIsReportedOnceThroughOnFailure(failOnStart: Bool) async throws {
        let core = PlayerCore(settings: PlaybackEngine.Settings())
        let format = OutputFormat(sampleRate: 48000, channels: 2)
        let now = SystemClock(.monotonicRaw).now().microseconds
        core.enqueue(timestamp: now, buffer: PCMBuffer(samples: [Int32](repeating: 0, count: 9600), channels: 2, bitDepth: 16),
                     format: format, compressedBytes: 0, arrival: now, now: now)
        let dac = SoftwareDAC(clock: SystemClock(.monotonicRaw), sink: FailingSink(failOnStart: failOnStart), core: core)
        let calls = Atomic<Int>(0)
        let seenFailure = Mutex<String?>(nil)
        dac.start(onFailure: { [dac] in
            // Called after the failure is readable.
            seenFailure.withLock { $0 = dac.failure }
            calls.add(1, ordering: .relaxed)
        })
        for _ in 0..<200 where calls.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(calls.load(ordering: .relaxed) == 1)
        #expect(seenFailure.withLock { $0 } == "failing: the device is gone")
        #expect(dac.stop() == "failing: the device is gone")
        #expect(calls.load(ordering: .relaxed) == 1)
    }
}
