import FarcastSupport
import Foundation
@testable import Sendspin
import Synchronization
import Testing

/// TimedDelivery: items go out in server-time order at the time the mapping gives, those sharing
/// a time together; late items and items beyond the capacity are refused; a clear, a replacing
/// item and a stop take back what still waits. These run on the real clock (the delivery thread
/// sleeps on it), with waits of tens of milliseconds and generous bounds.
@Suite struct TimedDeliveryTests {
    final class Recorder: Sendable {
        let batches = Mutex<[([Int], DeliveryTiming)]>([])
        var all: [([Int], DeliveryTiming)] { batches.withLock { $0 } }
        func wait(for count: Int, seconds: Double = 2) -> Bool {
            let end = Date().addingTimeInterval(seconds)
            while Date() < end {
                if batches.withLock({ $0.count }) >= count { return true }
                usleep(1_000)
            }
            return false
        }
    }

    static let clock = SystemClock(.monotonicRaw)
    static var now: Int64 { clock.now().microseconds }

    /// A delivery whose server time is the client time plus `offset` (µs).
    static func make(capacity: Int = .max, dropLate: Bool, offset: Int64 = 0, _ recorder: Recorder) -> TimedDelivery<Int> {
        TimedDelivery(name: "test-delivery", capacity: capacity, dropLate: dropLate, playTime: { $0 - offset }) { items, timing in
            recorder.batches.withLock { $0.append((items, timing)) }
        }
    }

    @Test func itemsGoOutInOrderAtTheirTimeThoseSharingATimeTogether() {
        let recorder = Recorder()
        let delivery = Self.make(dropLate: true, offset: 1_000_000_000, recorder)
        defer { delivery.stop() }
        let start = Self.now + 1_000_000_000
        // Queued out of order; two share a time.
        #expect(delivery.enqueue(3, serverTime: start + 60_000, bytes: 1) == .queued)
        #expect(delivery.enqueue(1, serverTime: start + 20_000, bytes: 1) == .queued)
        #expect(delivery.enqueue(2, serverTime: start + 40_000, bytes: 1) == .queued)
        #expect(delivery.enqueue(22, serverTime: start + 40_000, bytes: 1) == .queued)
        #expect(recorder.wait(for: 3))
        let batches = recorder.all
        #expect(batches.map(\.0) == [[1], [2, 22], [3]])
        for (_, timing) in batches {
            #expect(timing.due == timing.serverTime - 1_000_000_000)
            #expect(timing.delivered >= timing.due && timing.delivered - timing.due < 20_000, "\(timing.delivered - timing.due) µs late")
        }
        #expect(delivery.pending == 0)
    }

    @Test func lateAndOverflowingItemsAreRefused() {
        let recorder = Recorder()
        let delivery = Self.make(capacity: 10, dropLate: true, recorder)
        defer { delivery.stop() }
        #expect(delivery.enqueue(1, serverTime: Self.now - 5_000, bytes: 1) == .late)
        #expect(delivery.enqueue(2, serverTime: Self.now + 500_000, bytes: 6) == .queued)
        #expect(delivery.enqueue(3, serverTime: Self.now + 500_000, bytes: 6) == .overflow)
        #expect(delivery.pending == 1)

        // A state (a palette) that is already due goes out at once instead.
        let states = Recorder()
        let palettes = Self.make(dropLate: false, states)
        defer { palettes.stop() }
        #expect(palettes.enqueue(7, serverTime: Self.now - 5_000_000, bytes: 0) == .queued)
        #expect(states.wait(for: 1) && states.all[0].0 == [7])
    }

    @Test func clearReplaceAndStopTakeBackWhatWaits() {
        let recorder = Recorder()
        let delivery = Self.make(dropLate: false, recorder)
        delivery.enqueue(1, serverTime: Self.now + 100_000, bytes: 1)
        delivery.clear()
        #expect(delivery.pending == 0)
        // A replacing item drops what waits for a later time, not what is due.
        delivery.enqueue(2, serverTime: Self.now + 150_000, bytes: 1)
        delivery.enqueue(3, serverTime: Self.now + 60_000, bytes: 1, replacingPending: true)
        #expect(recorder.wait(for: 1))
        usleep(200_000)
        #expect(recorder.all.map(\.0) == [[3]], "the scheduled item was replaced")
        delivery.enqueue(4, serverTime: Self.now + 50_000, bytes: 1)
        delivery.stop()
        usleep(100_000)
        #expect(recorder.all.count == 1 && delivery.pending == 0, "nothing goes out after a stop")
        #expect(delivery.enqueue(5, serverTime: Self.now, bytes: 1) == .stopped && delivery.pending == 0, "a stopped delivery takes nothing")
    }
}
