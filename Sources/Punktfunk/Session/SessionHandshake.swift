/// One batch of clock rounds (ClockProbe → ClockEcho), as a pure state machine: the caller sends
/// the probes it returns, feeds the echoes and the per-round timeouts, and reads `samples`.
///
/// Times are CLOCK_REALTIME nanoseconds (what the host compares with). An echo whose `t1` is not
/// the outstanding probe's (a late answer to a round that already timed out) is ignored.
public struct ClockBatch: Sendable, Equatable {
    public let rounds: Int
    public private(set) var samples: [ClockSample] = []
    private var sent = 0
    private var outstanding: UInt64?

    public init(rounds: Int = ClockOffsetEstimator.roundsPerBatch) {
        self.rounds = max(1, rounds)
    }

    /// True once every round was answered or timed out.
    public var isFinished: Bool { sent >= rounds && outstanding == nil }

    /// The first probe.
    public mutating func start(realtime: UInt64) -> ControlMessage {
        nextProbe(realtime)
    }

    /// Takes an echo received at `realtime`; returns the next probe, or nil when the batch is done
    /// (or the echo was stale and the current round still waits).
    public mutating func receiveEcho(t1: UInt64, t2: UInt64, t3: UInt64, realtime t4: UInt64) -> ControlMessage? {
        guard let expected = outstanding, expected == t1 else { return nil }
        samples.append(ClockSample(t1: t1, t2: t2, t3: t3, t4: t4))
        outstanding = nil
        return sent < rounds ? nextProbe(t4) : nil
    }

    /// The outstanding round got no answer in time; returns the next probe or nil when done.
    public mutating func roundTimedOut(realtime: UInt64) -> ControlMessage? {
        outstanding = nil
        return sent < rounds ? nextProbe(realtime) : nil
    }

    private mutating func nextProbe(_ realtime: UInt64) -> ControlMessage {
        sent += 1
        outstanding = realtime
        return .clockProbe(t1: realtime)
    }
}

/// The opening of a punktfunk/1 session as a sans-I/O state machine:
/// Hello → Welcome → (the caller binds the data socket) → Start → clock batch → established.
///
/// Events in (`start`, `receive`, `dataSocketBound`, `timedOut`), actions out. Control payloads
/// that arrive during the clock batch and are not echoes are handed back (`.unhandled`) so the
/// caller keeps them for later; anything but a Welcome before the Welcome is a protocol error.
public struct SessionHandshake: Sendable {
    public enum Action: Equatable, Sendable {
        /// Send this control payload (the caller frames it).
        case send([UInt8])
        /// Bind the data socket for this Welcome, then call `dataSocketBound`.
        case bindDataSocket(Welcome)
        /// Wait for the next control payload until this monotonic deadline, then call `timedOut`.
        case wait(untilNs: Int64)
        /// A payload that belongs to the session after the handshake.
        case unhandled([UInt8])
        /// Done: the Welcome to configure from and the clock batch's samples.
        case established(Welcome, [ClockSample])
    }

    enum State: Sendable {
        case idle
        case awaitingWelcome(deadline: Int64)
        case awaitingSocket(Welcome)
        case clock(Welcome, ClockBatch, deadline: Int64)
        case established
    }

    public let hello: Hello
    public let welcomeTimeoutNs: Int64
    public let roundTimeoutNs: Int64
    private var state: State = .idle

    public init(hello: Hello, welcomeTimeoutNs: Int64 = 10_000_000_000,
                roundTimeoutNs: Int64 = ClockOffsetEstimator.roundTimeoutNs) {
        self.hello = hello
        self.welcomeTimeoutNs = welcomeTimeoutNs
        self.roundTimeoutNs = roundTimeoutNs
    }

    public var isEstablished: Bool {
        if case .established = state { return true }
        return false
    }

    /// Sends the Hello.
    public mutating func start(now: Int64) -> [Action] {
        guard case .idle = state else { return [] }
        let deadline = now + welcomeTimeoutNs
        state = .awaitingWelcome(deadline: deadline)
        return [.send(hello.encoded()), .wait(untilNs: deadline)]
    }

    /// A control payload arrived at `now` (monotonic) / `realtime`.
    public mutating func receive(_ payload: [UInt8], now: Int64, realtime: UInt64) throws(PunktfunkSessionError) -> [Action] {
        switch state {
        case .idle, .awaitingSocket:
            return [.unhandled(payload)]
        case .established:
            return [.unhandled(payload)]
        case .awaitingWelcome(let deadline):
            guard !ControlMessage.isControl(payload) else {
                throw .malformed("expected Welcome, got control message type 0x\(String(payload[4], radix: 16))")
            }
            _ = deadline
            let welcome = try Welcome.decode(payload)
            state = .awaitingSocket(welcome)
            return [.bindDataSocket(welcome)]
        case .clock(let welcome, var batch, let deadline):
            guard ControlMessage.payload(payload, is: .clockEcho),
                  case .clockEcho(let t1, let t2, let t3) = try ControlMessage.decode(payload) else {
                return [.unhandled(payload), .wait(untilNs: deadline)]
            }
            if let probe = batch.receiveEcho(t1: t1, t2: t2, t3: t3, realtime: realtime) {
                let next = now + roundTimeoutNs
                state = .clock(welcome, batch, deadline: next)
                return [.send(probe.encoded()), .wait(untilNs: next)]
            }
            if batch.isFinished {
                state = .established
                return [.established(welcome, batch.samples)]
            }
            state = .clock(welcome, batch, deadline: deadline)
            return [.wait(untilNs: deadline)]
        }
    }

    /// The caller bound the data socket: Start, then the first clock probe (clock sync runs right
    /// after Start, before any other control traffic).
    public mutating func dataSocketBound(port: UInt16, now: Int64, realtime: UInt64) -> [Action] {
        guard case .awaitingSocket(let welcome) = state else { return [] }
        var batch = ClockBatch()
        let probe = batch.start(realtime: realtime)
        let deadline = now + roundTimeoutNs
        state = .clock(welcome, batch, deadline: deadline)
        return [.send(StartMessage(clientUDPPort: port).encoded()), .send(probe.encoded()), .wait(untilNs: deadline)]
    }

    /// The pending wait's deadline passed.
    public mutating func timedOut(now: Int64, realtime: UInt64) throws(PunktfunkSessionError) -> [Action] {
        switch state {
        case .awaitingWelcome:
            throw .timeout(waitingFor: "Welcome", seconds: Double(welcomeTimeoutNs) / 1e9)
        case .clock(let welcome, var batch, let deadline):
            guard now >= deadline else { return [.wait(untilNs: deadline)] }
            if let probe = batch.roundTimedOut(realtime: realtime) {
                let next = now + roundTimeoutNs
                state = .clock(welcome, batch, deadline: next)
                return [.send(probe.encoded()), .wait(untilNs: next)]
            }
            // No answer at all means a shared clock: the estimator gets no samples (offset 0).
            state = .established
            return [.established(welcome, batch.samples)]
        case .idle, .awaitingSocket, .established:
            return []
        }
    }
}
