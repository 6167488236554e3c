import Synchronization

/// The hand-over between the network side (which decodes into its own framebuffer) and the
/// window thread (which owns the texture): the changed rectangles are copied here under a lock
/// and uploaded from here, so neither side touches the other's memory and no update costs a
/// full-frame copy. Pixels are 32-bit words 0x00RRGGBB (SDL's XRGB8888).
public final class FrameStaging: Sendable {
    struct State {
        var width = 0
        var height = 0
        var pixels: [UInt32] = []
        var dirty: [ViewerRect] = []
        /// The arrival time of the oldest update not yet presented (latency starts there).
        var oldestPending: Double?
        var updates = 0
        var bytes = 0
        /// Bumped when the size changes: the window recreates its texture.
        var generation = 0
    }

    /// More pending rectangles than this are merged into their bounding box.
    static let maximumRects = 64

    private let state = Mutex(State())

    public init() {}

    /// Copies `dirty` (clipped to the picture) from a `width`×`height` source whose rows are
    /// `stride` words apart. A size change re-sizes the stage and marks everything dirty.
    /// `arrival` is when the update arrived (seconds on the window's clock), `bytes` what it cost.
    public func stage(width: Int, height: Int, stride: Int, dirty: [ViewerRect], from source: UnsafeBufferPointer<UInt32>,
                      arrival: Double, bytes: Int) {
        precondition(width >= 0 && height >= 0 && stride >= width && source.count >= stride * max(0, height - 1) + width)
        state.withLock { s in
            var rects = dirty
            if s.width != width || s.height != height {
                s.width = width
                s.height = height
                s.pixels = [UInt32](repeating: 0, count: width * height)
                s.generation += 1
                s.dirty = []
                rects = [ViewerRect(x: 0, y: 0, width: width, height: height)]
            }
            let bounds = ViewerRect(x: 0, y: 0, width: width, height: height)
            s.pixels.withUnsafeMutableBufferPointer { dst in
                for rect in rects {
                    let r = rect.intersection(bounds)
                    guard !r.isEmpty else { continue }
                    for row in r.y..<(r.y + r.height) {
                        (dst.baseAddress! + row * width + r.x).update(from: source.baseAddress! + row * stride + r.x, count: r.width)
                    }
                    s.dirty.append(r)
                }
            }
            if s.dirty.count > Self.maximumRects {
                s.dirty = [s.dirty.reduce(ViewerRect(x: 0, y: 0, width: 0, height: 0)) { $0.union($1) }]
            }
            if s.oldestPending == nil { s.oldestPending = arrival }
            s.updates += 1
            s.bytes += bytes
        }
    }

    /// What the window needs to bring its texture up to date.
    public struct Pending {
        public var width: Int
        public var height: Int
        public var generation: Int
        public var dirty: [ViewerRect]
        public var oldestArrival: Double?
        public var updates: Int
        public var bytes: Int
    }

    /// Hands the pending rectangles to `upload` (with the whole stage, rows `width` words
    /// apart) and clears them. `upload` runs under the lock: keep it to the texture upload.
    public func drain(_ upload: (Pending, UnsafeBufferPointer<UInt32>) -> Void) {
        state.withLock { s in
            let pending = Pending(width: s.width, height: s.height, generation: s.generation, dirty: s.dirty,
                                  oldestArrival: s.oldestPending, updates: s.updates, bytes: s.bytes)
            s.dirty = []
            s.oldestPending = nil
            s.updates = 0
            s.bytes = 0
            s.pixels.withUnsafeBufferPointer { upload(pending, $0) }
        }
    }

    /// Reads the whole staged picture (rows `width` words apart) without taking what is pending.
    public func read(_ body: (_ width: Int, _ height: Int, UnsafeBufferPointer<UInt32>) -> Void) {
        state.withLock { s in s.pixels.withUnsafeBufferPointer { body(s.width, s.height, $0) } }
    }

    /// The staged picture's size.
    public var size: (width: Int, height: Int) { state.withLock { ($0.width, $0.height) } }
}
