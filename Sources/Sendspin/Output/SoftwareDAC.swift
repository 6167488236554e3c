import FarcastSupport
import Foundation
import Synchronization

/// A DAC made of software: a thread that consumes frames in real time from a monotonic clock,
/// pulls them from the playback engine and hands them to a sink. Frame k of a format run leaves
/// at anchor + k × frame duration — the sample clock a real DAC has — so the engine's timing
/// record is when each sample left. `ppm` makes this DAC's crystal run fast (+) or slow (−)
/// against the monotonic clock, to exercise sync correction.
///
/// Like a sound device it works a period at a time (the sink's `softwarePeriod`: 10 ms, what the
/// ALSA output asks for, or 50 ms for a sink nobody hears): each wake renders the frames that
/// leave before the next one, so a chunk must be there up to a period ahead of its moment, as with
/// a device's buffer — never later than real time allows. The wakes are most of what a player
/// with no sound device costs (about 35 µs each on the machines the benchmarks ran on).
public final class SoftwareDAC: AudioDAC {
    private let clock: any MonotonicClock
    private let sink: any AudioSink
    private let core: PlayerCore
    private let ppm: Double
    private let periodUs: Double
    private let running = Atomic<Bool>(false)
    private let finished = Mutex<(done: Bool, error: String?)>((false, nil))
    private let started = Atomic<Bool>(false)

    public init(clock: any MonotonicClock, sink: any AudioSink, core: PlayerCore, ppm: Double = 0, period: Duration = .milliseconds(10)) {
        self.clock = clock
        self.sink = sink
        self.core = core
        self.ppm = ppm
        periodUs = Double(period.components.seconds) * 1e6 + Double(period.components.attoseconds) / 1e12
    }

    public var sinkName: String { sink.name }
    public var failure: String? { finished.withLock { $0.error } }

    public func start(onFailure: @escaping @Sendable () -> Void) {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let t = Thread { [self] in self.run(onFailure: onFailure) }
        t.name = "farcast-dac"
        t.qualityOfService = .userInteractive
        started.store(true, ordering: .releasing)
        t.start()
    }

    /// Stops the thread and finishes the sink; returns a sink error, if any occurred.
    @discardableResult
    public func stop() -> String? {
        running.store(false, ordering: .releasing)
        while started.load(ordering: .acquiring) && !finished.withLock({ $0.done }) { usleep(2000) }
        return finished.withLock { $0.error }
    }

    private func nowMicroseconds() -> Double { Double(clock.now().nanoseconds) / 1000 }

    private func run(onFailure: @Sendable () -> Void) {
        var format: OutputFormat?
        var anchor = 0.0
        var framesOut = 0
        var previousFrameUs = 0.0
        var block = [Int32]()
        var failure: String?
        let maxBlock = 4096
        while running.load(ordering: .acquiring) {
            let now = nowMicroseconds()
            if format == nil {
                guard let next = core.withEngine({ $0.nextFormat }) else {
                    usleep(useconds_t(periodUs))
                    continue
                }
                do { try sink.start(format: next) } catch {
                    failure = "\(sink.name): \(error)"
                    break
                }
                // Continue the timeline: after a format change the next frame leaves where the
                // previous format's last frame ended; the very first starts now.
                anchor = previousFrameUs > 0 ? anchor + Double(framesOut) * previousFrameUs : now
                format = next
                framesOut = 0
            }
            guard let current = format else { continue }
            let frameUs = frameDuration(forRate: current.sampleRate)
            previousFrameUs = frameUs
            // Every frame that leaves before the next wake, a period from now.
            let due = Int((now + periodUs - anchor) / frameUs) - framesOut
            var remaining = due
            while remaining > 0 {
                let n = min(remaining, maxBlock)
                let departure = anchor + Double(framesOut) * frameUs
                let formatChanged = core.render(into: &block, frames: n, format: current, departureUs: departure, frameDurationUs: frameUs)
                do {
                    try block.withUnsafeBufferPointer { try sink.write(UnsafeBufferPointer(rebasing: $0[0..<(n * current.channels)]), frames: n) }
                } catch {
                    failure = "\(sink.name): \(error)"
                    running.store(false, ordering: .releasing)
                    break
                }
                framesOut += n
                remaining -= n
                if formatChanged {
                    format = nil
                    break
                }
            }
            // Wake when the first frame not yet rendered leaves: each frame is rendered between
            // a period and a moment before it leaves.
            let wake = anchor + Double(framesOut) * frameUs
            let sleep = format == nil ? 0 : wake - nowMicroseconds()
            if sleep > 0 { usleep(useconds_t(min(sleep, periodUs))) }
        }
        do { try sink.finish() } catch { failure = failure ?? "\(sink.name): \(error)" }
        finished.withLock { $0 = (true, failure) }
        if failure != nil { onFailure() }
    }

    private func frameDuration(forRate rate: Int) -> Double {
        // A crystal running fast by p ppm emits frames 1/(1 + p·1e-6) as long.
        1e6 / Double(rate) / (1 + ppm * 1e-6)
    }
}
