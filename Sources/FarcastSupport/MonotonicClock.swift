#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A point on a monotonic clock, in nanoseconds since the clock's arbitrary epoch (boot on Linux).
/// Instants from different clock sources are not comparable in meaning, only in type.
public struct MonotonicInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }
    public init(microseconds: Int64) { self.nanoseconds = microseconds &* 1000 }

    /// Whole microseconds (truncated toward zero), the unit most wire protocols use.
    public var microseconds: Int64 { nanoseconds / 1000 }
    public var seconds: Double { Double(nanoseconds) / 1e9 }

    public static func < (a: Self, b: Self) -> Bool { a.nanoseconds < b.nanoseconds }

    /// Nanoseconds from `other` to `self` (negative when `self` is earlier).
    public func nanoseconds(since other: Self) -> Int64 { nanoseconds - other.nanoseconds }

    public func advanced(byNanoseconds delta: Int64) -> Self { Self(nanoseconds: nanoseconds + delta) }

    public var description: String { "\(nanoseconds)ns" }
}

/// Which kernel clock a `SystemClock` reads.
public enum ClockSource: String, Sendable, CaseIterable {
    /// CLOCK_MONOTONIC: never goes backwards, but NTP may slew its rate.
    case monotonic
    /// CLOCK_MONOTONIC_RAW: the raw hardware counter, never slewed. Sendspin servers use it, so
    /// a client on the same host reading it sees a true clock offset of zero.
    case monotonicRaw
}

/// Time as a protocol core sees it. Cores never read a clock themselves: the I/O layer passes
/// `now()` in, so tests can drive a core with a `ManualClock`.
public protocol MonotonicClock: Sendable {
    func now() -> MonotonicInstant
}

/// Reads a kernel monotonic clock.
public struct SystemClock: MonotonicClock {
    public let source: ClockSource

    public init(_ source: ClockSource = .monotonic) { self.source = source }

    public func now() -> MonotonicInstant {
        var ts = timespec()
        let id: clockid_t
        switch source {
        case .monotonic: id = CLOCK_MONOTONIC
        case .monotonicRaw: id = CLOCK_MONOTONIC_RAW
        }
        // clock_gettime cannot fail for these ids on any supported kernel; a zero instant would
        // be the visible symptom if it ever did.
        _ = clock_gettime(id, &ts)
        return MonotonicInstant(nanoseconds: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec))
    }
}

/// A clock that only moves when told to; for deterministic tests of protocol cores.
public final class ManualClock: MonotonicClock {
    private let current: Mutex<MonotonicInstant>

    public init(start: MonotonicInstant = MonotonicInstant(nanoseconds: 0)) {
        current = Mutex(start)
    }

    public func now() -> MonotonicInstant { current.withLock { $0 } }

    public func advance(byNanoseconds delta: Int64) {
        precondition(delta >= 0, "a monotonic clock cannot go backwards")
        current.withLock { $0 = $0.advanced(byNanoseconds: delta) }
    }

    public func advance(byMicroseconds delta: Int64) { advance(byNanoseconds: delta * 1000) }
}

extension Duration {
    /// The duration in seconds, with its fraction (for reports, rates and messages).
    public var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
