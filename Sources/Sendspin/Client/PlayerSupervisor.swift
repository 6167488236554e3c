/// The player's supervision rule, the same for one session and for listening mode: when the
/// session has run for the duration the user asked, when an opening has waited too long, when a
/// stop request or a failed output device ends it, and when the once-a-second work is due
/// (offset sampling after the first ten seconds, telemetry). It reads no clock: the player calls
/// `check` with the time and what it sees, and sleeps until `nextCheck` says (a stop request or
/// a failing output wakes it sooner).
public struct PlayerSupervisor: Sendable {
    public enum Action: Sendable, Equatable {
        /// Record the clock offset for the report (due once a second after the first 10 s).
        case sampleOffset
        /// Report telemetry (once a second while there is something to report).
        case reportTelemetry
        /// The session ends; nothing after this.
        case end(Ending)
    }

    public enum Ending: Sendable, Equatable {
        /// The server never finished opening the session (`waitingFor` names the step).
        case timedOut(waitingFor: String)
        /// A stop request (its reason) or a failed output device ("shutdown").
        case stopped(reason: String)
        /// The session has played for the duration the user asked.
        case durationReached
    }

    /// How often the player calls `check` while the session is opening (what it waits for is
    /// not announced).
    public static let pollInterval: Duration = .milliseconds(50)
    /// The longest sleep between checks once open. Nothing needs looking at sooner than the
    /// once-a-second work: a stop request and a failing output wake the player's supervisor.
    public static let longestSleepUs: Int64 = 1_000_000
    /// Offsets sampled for the report before this (µs) are the filter still converging.
    public static let sampleOffsetsAfterUs: Int64 = 10_000_000

    private let started: Int64
    private let durationUs: Int64?
    private let openDeadline: Int64?
    private var nextTick: Int64
    /// When the session opened: the duration counts from here.
    private var openedAt: Int64?
    private var ended = false

    /// `countsDurationFromOpen`: one session's duration starts when it is open (a slow server's
    /// opening is not taken out of the time the user asked to play); a listener's starts at once.
    public init(started: Int64, duration: Duration?, openDeadline: Int64? = nil, countsDurationFromOpen: Bool) {
        self.started = started
        durationUs = duration.map { $0.components.seconds * 1_000_000 + $0.components.attoseconds / 1_000_000_000_000 }
        self.openDeadline = openDeadline
        nextTick = started + 1_000_000
        openedAt = countsDurationFromOpen ? nil : started
    }

    /// What is due at `now`. `openingStep`: what the session still waits for before it is open
    /// (nil once open); `reporting`: someone wants telemetry and, in listening mode, a server
    /// holds the player.
    public mutating func check(now: Int64, openingStep: String?, stopRequest: String?, outputFailed: Bool,
                               reporting: Bool) -> [Action] {
        guard !ended else { return [] }
        if openedAt == nil, openingStep == nil { openedAt = now }
        if let openDeadline, now >= openDeadline, let openingStep {
            return end(.timedOut(waitingFor: openingStep))
        }
        if let reason = stopRequest ?? (outputFailed ? "shutdown" : nil) { return end(.stopped(reason: reason)) }
        if let durationUs, let openedAt, now - openedAt >= durationUs { return end(.durationReached) }
        guard now >= nextTick else { return [] }
        nextTick += 1_000_000
        var actions: [Action] = []
        if now - started >= Self.sampleOffsetsAfterUs { actions.append(.sampleOffset) }
        // Telemetry only once the session is open: before that there is nothing to report.
        if reporting && openingStep == nil { actions.append(.reportTelemetry) }
        return actions
    }

    /// When `check` is next due after `now` (µs): at the poll interval while the session opens,
    /// otherwise at the next once-a-second work or the duration's end, at most `longestSleepUs`
    /// away. Each check wakes the player's network thread, so it checks no more than it must.
    public func nextCheck(after now: Int64) -> Int64 {
        var next = now + Self.longestSleepUs
        if let openedAt {
            if let durationUs { next = min(next, openedAt + durationUs) }
        } else {
            next = min(next, now + Int64(Self.pollInterval / .microseconds(1)))
        }
        return max(now, min(next, nextTick))
    }

    private mutating func end(_ ending: Ending) -> [Action] {
        ended = true
        return [.end(ending)]
    }
}
