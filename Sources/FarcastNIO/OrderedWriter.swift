import Synchronization

/// A connection's one writer. `enqueue` is synchronous, so what a protocol core produces is
/// queued in the same step that produced it, in the core's order, even when several tasks send at
/// once; exactly one task (`run`) hands the queue to the transport. Awaiting each write from the
/// sending task instead would let another task's message (sealed later, with a later nonce) reach
/// the wire first.
///
/// Invariants: elements leave in `enqueue` order; after a failure or `finish()` nothing more is
/// queued and every waiter is resumed; `pendingBytes` counts what is queued but not yet written.
public final class OrderedWriter<Element: Sendable>: Sendable {
    private struct State {
        var enqueued: UInt64 = 0
        var written: UInt64 = 0
        var pendingBytes = 0
        var closed: (any Error)?? = nil   // .some(nil): finished cleanly; .some(error): failed
        var flushWaiters: [(upTo: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
        var roomWaiters: [(limit: Int, continuation: CheckedContinuation<Void, any Error>)] = []
    }

    /// Raised to senders once the writer has stopped without an error of its own.
    public struct Closed: Error, CustomStringConvertible {
        public var description: String { "the connection is closed" }
    }

    private let state = Mutex(State())
    private let stream: AsyncStream<(Element, Int)>
    private let continuation: AsyncStream<(Element, Int)>.Continuation

    public init() {
        (stream, continuation) = AsyncStream.makeStream(of: (Element, Int).self, bufferingPolicy: .unbounded)
    }

    /// Queues `element` (of `bytes` bytes, for back-pressure) behind everything queued before.
    public func enqueue(_ element: Element, bytes: Int) throws {
        try state.withLock { state in
            if let closed = state.closed { throw closed ?? Closed() }
            state.enqueued += 1
            state.pendingBytes += bytes
            continuation.yield((element, bytes))
        }
    }

    /// Bytes queued and not yet written.
    public var pendingBytes: Int { state.withLock { $0.pendingBytes } }

    /// Returns once everything queued before the call has been written.
    public func flush() async throws {
        try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, any Error>) in
            state.withLock { state in
                if state.written >= state.enqueued { return waiter.resume() }
                if let closed = state.closed { return waiter.resume(throwing: closed ?? Closed()) }
                state.flushWaiters.append((state.enqueued, waiter))
            }
        }
    }

    /// Returns once no more than `limit` bytes wait to be written: a fast sender's back-pressure.
    /// Order is unaffected (what the caller sent is queued already).
    public func waitForRoom(limit: Int) async throws {
        try await withCheckedThrowingContinuation { (waiter: CheckedContinuation<Void, any Error>) in
            state.withLock { state in
                if state.pendingBytes <= limit { return waiter.resume() }
                if let closed = state.closed { return waiter.resume(throwing: closed ?? Closed()) }
                state.roomWaiters.append((limit, waiter))
            }
        }
    }

    /// Writes the queue in order with `write` until `finish()` or a failed write (rethrown, and
    /// handed to every waiter and later sender). Run it in exactly one task per connection.
    public func run(_ write: (Element) async throws -> Void) async throws {
        do {
            for await (element, bytes) in stream {
                try await write(element)
                let ready: [CheckedContinuation<Void, any Error>] = state.withLock { state in
                    state.written += 1
                    state.pendingBytes -= bytes
                    var ready: [CheckedContinuation<Void, any Error>] = []
                    let written = state.written
                    state.flushWaiters.removeAll { waiter in
                        guard waiter.upTo <= written else { return false }
                        ready.append(waiter.continuation)
                        return true
                    }
                    let pending = state.pendingBytes
                    state.roomWaiters.removeAll { waiter in
                        guard pending <= waiter.limit else { return false }
                        ready.append(waiter.continuation)
                        return true
                    }
                    return ready
                }
                for waiter in ready { waiter.resume() }
            }
            close(with: nil)
        } catch {
            close(with: error)
            throw error
        }
    }

    /// Stops taking new elements; `run` writes what is queued, then returns.
    public func finish() {
        state.withLock { state in
            if state.closed == nil { state.closed = .some(nil) }
        }
        continuation.finish()
    }

    private func close(with error: (any Error)?) {
        let waiters: [CheckedContinuation<Void, any Error>] = state.withLock { state in
            if state.closed == nil || error != nil { state.closed = .some(error) }
            let waiters = state.flushWaiters.map(\.continuation) + state.roomWaiters.map(\.continuation)
            state.flushWaiters = []
            state.roomWaiters = []
            return waiters
        }
        continuation.finish()
        for waiter in waiters { waiter.resume(throwing: error ?? Closed()) }
    }
}
