import Foundation

/// Threads started for one job each (blocking I/O loops), joined together: `start` runs a body
/// on a thread of its own; `join` returns once every body has returned (they must have been
/// told to stop first).
public final class WorkerThreads: Sendable {
    private let group = DispatchGroup()

    public init() {}

    public func start(_ name: String, _ body: @escaping @Sendable () -> Void) {
        group.enter()
        let thread = Thread { [group] in
            body()
            group.leave()
        }
        thread.name = name
        thread.start()
    }

    /// Waits for every worker.
    public func join() { group.wait() }
}
