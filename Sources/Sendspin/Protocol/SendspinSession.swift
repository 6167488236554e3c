import Crypto
import FarcastSupport

/// The Sendspin client protocol as a state machine over WebSocket messages: client/init →
/// server/init → Noise_KKpsk2 (server initiates) → encrypted hello and activation → the
/// session. It owns no socket and reads no clock: arrival times are passed in. Whoever
/// opened the socket (client-initiated or the server dialling a listening player), the
/// protocol is the same, so the core does not care.
///
/// The session is the public face of one of two cores, chosen once by the configuration:
/// `EncryptedSessionCore` (the protocol, with `PairingExchange` for pairing) or
/// `LegacySessionCore` (the older clear wire, only when `legacyWire` is set).
public struct SendspinSession: Sendable {
    public struct Configuration: Sendable {
        public var name: String
        public var suite: NoiseSuite = .chaChaPoly
        public var roles: [String] = ["player@v1", "metadata@v1", "controller@v1"]
        /// artwork@v1's channels (at most 4; their index is the channel number), sent in every
        /// client/state. Empty: no artwork (list `artwork@v1` in `roles` to get it).
        public var artworkChannels: [ArtworkChannel] = []
        /// visualizer@v1's request, sent in every client/state (list `visualizer@v1` in `roles`
        /// to get frames).
        public var visualizer = VisualizerRequest()
        /// Bytes of visualizer messages the client holds before their time.
        public var visualizerBufferCapacity = 1_000_000
        public var formats: [AudioFormatSpec]
        /// Bytes of compressed audio the player can queue; a hard cap for the server.
        public var bufferCapacity: Int = 2_000_000
        public var deviceInfo: DeviceInfo?
        /// Accept playback in unpaired (Sentinel) sessions.
        public var unpairedAccess = true
        /// The Pairing PSK and paired servers' long-term PSKs this client can answer with.
        public var credentials = PairingCredentials()
        /// The static 8-digit pairing code (ASCII digits); offered only when set.
        public var staticPairingCode: [UInt8]?
        /// Until when (client clock, µs) the pairing window is open: a code attempt outside it is
        /// held with client/pair-pending until `openPairingWindow` (the user's gesture).
        public var pairingWindowUntil: Int64?
        /// Speak the legacy, pre-encryption wire (aiosendspin 5.x; servers in transition mode):
        /// clear JSON, the client's hello first, no activation, 9-byte audio headers; player,
        /// metadata, controller and artwork. Only ever chosen deliberately (see
        /// `SendspinPlayer.Options.wire`).
        public var legacyWire = false
        /// The client_id for the legacy wire, which has no key to derive it from.
        public var legacyClientID: String?
        /// Server ids known to speak the encrypted protocol: a legacy hello from one of them is
        /// a downgrade and is refused.
        public var encryptedServerIDs: Set<String> = []

        public init(name: String, formats: [AudioFormatSpec]) {
            self.name = name
            self.formats = formats
        }
    }

    public enum Inbound: Sendable {
        case text(String)
        case binary([UInt8])
    }

    public enum Action: Sendable, Equatable {
        case sendText(String)
        case sendBinary([UInt8])
        case event(SendspinEvent)
        /// Close the connection: nil after a clean goodbye, else why.
        case close(SendspinError?)
    }

    public let configuration: Configuration
    /// The client_id: base64url of the identity's public key (on the legacy wire, `legacyClientID` when set).
    public let clientID: String
    private var core: any SendspinSessionCore

    public init(configuration: Configuration, identity: Curve25519.KeyAgreement.PrivateKey) {
        self.configuration = configuration
        let keyID = Base64URL.encode(Array(identity.publicKey.rawRepresentation))
        if configuration.legacyWire {
            clientID = configuration.legacyClientID ?? keyID
            core = LegacySessionCore(configuration: configuration, clientID: clientID)
        } else {
            clientID = keyID
            core = EncryptedSessionCore(configuration: configuration, identity: identity, clientID: keyID)
        }
    }

    public var isLegacy: Bool { configuration.legacyWire }
    public var isClosed: Bool { core.isClosed }
    public var isActive: Bool { core.isActive }
    public var serverID: String? { core.serverID }
    public var activeRoles: [String] { core.activeRoles }
    public var activities: [Activity] { core.activities }
    public var serverHello: ServerHello? { core.serverHello }
    /// The server closed the connection without answering client/init — what a server that
    /// speaks only the legacy wire does.
    public var closedAwaitingServerInit: Bool { core.closedAwaitingServerInit }
    /// The PSKs held now (pairing adds to them within the session).
    public var credentials: PairingCredentials { core.credentials }
    /// The category of the PSK keying the session; nil before the handshake and on the legacy wire.
    public var pskCategory: PSKCategory? { core.pskCategory }
    /// While a pairing activation is in force the server takes pairing messages only (anything
    /// else ends the attempt and the connection), so state and time requests wait for the
    /// activation that follows it.
    public var isPairing: Bool { activities.contains(.pairing) }
    /// While the connection is still opening, what the client waits for from the server (for
    /// timeout messages); nil once the server has answered the hello.
    public var openingStep: String? { core.openingStep }
    /// The finished handshake's hash (the next re-handshake's prologue); for tests.
    var handshakeHash: [UInt8]? { (core as? EncryptedSessionCore)?.handshakeHash }

    /// The first messages: client/init (its exact text is half the prologue), or on the legacy
    /// wire the client's hello and a first state.
    public mutating func start() -> [Action] { core.start() }

    /// Feeds one complete WebSocket message; `time` is the client clock (µs) at arrival.
    public mutating func receive(_ message: Inbound, at time: Int64) -> [Action] { core.receive(message, at: time) }

    /// The transport saw the connection end.
    public mutating func connectionClosed() -> [Action] { core.connectionClosed() }

    /// The user's gesture: opens the pairing window until `until`; a held code attempt starts.
    public mutating func openPairingWindow(until: Int64, now: Int64) -> [Action] { core.openPairingWindow(until: until, now: now) }

    /// client/time, stamped with the client clock (µs) — T1 of an exchange.
    public mutating func sendTime(at clientTime: Int64) -> [Action] { core.sendTime(at: clientTime) }

    /// client/state; `available` goes in every message.
    public mutating func sendState(available: Bool, player: PlayerStateReport?) -> [Action] {
        core.sendState(available: available, player: player)
    }

    /// A controller command (never on the legacy wire: such a server closes on a type it does not know).
    public mutating func sendCommand(_ command: ControllerCommand) -> [Action] { core.sendCommand(command) }

    /// source@v1: `client-stream/start` announcing the format the chunks come in.
    public mutating func sendSourceStart(_ format: SourceFormat) -> [Action] { core.sendSourceStart(format) }

    /// source@v1: one chunk, stamped with the server time its first sample was captured at.
    public mutating func sendSourceAudio(timestamp: Int64, payload: [UInt8]) -> [Action] { core.sendSourceAudio(timestamp: timestamp, payload: payload) }

    /// source@v1: `client-stream/end`.
    public mutating func sendSourceEnd() -> [Action] { core.sendSourceEnd() }

    /// client/goodbye, then close.
    public mutating func goodbye(reason: String) -> [Action] { core.goodbye(reason: reason) }
}

/// One wire's session core: what `SendspinSession` forwards to. Each core is a state machine
/// that returns the actions to perform and reads no clock.
protocol SendspinSessionCore: Sendable {
    typealias Action = SendspinSession.Action
    var serverID: String? { get }
    var serverHello: ServerHello? { get }
    var activeRoles: [String] { get }
    var activities: [Activity] { get }
    var pskCategory: PSKCategory? { get }
    var credentials: PairingCredentials { get }
    var closedAwaitingServerInit: Bool { get }
    var isActive: Bool { get }
    var isClosed: Bool { get }
    var openingStep: String? { get }
    mutating func start() -> [Action]
    mutating func receive(_ message: SendspinSession.Inbound, at time: Int64) -> [Action]
    mutating func connectionClosed() -> [Action]
    mutating func openPairingWindow(until: Int64, now: Int64) -> [Action]
    mutating func sendSourceStart(_ format: SourceFormat) -> [Action]
    mutating func sendSourceAudio(timestamp: Int64, payload: [UInt8]) -> [Action]
    mutating func sendSourceEnd() -> [Action]
    mutating func sendTime(at clientTime: Int64) -> [Action]
    mutating func sendState(available: Bool, player: PlayerStateReport?) -> [Action]
    mutating func sendCommand(_ command: ControllerCommand) -> [Action]
    mutating func goodbye(reason: String) -> [Action]
}
