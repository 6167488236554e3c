import Crypto
import Foundation

/// The client's side of pairing inside an encrypted session, as its own state machine: answers
/// a pairing activation by the Pairing-PSK method or the static code, runs the code's CPace
/// exchange (the server's share, its confirmation), and holds the long-term PSK it sent until
/// the server confirms it. It seals nothing: it returns the messages to send as wire JSON and
/// the events to report, and the session encrypts and frames them.
///
/// Invariants: at most one attempt is in progress (`step`); the CPace keys exist only between
/// the server's share and its confirmation; a long-term PSK is offered only once the server
/// has proved the code (or the session is keyed by the Pairing PSK).
struct PairingExchange: Sendable {
    /// Where the attempt in progress stands.
    enum Step: Sendable {
        case none
        /// A static-code attempt outside the pairing window: client/pair-pending went out.
        case held
        /// Our pair-init went out; the server's CPace share comes next.
        case awaitingShare(scalar: [UInt8])
        /// Our share went out; the server's confirmation tag comes next.
        case awaitingConfirmation(keys: CPace.Keys, ya: [UInt8], yb: [UInt8])
        /// client/pair-finalize carried this long-term PSK; server/pair-finalize stores it.
        case awaitingFinalize(longTermPSK: [UInt8])
    }

    /// What the session must do for the exchange, in order.
    enum Output: Sendable, Equatable {
        /// Send this wire JSON (the session encrypts it).
        case send(String)
        case event(SendspinEvent)
        /// A pairing message that means nothing now: reported once per text, then ignored.
        case unexpected(String)
    }

    /// The static 8-digit code (ASCII digits), when the player offers it.
    let staticCode: [UInt8]?
    let suite: NoiseSuite
    /// 32 fresh random bytes: CPace scalars and long-term PSKs (injected for known-answer tests).
    let randomKey: @Sendable () -> [UInt8]
    private(set) var step: Step = .none
    /// Pairing activations since the last (re)handshake: the CPace session id's index.
    private(set) var index = 0
    /// Until when (client clock, µs) a code attempt may proceed; nil: the window is closed.
    private(set) var windowUntil: Int64?

    init(staticCode: [UInt8]?, suite: NoiseSuite, windowUntil: Int64?,
         randomKey: @escaping @Sendable () -> [UInt8] = { SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) } }) {
        self.staticCode = staticCode
        self.suite = suite
        self.windowUntil = windowUntil
        self.randomKey = randomKey
    }

    /// Whether the attempt waits for the pairing window.
    var isHeld: Bool { if case .held = step { true } else { false } }

    /// A new (re)handshake: pairing activations count from one again.
    mutating func restart() { index = 0 }

    /// Any activation ends an attempt in progress (nothing was stored); true if there was one.
    mutating func abandon() -> Bool {
        if case .none = step { return false }
        step = .none
        return true
    }

    /// A pairing activation on a session keyed by `category`: the static code on an unpaired
    /// session when the player has one, the Pairing-PSK method on a session keyed by our
    /// Pairing PSK (pair-init and, at once, pair-finalize with a fresh long-term PSK); any
    /// other method is refused with pair/abort.
    mutating func start(_ pairing: PairingActivation?, category: PSKCategory, now: Int64) -> [Output] {
        index += 1
        if let pairing, pairing.method == "static_pairing_code", staticCode != nil, category == .sentinel {
            return startCodeAttempt(now: now)
        }
        guard let pairing, pairing.method == "pairing_psk", category == .pairing else {
            let method = pairing?.method ?? "none"
            return [.send(WireJSON.encode(type: "pair/abort", payload: PairAbort(reason: "method_not_supported"))),
                    .event(.pairingAborted("the server asked for pairing method '\(method)' on a \(category) session; this player pairs by its pairing token (pairing_psk)"))]
        }
        let longTerm = randomKey()
        step = .awaitingFinalize(longTermPSK: longTerm)
        return [.send(WireJSON.encode(type: "client/pair-init", payload: PairInit(pairingIndex: index))),
                .send(WireJSON.encode(type: "client/pair-finalize", payload: PairFinalize(longTermPSK: Base64URL.encode(longTerm), wrappedPSK: nil))),
                .event(.pairingStarted(method: pairing.method))]
    }

    /// The static code: inside the pairing window, pair-init (our share follows the server's);
    /// outside it, client/pair-pending until the window opens.
    private mutating func startCodeAttempt(now: Int64) -> [Output] {
        guard let until = windowUntil, now < until else {
            step = .held
            return [.send(WireJSON.encode(type: "client/pair-pending", payload: PairPending(pairingIndex: index, message: "Open the pairing window on the player to pair with its code"))),
                    .event(.pairingStarted(method: "static_pairing_code (waiting for the pairing window)"))]
        }
        step = .awaitingShare(scalar: randomKey())
        return [.send(WireJSON.encode(type: "client/pair-init", payload: PairInit(pairingIndex: index))),
                .event(.pairingStarted(method: "static_pairing_code"))]
    }

    /// The user's gesture opens the window until `until`. A held attempt starts if `resume` (the
    /// session is active in a pairing activation); otherwise only the window changes.
    mutating func openWindow(until: Int64, now: Int64, resume: Bool) -> [Output] {
        windowUntil = until
        guard isHeld, resume else { return [] }
        return startCodeAttempt(now: now)
    }

    /// server/pair-auth: the server's share; answer with ours and derive the keys. The session
    /// id binds the exchange to this handshake (`handshakeHash`) and activation (`index`).
    mutating func receiveShare(_ body: [UInt8], handshakeHash: [UInt8]) throws -> [Output] {
        guard case .awaitingShare(let scalar) = step, let code = staticCode else { return [.unexpected("server/pair-auth outside a code attempt")] }
        let message = try WireJSON.decode(ServerPairAuth.self, from: body)
        guard let ya = Base64URL.decode(message.pakeMessage1), ya.count == 32 else {
            throw SendspinError.protocolViolation("server/pair-auth: pake_msg_1 is not 32 base64url bytes")
        }
        let sid = CPace.sessionID(handshakeHash: handshakeHash, pairingIndex: UInt32(index))
        let g = CPace.generator(password: code, sessionID: sid)
        guard let yb = CPace.x25519(scalar: scalar, u: g), let k = CPace.x25519(scalar: scalar, u: ya) else {
            return abort("pairing_code_mismatch", "the server's share is a low-order point")
        }
        step = .awaitingConfirmation(keys: CPace.keys(sessionID: sid, k: k, ya: ya, yb: yb), ya: ya, yb: yb)
        return [.send(WireJSON.encode(type: "client/pair-auth", payload: ClientPairAuth(pakeMessage2: Base64URL.encode(yb))))]
    }

    /// server/pair-confirm: a right tag proves the server used the same code; then our tag and
    /// the new long-term PSK, wrapped.
    mutating func receiveConfirmation(_ body: [UInt8]) throws -> [Output] {
        guard case .awaitingConfirmation(let keys, let ya, let yb) = step else {
            return [.unexpected("server/pair-confirm outside a code attempt")]
        }
        let tag = Base64URL.decode(try WireJSON.decode(ServerPairConfirm.self, from: body).serverConfirmation) ?? []
        guard CPace.equal(tag, keys.serverConfirmation), ya != yb else {
            return abort("pairing_code_mismatch", "the server's confirmation does not match: the code entered there differs from this player's")
        }
        let longTerm = randomKey()
        let wrapped = try CPace.wrap(psk: longTerm, key: keys.pskWrapKey, suite: suite)
        step = .awaitingFinalize(longTermPSK: longTerm)
        return [.send(WireJSON.encode(type: "client/pair-confirm", payload: ClientPairConfirm(clientConfirmation: Base64URL.encode(keys.clientConfirmation)))),
                .send(WireJSON.encode(type: "client/pair-finalize", payload: PairFinalize(longTermPSK: nil, wrappedPSK: Base64URL.encode(wrapped))))]
    }

    /// server/pair-finalize: the server stored the long-term PSK we sent; the record to keep,
    /// or nil when no attempt was waiting for it.
    mutating func receiveFinalize(serverID: String) -> PairedServer? {
        guard case .awaitingFinalize(let psk) = step else { return nil }
        step = .none
        return PairedServer(psk: psk, serverID: serverID)
    }

    /// pair/abort from the server: the attempt ends with its reason.
    mutating func receiveAbort(_ body: [UInt8]) -> [Output] {
        let reason = (try? WireJSON.decode(PairAbort.self, from: body).reason) ?? "unknown"
        step = .none
        return [.event(.pairingAborted(reason))]
    }

    private mutating func abort(_ reason: String, _ detail: String) -> [Output] {
        step = .none
        return [.send(WireJSON.encode(type: "pair/abort", payload: PairAbort(reason: reason))),
                .event(.pairingAborted("\(reason): \(detail)"))]
    }
}
