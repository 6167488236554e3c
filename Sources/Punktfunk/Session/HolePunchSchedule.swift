/// When to send the data-plane hole punch (`PFpunch1`): every 200 ms for the first 15 sends, then
/// every 2 s as a keep-alive for the NAT mapping. Pure: the caller owns the clock and the socket.
public struct HolePunchSchedule: Sendable, Equatable {
    /// The only bytes a client ever sends on the data plane.
    public static let payload: [UInt8] = Array("PFpunch1".utf8)
    public static let fastInterval: Int64 = 200_000_000
    public static let fastCount = 15
    public static let keepAliveInterval: Int64 = 2_000_000_000

    /// Punches sent so far.
    public private(set) var sent = 0
    /// Monotonic time (ns) the next punch is due; nil before `start`.
    public private(set) var nextDue: Int64?

    public init() {}

    /// The first punch is due at once.
    public mutating func start(now: Int64) { nextDue = now }

    /// True when a punch should go out at `now`; call `didSend` after sending it.
    public func isDue(now: Int64) -> Bool { nextDue.map { now >= $0 } ?? false }

    /// Records a punch sent at `now` and schedules the next one.
    public mutating func didSend(now: Int64) {
        sent += 1
        nextDue = now + (sent < Self.fastCount ? Self.fastInterval : Self.keepAliveInterval)
    }
}
