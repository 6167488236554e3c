import Synchronization

/// Receives a session's video: the data plane's `VideoReceiver` on the data socket's thread,
/// driven by the session's `StreamingPolicy` (keyframe requests after lost frames, loss reports,
/// clock re-sync) and measuring capture→receipt latency with the clock offset.
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
        public var keyframeRequests = 0
        public var lossReports = 0
        public var latency = LatencyPercentiles()
        public var clockOffsetNs: Int64 = 0
        public var lastMode: StreamMode?
    }

    private let client: PunktfunkClient
    private let receiver: VideoReceiver
    private var policy = StreamingPolicy()
    private var events: [VideoEvent] = []
    /// The offset estimate, and whether one has been applied yet (frames before the first clock
    /// batch are counted but their latency is not recorded: it would use a made-up offset).
    private let clock: Mutex<(estimator: ClockOffsetEstimator, ready: Bool)>
    private let stats = Mutex(Statistics())
    private let onFrame: FrameHandler?

    public init(client: PunktfunkClient, welcome: Welcome, clock: ClockOffsetEstimator, onFrame: FrameHandler? = nil) throws(DataPlaneError) {
        let cipher: DatagramCipher = welcome.cipher == 1 ? .chaCha20Poly1305 : .aes128GCM
        let key = try DatagramKey(cipher: cipher, key: welcome.cipher == 1 ? welcome.chachaKey : welcome.key, salt: welcome.salt)
        let limits = VideoStreamLimits(shardBytes: Int(welcome.shardPayload), maxDataShardsPerBlock: Int(welcome.maxDataPerBlock))
        receiver = try VideoReceiver(key: key, limits: limits)
        // The FEC's GF(2^16) tables are built on first use (about a second in a debug build); build
        // them now, before Start, so the first repaired frame does not stall the socket thread.
        var warmUp = LeopardCodec()
        _ = try? warmUp.decode(originalCount: 2, recoveryCount: 2, originals: [0: [0, 0]],
                               recovery: [0: try warmUp.encode([[0, 0], [1, 1]], recoveryCount: 2)[0]])
        self.client = client
        self.clock = Mutex((clock, clock.rttNs != nil))
        self.onFrame = onFrame
        events.reserveCapacity(16)
        stats.withLock { $0.clockOffsetNs = clock.offsetNs; $0.lastMode = welcome.mode }
    }

    /// Feeds one datagram (data socket thread only).
    public func handle(_ datagram: UnsafeMutableRawBufferPointer, receivedAt realtimeNs: UInt64) {
        events.removeAll(keepingCapacity: true)
        receiver.receive(UnsafeRawBufferPointer(datagram), at: realtimeNs, into: &events)
        let now = DataPlaneSocket.monotonic()
        var outgoing: [ControlMessage] = []
        for event in events {
            switch event {
            case .frame(let frame):
                let keyframe = Self.isHEVCKeyframe(frame.data)
                if let request = policy.frameDelivered(now: now, isKeyframe: keyframe) { outgoing.append(request) }
                let (latency, ready) = clock.withLock { ($0.estimator.latencyNs(ptsNs: frame.ptsNanoseconds, receivedNs: frame.completedAtNanoseconds), $0.ready) }
                stats.withLock { s in
                    s.accessUnits += 1
                    if keyframe { s.keyframes += 1 }
                    if ready { s.latency.record(latency) }
                }
                onFrame?(frame, latency, keyframe)
            case .framesLost:
                if let request = policy.frameLost(now: now) { outgoing.append(request) }
            case .probe:
                break
            }
        }
        if policy.lossReportDue(now: now) {
            outgoing.append(.lossReport(lossPPM: receiver.takeLossPartsPerMillion()))
        }
        let counters = receiver.counters
        let requests = policy.keyframeRequests
        stats.withLock { s in
            s.receiver = counters
            s.keyframeRequests = requests
            s.lossReports += outgoing.filter { if case .lossReport = $0 { return true } else { return false } }.count
        }
        for message in outgoing { client.send(message) }
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

    /// A copy of the figures so far.
    public var statistics: Statistics { stats.withLock { $0 } }

    /// True when an HEVC access unit is a point a decoder can start from (IDR/BLA/CRA), by the
    /// media layer's Annex-B parse.
    public static func isHEVCKeyframe(_ au: [UInt8]) -> Bool {
        (try? AccessUnit(au, codec: .hevc))?.isRandomAccessPoint ?? false
    }
}
