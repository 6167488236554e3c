/// The output format a DAC runs at.
public struct OutputFormat: Sendable, Equatable, CustomStringConvertible {
    public var sampleRate: Int
    public var channels: Int
    /// The stream's sample resolution (sinks that store samples keep it).
    public var bitDepth: Int

    public init(sampleRate: Int, channels: Int, bitDepth: Int = 16) {
        self.sampleRate = sampleRate
        self.channels = channels
        self.bitDepth = bitDepth
    }

    public var description: String { "\(sampleRate) Hz, \(bitDepth)-bit, \(channels) ch" }
}

/// One chunk's timing, for `--trace`: when it should have played and when it did.
public struct ChunkTrace: Sendable, Codable, Equatable {
    public var serverTimestampUs: Int64
    public var arrivalUs: Int64
    /// Local play time predicted at arrival (client clock, output delay applied).
    public var predictedPlayUs: Int64
    /// When the chunk's first played frame left the output (client clock); nil if never played.
    public var firstSampleOutUs: Int64?
    /// Output error of that frame against the prediction at that moment (µs, + = late).
    public var outputErrorUs: Double?
    public var filterOffsetUs: Double
    public var filterErrorUs: Int64?
    /// played, late, dropped (buffer full), bad (did not decode), cleared.
    public var outcome: String

    enum CodingKeys: String, CodingKey {
        case serverTimestampUs, arrivalUs, predictedPlayUs, firstSampleOutUs, outputErrorUs, filterOffsetUs, filterErrorUs, outcome
    }

    /// Every key is written, null when unknown, so each trace line has the same shape.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(serverTimestampUs, forKey: .serverTimestampUs)
        try c.encode(arrivalUs, forKey: .arrivalUs)
        try c.encode(predictedPlayUs, forKey: .predictedPlayUs)
        try c.encode(firstSampleOutUs, forKey: .firstSampleOutUs)
        try c.encode(outputErrorUs, forKey: .outputErrorUs)
        try c.encode(filterOffsetUs, forKey: .filterOffsetUs)
        try c.encode(filterErrorUs, forKey: .filterErrorUs)
        try c.encode(outcome, forKey: .outcome)
    }
}

/// Counters the player reports.
public struct PlaybackStatistics: Sendable, Codable, Equatable {
    public var chunksReceived = 0
    public var chunksPlayed = 0
    /// Arrived (or reached the output) after their time had passed.
    public var chunksLate = 0
    /// Refused because the buffer was full, or did not decode.
    public var chunksDropped = 0
    public var underruns = 0
    public var framesDropped = 0
    public var framesInserted = 0
    public var snaps = 0
    /// Largest |output error| (µs) of a chunk's first frame after convergence.
    public var maxOutputErrorUs = 0.0
    public var outputErrorsMeasured = 0
    /// Seconds of audio rendered from chunks (silence between streams not counted).
    public var secondsPlayed = 0.0
}

/// Converts server time to client time; the time filter supplies it.
public struct ClockMapping: Sendable {
    public var clientTimeForServerTime: @Sendable (Int64) -> Int64
    public var synchronized: Bool

    public init(synchronized: Bool, _ clientTimeForServerTime: @escaping @Sendable (Int64) -> Int64) {
        self.synchronized = synchronized
        self.clientTimeForServerTime = clientTimeForServerTime
    }
}

/// The scheduling and sync-correction core between decoding and the DAC. It holds decoded
/// chunks in timestamp order within a byte budget (buffer_capacity), drops late ones, and fills
/// output blocks so that each chunk's first frame leaves the DAC at the moment the time filter
/// predicts: a dead band of ~100 µs, corrections of whole frames within ±0.5 % speed, and a
/// one-shot snap (silence or a skipped prefix) on start, clear, underrun or a jump over 1 ms.
///
/// Pure logic: the caller passes the clock mapping and the DAC's departure times, so the
/// whole behaviour is testable with virtual time.
public struct PlaybackEngine: Sendable {
    struct Queued: Sendable {
        var timestamp: Int64
        var buffer: PCMBuffer
        var format: OutputFormat
        var compressedBytes: Int
        var position = 0
        var started = false
        var traceIndex: Int?
        var durationUs: Double { Double(buffer.frameCount) * 1e6 / Double(format.sampleRate) }
    }

    public struct Settings: Sendable {
        /// Bytes of compressed audio that may be queued (the buffer_capacity announced).
        public var bufferCapacity = 2_000_000
        /// Errors inside this band are left alone (µs).
        public var deadBandUs = 100.0
        /// Errors beyond this are fixed at once with a snap (µs).
        public var snapThresholdUs = 1000.0
        /// Output errors count toward the maximum only after this much playback (µs).
        public var convergenceUs: Double = 2_000_000
        /// Keep per-chunk trace records.
        public var tracing = false
        /// Chunks due further ahead than this are refused (µs): a hostile or broken timestamp
        /// must not park audio in the buffer for hours.
        public var maximumLeadUs: Int64 = 60_000_000
        public init() {}
    }

    public var settings: Settings
    public private(set) var statistics = PlaybackStatistics()
    public private(set) var traces: [ChunkTrace] = []
    private var queue: [Queued] = []
    private var queuedBytes = 0
    private var needsSnap = true
    private var streaming = false
    private var inUnderrun = false
    private var playbackStartUs: Double?
    /// Output delay beyond the DAC (µs): the chunk stamped T must leave the DAC at T − delay.
    public var outputDelayUs: Int64 = 0
    /// Latency between handing a frame to the sink and its leaving (µs).
    public var sinkLatencyUs: Int64 = 0
    /// Linear gain applied to the output, ramped towards `targetGain`.
    public var targetGain = 1.0
    private var gain = 1.0

    public init(settings: Settings = Settings()) {
        self.settings = settings
    }

    /// Frames queued, in milliseconds of audio.
    public var bufferedMilliseconds: Double { queue.reduce(0) { $0 + ($1.durationUs - Double($1.position) * 1e6 / Double($1.format.sampleRate)) } / 1000 }
    /// The format of the next chunk to play, if any.
    public var nextFormat: OutputFormat? { queue.first?.format }

    /// When a chunk must leave the DAC, on the client clock (µs).
    func idealStart(_ timestamp: Int64, _ mapping: ClockMapping) -> Int64 {
        mapping.clientTimeForServerTime(timestamp) - outputDelayUs - sinkLatencyUs
    }

    /// Queues a decoded chunk. `now` is the client clock at arrival.
    public mutating func enqueue(timestamp: Int64, buffer: PCMBuffer, format: OutputFormat, compressedBytes: Int,
                                 arrival: Int64, now: Int64, mapping: ClockMapping, filterOffset: Double, filterError: Int64?) {
        statistics.chunksReceived += 1
        streaming = true
        let predicted = idealStart(timestamp, mapping)
        var trace: Int?
        if settings.tracing {
            traces.append(ChunkTrace(serverTimestampUs: timestamp, arrivalUs: arrival, predictedPlayUs: predicted, firstSampleOutUs: nil,
                                     outputErrorUs: nil, filterOffsetUs: filterOffset, filterErrorUs: filterError, outcome: "queued"))
            trace = traces.count - 1
        }
        // A chunk with no frames has nothing to play and no first frame to place: it is dropped
        // (a server may send one; queued, a correction that repeats its first frame would read
        // a frame that is not there).
        guard buffer.frameCount > 0 else {
            statistics.chunksDropped += 1
            if let trace { traces[trace].outcome = "dropped" }
            return
        }
        let duration = Double(buffer.frameCount) * 1e6 / Double(format.sampleRate)
        // A chunk whose end has already passed can never be heard.
        if mapping.synchronized && Double(predicted) + duration < Double(now) {
            statistics.chunksLate += 1
            if let trace { traces[trace].outcome = "late" }
            return
        }
        if mapping.synchronized && predicted - now > settings.maximumLeadUs {
            statistics.chunksDropped += 1
            if let trace { traces[trace].outcome = "dropped" }
            return
        }
        if queuedBytes + compressedBytes > settings.bufferCapacity {
            statistics.chunksDropped += 1
            if let trace { traces[trace].outcome = "dropped" }
            return
        }
        var entry = Queued(timestamp: timestamp, buffer: buffer, format: format, compressedBytes: compressedBytes)
        entry.traceIndex = trace
        // Keep timestamp order; a duplicate timestamp is dropped.
        if let last = queue.last, last.timestamp >= timestamp {
            guard !queue.contains(where: { $0.timestamp == timestamp }) else {
                statistics.chunksDropped += 1
                if let trace { traces[trace].outcome = "dropped" }
                return
            }
            let index = queue.firstIndex { $0.timestamp > timestamp } ?? queue.count
            queue.insert(entry, at: index)
        } else {
            queue.append(entry)
        }
        queuedBytes += compressedBytes
    }

    /// Records a chunk that failed to decode.
    public mutating func recordUndecodable() {
        statistics.chunksReceived += 1
        statistics.chunksDropped += 1
    }

    /// Drops everything queued (stream/clear, stream/end, a new stream) and snaps on the next chunk.
    public mutating func clear(endOfStream: Bool = false) {
        for q in queue { if let t = q.traceIndex { traces[t].outcome = "cleared" } }
        queue.removeAll()
        queuedBytes = 0
        needsSnap = true
        inUnderrun = false
        if endOfStream { streaming = false }
    }

    /// Fills `frameCount` frames for the DAC. The block's first frame leaves at `departureUs`
    /// (client clock, fractional µs); each frame lasts `frameDurationUs`. Samples are
    /// full-scale 32-bit, interleaved for `format`. Returns the frames filled with audio (the
    /// rest is silence) — filling stops early at a format change, which the caller applies
    /// before the next block.
    public mutating func render(into out: inout [Int32], frameCount: Int, format: OutputFormat, departureUs: Double,
                                frameDurationUs: Double, mapping: ClockMapping) -> Int {
        let channels = format.channels
        if out.count < frameCount * channels { out = [Int32](repeating: 0, count: frameCount * channels) }
        var filled = 0
        var audible = 0
        while filled < frameCount {
            guard var chunk = queue.first, mapping.synchronized else {
                // Nothing to play: silence. An underrun mid-stream means the next chunk snaps.
                if streaming && queue.isEmpty && !inUnderrun && playbackStartUs != nil {
                    statistics.underruns += 1
                    inUnderrun = true
                    needsSnap = true
                }
                fillSilence(&out, from: filled, to: frameCount, channels: channels)
                filled = frameCount
                break
            }
            if chunk.format != format {
                // The DAC must switch formats first; the remainder of this block is silence.
                fillSilence(&out, from: filled, to: frameCount, channels: channels)
                filled = frameCount
                break
            }
            inUnderrun = false
            let now = departureUs + Double(filled) * frameDurationUs
            let frameUs = 1e6 / Double(chunk.format.sampleRate)
            if !chunk.started {
                let ideal = Double(idealStart(chunk.timestamp, mapping)) + Double(chunk.position) * frameUs
                let error = now - ideal          // + means this frame would leave late
                if needsSnap || abs(error) > settings.snapThresholdUs {
                    if error < -frameUs / 2 {
                        // Early: play silence until the chunk's moment.
                        let n = min(Int((-error / frameDurationUs).rounded()), frameCount - filled)
                        fillSilence(&out, from: filled, to: filled + n, channels: channels)
                        filled += n
                        statistics.framesInserted += n
                        if filled < frameCount { needsSnap = false; statistics.snaps += 1 }
                        continue
                    }
                    if error > frameUs / 2 {
                        // Late: skip the prefix that should already have played.
                        let skip = Int((error / frameUs).rounded())
                        if chunk.position + skip >= chunk.buffer.frameCount {
                            statistics.chunksLate += 1
                            if let t = chunk.traceIndex { traces[t].outcome = "late" }
                            popFront()
                            continue
                        }
                        chunk.position += skip
                        statistics.framesDropped += skip
                    }
                    needsSnap = false
                    statistics.snaps += 1
                } else if abs(error) > settings.deadBandUs {
                    // Gentle correction in whole frames (21 µs granularity at 48 kHz), never
                    // more than 0.5 % of the chunk: inaudible, and fast enough for a 0.5 % drift.
                    let cap = max(1, Int(0.005 * Double(chunk.buffer.frameCount)))
                    let n = min(max(1, Int((abs(error) / frameUs).rounded())), cap)
                    if error > 0 {
                        chunk.position = min(chunk.position + n, chunk.buffer.frameCount - 1)
                        statistics.framesDropped += n
                    } else {
                        // Duplicate the chunk's first frame n times.
                        let copies = min(n, frameCount - filled)
                        for k in 0..<copies { copyFrames(&out, at: filled + k, from: chunk, index: chunk.position, count: 1, channels: channels) }
                        filled += copies
                        statistics.framesInserted += copies
                    }
                }
                chunk.started = true
                let departure = departureUs + Double(filled) * frameDurationUs
                let idealNow = Double(idealStart(chunk.timestamp, mapping)) + Double(chunk.position) * frameUs
                let outputError = departure - idealNow
                if playbackStartUs == nil { playbackStartUs = departure }
                if departure - (playbackStartUs ?? departure) >= settings.convergenceUs {
                    statistics.maxOutputErrorUs = max(statistics.maxOutputErrorUs, abs(outputError))
                    statistics.outputErrorsMeasured += 1
                }
                if let t = chunk.traceIndex {
                    traces[t].firstSampleOutUs = Int64(departure.rounded())
                    traces[t].outputErrorUs = outputError
                    traces[t].outcome = "played"
                }
            }
            let n = min(chunk.buffer.frameCount - chunk.position, frameCount - filled)
            copyFrames(&out, at: filled, from: chunk, index: chunk.position, count: n, channels: channels)
            chunk.position += n
            filled += n
            audible += n
            statistics.secondsPlayed += Double(n) / Double(chunk.format.sampleRate)
            if chunk.position >= chunk.buffer.frameCount {
                statistics.chunksPlayed += 1
                popFront()
            } else {
                queue[0] = chunk
            }
        }
        applyGain(&out, frames: frameCount, channels: channels)
        return audible
    }

    private mutating func popFront() {
        queuedBytes -= queue.removeFirst().compressedBytes
    }

    private func fillSilence(_ out: inout [Int32], from: Int, to: Int, channels: Int) {
        guard to > from else { return }
        out.withUnsafeMutableBufferPointer { o in
            UnsafeMutableBufferPointer(rebasing: o[(from * channels)..<(to * channels)]).update(repeating: 0)
        }
    }

    /// Copies `count` frames from the chunk's frame `index` to the block's frame `frame`, scaled
    /// to the full 32-bit range; channels the chunk lacks are silent. The DAC's hot loop: one
    /// pass over raw buffers (the ranges are checked once, here, not per sample).
    private func copyFrames(_ out: inout [Int32], at frame: Int, from chunk: Queued, index: Int, count: Int, channels: Int) {
        let sourceChannels = chunk.buffer.channels
        precondition(count >= 0 && frame >= 0 && index >= 0 && (frame + count) * channels <= out.count
                     && (index + count) * sourceChannels <= chunk.buffer.samples.count)
        guard count > 0 else { return }
        let shift = Int32(32 - chunk.buffer.bitDepth)      // 0...24 for the depths a stream may have
        out.withUnsafeMutableBufferPointer { o in
            chunk.buffer.samples.withUnsafeBufferPointer { s in
                let target = o.baseAddress! + frame * channels
                let source = s.baseAddress! + index * sourceChannels
                if sourceChannels == channels {
                    for i in 0..<(count * channels) { target[i] = source[i] &<< shift }
                } else {
                    for f in 0..<count {
                        for c in 0..<channels { target[f * channels + c] = c < sourceChannels ? source[f * sourceChannels + c] &<< shift : 0 }
                    }
                }
            }
        }
    }

    /// Applies the volume gain, ramping linearly towards the target over ~10 ms of frames.
    private mutating func applyGain(_ out: inout [Int32], frames: Int, channels: Int) {
        if gain == 1.0 && targetGain == 1.0 { return }
        let step = 1.0 / 480.0
        precondition(frames * channels <= out.count)
        var gain = self.gain
        let target = targetGain
        out.withUnsafeMutableBufferPointer { o in
            for f in 0..<frames {
                if gain < target { gain = min(target, gain + step) } else if gain > target { gain = max(target, gain - step) }
                for c in 0..<channels {
                    let i = f * channels + c
                    o[i] = Int32(clamping: Int64((Double(o[i]) * gain).rounded()))
                }
            }
        }
        self.gain = gain
    }
}
