/// The audio plane's jitter buffer: Opus frames (one per 5 ms datagram) wait here in sequence
/// order until the output takes them. It never blocks the output: a frame that did not arrive in
/// time is handed out as "conceal" (the decoder's loss concealment fills it) and the play head
/// moves on; frames arriving after their turn are counted and dropped.
///
/// Starts playing once `targetDepth` frames are buffered (priming). When the buffer runs dry it
/// conceals up to `maxConcealRun` frames, then primes again. When it holds more than `maxDepth`
/// (the sender's clock runs fast, or a burst arrived), it drops the oldest frames back to the
/// target, so latency cannot creep. Holds at most `capacity` frames; a sequence that far ahead
/// restarts the stream from it.
///
/// Adaptive (`adaptive: true`): the target grows by one frame (5 ms) for each frame that
/// arrived after its turn, up to `maxDepth` − 1, the play head holding back one frame
/// (concealed) to make the room at once, and by two when the ring ran dry and primes again; after `relaxAfterFrames` frames played with nothing
/// late it shrinks by one, skipping a frame when more than the new target is buffered. So the
/// delay follows the link's jitter between `targetDepth` and `maxDepth` frames (15–90 ms by default).
public struct AudioJitterRing: Sendable {
    public enum Next: Sendable, Equatable {
        /// The frame to decode.
        case frame(sequence: UInt32, ptsNanoseconds: UInt64, opus: [UInt8])
        /// This frame is missing: conceal it.
        case conceal(sequence: UInt32)
        /// Not playing yet (priming): output silence.
        case waiting
    }

    public enum Arrival: Sendable, Equatable { case accepted, late, duplicate, restarted }

    public struct Counters: Sendable, Equatable {
        public var accepted = 0, late = 0, duplicate = 0, concealed = 0, droppedForLatency = 0, underruns = 0, restarts = 0
        /// Adaptive: frames held back to deepen the buffer, and times it grew and shrank.
        public var held = 0, grown = 0, shrunk = 0
    }

    public let targetDepth: Int
    public let maxDepth: Int
    public let capacity: Int
    public let maxConcealRun: Int
    public let adaptive: Bool
    public let relaxAfterFrames: Int
    /// The depth it primes to and trims back to now (`targetDepth` unless adaptive).
    public private(set) var currentTarget: Int
    private var pendingHolds = 0
    private var framesSinceLate = 0
    public private(set) var counters = Counters()
    private var slots: [(sequence: UInt32, pts: UInt64, opus: [UInt8])?]
    private var playing = false
    private var started = false
    private var head: UInt32 = 0          // next sequence to hand out
    private var newest: UInt32 = 0
    private var concealRun = 0

    public init(targetDepth: Int = 3, maxDepth: Int = 18, capacity: Int = 64, maxConcealRun: Int = 4,
                adaptive: Bool = false, relaxAfterFrames: Int = 2000) {
        self.targetDepth = max(1, targetDepth)
        self.capacity = max(capacity, self.targetDepth + 1)
        self.maxDepth = min(max(maxDepth, self.targetDepth), self.capacity - 1)
        self.maxConcealRun = max(1, maxConcealRun)
        self.adaptive = adaptive
        self.relaxAfterFrames = max(1, relaxAfterFrames)
        currentTarget = self.targetDepth
        slots = Array(repeating: nil, count: self.capacity)
    }

    /// Frames from the play head to the newest arrival.
    public var depth: Int { started ? Int(newest &- head &+ 1) : 0 }
    public var isPlaying: Bool { playing }

    @discardableResult
    public mutating func insert(_ packet: AudioPacket) -> Arrival {
        let s = packet.sequence
        if !started {
            started = true
            head = s
            newest = s
        } else if Int32(bitPattern: s &- head) < 0 {
            counters.late += 1
            if adaptive {
                framesSinceLate = 0
                if currentTarget < maxDepth - 1 {
                    currentTarget += 1
                    // While priming the deeper target is waited for anyway; while playing the head holds back.
                    if playing { pendingHolds += 1 }
                    counters.grown += 1
                }
            }
            return .late
        } else if s &- head >= UInt32(capacity) {
            // Far beyond what the ring holds: a stream restart or a long outage. Start over here.
            for i in slots.indices { slots[i] = nil }
            head = s
            newest = s
            playing = false
            counters.restarts += 1
            store(packet)
            return .restarted
        }
        if let existing = slots[index(s)], existing.sequence == s {
            counters.duplicate += 1
            return .duplicate
        }
        if Int32(bitPattern: s &- newest) > 0 { newest = s }
        store(packet)
        counters.accepted += 1
        // Too much buffered: skip the oldest frames back to the target depth.
        if playing && depth > maxDepth {
            while depth > currentTarget {
                slots[index(head)] = nil
                head &+= 1
                counters.droppedForLatency += 1
            }
        }
        return .accepted
    }

    /// What the output plays next (call once per 5 ms frame).
    public mutating func next() -> Next {
        guard started else { return .waiting }
        if !playing {
            guard depth >= currentTarget else { return .waiting }
            playing = true
            concealRun = 0
        }
        if pendingHolds > 0 {
            // Deepen the buffer by one frame now: the head waits, the output conceals.
            pendingHolds -= 1
            counters.held += 1
            counters.concealed += 1
            return .conceal(sequence: head &- 1)
        }
        if adaptive {
            framesSinceLate += 1
            if framesSinceLate >= relaxAfterFrames && currentTarget > targetDepth {
                framesSinceLate = 0
                currentTarget -= 1
                counters.shrunk += 1
                // Buffered beyond the new target: skip the oldest frame.
                if depth > currentTarget + 1, let slot = slots[index(head)], slot.sequence == head {
                    slots[index(head)] = nil
                    head &+= 1
                    counters.droppedForLatency += 1
                }
            }
        }
        let s = head
        let i = index(s)
        if let slot = slots[i], slot.sequence == s {
            slots[i] = nil
            head &+= 1
            concealRun = 0
            if Int32(bitPattern: newest &- head) < 0 { newest = head &- 1 }
            return .frame(sequence: s, ptsNanoseconds: slot.pts, opus: slot.opus)
        }
        // Missing: conceal it, unless the buffer is dry for too long (then prime again).
        let dry = Int32(bitPattern: newest &- s) < 0
        if dry {
            concealRun += 1
            if concealRun > maxConcealRun {
                counters.underruns += 1
                playing = false
                newest = head &- 1
                if adaptive && currentTarget < maxDepth - 1 {
                    // Dry for longer than concealment covers: prime deeper (two frames more).
                    currentTarget = min(maxDepth - 1, currentTarget + 2)
                    framesSinceLate = 0
                    counters.grown += 1
                }
                return .waiting
            }
        }
        head &+= 1
        if Int32(bitPattern: newest &- head) < -1 { newest = head &- 1 }
        counters.concealed += 1
        return .conceal(sequence: s)
    }

    private func index(_ s: UInt32) -> Int { Int(s % UInt32(capacity)) }

    private mutating func store(_ p: AudioPacket) {
        slots[index(p.sequence)] = (p.sequence, p.ptsNanoseconds, p.opus)
    }
}
