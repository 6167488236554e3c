import Foundation
import Synchronization

/// A task executor that runs its jobs on one dedicated thread.
///
/// Timing-critical loops (a player's network receive path, where arrival times feed a clock
/// filter) run here so they never wait behind whatever else occupies Swift's shared cooperative
/// pool — on a two-core machine that pool has two threads, and one blocking call elsewhere in
/// the process can stall every task on it for seconds.
public final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs` and `stopping` are only touched under `condition`'s lock.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var stopping = false

    public init(name: String) {
        // The thread keeps the executor alive until `shutdown` lets it end.
        let thread = Thread { self.run() }
        thread.name = name
        thread.qualityOfService = .userInteractive
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        condition.lock()
        jobs.append(unowned)
        condition.signal()
        condition.unlock()
    }

    /// Lets the thread finish once its queue is empty. Jobs enqueued later never run, so call
    /// this only after every task using the executor has completed.
    public func shutdown() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if jobs.isEmpty && stopping {
                condition.unlock()
                return
            }
            let batch = jobs
            jobs.removeAll(keepingCapacity: true)
            condition.unlock()
            for job in batch { job.runSynchronously(on: asUnownedTaskExecutor()) }
        }
    }
}
