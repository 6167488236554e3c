import FarcastSupport
import Synchronization

/// Receives a session's video: the data plane's `VideoReceiver` on the data socket's thread,
/// driven by the session's `StreamingPolicy` (reference invalidation or keyframe requests after
/// lost frames, loss reports, the bitrate rule) and measuring capture→receipt latency with the
/// clock offset.
///
/// `@unchecked Sendable`: `receiver`, `policy` and `events` are used only inside `handle`, which
/// runs only on the one `DataPlaneSocket` thread this object is started on; everything other
/// tasks read (`statistics`, the clock offset they write) sits behind mutexes.
public final class VideoStreamSession: @unchecked Sendable {
    /// A delivered access unit, handed to the caller on the data socket's thread.
    public typealias FrameHandler = @Sendable (VideoFrame, _ latencyNs: Int64, _ isKeyframe: Bool) -> Void

    /// What the session counted.
    public struct Statistics: Sendable {
        public var receiver = VideoReceiverCounters()
        public var accessUnits: UInt64 = 0
        public var keyframes: UInt64 = 0
        /// Keyframe requests sent, for lost frames and for stalls.
        public var keyframeRequests = 0
        /// Of those, the ones sent because no video arrived (`watchForStalls`).
        public var stallKeyframeRequests = 0
        public var rfiRequests = 0
        public var lossReports = 0
        /// SetBitrate messages sent by the bitrate rule, and the bitrate the host last confirmed
        /// (BitrateChanged; the Welcome's until then).
        public var bitrateRequests = 0
        public var bitrateKbps: UInt32 = 0
        public var latency = LatencyPercentiles()
        public var clockOffsetNs: Int64 = 0
        public var lastMode: StreamMode?
    }

    let client: PunktfunkClient
    /// The session's monotonic clock (`PunktfunkClient.Options.clock`), read once per datagram.
    let monotonic: any MonotonicClock
    /// The Welcome's codec (HEVC when it names one this client does not know), for telling keyframes.
    public let codec: VideoCodec
    private let receiver: VideoReceiver
    private var policy: StreamingPolicy
    /// BitrateChanged values from the control task, applied to the policy at the next interval.
    private let confirmedBitrate = Mutex<UInt32?>(nil)
    private var events: [VideoEvent] = []
    /// The offset estimate, and whether one has been applied yet (frames before the first clock
    /// batch are counted but their latency is not recorded: it would use a made-up offset).
    private let clock: Mutex<(estimator: ClockOffsetEstimator, ready: Bool)>
    private let stats = Mutex(Statistics())
    private let onFrame: FrameHandler?
    /// Created at the first `watchForStalls`, which is when the stream is awaited from.
    private let stallWatch = Mutex<VideoStallWatch?>(nil)
    private let stallLimitNs: Int64

    /// `policy` decides recovery requests, loss reports and the bitrate; by default RFI first and
    /// the bitrate rule from the Welcome's bitrate (a policy with `bitrate: nil` keeps it fixed).
    /// `stallLimitNs` is how long a stream may send nothing before `watchForStalls` says to end it.
    public init(client: PunktfunkClient, welcome: Welcome, clock: ClockOffsetEstimator, policy: StreamingPolicy? = nil,
                stallLimitNs: Int64 = 10_000_000_000, onFrame: FrameHandler? = nil) throws(DataPlaneError) {
        self.stallLimitNs = stallLimitNs
        let key = try welcome.datagramKey()
        let limits = VideoStreamLimits(shardBytes: Int(welcome.shardPayload), maxDataShardsPerBlock: Int(welcome.maxDataPerBlock))
        receiver = try VideoReceiver(key: key, limits: limits)
        // The FEC's GF(2^16) tables are built on first use (about a second in a debug build); build
        // them now, before Start, so the first repaired frame does not stall the socket thread.
        var warmUp = LeopardCodec()
        _ = try? warmUp.decode(originalCount: 2, recoveryCount: 2, originals: [0: [0, 0]],
                               recovery: [0: try warmUp.encode([[0, 0], [1, 1]], recoveryCount: 2)[0]])
        self.client = client
        monotonic = client.options.clock
        codec = VideoCodec(welcomeCodec: welcome.codec) ?? .hevc
        self.policy = policy ?? StreamingPolicy(bitrate: BitrateAdaptation(openedAtKbps: welcome.bitrateKbps))
        self.clock = Mutex((clock, clock.rttNs != nil))
        self.onFrame = onFrame
        events.reserveCapacity(16)
        let kbps = welcome.bitrateKbps
        stats.withLock { $0.clockOffsetNs = clock.offsetNs; $0.lastMode = welcome.mode; $0.bitrateKbps = kbps }
    }

    /// Feeds one datagram (data socket thread only).
    public func handle(_ datagram: UnsafeMutableRawBufferPointer, receivedAt realtimeNs: UInt64) {
        events.removeAll(keepingCapacity: true)
        receiver.receive(UnsafeRawBufferPointer(datagram), at: realtimeNs, into: &events)
        let now = monotonic.now().nanoseconds
        var outgoing: [ControlMessage] = []
        for event in events {
            switch event {
            case .frame(let frame):
                let keyframe = Self.isKeyframe(frame.data, codec: codec)
                if let request = policy.frameDelivered(now: now, isKeyframe: keyframe, flags: frame.userFlags) { outgoing.append(request) }
                let (latency, ready) = clock.withLock { ($0.estimator.latencyNs(ptsNs: frame.ptsNanoseconds, receivedNs: frame.completedAtNanoseconds), $0.ready) }
                stats.withLock { s in
                    s.accessUnits += 1
                    if keyframe { s.keyframes += 1 }
                    if ready { s.latency.record(latency) }
                }
                onFrame?(frame, latency, keyframe)
            case .framesLost(let loss):
                if let request = policy.frameLost(loss, now: now) { outgoing.append(request) }
            case .probe:
                break
            }
        }
        if policy.lossReportDue(now: now) {
            if let kbps = confirmedBitrate.withLock({ c -> UInt32? in defer { c = nil }; return c }) { policy.bitrateConfirmed(kbps: kbps) }
            let ppm = receiver.takeLossPartsPerMillion()
            outgoing.append(.lossReport(lossPPM: ppm))
            if let change = policy.intervalEnded(lossPPM: ppm) { outgoing.append(change) }
        }
        let counters = receiver.counters
        let (keyframes, rfis) = (policy.keyframeRequests, policy.rfiRequests)
        stats.withLock { s in
            s.receiver = counters
            s.keyframeRequests = keyframes + s.stallKeyframeRequests
            s.rfiRequests = rfis
            for message in outgoing {
                switch message {
                case .lossReport: s.lossReports += 1
                case .setBitrate: s.bitrateRequests += 1
                default: break
                }
            }
        }
        for message in outgoing { client.send(message) }
    }

    /// Checks whether video has stopped (call it a few times a second from the task that runs
    /// the session): during a stall it asks the host for a keyframe (`VideoStallWatch`'s rule)
    /// and counts the request; `.giveUp` means the stall limit has passed.
    public func watchForStalls(now: Int64) -> VideoStallWatch.Action {
        let count = stats.withLock { $0.accessUnits }
        let limit = stallLimitNs
        let action = stallWatch.withLock { stored -> VideoStallWatch.Action in
            var watch = stored ?? VideoStallWatch(startedAt: now, giveUpAfterNs: limit)
            defer { stored = watch }
            return watch.observe(accessUnits: count, now: now)
        }
        switch action {
        case .stalled, .requestKeyframe:
            stats.withLock { s in
                s.stallKeyframeRequests += 1
                s.keyframeRequests += 1
            }
            client.send(.requestKeyframe)
        case .none, .resumed, .giveUp:
            break
        }
        return action
    }

    /// Applies a mid-stream clock batch (the caller runs it on its own task).
    public func applyClock(_ batch: [ClockSample]) {
        let offset = clock.withLock { c -> Int64 in
            c.estimator.apply(batch: batch)
            c.ready = true
            return c.estimator.offsetNs
        }
        stats.withLock { $0.clockOffsetNs = offset }
    }

    /// Records the mode the host confirmed in Reconfigured.
    public func modeChanged(to mode: StreamMode) {
        stats.withLock { $0.lastMode = mode }
    }

    /// Records the host's BitrateChanged (any thread): the figure in the statistics, and the
    /// bitrate rule's starting point at its next interval.
    public func bitrateChanged(to kbps: UInt32) {
        confirmedBitrate.withLock { $0 = kbps }
        stats.withLock { $0.bitrateKbps = kbps }
    }

    /// A copy of the figures so far.
    public var statistics: Statistics { stats.withLock { $0 } }

    /// True when an access unit is a point a decoder can start from (HEVC IDR/BLA/CRA, an H.264
    /// IDR, an AV1 key frame), by the media layer's parse.
    public static func isKeyframe(_ au: [UInt8], codec: VideoCodec) -> Bool {
        (try? AccessUnit(au, codec: codec))?.isRandomAccessPoint ?? false
    }
}
