import Foundation
import Synchronization

/// Control payloads received from the host, waiting for whoever asks for them.
///
/// The QUIC thread `deliver`s stream bytes; tasks `next(...)` the first queued payload that
/// matches a predicate (so a clock echo can be awaited while other messages stay queued), with a
/// timeout. The queue is bounded: a host that floods the stream ends the session instead of
/// growing memory.
public final class ControlInbox: Sendable {
    public static let maximumQueued = 4096
    /// Bytes of unclaimed payloads the inbox holds at most.
    public static let maximumQueuedBytes = 4 << 20

    private struct Waiter {
        let id: UInt64
        let matches: @Sendable ([UInt8]) -> Bool
        let continuation: CheckedContinuation<[UInt8], any Error>
    }

    private struct State {
        var decoder = ControlFrameDecoder()
        var queued: [[UInt8]] = []
        var queuedBytes = 0
        var waiters: [Waiter] = []
        var failure: PunktfunkSessionError?
        var nextID: UInt64 = 0
        var observer: (@Sendable ([UInt8]) -> Bool)?
        /// Timers that fired before their waiter was registered.
        var expired: Set<UInt64> = []
    }

    private let state = Mutex(State())

    public init() {}

    /// Sets a function that sees every payload first and may consume it (returns true), e.g. to
    /// answer BitrateChanged while streaming.
    public func observe(_ observer: (@Sendable ([UInt8]) -> Bool)?) {
        state.withLock { $0.observer = observer }
    }

    /// Feeds stream bytes (QUIC thread).
    public func deliver(_ bytes: [UInt8]) {
        var ready: [(CheckedContinuation<[UInt8], any Error>, [UInt8])] = []
        var observed: [(@Sendable ([UInt8]) -> Bool, [UInt8])] = []
        var overflow: [CheckedContinuation<[UInt8], any Error>] = []
        state.withLock { s in
            guard s.failure == nil else { return }
            s.decoder.append(bytes)
            while let payload = s.decoder.next() {
                if let index = s.waiters.firstIndex(where: { $0.matches(payload) }) {
                    ready.append((s.waiters.remove(at: index).continuation, payload))
                } else if let observer = s.observer {
                    observed.append((observer, payload))
                } else {
                    s.queued.append(payload)
                    s.queuedBytes += payload.count
                }
            }
            if s.queued.count > Self.maximumQueued || s.queuedBytes > Self.maximumQueuedBytes {
                s.failure = .malformed("more than \(Self.maximumQueued) messages or \(Self.maximumQueuedBytes >> 20) MiB of unanswered control messages")
                overflow = s.waiters.map(\.continuation)
                s.waiters.removeAll()
                s.queued.removeAll()
                s.queuedBytes = 0
            }
        }
        for (continuation, payload) in ready { continuation.resume(returning: payload) }
        for (observer, payload) in observed where !observer(payload) {
            state.withLock { s in
                guard s.queuedBytes + payload.count <= Self.maximumQueuedBytes else { return }
                s.queued.append(payload)
                s.queuedBytes += payload.count
            }
        }
        for continuation in overflow { continuation.resume(throwing: PunktfunkSessionError.malformed("control flood")) }
    }

    /// Puts payloads someone took but does not own back at the front, in order.
    public func requeue(_ payloads: [[UInt8]]) {
        guard !payloads.isEmpty else { return }
        state.withLock { s in
            s.queued.insert(contentsOf: payloads, at: 0)
            s.queuedBytes += payloads.reduce(0) { $0 + $1.count }
        }
    }

    /// Ends every wait with an error (connection gone).
    public func fail(_ error: PunktfunkSessionError) {
        let waiters = state.withLock { s -> [Waiter] in
            if s.failure == nil { s.failure = error }
            let w = s.waiters
            s.waiters.removeAll()
            return w
        }
        for waiter in waiters { waiter.continuation.resume(throwing: error) }
    }

    /// The error that ended the inbox, if any.
    public var failure: PunktfunkSessionError? { state.withLock { $0.failure } }

    /// The first payload matching `matches`, waiting up to `timeout`.
    public func next(timeout: Duration, waitingFor what: String,
                     matching matches: @escaping @Sendable ([UInt8]) -> Bool = { _ in true }) async throws(PunktfunkSessionError) -> [UInt8] {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        let timer = Task {
            try? await Task.sleep(for: max(.zero, timeout))
            guard !Task.isCancelled else { return }
            self.expire(id: id, error: .timeout(waitingFor: what, seconds: timeout.inSeconds))
        }
        defer {
            timer.cancel()
            _ = state.withLock { $0.expired.remove(id) }
        }
        do {
            return try await withCheckedThrowingContinuation { continuation in
                let immediate: Result<[UInt8], PunktfunkSessionError>? = state.withLock { s in
                    if let index = s.queued.firstIndex(where: matches) {
                        let payload = s.queued.remove(at: index)
                        s.queuedBytes -= payload.count
                        return .success(payload)
                    }
                    if let failure = s.failure { return .failure(failure) }
                    if s.expired.remove(id) != nil { return .failure(.timeout(waitingFor: what, seconds: timeout.inSeconds)) }
                    s.waiters.append(Waiter(id: id, matches: matches, continuation: continuation))
                    return nil
                }
                switch immediate {
                case .success(let payload)?: continuation.resume(returning: payload)
                case .failure(let error)?: continuation.resume(throwing: error)
                case nil: break
                }
            }
        } catch let error as PunktfunkSessionError {
            throw error
        } catch {
            throw .closed
        }
    }

    private func expire(id: UInt64, error: PunktfunkSessionError) {
        let waiter = state.withLock { s -> Waiter? in
            guard let index = s.waiters.firstIndex(where: { $0.id == id }) else {
                s.expired.insert(id)
                return nil
            }
            return s.waiters.remove(at: index)
        }
        waiter?.continuation.resume(throwing: error)
    }
}
