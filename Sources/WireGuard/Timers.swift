/// WireGuard's timer constants (the paper, section 6.1). The defaults are the protocol's; tests
/// scale them down (`scaled(by:)`) so every timer rule runs in milliseconds — never a user.
public struct WireGuardTimers: Sendable, Equatable {
    /// A session this old is renewed by its initiator when it next sends.
    public var rekeyAfterTime: Duration = .seconds(120)
    /// A session this old is used no more, either way.
    public var rejectAfterTime: Duration = .seconds(180)
    /// How long a handshake is retried before the queued packets are dropped.
    public var rekeyAttemptTime: Duration = .seconds(90)
    /// How long to wait for a response before sending a new initiation (plus jitter).
    public var rekeyTimeout: Duration = .seconds(5)
    /// The most random delay added to each retry, so peers do not retry in lockstep.
    public var rekeyTimeoutJitter: Duration = .milliseconds(333)
    /// After receiving data and sending nothing for this long, a keepalive goes out.
    public var keepaliveTimeout: Duration = .seconds(10)
    /// Initiations from one peer closer together than this are refused (a flood).
    public var initiationRateInterval: Duration = .milliseconds(20)

    public init() {}

    /// The protocol's values.
    public static let standard = WireGuardTimers()

    /// Every interval divided by `factor` (a test-only setting).
    public func scaled(by factor: Int) -> WireGuardTimers {
        var copy = self
        copy.rekeyAfterTime = rekeyAfterTime / factor
        copy.rejectAfterTime = rejectAfterTime / factor
        copy.rekeyAttemptTime = rekeyAttemptTime / factor
        copy.rekeyTimeout = rekeyTimeout / factor
        copy.rekeyTimeoutJitter = rekeyTimeoutJitter / factor
        copy.keepaliveTimeout = keepaliveTimeout / factor
        copy.initiationRateInterval = initiationRateInterval / factor
        return copy
    }
}

extension Duration {
    /// Whole nanoseconds (for arithmetic on `MonotonicInstant`).
    var wholeNanoseconds: Int64 {
        components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000
    }
}
