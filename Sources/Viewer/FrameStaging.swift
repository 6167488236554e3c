import Synchronization

/// The hand-over between the network side and the window thread (which owns the texture), in one
/// of two ways:
/// - **lending** (VNC): the producer keeps the picture in its own memory (the decoder's
///   framebuffer) and says which rectangles changed (`markChanged`); at upload the window borrows
///   the picture for a moment through the producer's `Lender` and copies the changed rectangles
///   straight into its texture or window surface — one copy per changed pixel. When the producer
///   goes away it leaves its last picture here (`keep`) for redraws and the next connection.
/// - **staging** (`stage`): the changed rectangles are copied here under a lock, for producers
///   whose pictures do not stay put.
/// Either way neither side touches the other's memory unsynchronised and no update costs a
/// full-frame copy. Pixels are 32-bit words 0x00RRGGBB (SDL's XRGB8888), rows `width` words apart.
public final class FrameStaging: Sendable {
    /// Lends the producer's picture: calls `body` on the caller's thread with it (rows `width`
    /// words apart) while the producer changes nothing, and returns true; returns false without
    /// calling `body` when it cannot lend now (its thread is gone, or busy for too long).
    public typealias Lender = @Sendable (_ body: (_ width: Int, _ height: Int, UnsafeBufferPointer<UInt32>) -> Void) -> Bool

    struct State {
        var width = 0
        var height = 0
        /// The picture when no producer lends one (empty while lending).
        var pixels: [UInt32] = []
        var lender: Lender?
        var dirty: [ViewerRect] = []
        /// The arrival time of the oldest update not yet presented (latency starts there).
        var oldestPending: Double?
        var updates = 0
        var bytes = 0
        /// Bumped when the size changes: the window recreates its texture.
        var generation = 0

        /// A new picture size: everything is dirty, in a new generation.
        mutating func resize(width: Int, height: Int) {
            self.width = width
            self.height = height
            generation += 1
            dirty = [ViewerRect(x: 0, y: 0, width: width, height: height)]
        }

        mutating func record(_ rects: [ViewerRect], arrival: Double, bytes: Int) {
            let bounds = ViewerRect(x: 0, y: 0, width: width, height: height)
            for rect in rects {
                let r = rect.intersection(bounds)
                if !r.isEmpty { dirty.append(r) }
            }
            if dirty.count > FrameStaging.maximumRects {
                dirty = [dirty.reduce(ViewerRect(x: 0, y: 0, width: 0, height: 0)) { $0.union($1) }]
            }
            if oldestPending == nil { oldestPending = arrival }
            updates += 1
            self.bytes += bytes
        }

        mutating func take() -> Pending {
            defer {
                dirty = []
                oldestPending = nil
                updates = 0
                bytes = 0
            }
            return Pending(width: width, height: height, generation: generation, dirty: dirty,
                           oldestArrival: oldestPending, updates: updates, bytes: bytes)
        }

        /// Puts back what a drain took but could not upload.
        mutating func restore(_ pending: Pending) {
            guard pending.generation == generation else { return }
            dirty = pending.dirty + dirty
            if dirty.count > FrameStaging.maximumRects {
                dirty = [dirty.reduce(ViewerRect(x: 0, y: 0, width: 0, height: 0)) { $0.union($1) }]
            }
            if let arrival = pending.oldestArrival { oldestPending = min(oldestPending ?? arrival, arrival) }
            updates += pending.updates
            bytes += pending.bytes
        }
    }

    /// More pending rectangles than this are merged into their bounding box.
    static let maximumRects = 64

    private let state = Mutex(State())

    public init() {}

    /// The producer's picture (`width`×`height`, lent by `lender`) changed in `dirty`; nothing is
    /// copied. A size change marks everything dirty. `arrival` is when the update arrived (seconds
    /// on the window's clock), `bytes` what it cost.
    public func markChanged(width: Int, height: Int, dirty: [ViewerRect], arrival: Double, bytes: Int, lender: @escaping Lender) {
        precondition(width >= 0 && height >= 0)
        state.withLock { s in
            s.lender = lender
            s.pixels = []
            let resized = s.width != width || s.height != height
            if resized { s.resize(width: width, height: height) }
            s.record(resized ? [] : dirty, arrival: arrival, bytes: bytes)
        }
    }

    /// The lending producer goes away: its last picture (rows `stride` words apart) is copied here
    /// once, and redraws and uploads use this copy until a producer lends or stages again.
    public func keep(width: Int, height: Int, stride: Int, from source: UnsafeBufferPointer<UInt32>) {
        precondition(width >= 0 && height >= 0 && stride >= width && source.count >= stride * max(0, height - 1) + width)
        state.withLock { s in
            s.lender = nil
            if s.width != width || s.height != height { s.resize(width: width, height: height) }
            s.pixels = [UInt32](repeating: 0, count: width * height)
            s.pixels.withUnsafeMutableBufferPointer { dst in
                for row in 0..<height {
                    (dst.baseAddress! + row * width).update(from: source.baseAddress! + row * stride, count: width)
                }
            }
        }
    }

    /// Copies `dirty` (clipped to the picture) from a `width`×`height` source whose rows are
    /// `stride` words apart. A size change re-sizes the stage and marks everything dirty.
    /// `arrival` is when the update arrived (seconds on the window's clock), `bytes` what it cost.
    public func stage(width: Int, height: Int, stride: Int, dirty: [ViewerRect], from source: UnsafeBufferPointer<UInt32>,
                      arrival: Double, bytes: Int) {
        precondition(width >= 0 && height >= 0 && stride >= width && source.count >= stride * max(0, height - 1) + width)
        state.withLock { s in
            // A new size, or taking over from a lending producer: the whole picture is copied.
            let renewed = s.width != width || s.height != height || s.lender != nil || s.pixels.count != width * height
            if renewed {
                s.lender = nil
                s.pixels = [UInt32](repeating: 0, count: width * height)
                s.resize(width: width, height: height)
            }
            let bounds = ViewerRect(x: 0, y: 0, width: width, height: height)
            s.pixels.withUnsafeMutableBufferPointer { dst in
                for rect in renewed ? [bounds] : dirty {
                    let r = rect.intersection(bounds)
                    guard !r.isEmpty else { continue }
                    for row in r.y..<(r.y + r.height) {
                        (dst.baseAddress! + row * width + r.x).update(from: source.baseAddress! + row * stride + r.x, count: r.width)
                    }
                }
            }
            s.record(renewed ? [] : dirty, arrival: arrival, bytes: bytes)
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

    /// Hands the pending rectangles to `upload` with the whole picture (rows `width` words apart;
    /// an empty buffer when no rectangle is pending) and clears them. `upload` runs while the
    /// picture holds still — under the lock, or while the producer lends it: keep it to the texture
    /// upload. When the producer cannot lend, the rectangles stay pending for the next drain.
    public func drain(_ upload: (Pending, UnsafeBufferPointer<UInt32>) -> Void) {
        let (pending, lender) = state.withLock { s in (s.take(), s.lender) }
        if pending.dirty.isEmpty {
            upload(pending, UnsafeBufferPointer(start: nil, count: 0))
            return
        }
        if let lender {
            let lent = lender { width, height, pixels in
                // Resized since the mark: the mark of the new size (everything dirty) follows.
                guard width == pending.width, height == pending.height else { return }
                upload(pending, pixels)
            }
            if lent { return }
        }
        state.withLock { s in
            guard s.lender == nil, s.width == pending.width, s.height == pending.height, s.pixels.count == s.width * s.height else {
                s.restore(pending)
                return
            }
            s.pixels.withUnsafeBufferPointer { upload(pending, $0) }
        }
    }

    /// Reads the whole picture (rows `width` words apart) without taking what is pending; false
    /// when it cannot be read now (the producer could not lend it).
    @discardableResult
    public func read(_ body: (_ width: Int, _ height: Int, UnsafeBufferPointer<UInt32>) -> Void) -> Bool {
        let lender = state.withLock { $0.lender }
        if let lender {
            return lender(body)
        }
        return state.withLock { s in
            guard s.pixels.count == s.width * s.height else { return false }
            s.pixels.withUnsafeBufferPointer { body(s.width, s.height, $0) }
            return true
        }
    }

    /// The staged picture's size.
    public var size: (width: Int, height: Int) { state.withLock { ($0.width, $0.height) } }
}
