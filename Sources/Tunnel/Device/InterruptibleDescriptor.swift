#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A non-blocking descriptor whose blocking waits can be ended from another thread, and which
/// is closed only once no call is using it (so a closed number is never reused under a reader).
///
/// Invariants: `enter()` succeeds only before `interrupt()`/`close()`; `close()` returns after
/// every entered call has left, then closes the descriptor exactly once.
final class InterruptibleDescriptor: Sendable {
    let fileDescriptor: Int32
    private let wake: WakeSignal
    /// Bit 0: closing; bit 1: interrupted; the rest counts calls in progress (in units of 4).
    private let lifecycle = Atomic<Int>(0)
    private let onInterrupt: (@Sendable () -> Void)?

    private static let closingBit = 1
    private static let interruptedBit = 2
    private static let operation = 4

    /// Takes ownership of `fileDescriptor` and makes it non-blocking.
    init(_ fileDescriptor: Int32, what: String, onInterrupt: (@Sendable () -> Void)? = nil) throws(TunnelError) {
        let flags = fcntl(fileDescriptor, F_GETFL)
        guard flags >= 0, fcntl(fileDescriptor, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw .system(operation: "make \(what) non-blocking", errno: errno)
        }
        self.fileDescriptor = fileDescriptor
        wake = try WakeSignal()
        self.onInterrupt = onInterrupt
    }

    /// Registers a call; writes (`reading: false`) still go through after `interrupt()`.
    func enter(reading: Bool = true) throws(TunnelError) {
        let state = lifecycle.add(Self.operation, ordering: .acquiring).newValue
        if state & Self.closingBit != 0 {
            leave()
            throw .closed
        }
        if reading && state & Self.interruptedBit != 0 {
            leave()
            throw .interrupted
        }
    }

    func leave() {
        lifecycle.subtract(Self.operation, ordering: .releasing)
    }

    var isInterrupted: Bool {
        lifecycle.load(ordering: .relaxed) & (Self.interruptedBit | Self.closingBit) != 0
    }

    func interrupt() {
        let before = lifecycle.bitwiseOr(Self.interruptedBit, ordering: .sequentiallyConsistent).oldValue
        guard before & (Self.interruptedBit | Self.closingBit) == 0 else { return }
        wake.signal()
        onInterrupt?()
    }

    func close() {
        let before = lifecycle.bitwiseOr(Self.closingBit | Self.interruptedBit, ordering: .sequentiallyConsistent).oldValue
        guard before & Self.closingBit == 0 else { return }
        if before & Self.interruptedBit == 0 {
            wake.signal()
            onInterrupt?()
        }
        // Blocked calls wake on the signal; a call inside one read or write returns at once.
        while lifecycle.load(ordering: .acquiring) >= Self.operation { sched_yield() }
        _ = systemClose(fileDescriptor)
        wake.close()
    }

    /// Waits until the descriptor is ready for `events`: true, or false when `timeout` passed
    /// (nil: no limit). Throws `.interrupted`/`.closed` once `interrupt()`/`close()` is called.
    func wait(for events: Int16 = Int16(POLLIN), timeout: Duration?) throws(TunnelError) -> Bool {
        var fds = (pollfd(fd: fileDescriptor, events: events, revents: 0),
                   pollfd(fd: wake.readDescriptor, events: Int16(POLLIN), revents: 0))
        let milliseconds = timeout.map(Self.milliseconds) ?? -1
        while true {
            let n = withUnsafeMutableBytes(of: &fds) { poll($0.baseAddress!.assumingMemoryBound(to: pollfd.self), 2, milliseconds) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .system(operation: "poll", errno: errno)
            }
            if fds.1.revents != 0 {
                throw lifecycle.load(ordering: .acquiring) & Self.closingBit != 0 ? .closed : .interrupted
            }
            if fds.0.revents & Int16(POLLNVAL) != 0 { throw .closed }
            return n > 0
        }
    }

    static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
        let ms = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: ms)
    }
}
