#if canImport(Glibc)
import Glibc
#if os(Linux)
import CTunnelLinux   // naming a thread
#endif
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Threads started for one job each (blocking I/O loops: a device queue, a socket), joined
/// together: `start` runs a body on a POSIX thread of its own, named for `top -H` and perf;
/// `join` returns once every body has returned (they must have been told to stop first).
public final class WorkerThreads: Sendable {
    private final class Job {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) { self.name = name; self.body = body }
    }

    #if canImport(Darwin)
    private typealias Handle = pthread_t?
    #else
    private typealias Handle = pthread_t
    #endif
    private struct Threads: ~Copyable { var handles: [Handle] = [] }
    private let started = Mutex(Threads())

    public init() {}

    public func start(_ name: String, _ body: @escaping @Sendable () -> Void) {
        let job = Unmanaged.passRetained(Job(name: name, body: body)).toOpaque()
        var handle = Handle()
        let status = pthread_create(&handle, nil, { raw in
            #if canImport(Darwin)
            let job = Unmanaged<Job>.fromOpaque(raw).takeRetainedValue()
            _ = pthread_setname_np(String(job.name.prefix(15)))
            #else
            let job = Unmanaged<Job>.fromOpaque(raw!).takeRetainedValue()
            ctunnel_name_this_thread(job.name)
            #endif
            job.body()
            return nil
        }, job)
        // Only when the system is out of threads; nothing sensible can go on without the worker.
        precondition(status == 0, "cannot start thread \(name): \(String(cString: strerror(status)))")
        started.withLock { $0.handles.append(handle) }
    }

    /// Waits for every worker started so far.
    public func join() {
        let handles = started.withLock { threads -> [Handle] in
            defer { threads.handles.removeAll() }
            return threads.handles
        }
        #if canImport(Darwin)
        for case let handle? in handles { pthread_join(handle, nil) }
        #else
        for handle in handles { pthread_join(handle, nil) }
        #endif
    }
}
