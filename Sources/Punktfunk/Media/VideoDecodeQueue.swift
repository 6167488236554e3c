import Foundation
import Synchronization

/// Decodes a stream's access units on a thread of its own, so the data socket's thread never
/// waits for the decoder. Access units queue in arrival order (a few at most: a decoder that
/// falls behind loses the queue and restarts at the next keyframe rather than running ever
/// later); `DecodeGate` keeps units that build on missing ones away from the decoder; pictures
/// and keyframe requests leave through the handlers, on the decode thread.
public final class VideoDecodeQueue: Sendable {
    public struct Statistics: Sendable, Equatable {
        /// Access units given to the decoder, and the pictures it returned.
        public var decoded = 0
        public var pictures = 0
        /// Units held back by the gate (after a gap, until a keyframe).
        public var skipped = 0
        /// Units the decoder refused.
        public var errors = 0
        /// Units dropped because the decoder fell behind (the queue was full).
        public var overflowed = 0
        /// Units still waiting when a keyframe arrived, dropped because it makes them unnecessary.
        public var superseded = 0
        public var keyframeRequests = 0
        /// The first error the decoder reported, for the person.
        public var firstError: String?
    }

    private struct Unit: Sendable {
        var bytes: [UInt8]
        var frameIndex: UInt32
        var ptsNanoseconds: UInt64
        var isRandomAccessPoint: Bool
    }

    private struct State {
        var queue: [Unit] = []
        var stopped = false
        var statistics = Statistics()
        /// Overflow asked the gate to wait for a keyframe (applied on the decode thread).
        var broken = false
    }

    /// Units waiting at most (about a tenth of a second at 60 fps).
    public static let capacity = 6
    private let state = Mutex(State())
    private let condition = NSCondition()
    private let finished = Mutex<Bool>(false)

    /// Starts the decode thread. `decoder` is used only there; `onPicture` and `requestKeyframe`
    /// run there too.
    public init(decoder: sending any VideoDecoder, onPicture: @escaping @Sendable (DecodedPicture) -> Void,
                requestKeyframe: @escaping @Sendable () -> Void) {
        let box = DecoderBox(decoder)
        // The thread holds the queue until it ends (at `stop`).
        let thread = Thread { [self] in
            run(box.decoder, onPicture: onPicture, requestKeyframe: requestKeyframe)
            finished.withLock { $0 = true }
        }
        thread.name = "farcast video decode"
        thread.start()
    }

    /// Queues an access unit (any thread; the data socket's, usually).
    public func enqueue(_ frame: VideoFrame, isRandomAccessPoint: Bool) {
        let unit = Unit(bytes: frame.data, frameIndex: frame.frameIndex, ptsNanoseconds: frame.ptsNanoseconds, isRandomAccessPoint: isRandomAccessPoint)
        state.withLock { s in
            guard !s.stopped else { return }
            if s.queue.count >= Self.capacity && !unit.isRandomAccessPoint {
                s.statistics.overflowed += s.queue.count + 1
                s.queue.removeAll()
                s.broken = true
                return
            }
            // A keyframe makes what waits before it unnecessary.
            if unit.isRandomAccessPoint { s.statistics.superseded += s.queue.count; s.queue.removeAll() }
            s.queue.append(unit)
        }
        condition.lock()
        condition.signal()
        condition.unlock()
    }

    /// Stops the thread after the unit it is decoding; returns once it has ended (or after `timeout`).
    @discardableResult
    public func stop(timeout: Duration = .seconds(2)) -> Bool {
        state.withLock { $0.stopped = true; $0.queue.removeAll() }
        condition.lock()
        condition.broadcast()
        condition.unlock()
        let deadline = ContinuousClock.now + timeout
        while !finished.withLock({ $0 }) {
            if ContinuousClock.now >= deadline { return false }
            usleep(2_000)
        }
        return true
    }

    public var statistics: Statistics { state.withLock { $0.statistics } }

    private final class DecoderBox: @unchecked Sendable {
        // @unchecked: handed to the decode thread once and used only there.
        let decoder: any VideoDecoder
        init(_ decoder: sending any VideoDecoder) { self.decoder = decoder }
    }

    private func run(_ decoder: any VideoDecoder, onPicture: @Sendable (DecodedPicture) -> Void, requestKeyframe: @Sendable () -> Void) {
        var gate = DecodeGate()
        while true {
            condition.lock()
            var next: (unit: Unit?, stop: Bool, broken: Bool) = (nil, false, false)
            while true {
                next = state.withLock { s -> (unit: Unit?, stop: Bool, broken: Bool) in
                    defer { s.broken = false }
                    if s.stopped { return (nil, true, s.broken) }
                    return (s.queue.isEmpty ? nil : s.queue.removeFirst(), false, s.broken)
                }
                if next.stop || next.unit != nil || next.broken { break }
                condition.wait()
            }
            condition.unlock()
            if next.stop { return }
            if next.broken { gate.framesLost() }
            guard let unit = next.unit else { continue }
            switch gate.admit(frameIndex: unit.frameIndex, isRandomAccessPoint: unit.isRandomAccessPoint) {
            case .skip(let ask):
                state.withLock { s in
                    s.statistics.skipped += 1
                    if ask { s.statistics.keyframeRequests += 1 }
                }
                if ask {
                    decoder.reset()
                    requestKeyframe()
                }
            case .decode:
                do {
                    let picture = try unit.bytes.withUnsafeBytes { raw throws(VideoDecodeError) in
                        try decoder.decode(raw, frameIndex: unit.frameIndex, ptsNanoseconds: unit.ptsNanoseconds)
                    }
                    state.withLock { s in
                        s.statistics.decoded += 1
                        if picture != nil { s.statistics.pictures += 1 }
                    }
                    if let picture { onPicture(picture) }
                } catch {
                    gate.decodeFailed()
                    decoder.reset()
                    state.withLock { s in
                        s.statistics.decoded += 1
                        s.statistics.errors += 1
                        s.statistics.keyframeRequests += 1
                        if s.statistics.firstError == nil { s.statistics.firstError = "\(error)" }
                    }
                    requestKeyframe()
                }
            }
        }
    }
}
