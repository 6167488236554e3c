import NIOCore
import Synchronization

/// Runs Swift tasks on one SwiftNIO event loop, so a connection's own work (reading its frames,
/// decrypting, decoding, answering) happens on the thread that read the bytes: a message that
/// arrives resumes the task waiting for it without waking a second thread. Its `sleep` and
/// `schedule` use the loop's own timers, so a periodic check wakes only the loop, where
/// `Task.sleep` arms a timer on Dispatch's timer thread which then wakes the executor.
///
/// Use it as a task executor preference (`withTaskExecutorPreference`) around a connection's
/// tasks. Work on it must not block: everything else on the loop waits for it.
public final class EventLoopExecutor: TaskExecutor, Sendable {
    public let eventLoop: any EventLoop

    public init(_ eventLoop: any EventLoop) {
        self.eventLoop = eventLoop
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        // From the loop's own thread this only queues (the loop runs it before it sleeps again);
        // from another thread it wakes the loop.
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// Sleeps for `duration` on the loop's timers; throws `CancellationError` when the task is
    /// cancelled, as `Task.sleep` does, or when `wake` opens (at once if it is open already).
    public func sleep(for duration: Duration, wake: WakeLatch? = nil) async throws {
        let scheduled = Mutex<Scheduled<Void>?>(nil)
        var registration: WakeLatch.Registration?
        defer { if let registration { wake?.unregister(registration) } }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let task = eventLoop.scheduleTask(in: Self.timeAmount(duration)) {}
                task.futureResult.whenComplete { result in
                    switch result {
                    case .success: continuation.resume()
                    case .failure: continuation.resume(throwing: CancellationError())
                    }
                }
                scheduled.withLock { $0 = task }
                if let wake {
                    registration = wake.register(task)
                    if registration == nil { task.cancel() }
                }
                if Task.isCancelled { task.cancel() }
            }
        } onCancel: {
            scheduled.withLock { $0 }?.cancel()
        }
    }

    /// Runs `body` on the loop after `delay`, unless the returned handle is cancelled first. No
    /// task is created: for deadlines that usually never fire (an answer's timeout).
    @discardableResult
    public func schedule(after delay: Duration, _ body: @escaping @Sendable () -> Void) -> Scheduled<Void> {
        eventLoop.scheduleTask(in: Self.timeAmount(delay), body)
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
    }
}

/// Ends `EventLoopExecutor.sleep`s early, once and for good: a loop that sleeps until its next
/// deadline still notices a stop request at once. After `open()`, every sleep given the latch
/// returns immediately.
public final class WakeLatch: Sendable {
    struct Registration: Hashable {
        let id: UInt64
    }

    private struct State {
        var isOpen = false
        var sleepers: [UInt64: Scheduled<Void>] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    public init() {}

    public var isOpen: Bool { state.withLock { $0.isOpen } }

    /// Wakes every sleeper now and every later one at once.
    public func open() {
        let sleepers = state.withLock { s -> [Scheduled<Void>] in
            s.isOpen = true
            defer { s.sleepers = [:] }
            return Array(s.sleepers.values)
        }
        for sleeper in sleepers { sleeper.cancel() }
    }

    /// nil when the latch is open already (the caller wakes itself).
    func register(_ timer: Scheduled<Void>) -> Registration? {
        state.withLock { s in
            guard !s.isOpen else { return nil }
            s.nextID += 1
            s.sleepers[s.nextID] = timer
            return Registration(id: s.nextID)
        }
    }

    func unregister(_ registration: Registration) {
        _ = state.withLock { $0.sleepers.removeValue(forKey: registration.id) }
    }
}
