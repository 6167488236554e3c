import FarcastNIO
import Synchronization
import Testing

/// `OrderedWriter`, the one writer of every connection that encrypts or must keep frame order:
/// what leaves is what was enqueued, in that order, however many tasks enqueue at once; a failed
/// write reaches the runner, every waiter and every later sender; `finish` drains then stops.
struct OrderedWriterTests {
    struct WriteFailed: Error, Equatable {}

    /// Writes into an array, optionally slowly or failing at one element.
    final class Sink: Sendable {
        let written = Mutex<[Int]>([])
        let failAt: Int?
        let delay: Duration?
        init(failAt: Int? = nil, delay: Duration? = nil) {
            self.failAt = failAt
            self.delay = delay
        }
        func write(_ element: Int) async throws {
            if let delay { try await Task.sleep(for: delay) }
            if element == failAt { throw WriteFailed() }
            written.withLock { $0.append(element) }
        }
    }

    @Test func elementsLeaveInEnqueueOrderUnderConcurrentSenders() async throws {
        let writer = OrderedWriter<Int>()
        let sink = Sink()
        let runner = Task { try await writer.run(sink.write) }
        // The order of enqueue calls, recorded under the same lock as each call.
        final class Log: Sendable { let entries = Mutex<[Int]>([]) }
        let log = Log()
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<8 {
                group.addTask {
                    for n in 0..<250 {
                        let element = sender * 1000 + n
                        log.entries.withLock { entries in
                            try? writer.enqueue(element, bytes: 1)
                            entries.append(element)
                        }
                        if n % 50 == 0 { await Task.yield() }
                    }
                }
            }
        }
        try await writer.flush()
        #expect(sink.written.withLock { $0 } == log.entries.withLock { $0 })
        #expect(sink.written.withLock { $0.count } == 2000)
        #expect(writer.pendingBytes == 0)
        writer.finish()
        try await runner.value
    }

    @Test func flushAndRoomWaitForTheWritesTheyDependOn() async throws {
        let writer = OrderedWriter<Int>()
        let sink = Sink(delay: .milliseconds(5))
        let runner = Task { try await writer.run(sink.write) }
        for n in 0..<10 { try writer.enqueue(n, bytes: 100) }
        #expect(writer.pendingBytes <= 1000)
        try await writer.waitForRoom(limit: 300)
        #expect(writer.pendingBytes <= 300)
        #expect(sink.written.withLock { $0.count } >= 7)
        try await writer.flush()
        #expect(sink.written.withLock { $0 } == Array(0..<10))
        writer.finish()
        try await runner.value
    }

    @Test func aFailedWriteReachesTheRunnerEveryWaiterAndLaterSenders() async throws {
        let writer = OrderedWriter<Int>()
        let sink = Sink(failAt: 3, delay: .milliseconds(2))
        for n in 0..<6 { try writer.enqueue(n, bytes: 10) }
        let flushing = Task { try await writer.flush() }
        let waitingForRoom = Task { try await writer.waitForRoom(limit: 0) }
        await #expect(throws: WriteFailed.self) { try await writer.run(sink.write) }
        await #expect(throws: WriteFailed.self) { try await flushing.value }
        await #expect(throws: WriteFailed.self) { try await waitingForRoom.value }
        #expect(throws: WriteFailed.self) { try writer.enqueue(9, bytes: 1) }
        await #expect(throws: WriteFailed.self) { try await writer.flush() }
        #expect(sink.written.withLock { $0 } == [0, 1, 2], "nothing after the failed element is written")
    }

    @Test func finishWritesWhatIsQueuedThenRefusesMore() async throws {
        let writer = OrderedWriter<Int>()
        let sink = Sink(delay: .milliseconds(1))
        for n in 0..<5 { try writer.enqueue(n, bytes: 1) }
        writer.finish()
        #expect(throws: OrderedWriter<Int>.Closed.self) { try writer.enqueue(99, bytes: 1) }
        try await writer.run(sink.write)
        #expect(sink.written.withLock { $0 } == Array(0..<5))
        try await writer.flush()
    }
}
