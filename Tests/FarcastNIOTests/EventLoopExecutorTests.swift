import FarcastNIO
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// `EventLoopExecutor`: tasks preferring it run on the loop's thread, its sleeps use the loop's
/// timers and end early on cancellation or a `WakeLatch`, and its scheduled work can be
/// cancelled before it runs. Real NIO event loops; only the durations are chosen small.
struct EventLoopExecutorTests {
    private let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)

    @Test func tasksPreferringItRunOnTheLoop() async throws {
        let executor = EventLoopExecutor(group.next())
        let onLoop = await withTaskExecutorPreference(executor) {
            await withTaskGroup(of: Bool.self) { tasks in
                for _ in 0..<4 { tasks.addTask { executor.eventLoop.inEventLoop } }
                return await tasks.reduce(true) { $0 && $1 }
            }
        }
        #expect(onLoop)
        let unstructured = await Task(executorPreference: executor) { executor.eventLoop.inEventLoop }.value
        #expect(unstructured)
        try await group.shutdownGracefully()
    }

    @Test func sleepWaitsAtLeastItsDuration() async throws {
        let executor = EventLoopExecutor(group.next())
        let clock = ContinuousClock()
        let start = clock.now
        try await withTaskExecutorPreference(executor) { try await executor.sleep(for: .milliseconds(30)) }
        #expect(clock.now - start >= .milliseconds(30))
        try await group.shutdownGracefully()
    }

    @Test func cancellationEndsASleepAtOnce() async throws {
        let executor = EventLoopExecutor(group.next())
        // An hour: a stall of the test's own pool (the whole suite runs in parallel) cannot let
        // it end by itself, so the error proves the cancellation ended it.
        let sleeper = Task(executorPreference: executor) { try await executor.sleep(for: .seconds(3600)) }
        try await Task.sleep(for: .milliseconds(20))
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        try await group.shutdownGracefully()
    }

    @Test func aWakeLatchEndsSleepsNowAndLater() async throws {
        let executor = EventLoopExecutor(group.next())
        let latch = WakeLatch()
        // An hour each, as above: the errors prove the latch ended them.
        let sleeper = Task(executorPreference: executor) { try await executor.sleep(for: .seconds(3600), wake: latch) }
        try await Task.sleep(for: .milliseconds(20))
        latch.open()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        // Once open, a later sleep returns at once.
        await #expect(throws: CancellationError.self) { try await executor.sleep(for: .seconds(3600), wake: latch) }
        #expect(latch.isOpen)
        try await group.shutdownGracefully()
    }

    @Test func scheduledWorkRunsOnTheLoopUnlessCancelled() async throws {
        let executor = EventLoopExecutor(group.next())
        let ran = Mutex<[String]>([])
        let kept = executor.schedule(after: .milliseconds(10)) {
            ran.withLock { $0.append(executor.eventLoop.inEventLoop ? "kept on loop" : "kept elsewhere") }
        }
        let dropped = executor.schedule(after: .milliseconds(10)) { ran.withLock { $0.append("dropped") } }
        dropped.cancel()
        try await kept.futureResult.get()
        try await Task.sleep(for: .milliseconds(30))
        #expect(ran.withLock { $0 } == ["kept on loop"])
        try await group.shutdownGracefully()
    }
}
