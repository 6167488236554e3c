import Crypto
import FarcastSupport
import Foundation
import Synchronization

/// How much to trust a host whose certificate is not pinned yet, or has changed.
public enum HostTrustPolicy: Sendable, Equatable {
    /// Only a pinned certificate is accepted (hand-added hosts, unknown pairing policy).
    case pinnedOnly
    /// An unknown host is pinned on first use (discovered hosts advertising `pair=optional`, or
    /// the user said so); a changed certificate is still refused.
    case trustOnFirstUse
    /// The user re-trusts this host: whatever it presents replaces the pin.
    case acceptChange
    /// Pairing authenticates the host itself (SPAKE2 binds its fingerprint); pinned on success.
    case pairing
}

/// A punktfunk/1 client session over QUIC: trust, the Hello/Welcome/Start handshake, clock sync,
/// typed control, pairing and the speed test. Video reassembly is the data plane's; this type
/// gives it the data socket and the Welcome's keys and geometry.
///
/// Every wait is bounded; when the QUIC connection ends, every pending wait fails with the reason.
public final class PunktfunkClient: Sendable {
    /// Where and how to connect.
    public struct Options: Sendable {
        public var host: String
        public var port: UInt16
        public var stateDirectory: StateDirectory
        public var trust: HostTrustPolicy
        /// Device name shown by the host.
        public var name: String
        /// The QUIC handshake's deadline (the CLI's `--timeout`).
        public var connectTimeout: Duration = .seconds(10)
        /// How long a silent host is waited for once the session is up (the host uses 8 s).
        public var idleTimeout: Duration = .seconds(8)
        /// The monotonic clock the session's deadlines, pacing and stall watch read (the data
        /// socket's hole punches, the handshake's waits, the video's feedback timing); tests may
        /// pass a `ManualClock`.
        public var clock: any MonotonicClock = SystemClock()

        public init(host: String, port: UInt16 = 9777, stateDirectory: StateDirectory, trust: HostTrustPolicy = .pinnedOnly,
                    name: String = "farcast") {
            self.host = host
            self.port = port
            self.stateDirectory = stateDirectory
            self.trust = trust
            self.name = name
        }

        /// The trust-store key for this host.
        public var peerKey: String { "\(host.lowercased()):\(port)" }
    }

    /// What the trust check concluded.
    public enum TrustOutcome: String, Sendable {
        case pinned, pinnedOnFirstUse = "pinned_on_first_use", replacedPin = "replaced_pin", pairing
    }

    public let options: Options
    public let quic: QUICConnection
    public let identity: ClientIdentity
    public let trustOutcome: TrustOutcome
    public let inbox: ControlInbox
    private let datagramHandler = Mutex<(@Sendable ([UInt8]) -> Void)?>(nil)

    /// Lowercase hex SHA-256 of the host's certificate DER.
    public var hostFingerprintHex: String { hexString(quic.hostFingerprint) }

    private init(options: Options, quic: QUICConnection, identity: ClientIdentity, trust: TrustOutcome, inbox: ControlInbox) {
        self.options = options
        self.quic = quic
        self.identity = identity
        self.trustOutcome = trust
        self.inbox = inbox
    }

    /// The store of host pins (`punktfunk/pins.json` in the state directory).
    public static func trustStore(_ directory: StateDirectory) -> TrustStore {
        TrustStore(directory: directory, fileName: "punktfunk/pins.json")
    }

    /// Connects and settles trust before anything is sent on the control stream.
    public static func connect(_ options: Options) async throws -> PunktfunkClient {
        let identity = try ClientIdentity.loadOrCreate(in: options.stateDirectory)
        let store = trustStore(options.stateDirectory)
        let pin = try store.pin(for: options.peerKey)
        var configuration = QUICConnection.Configuration(host: options.host, port: options.port, identity: identity)
        configuration.idleTimeout = options.idleTimeout
        configuration.handshakeTimeout = options.connectTimeout
        if let pin, options.trust == .pinnedOnly || options.trust == .trustOnFirstUse {
            configuration.pinnedFingerprint = hexBytes(pin)
        }
        let inbox = ControlInbox()
        // Weak: the QUIC thread's handler must not keep the client alive, so a dropped client
        // closes its connection (QUICConnection's deinit) instead of leaking a running thread.
        let box = Mutex(WeakClient())
        let early = Mutex<[[UInt8]]>([])
        let quic = try await QUICConnection.connect(configuration) { event in
            switch event {
            case .streamData(let bytes):
                inbox.deliver(bytes)
            case .streamFinished:
                inbox.fail(.closedByHost(code: 0, reason: "the host ended the control stream"))
            case .datagram(let bytes):
                if let client = box.withLock({ $0.client }) {
                    client.datagramHandler.withLock { $0 }?(bytes)
                } else {
                    early.withLock { if $0.count < 64 { $0.append(bytes) } }
                }
            case .closed(let error):
                // Whoever waits on the control stream learns why the connection ended.
                inbox.fail(error.map(PunktfunkClient.refine) ?? .closed)
            }
        }
        let presented = hexString(quic.hostFingerprint)
        let outcome: TrustOutcome
        switch options.trust {
        case .pairing:
            outcome = .pairing
        case .pinnedOnly:
            guard pin != nil else {
                quic.close(code: 0x51, reason: "untrusted host")
                throw PunktfunkSessionError.untrustedHost(host: options.peerKey, fingerprint: presented)
            }
            outcome = .pinned
        // First use and --trust are decided here but pinned only once the host has welcomed
        // us (`recordTrust`): a host that refuses the Hello (pairing required) leaves no pin.
        case .trustOnFirstUse:
            switch try store.evaluate(peer: options.peerKey, fingerprint: presented, acceptChange: false) {
            case .matchesPin: outcome = .pinned
            case .pinnedOnFirstUse: outcome = .pinnedOnFirstUse
            case .replacedPin: outcome = .replacedPin
            case .mismatch(let pinned):
                quic.close(code: 0x51, reason: "fingerprint changed")
                throw PunktfunkSessionError.fingerprintChanged(host: options.peerKey, pinned: pinned, presented: presented)
            }
        case .acceptChange:
            switch try store.evaluate(peer: options.peerKey, fingerprint: presented, acceptChange: true) {
            case .matchesPin: outcome = .pinned
            case .pinnedOnFirstUse: outcome = .pinnedOnFirstUse
            case .replacedPin, .mismatch: outcome = .replacedPin
            }
        }
        let client = PunktfunkClient(options: options, quic: quic, identity: identity, trust: outcome, inbox: inbox)
        box.withLock { $0.client = client }
        for datagram in early.withLock({ $0 }) { client.datagramHandler.withLock { $0 }?(datagram) }
        return client
    }

    struct WeakClient {
        weak var client: PunktfunkClient?
    }

    /// Pins the host's certificate when first use or --trust allowed it: called once the host
    /// has answered the Hello with a Welcome, the handshake that proves the session good.
    func recordTrust() throws(PunktfunkSessionError) {
        guard trustOutcome == .pinnedOnFirstUse || trustOutcome == .replacedPin else { return }
        do {
            try Self.trustStore(options.stateDirectory).record(peer: options.peerKey, fingerprint: hostFingerprintHex)
        } catch {
            throw .trustStore("\(error)")
        }
    }

    /// The rejections a host closes the connection with, named by the first word of its reason
    /// ("PairingRequired: this device is not paired").
    enum HostRejection: String, CaseIterable {
        case pairingRequired = "PairingRequired"
        case wireVersionMismatch = "WireVersionMismatch"
        case pairingNotArmed = "PairingNotArmed"
        case pairingBoundToOtherDevice = "PairingBoundToOtherDevice"

        init?(reason: String) {
            let name = reason.prefix { $0.isLetter || $0.isNumber }
            self.init(rawValue: String(name))
        }
    }

    /// Typed rejections the host closes with: the first word of its reason names them.
    static func refine(_ error: PunktfunkSessionError) -> PunktfunkSessionError {
        guard case .closedByHost(_, let reason) = error, let rejection = HostRejection(reason: reason) else { return error }
        switch rejection {
        case .pairingRequired: return .pairingRequired
        case .wireVersionMismatch: return .malformed("the host refused wire version \(Hello.wireVersion): \(reason)")
        case .pairingNotArmed: return .pairingRefused("no PIN is armed on the host; start pairing on the host first")
        case .pairingBoundToOtherDevice: return .pairingRefused("the host's pairing window belongs to another device")
        }
    }

    /// Receives QUIC datagrams (audio, rumble, HID output…) on the connection's thread.
    public func onDatagram(_ handler: (@Sendable ([UInt8]) -> Void)?) {
        datagramHandler.withLock { $0 = handler }
    }

    /// Sends one control payload.
    public func send(_ message: ControlMessage) {
        quic.send(stream: ControlFrameDecoder.frame(message.encoded()))
    }

    /// Sends a raw handshake payload.
    public func sendPayload(_ payload: [UInt8]) {
        quic.send(stream: ControlFrameDecoder.frame(payload))
    }

    /// Sends an input or rich-input datagram.
    public func send(datagram: [UInt8]) {
        quic.send(datagram: datagram)
    }

    /// Ends the session (0x51: the client quit on purpose).
    public func close() {
        quic.close(code: 0x51, reason: "client quit")
    }

    /// Closes and waits (up to `timeout`) until the connection's thread has sent the
    /// close and released QUIC and TLS — what a program does before it exits, so no library
    /// teardown runs while that thread still uses the library. True when it finished in time.
    @discardableResult
    public func closeAndWait(timeout: Duration = .seconds(2)) async -> Bool {
        close()
        return await quic.waitUntilClosed(timeout: timeout)
    }

    // MARK: - handshake

    /// Sends Hello and returns the host's Welcome.
    public func handshake(_ hello: Hello, timeout: Duration = .seconds(10)) async throws(PunktfunkSessionError) -> Welcome {
        sendPayload(hello.encoded())
        let payload = try await inbox.next(timeout: timeout, waitingFor: "Welcome")
        guard !ControlMessage.isControl(payload) else {
            throw .malformed("expected Welcome, got control message type 0x\(String(payload[4], radix: 16))")
        }
        let welcome = try Welcome.decode(payload)
        try recordTrust()
        return welcome
    }

    /// Runs the opening of the session through `SessionHandshake`: Hello, Welcome, the data socket
    /// (`bindDataSocket` binds it and returns its port), Start and the clock batch. Payloads that
    /// arrive meanwhile and belong to later are left in the inbox.
    public func establish(_ hello: Hello, timeout: Duration = .seconds(10),
                          bindDataSocket: (Welcome) throws -> UInt16) async throws -> (welcome: Welcome, samples: [ClockSample]) {
        var machine = SessionHandshake(hello: hello, welcomeTimeoutNs: Int64(timeout / .nanoseconds(1)))
        let clock = options.clock
        var pending = machine.start(now: clock.now().nanoseconds)
        var held: [[UInt8]] = []
        defer { inbox.requeue(held) }
        while !pending.isEmpty {
            switch pending.removeFirst() {
            case .send(let payload):
                sendPayload(payload)
            case .bindDataSocket(let welcome):
                try recordTrust()
                let port = try bindDataSocket(welcome)
                pending += machine.dataSocketBound(port: port, now: clock.now().nanoseconds, realtime: DataPlaneSocket.realtime())
            case .unhandled(let payload):
                held.append(payload)
            case .established(let welcome, let samples):
                return (welcome, samples)
            case .wait(let deadline):
                let remaining = Duration.nanoseconds(max(0, deadline - clock.now().nanoseconds))
                do {
                    let payload = try await inbox.next(timeout: remaining, waitingFor: "the handshake")
                    pending += try machine.receive(payload, now: clock.now().nanoseconds, realtime: DataPlaneSocket.realtime())
                } catch .timeout {
                    pending += try machine.timedOut(now: clock.now().nanoseconds, realtime: DataPlaneSocket.realtime())
                }
            }
        }
        throw PunktfunkSessionError.closed
    }

    /// Sends Start for a bound data socket.
    public func start(dataPort: UInt16) {
        sendPayload(StartMessage(clientUDPPort: dataPort).encoded())
    }

    /// One clock batch: 8 ClockProbe/ClockEcho rounds, each bounded by 2 s (a silent host means a
    /// shared clock: no samples), run by the same `ClockBatch` the session's opening uses (an
    /// echo for a round that already timed out is ignored).
    public func measureClock(rounds: Int = ClockOffsetEstimator.roundsPerBatch) async throws(PunktfunkSessionError) -> [ClockSample] {
        var batch = ClockBatch(rounds: rounds)
        send(batch.start(realtime: DataPlaneSocket.realtime()))
        while !batch.isFinished {
            let payload: [UInt8]
            do {
                payload = try await inbox.next(timeout: .nanoseconds(ClockOffsetEstimator.roundTimeoutNs), waitingFor: "clock echo") { p in
                    ControlMessage.payload(p, is: .clockEcho)
                }
            } catch .timeout {
                if let probe = batch.roundTimedOut(realtime: DataPlaneSocket.realtime()) { send(probe) }
                continue
            }
            let t4 = DataPlaneSocket.realtime()
            guard case .clockEcho(let t1, let t2, let t3) = try ControlMessage.decode(payload) else { continue }
            if let probe = batch.receiveEcho(t1: t1, t2: t2, t3: t3, realtime: t4) { send(probe) }
        }
        return batch.samples
    }

    /// Waits for the first control message of a kind (others stay queued).
    public func next(_ kind: ControlMessage.Kind, timeout: Duration, waitingFor what: String) async throws(PunktfunkSessionError) -> ControlMessage {
        let payload = try await inbox.next(timeout: timeout, waitingFor: what) { p in ControlMessage.payload(p, is: kind) }
        return try ControlMessage.decode(payload)
    }

    // MARK: - pairing

    /// Pairs with the PIN the host shows (side A of SPAKE2); on success pins the host.
    public func pair(pin: String, timeout: Duration = .seconds(10), scalar: [UInt8]? = nil) async throws -> Void {
        var exchange = try PairingExchange(pin: pin, name: options.name, clientFingerprint: identity.fingerprint,
                                           hostFingerprint: quic.hostFingerprint, scalar: scalar)
        send(exchange.start())
        let challenge = try await next(.pairChallenge, timeout: timeout, waitingFor: "pairing challenge")
        guard case .pairChallenge(let spakeB, let confirmHost) = challenge else { throw PunktfunkSessionError.malformed("pairing challenge") }
        let proof: ControlMessage
        do {
            proof = try exchange.receive(challenge: spakeB, confirmHost: confirmHost)
        } catch {
            quic.close(code: 0x51, reason: "pairing failed")
            throw error
        }
        send(proof)
        let result = try await next(.pairResult, timeout: timeout, waitingFor: "pairing result")
        guard case .pairResult(true) = result else { throw PunktfunkSessionError.wrongPIN }
        _ = try Self.trustStore(options.stateDirectory).check(peer: options.peerKey, fingerprint: hostFingerprintHex, acceptChange: true)
    }

    // MARK: - speed test

    /// Asks the host for a probe burst and counts what arrives on the data socket. `counter`
    /// reports (packets, bytes) received so far; the caller's data plane owns the socket.
    public func speedTest(targetKbps: UInt32, durationMs: UInt32, grace: Duration = .milliseconds(500),
                          counter: @Sendable () -> (UInt64, UInt64)) async throws(PunktfunkSessionError) -> SpeedTestResult {
        let before = counter()
        send(.probeRequest(targetKbps: targetKbps, durationMs: durationMs))
        let answer = try await next(.probeResult, timeout: .milliseconds(Int(durationMs)) + .seconds(10), waitingFor: "probe result")
        guard case .probeResult(let result) = answer else { throw .malformed("probe result") }
        // Datagrams still in flight when the result (on the reliable stream) overtook them.
        try? await Task.sleep(for: grace)
        let after = counter()
        return SpeedTestResult(targetKbps: targetKbps, result: result, receivedPackets: after.0 - before.0,
                               receivedBytes: after.1 - before.1)
    }
}
