/// Whether the player tells the server it can play (`available` in every client/state).
///
/// The spec forbids `available: true` before the clock filter has converged (§9). Once it has,
/// availability is kept through transient errors, as the reference client does: under network
/// jitter the filter's error briefly passes the threshold, and each withdrawal makes a server
/// move the player out of its group and stop its stream. Only a filter that has lost
/// synchronisation altogether (reset, or never synchronised) withdraws it.
public struct Availability: Sendable, Equatable {
    /// The filter error (µs) below which the clock counts as converged.
    public static let convergedErrorUs: Int64 = 5000

    public private(set) var available = false
    /// How often availability was withdrawn after having been given.
    public private(set) var withdrawals = 0
    /// The largest filter error (µs) seen while available: past `convergedErrorUs` it is the
    /// transient a stricter rule would have withdrawn for.
    public private(set) var peakErrorWhileAvailableUs: Int64 = 0

    public init() {}

    /// Feeds the filter's state after an update; true when `available` changed.
    public mutating func update(synchronized: Bool, errorUs: Int64?) -> Bool {
        let now: Bool
        if available {
            if let errorUs { peakErrorWhileAvailableUs = max(peakErrorWhileAvailableUs, errorUs) }
            now = synchronized
        } else {
            now = synchronized && (errorUs ?? .max) <= Self.convergedErrorUs
        }
        guard now != available else { return false }
        if available && !now { withdrawals += 1 }
        available = now
        return true
    }
}
