import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A whole picture in planar YUV that the window shows at once: a video stream's decoded frame.
/// The planes are uploaded into a YUV texture as they are (the colour conversion happens where
/// the picture is drawn, not on the producer's side).
public protocol ViewerPicture: AnyObject, Sendable {
    var width: Int { get }
    var height: Int { get }
    var layout: ViewerPictureLayout { get }
    var colour: ViewerPictureColour { get }
    /// The planes' first bytes and row pitches (3 for `.i420`, 2 for `.nv12`), valid during `body`.
    func withPlanes<R>(_ body: (_ planes: [UnsafePointer<UInt8>], _ pitches: [Int]) throws -> R) rethrows -> R
}

public enum ViewerPictureLayout: Sendable, Equatable {
    /// 8-bit 4:2:0: Y, U, V planes.
    case i420
    /// 8-bit 4:2:0: Y, then interleaved UV.
    case nv12
}

/// The YUV→RGB matrix and value range a picture's samples use.
public struct ViewerPictureColour: Sendable, Equatable {
    public enum Matrix: Sendable, Equatable { case bt601, bt709, bt2020 }
    public var matrix: Matrix
    public var fullRange: Bool
    public init(matrix: Matrix, fullRange: Bool) {
        self.matrix = matrix
        self.fullRange = fullRange
    }
}

/// What the window did with the pictures a stream offered it.
public struct PictureStatistics: Sendable, Equatable, Codable {
    /// Pictures offered (`ViewerWindow.show`).
    public var offered = 0
    /// Shown: each picture at most once.
    public var presented = 0
    /// Replaced by a newer one before the window could show them (it drops, never queues).
    public var replaced = 0
    /// The most pictures shown per second (the display's refresh rate, or a lower configured limit).
    public var cadence: Double?
    /// The frame number of the picture shown last.
    public var lastPresentedFrame: UInt32?
    /// Capture→present latency of the shown pictures (milliseconds), when the producer gave capture times.
    public var latencyP50Milliseconds: Double?
    public var latencyP95Milliseconds: Double?
    public var latencySamples = 0
}

/// The hand-over of whole pictures from a stream to the window: one place, the newest picture
/// wins (a picture the window has not shown yet is replaced and counted, so a late window drops
/// rather than queues and shows each picture at most once), and what was presented when.
public final class PictureSlot: Sendable {
    struct Entry: @unchecked Sendable {
        // @unchecked: ViewerPicture is Sendable; the tuple of an existential and values is not inferred.
        var picture: any ViewerPicture
        var frameNumber: UInt32
        /// Capture time on this machine's CLOCK_REALTIME (nanoseconds), already corrected for the host's clock offset.
        var capturedAtRealtimeNs: Int64?
    }

    private struct State {
        var pending: Entry?
        var statistics = PictureStatistics()
        /// Every capture→present latency (ns), for the percentiles; capped.
        var latencies: [Int64] = []
    }
    private let state = Mutex(State())
    /// Latency samples kept (an hour at 60 fps).
    static let maximumSamples = 216_000

    public init() {}

    /// Offers a picture; returns true when it replaced one the window had not shown yet.
    @discardableResult
    func offer(_ entry: Entry) -> Bool {
        state.withLock { s in
            s.statistics.offered += 1
            let replaced = s.pending != nil
            if replaced { s.statistics.replaced += 1 }
            s.pending = entry
            return replaced
        }
    }

    /// A picture waits to be shown.
    var hasPending: Bool { state.withLock { $0.pending != nil } }

    /// The window's present cadence, for the statistics.
    var cadence: Double? {
        get { state.withLock { $0.statistics.cadence } }
        set { state.withLock { $0.statistics.cadence = newValue } }
    }

    /// The picture to show next, if a new one came (window thread).
    func take() -> Entry? {
        state.withLock { s in
            defer { s.pending = nil }
            return s.pending
        }
    }

    /// The window presented `entry` at `realtimeNs` (CLOCK_REALTIME).
    func presented(_ entry: Entry, at realtimeNs: Int64) {
        state.withLock { s in
            s.statistics.presented += 1
            s.statistics.lastPresentedFrame = entry.frameNumber
            if let captured = entry.capturedAtRealtimeNs, s.latencies.count < Self.maximumSamples {
                s.latencies.append(realtimeNs - captured)
            }
        }
    }

    public var statistics: PictureStatistics {
        let (stats, latencies) = state.withLock { ($0.statistics, $0.latencies) }
        var result = stats
        let sorted = latencies.sorted()
        result.latencySamples = sorted.count
        func quantile(_ q: Double) -> Double? {
            guard !sorted.isEmpty else { return nil }
            let index = min(sorted.count - 1, Int((Double(sorted.count - 1) * q).rounded()))
            return Double(sorted[index]) / 1e6
        }
        result.latencyP50Milliseconds = quantile(0.5)
        result.latencyP95Milliseconds = quantile(0.95)
        return result
    }

    /// CLOCK_REALTIME now, in nanoseconds (what capture times are compared with).
    public static func realtimeNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}

extension ViewerWindow {
    /// Shows a whole picture (a video stream's): it replaces a picture not yet shown. `frameNumber`
    /// and `capturedAtRealtimeNs` (this machine's CLOCK_REALTIME) feed `pictureStatistics`.
    public func show(_ picture: any ViewerPicture, frameNumber: UInt32, capturedAtRealtimeNs: Int64?) {
        pictures.offer(PictureSlot.Entry(picture: picture, frameNumber: frameNumber, capturedAtRealtimeNs: capturedAtRealtimeNs))
        wake()
    }

    /// What became of the pictures given to `show`.
    public var pictureStatistics: PictureStatistics { pictures.statistics }
}
