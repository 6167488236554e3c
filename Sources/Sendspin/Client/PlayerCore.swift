import FarcastSupport
import Foundation
import Synchronization

/// The state the network side and the DAC thread share: the playback engine and the time
/// filter, behind one lock so a render always sees a consistent clock mapping.
public final class PlayerCore: Sendable {
    struct State: Sendable {
        var engine: PlaybackEngine
        /// Set through `setFilter`, which keeps `mapping` in step.
        private(set) var filter = TimeFilter()
        /// The filter's mapping, made once per filter change rather than per render (making one
        /// copies the filter into a closure: an allocation the DAC would pay on every wake).
        private(set) var mapping = PlayerCore.mapping(TimeFilter())
        var volume = 100
        var muted = false
        /// Why the hardware volume stopped working (the samples are scaled again since).
        var hardwareFailure: String?
        /// Filter offsets sampled once a second: (client time µs, offset µs).
        var offsetSamples: [(Int64, Double)] = []

        init(engine: PlaybackEngine) { self.engine = engine }

        mutating func setFilter(_ change: (inout TimeFilter) -> Void) {
            change(&filter)
            mapping = PlayerCore.mapping(filter)
        }
    }

    private let state: Mutex<State>
    /// Volume and mute applied here instead of to the samples, while it works.
    public let hardwareVolume: (any HardwareVolume)?

    public init(settings: PlaybackEngine.Settings, hardwareVolume: (any HardwareVolume)? = nil) {
        state = Mutex(State(engine: PlaybackEngine(settings: settings)))
        self.hardwareVolume = hardwareVolume
    }

    static func mapping(_ filter: TimeFilter) -> ClockMapping {
        ClockMapping(synchronized: filter.isSynchronized) { filter.clientTime(forServerTime: $0) }
    }

    public func withEngine<R>(_ body: (inout PlaybackEngine) -> R) -> R {
        state.withLock { body(&$0.engine) }
    }

    /// Fills a DAC block; returns true when the block stopped at a format change.
    func render(into block: inout [Int32], frames: Int, format: OutputFormat, departureUs: Double, frameDurationUs: Double) -> Bool {
        state.withLock { s in
            _ = s.engine.render(into: &block, frameCount: frames, format: format, departureUs: departureUs,
                                frameDurationUs: frameDurationUs, mapping: s.mapping)
            if let next = s.engine.nextFormat { return next != format }
            return false
        }
    }

    public func enqueue(timestamp: Int64, buffer: PCMBuffer, format: OutputFormat, compressedBytes: Int, arrival: Int64, now: Int64) {
        state.withLock { s in
            s.engine.enqueue(timestamp: timestamp, buffer: buffer, format: format, compressedBytes: compressedBytes, arrival: arrival,
                             now: now, mapping: s.mapping, filterOffset: s.filter.offset, filterError: s.filter.error)
        }
    }

    public func updateFilter(t1: Int64, t2: Int64, t3: Int64, t4: Int64) {
        state.withLock { $0.setFilter { $0.update(t1: t1, t2: t2, t3: t3, t4: t4) } }
    }

    public var filter: TimeFilter { state.withLock { $0.filter } }

    /// When audio stamped `serverTime` leaves the output (client clock, µs), by the rule the
    /// engine plays by (output delay and sink latency applied); nil while the clock is not
    /// synchronised.
    public func playTime(forServerTime serverTime: Int64) -> Int64? {
        state.withLock { s in
            guard s.filter.isSynchronized else { return nil }
            return s.engine.idealStart(serverTime, s.mapping)
        }
    }

    /// Another server took over: its clock is unknown and nothing queued belongs to it.
    func resetForNewServer() {
        state.withLock { s in
            s.setFilter { $0 = TimeFilter() }
            s.engine.clear()
        }
    }

    /// Records the offset the filter applies at `time` — server time minus client time, drift
    /// included — for the offset statistics.
    public func sampleOffset(at time: Int64) {
        state.withLock { s in
            if s.filter.isSynchronized { s.offsetSamples.append((time, Double(s.filter.serverTime(forClientTime: time) - time))) }
        }
    }

    public func offsetSamples() -> [(Int64, Double)] { state.withLock { $0.offsetSamples } }

    /// Applies volume/mute: to the hardware volume when there is one (the samples keep unity
    /// gain), else to the output gain, amplitude = (volume/100)^1.5, 0 when muted. A hardware
    /// volume that fails is given up for the rest of the run (`hardwareVolumeFailure`).
    public func setVolume(_ volume: Int?, muted: Bool?) -> (volume: Int, muted: Bool) {
        let (v, m, onHardware) = state.withLock { s in
            if let volume { s.volume = min(max(volume, 0), 100) }
            if let muted { s.muted = muted }
            let onHardware = hardwareVolume != nil && s.hardwareFailure == nil
            s.engine.targetGain = onHardware ? 1 : Self.gain(s)
            return (s.volume, s.muted, onHardware)
        }
        if onHardware, let hardwareVolume {
            // Outside the lock: the DAC thread renders under it.
            do { try hardwareVolume.apply(volume: v, muted: m) } catch {
                state.withLock { s in
                    s.hardwareFailure = "\(error)"
                    s.engine.targetGain = Self.gain(s)
                }
            }
        }
        return (v, m)
    }

    private static func gain(_ s: State) -> Double { s.muted ? 0 : pow(Double(s.volume) / 100, 1.5) }

    /// Why the hardware volume was given up (nil while it works, or when there is none).
    public var hardwareVolumeFailure: String? { state.withLock { $0.hardwareFailure } }

    /// Volume, mute and output delay (ms) as the core applies them now.
    var playerSettings: (volume: Int, muted: Bool, outputDelayMs: Int) {
        state.withLock { ($0.volume, $0.muted, Int($0.engine.outputDelayUs / 1000)) }
    }

    public var statistics: PlaybackStatistics { state.withLock { $0.engine.statistics } }
    public var bufferedMilliseconds: Double { state.withLock { $0.engine.bufferedMilliseconds } }
    public func traces() -> [ChunkTrace] { state.withLock { $0.engine.traces } }
}
