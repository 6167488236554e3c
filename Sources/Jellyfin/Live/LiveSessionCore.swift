import FarcastSupport

/// The live session's rules without the socket: what to send and what to report, given what
/// arrived and what time it is (time is passed in; the core owns no clock, socket or task).
///
/// Invariants:
/// - No KeepAlive is sent before the server asks with `ForceKeepAlive`; after it asks, one goes
///   out at once and then every half of its period (60 s → every 30 s), as the server expects.
/// - A connection that hears nothing for two keep-alive periods (plus 5 s) is declared stale,
///   so a server that vanished without closing is noticed and the runtime reconnects.
/// - Reconnect delays double from `initialBackoff` to `maxBackoff` and start over after a
///   connection that got as far as a message from the server.
public struct LiveSessionCore: Sendable {
    public enum Action: Sendable, Equatable {
        /// Send this text message.
        case send(String)
        /// A message for the application.
        case deliver(LiveMessage)
        /// Something the server sent could not be read (the session goes on).
        case report(JellyfinSocketError)
        /// Close the connection: it has gone quiet.
        case closeStale
    }

    public struct Options: Sendable, Equatable {
        /// Ask for `Sessions` updates (`SessionsStart`) as soon as the socket is up.
        public var subscribeToSessions: Bool
        /// `SessionsStart` data: first delay and interval in milliseconds.
        public var sessionsInterval: (initialMs: Int, intervalMs: Int)
        public var initialBackoff: Duration
        public var maxBackoff: Duration

        public init(subscribeToSessions: Bool = true, sessionsInterval: (initialMs: Int, intervalMs: Int) = (0, 1500),
                    initialBackoff: Duration = .seconds(1), maxBackoff: Duration = .seconds(30)) {
            self.subscribeToSessions = subscribeToSessions
            self.sessionsInterval = sessionsInterval
            self.initialBackoff = initialBackoff
            self.maxBackoff = maxBackoff
        }

        public static func == (a: Options, b: Options) -> Bool {
            a.subscribeToSessions == b.subscribeToSessions && a.sessionsInterval == b.sessionsInterval
                && a.initialBackoff == b.initialBackoff && a.maxBackoff == b.maxBackoff
        }
    }

    public let options: Options
    /// Half the server's ForceKeepAlive period, once it has asked.
    public private(set) var keepAliveInterval: Int64? = nil
    /// When the next KeepAlive is due.
    public private(set) var nextKeepAlive: MonotonicInstant? = nil
    private var lastHeard: MonotonicInstant? = nil
    private var failedAttempts = 0
    private var heardThisConnection = false

    public init(options: Options = Options()) { self.options = options }

    public static let keepAliveMessage = #"{"MessageType":"KeepAlive"}"#

    /// The socket is open.
    public mutating func connected(at now: MonotonicInstant) -> [Action] {
        keepAliveInterval = nil
        nextKeepAlive = nil
        lastHeard = now
        heardThisConnection = false
        guard options.subscribeToSessions else { return [] }
        return [.send(#"{"MessageType":"SessionsStart","Data":"\#(options.sessionsInterval.initialMs),\#(options.sessionsInterval.intervalMs)"}"#)]
    }

    /// One text message arrived.
    public mutating func received(_ text: String, at now: MonotonicInstant) -> [Action] {
        lastHeard = now
        if !heardThisConnection {
            heardThisConnection = true
            failedAttempts = 0
        }
        let split = SocketMessageSplitter.split(text)
        var actions: [Action] = []
        for object in split.objects {
            let message: LiveMessage
            do {
                message = try LiveMessage.decode(object)
            } catch {
                actions.append(.report(error))
                continue
            }
            if case .forceKeepAlive(let seconds) = message, seconds > 0 {
                // Half the period, never below one second (a hostile 0 or 1 must not spin us).
                let interval = max(Int64(seconds) * 1_000_000_000 / 2, 1_000_000_000)
                keepAliveInterval = interval
                nextKeepAlive = now.advanced(byNanoseconds: interval)
                actions.append(.send(Self.keepAliveMessage))
            }
            actions.append(.deliver(message))
        }
        if let problem = split.problem { actions.append(.report(problem)) }
        return actions
    }

    /// Time passed: sends a KeepAlive when due, or gives up on a silent connection.
    public mutating func tick(at now: MonotonicInstant) -> [Action] {
        var actions: [Action] = []
        if let interval = keepAliveInterval, let heard = lastHeard,
           now.nanoseconds(since: heard) > 4 * interval + 5_000_000_000 {
            keepAliveInterval = nil
            nextKeepAlive = nil
            return [.closeStale]
        }
        if let interval = keepAliveInterval, var due = nextKeepAlive, now >= due {
            actions.append(.send(Self.keepAliveMessage))
            // Catch up without a burst after a long stall: the next one is a period from now.
            due = due.advanced(byNanoseconds: interval)
            if due <= now { due = now.advanced(byNanoseconds: interval) }
            nextKeepAlive = due
        }
        return actions
    }

    /// When `tick` next has something to do (nil: only a message can change anything).
    public var nextDeadline: MonotonicInstant? {
        guard let interval = keepAliveInterval, let due = nextKeepAlive, let heard = lastHeard else { return nil }
        return min(due, heard.advanced(byNanoseconds: 4 * interval + 5_000_000_001))
    }

    /// The socket closed or could not open: how long to wait before the next attempt.
    public mutating func disconnected() -> Duration {
        keepAliveInterval = nil
        nextKeepAlive = nil
        let attempt = failedAttempts
        failedAttempts += 1
        var delay = options.initialBackoff
        for _ in 0..<min(attempt, 16) {
            delay = delay * 2
            if delay >= options.maxBackoff { return options.maxBackoff }
        }
        return min(delay, options.maxBackoff)
    }
}
