/// What the video receiver reports after a datagram.
public enum VideoEvent: Sendable, Equatable {
    /// A complete access unit, FEC-repaired where needed.
    case frame(VideoFrame)
    /// A speed-probe filler frame completed (its bytes are not kept).
    case probe(ProbeFrame)
    /// Video frames that can no longer complete: ask the host for a keyframe, or for reference
    /// frame invalidation over the range when it is short (punktfunk/1 §8, RfiRequest ≤ 256 frames).
    case framesLost(FrameLoss)
}

/// One reassembled access unit.
public struct VideoFrame: Sendable, Equatable {
    /// The access unit (Annex-B for HEVC and H.264, OBUs for AV1), trimmed to its true length.
    public var data: [UInt8]
    public var frameIndex: UInt32
    /// Host capture time (CLOCK_REALTIME nanoseconds).
    public var ptsNanoseconds: UInt64
    public var userFlags: UserFlags
    /// Data shards the FEC rebuilt.
    public var recoveredShards: Int
    /// Arrival time (the caller's clock) of the datagram that completed the frame.
    public var completedAtNanoseconds: UInt64
}

/// A completed probe filler frame.
public struct ProbeFrame: Sendable, Equatable {
    public var frameIndex: UInt32
    public var frameBytes: Int
    public var recoveredShards: Int
}

/// A run of video frames declared lost.
public struct FrameLoss: Sendable, Equatable {
    public enum Reason: Sendable, Equatable {
        /// Not enough shards arrived within the loss window.
        case incomplete
        /// No shard of these frames arrived at all before newer frames moved past them.
        case neverArrived
        /// Shards arrived but the FEC could not rebuild a block (corrupt or inconsistent shards).
        case unrecoverable
        /// The frame window was full and this, the oldest frame, made room.
        case evicted
        /// The stream's frame index jumped beyond the window; everything between counts as lost.
        case indexJump
    }
    public var firstFrame: UInt32
    /// Frames in the run (it may wrap around 2^32).
    public var count: UInt32
    public var reason: Reason

    /// The last frame of the run.
    public var lastFrame: UInt32 { firstFrame &+ (count &- 1) }
    /// Whether reference frame invalidation can repair the run (at most 256 frames), or only a keyframe.
    public var fitsReferenceInvalidation: Bool { count <= 256 }
}

/// Running totals of a video receiver. All counts since the receiver was made.
public struct VideoReceiverCounters: Sendable, Equatable {
    /// Datagrams given to the receiver and their bytes.
    public var datagrams: UInt64 = 0
    public var bytes: UInt64 = 0
    /// Dropped before opening: sequence older than the replay window.
    public var late: UInt64 = 0
    /// Dropped before opening: sequence already seen.
    public var duplicate: UInt64 = 0
    /// Dropped before opening: sequence implausibly far ahead.
    public var farFuture: UInt64 = 0
    /// Dropped: the AEAD tag did not verify.
    public var authenticationFailed: UInt64 = 0
    /// Dropped: too short, wrong magic, or a header whose geometry breaks the limits.
    public var malformed: UInt64 = 0
    /// Shards that arrived for frames already given up on or outside the window.
    public var staleShards: UInt64 = 0
    /// Shards not needed: their block or frame was already complete, or a second copy of a shard.
    public var redundantShards: UInt64 = 0
    /// Data shards the FEC rebuilt.
    public var fecRecoveredShards: UInt64 = 0
    /// FEC blocks that had enough shards but could not be rebuilt.
    public var unrecoverableBlocks: UInt64 = 0
    /// Video frames delivered and declared lost.
    public var framesCompleted: UInt64 = 0
    public var framesLost: UInt64 = 0
    /// Probe filler: packets, wire bytes, completed frames.
    public var probePackets: UInt64 = 0
    public var probeBytes: UInt64 = 0
    public var probeFrames: UInt64 = 0
    /// Shards dropped because the frame buffers' memory budget was spent.
    public var overBudget: UInt64 = 0

    public init() {}
}
