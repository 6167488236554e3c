import Synchronization

/// A value behind a lock that closures can capture: `Mutex` is non-copyable, so it cannot be
/// captured by escaping closures or stored in a copyable struct; this class holds one.
/// Every access goes through `withLock`, so the value is never touched by two threads at once.
public final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    public init(_ value: Value) { mutex = Mutex(value) }

    public func withLock<Result: Sendable>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try mutex.withLock { value in try body(&value) }
    }

    /// A copy of the current value.
    public var value: Value { withLock { $0 } }
}
