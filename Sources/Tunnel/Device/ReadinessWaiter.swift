import Dispatch
import Synchronization

/// Suspends a task until a descriptor is readable (or writable), through a Dispatch read (or
/// write) source (epoll on Linux, kqueue on Apple platforms), so async reads and writes hold no
/// thread while they wait.
///
/// Invariants: at most one waiter at a time (a second concurrent `wait` fails); the source is
/// resumed only while someone waits, so an unread descriptor does not spin the event handler;
/// `cancel()` resumes a waiter with `TunnelError.interrupted` and returns only after Dispatch has
/// let go of the descriptor, so the caller may close it next.
final class ReadinessWaiter: Sendable {
    private struct State {
        var waiter: CheckedContinuation<Void, any Error>?
        var armed = false          // the source is resumed
        var cancelled = false
    }

    // Dispatch sources are thread-safe objects (their methods may be called from any thread);
    // the Swift overlay on Linux does not mark the protocol Sendable. Every call on it below is
    // made under `state`'s lock, which also orders resume/suspend.
    nonisolated(unsafe) private let source: any DispatchSourceProtocol
    private let state = Mutex(State())
    private let cancelled = DispatchSemaphore(value: 0)

    /// What the waits are for, in the message for two waiting at once.
    private let purpose: String

    init(fileDescriptor: Int32, writable: Bool = false) {
        purpose = writable ? "write to" : "read"
        source = writable ? DispatchSource.makeWriteSource(fileDescriptor: fileDescriptor, queue: DispatchQueue.global())
            : DispatchSource.makeReadSource(fileDescriptor: fileDescriptor, queue: DispatchQueue.global())
        source.setEventHandler { [weak self] in self?.fire() }
        source.setCancelHandler { [cancelled] in cancelled.signal() }
    }

    private func fire() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, any Error>? in
            if s.armed && !s.cancelled {
                source.suspend()
                s.armed = false
            }
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume()
    }

    /// Returns when the descriptor is readable or writable, as made (or may be: the caller
    /// retries).
    func wait() async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let refusal: (any Error)? = state.withLock { s in
                    if s.cancelled { return TunnelError.interrupted }
                    if Task.isCancelled { return CancellationError() }
                    if s.waiter != nil { return TunnelError.invalidConfiguration("two tasks \(purpose) one queue at once") }
                    s.waiter = continuation
                    if !s.armed {
                        source.resume()
                        s.armed = true
                    }
                    return nil
                }
                if let refusal { continuation.resume(throwing: refusal) }
            }
        } onCancel: {
            let waiter = state.withLock { s in
                defer { s.waiter = nil }
                return s.waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Wakes a waiter with `TunnelError.interrupted`, stops the source and waits until Dispatch
    /// no longer watches the descriptor.
    func cancel() {
        let (waiter, wasCancelled) = state.withLock { s -> (CheckedContinuation<Void, any Error>?, Bool) in
            if s.cancelled { return (nil, true) }
            s.cancelled = true
            // A suspended (or never activated) source runs its cancel handler only once resumed.
            if !s.armed {
                source.resume()
                s.armed = true
            }
            source.cancel()
            defer { s.waiter = nil }
            return (s.waiter, false)
        }
        waiter?.resume(throwing: TunnelError.interrupted)
        if !wasCancelled { cancelled.wait() }
    }
}
