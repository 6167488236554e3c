import Dispatch
import FarcastSupport
import Foundation
import Synchronization

/// When a timed item (a visualizer frame, a color palette) was meant for and when it went out,
/// on the client's monotonic raw clock (µs), with the server time it carried.
public struct DeliveryTiming: Sendable, Equatable {
    public var serverTime: Int64
    /// When its sound plays: the audio rule (through the clock filter, output delay applied).
    /// Equal to `delivered` for an item with nothing to wait for.
    public var due: Int64
    public var delivered: Int64
}

/// Hands items to `deliver` on one thread of its own, each when its sound plays (those sharing a
/// server time together, so a frame of every kind for one instant goes out at once): the client
/// time for its server time is asked of `playTime` (the same rule the audio follows) while it
/// waits, so a clock correction during the wait moves it too. Items are kept in server-time
/// order (a late-arriving earlier item goes before later ones) and at most `capacity` bytes are
/// held (beyond that the newest is refused: the server broke the budget the client announced).
final class TimedDelivery<Item: Sendable>: Sendable {
    enum Admission: Equatable {
        case queued
        /// Its time had already passed when it arrived (only when late items are refused).
        case late
        /// Holding it would exceed the capacity.
        case overflow
        /// The delivery was stopped (the connection ended).
        case stopped
    }

    private struct Entry {
        var serverTime: Int64
        var bytes: Int
        var item: Item
    }

    private enum Next {
        case entry(Entry)
        case empty
        case stopped
    }

    private struct State {
        var queue: [Entry] = []
        var head = 0
        var bytes = 0
        var running = true
        var threadStarted = false

        mutating func clear() {
            queue = []
            head = 0
            bytes = 0
        }
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let clock = SystemClock(.monotonicRaw)
    private let capacity: Int
    private let dropLate: Bool
    private let playTime: @Sendable (Int64) -> Int64?
    private let deliver: @Sendable ([Item], DeliveryTiming) -> Void
    private let name: String
    /// The last stretch before an item is due is slept with nanosleep (µs).
    private static var finalApproachUs: Int64 { 2_000 }

    /// `playTime`: the client time (µs) a server time plays at, nil while the clock is not
    /// synchronised (then an item is delivered at once). `dropLate`: refuse an item whose time
    /// has passed on arrival (an event such as a beat), rather than deliver it at once (a state
    /// such as a palette, which applies from then on).
    init(name: String, capacity: Int, dropLate: Bool, playTime: @escaping @Sendable (Int64) -> Int64?,
         deliver: @escaping @Sendable ([Item], DeliveryTiming) -> Void) {
        self.name = name
        self.capacity = capacity
        self.dropLate = dropLate
        self.playTime = playTime
        self.deliver = deliver
    }

    /// Queues `item` for `serverTime`; `replacingPending` first drops whatever waits for a time
    /// still to come (a new palette replaces a scheduled one; one already due still goes out).
    @discardableResult
    func enqueue(_ item: Item, serverTime: Int64, bytes: Int, replacingPending: Bool = false) -> Admission {
        if dropLate, let due = playTime(serverTime), due < clock.now().microseconds { return .late }
        let (admission, startThread) = state.withLock { s -> (Admission, Bool) in
            guard s.running else { return (.stopped, false) }
            if replacingPending {
                // What is already due still goes out; what waits for a later time is replaced.
                let now = clock.now().microseconds
                let kept = s.queue[s.head...].filter { (playTime($0.serverTime) ?? now) <= now }
                s.clear()
                s.queue = Array(kept)
                s.bytes = kept.reduce(0) { $0 + $1.bytes }
            }
            guard s.bytes + bytes <= capacity else { return (.overflow, false) }
            var index = s.queue.count
            while index > s.head && s.queue[index - 1].serverTime > serverTime { index -= 1 }
            s.queue.insert(Entry(serverTime: serverTime, bytes: bytes, item: item), at: index)
            s.bytes += bytes
            defer { s.threadStarted = true }
            return (.queued, !s.threadStarted)
        }
        if startThread {
            let thread = Thread { [self] in run() }
            thread.name = name
            thread.qualityOfService = .userInteractive
            thread.start()
        }
        wake.signal()
        return admission
    }

    /// Drops every item not yet delivered.
    func clear() {
        state.withLock { $0.clear() }
        wake.signal()
    }

    /// Drops what waits and ends the thread.
    func stop() {
        state.withLock { s in
            s.clear()
            s.running = false
        }
        wake.signal()
    }

    var pending: Int { state.withLock { $0.queue.count - $0.head } }

    private func run() {
        while true {
            let next = state.withLock { s -> Next in
                guard s.running else { return .stopped }
                return s.head < s.queue.count ? .entry(s.queue[s.head]) : .empty
            }
            let entry: Entry
            switch next {
            case .stopped: return
            case .empty:
                wake.wait()                                  // nothing waits: sleep until an item comes
                continue
            case .entry(let first): entry = first
            }
            let now = clock.now().microseconds
            let due = playTime(entry.serverTime) ?? now
            let remaining = due - now
            if remaining > Self.finalApproachUs {
                // Until shortly before: woken early by a new item or a clear, and the time is
                // asked again at least every 50 ms, so a clock correction during a long wait is
                // followed. A semaphore's timeout is a few hundred µs coarse, so the last
                // stretch is slept precisely instead.
                _ = wake.wait(timeout: .now() + .microseconds(Int(min(remaining - Self.finalApproachUs / 2, 50_000))))
                continue
            }
            if remaining > 0 {
                var pause = timespec(tv_sec: 0, tv_nsec: Int(remaining) * 1000), left = timespec()
                while nanosleep(&pause, &left) != 0 && errno == EINTR { pause = left }
            }
            let batch = state.withLock { s -> [Item] in
                // A clear or an earlier item may have come meanwhile: deliver only what is still
                // first, with every item that shares its time.
                guard s.running, s.head < s.queue.count, s.queue[s.head].serverTime == entry.serverTime else { return [] }
                var items: [Item] = []
                while s.head < s.queue.count && s.queue[s.head].serverTime == entry.serverTime {
                    items.append(s.queue[s.head].item)
                    s.bytes -= s.queue[s.head].bytes
                    s.head += 1
                }
                if s.head > 256 && s.head * 2 > s.queue.count {
                    s.queue.removeFirst(s.head)
                    s.head = 0
                }
                return items
            }
            guard !batch.isEmpty else { continue }
            deliver(batch, DeliveryTiming(serverTime: entry.serverTime, due: due, delivered: clock.now().microseconds))
        }
    }
}

/// The visualizer and color roles' counts over a run, shared by its connections.
final class VisualizationLedger: Sendable {
    private let statistics = Mutex(SendspinPlayer.VisualizationStatistics())

    var snapshot: SendspinPlayer.VisualizationStatistics { statistics.withLock { $0 } }

    func record(_ body: (inout SendspinPlayer.VisualizationStatistics) -> Void) {
        statistics.withLock { body(&$0) }
    }

    /// Counts a delivery and its lateness.
    func delivered(_ count: Int, _ timing: DeliveryTiming, palette: Bool) {
        statistics.withLock { s in
            if palette { s.palettesApplied += count } else { s.framesDelivered += count }
            s.maxDeliveryLateUs = max(s.maxDeliveryLateUs, timing.delivered - timing.due)
        }
    }
}
