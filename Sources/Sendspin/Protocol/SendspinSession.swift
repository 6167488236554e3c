import Crypto
import FarcastSupport
import Foundation

/// One audio chunk as it arrived: the server timestamp of its first sample, the server's
/// send-ahead figure, the codec payload, and when it arrived on the client clock.
public struct AudioChunk: Sendable, Equatable {
    /// Server clock (µs) at which the first sample must leave the output.
    public var timestamp: Int64
    /// Timestamp minus the server's transmit time (µs); 0 or UInt32.max when saturated.
    public var sendAhead: UInt32
    public var payload: [UInt8]
    /// Client clock (µs) when the WebSocket message arrived.
    public var arrival: Int64

    /// Parses the 13-byte header (type 4, int64 BE timestamp, uint32 BE send-ahead).
    static func parse(_ body: ArraySlice<UInt8>, arrival: Int64) -> AudioChunk? {
        guard body.count >= 12 else { return nil }
        var reader = ByteReader(Array(body))
        guard let timestamp = try? reader.readInteger(as: Int64.self),
              let sendAhead = try? reader.readInteger(as: UInt32.self) else { return nil }
        return AudioChunk(timestamp: timestamp, sendAhead: sendAhead, payload: Array(body.dropFirst(12)), arrival: arrival)
    }
}

/// What the server did, as the session reports it.
public enum SendspinEvent: Sendable, Equatable {
    case handshakeComplete(serverID: String, pskCategory: PSKCategory)
    case hello(ServerHello)
    /// Activation; `roles` is the active role list in effect (it persists when omitted).
    case activated(activities: [Activity], roles: [String])
    /// A server/time answer and the client time (µs) it arrived.
    case serverTime(ServerTime, receivedAt: Int64)
    case streamStart(StreamFormat?)
    case streamClear
    case streamEnd
    case audioChunk(AudioChunk)
    /// An audio message too short for its header: dropped and counted.
    case malformedAudio(String)
    case groupUpdate(GroupUpdate)
    case metadata(Metadata)
    case controller(ControllerState)
    case playerCommand(PlayerCommand)
    /// A message type this client does not handle, reported once per type.
    case unknownMessage(String)
    /// Pairing finished: the server stored this long-term PSK for us; keep it.
    case paired(PairedServer)
    /// A pairing activation was answered (pair-init and pair-finalize went out).
    case pairingStarted(method: String)
    /// A pairing attempt ended without a result (the server's or our reason).
    case pairingAborted(String)
    /// The server ended the pairing: forget its record (the session then says goodbye).
    case unpaired(serverID: String)
}

/// The Sendspin client protocol as a state machine over WebSocket messages: client/init →
/// server/init → Noise_KKpsk2 (server initiates) → encrypted hello and activation → the
/// session. It owns no socket and reads no clock: arrival times are passed in. Whoever
/// opened the socket (client-initiated or the server dialling a listening player), the
/// protocol is the same, so the core does not care.
public struct SendspinSession: Sendable {
    public struct Configuration: Sendable {
        public var name: String
        public var suite: NoiseSuite = .chaChaPoly
        public var roles: [String] = ["player@v1", "metadata@v1", "controller@v1"]
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
        /// clear JSON, the client's hello first, no activation, 9-byte audio headers, the
        /// player role only. Only ever chosen deliberately (see `SendspinPlayer.Options.allowLegacy`).
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

    enum Phase: Sendable, Equatable {
        case idle
        case awaitingServerInit
        case awaitingHandshake
        case awaitingHello
        case awaitingActivation
        case active
        case closed
    }

    public let configuration: Configuration
    private let identity: Curve25519.KeyAgreement.PrivateKey
    private(set) var phase: Phase = .idle
    private var clientInitText = ""
    private var serverInitText = ""
    public private(set) var serverID: String?
    private var handshake: NoiseKKpsk2Responder?
    private var receiveCipher: NoiseCipherState?
    private var sendCipher: NoiseCipherState?
    private var reassembler = FragmentReassembler()
    private var reportedUnknown: Set<String> = []
    /// Re-handshake in progress: new ciphers wait until the server's first message under them.
    private var pendingCiphers: (receive: NoiseCipherState, send: NoiseCipherState)?
    public private(set) var activeRoles: [String] = []
    public private(set) var activities: [Activity] = []
    public private(set) var serverHello: ServerHello?
    /// The server closed the connection without answering client/init — what a server that
    /// speaks only the legacy wire does.
    public private(set) var closedAwaitingServerInit = false
    /// The PSKs held now (pairing adds to them within the session).
    public private(set) var credentials: PairingCredentials
    /// The category of the PSK keying the session: `sn` (unpaired), `pr` (pairing), `lt` (paired).
    public private(set) var pskCategory: PSKCategory?
    /// Pairing activations since the last (re)handshake.
    private var pairingIndex = 0
    /// The long-term PSK sent in client/pair-finalize, until the server confirms it.
    private var pendingLongTermPSK: [UInt8]?
    /// A static-code attempt: held for the window, waiting for the server's share, or for its
    /// confirmation.
    private enum CodeAttempt {
        case held
        case awaitingShare(scalar: [UInt8])
        case awaitingConfirmation(keys: CPace.Keys, ya: [UInt8], yb: [UInt8])
    }
    private var codeAttempt: CodeAttempt?
    private var pairingWindowUntil: Int64?
    /// The time of the message being handled (client clock, µs).
    private var now: Int64 = 0
    private var pendingCategory: PSKCategory?

    public init(configuration: Configuration, identity: Curve25519.KeyAgreement.PrivateKey) {
        self.configuration = configuration
        self.identity = identity
        credentials = configuration.credentials
        pairingWindowUntil = configuration.pairingWindowUntil
    }

    /// The client_id: base64url of the identity's public key.
    public var clientID: String {
        if configuration.legacyWire, let id = configuration.legacyClientID { return id }
        return Base64URL.encode(Array(identity.publicKey.rawRepresentation))
    }
    public var isLegacy: Bool { configuration.legacyWire }
    public var isClosed: Bool { phase == .closed }
    public var isActive: Bool { phase == .active }

    /// While the connection is still opening, what the client waits for from the server (for
    /// timeout messages); nil once the server has answered the hello.
    public var openingStep: String? {
        switch phase {
        case .idle: return "the session to start"
        case .awaitingServerInit:
            return "an answer to client/init (is it a Sendspin server that speaks the encrypted protocol? an older one may speak only the legacy wire: see --allow-legacy)"
        case .awaitingHandshake: return "the server to finish the encrypted handshake"
        case .awaitingHello: return configuration.legacyWire ? "an answer to the legacy client/hello" : "an answer to client/hello"
        case .awaitingActivation, .active, .closed: return nil
        }
    }

    // MARK: - Starting

    /// The first message: client/init, as a text frame. Its exact text is half the prologue.
    public mutating func start() -> [Action] {
        guard phase == .idle else { return [] }
        if configuration.legacyWire {
            // The hello and a first state at once: a legacy server holds the stream until it has
            // a client/state, and the state may precede its hello.
            phase = .awaitingHello
            let hello = LegacyClientHello(clientID: clientID, name: configuration.name, supportedRoles: ["player@v1"],
                                          playerSupport: LegacyPlayerSupport(supportedFormats: configuration.formats,
                                                                             bufferCapacity: configuration.bufferCapacity,
                                                                             supportedCommands: ["volume", "mute"]))
            return [.sendText(WireJSON.encode(type: "client/hello", payload: hello)),
                    .sendText(WireJSON.encode(type: "client/state", payload: LegacyClientState(state: nil, player: nil)))]
        }
        clientInitText = WireJSON.encode(type: "client/init", payload: ClientInit(clientID: clientID, version: 1, suite: configuration.suite.rawValue))
        phase = .awaitingServerInit
        return [.sendText(clientInitText)]
    }

    // MARK: - Receiving

    /// Feeds one complete WebSocket message; `time` is the client clock (µs) at arrival.
    public mutating func receive(_ message: Inbound, at time: Int64) -> [Action] {
        guard phase != .closed else { return [] }
        now = time
        var actions: [Action] = []
        do {
            switch (phase, message) {
            case (.awaitingHello, .text(let text)) where configuration.legacyWire, (.active, .text(let text)) where configuration.legacyWire:
                try readJSON(Array(text.utf8), at: time, &actions)
            case (.active, .binary(let bytes)) where configuration.legacyWire:
                try readLegacyAudio(bytes, at: time, &actions)
            case (_, .binary) where configuration.legacyWire:
                throw SendspinError.protocolViolation("audio before server/hello")
            case (.awaitingServerInit, .text(let text)):
                try readServerInit(text, &actions)
            case (.awaitingHandshake, .text(let text)):
                try readHandshakeMessage1(text, &actions)
            case (.awaitingServerInit, .binary), (.awaitingHandshake, .binary):
                throw SendspinError.protocolViolation("a binary message before the encrypted handshake finished")
            case (.awaitingHello, .binary(let bytes)), (.awaitingActivation, .binary(let bytes)), (.active, .binary(let bytes)):
                try readTransport(bytes, at: time, &actions)
            case (_, .text):
                // After the handshake everything is encrypted: cleartext is a protocol failure.
                throw SendspinError.protocolViolation("a cleartext message after the encrypted handshake")
            default:
                throw SendspinError.protocolViolation("a message before the session started")
            }
        } catch let error as SendspinError {
            phase = .closed
            actions.append(.close(error))
        } catch {
            phase = .closed
            actions.append(.close(.protocolViolation("\(error)")))
        }
        return actions
    }

    /// The transport saw the connection end.
    public mutating func connectionClosed() -> [Action] {
        guard phase != .closed else { return [] }
        closedAwaitingServerInit = phase == .awaitingServerInit
        let context: String
        switch phase {
        case .awaitingServerInit: context = "before the server answered client/init (is this a Sendspin server, and does it speak the encrypted protocol? an older server may speak only the legacy wire: see --allow-legacy)"
        case .awaitingHello where configuration.legacyWire: context = "before the server answered the legacy client/hello (it refused it, or is no legacy Sendspin server)"
        case .awaitingHandshake: context = "during the encrypted handshake (the server rejected it silently)"
        case .awaitingHello, .awaitingActivation: context = "before the server activated this client"
        default: context = "by the server"
        }
        phase = .closed
        return [.close(.connectionClosed(context))]
    }

    private mutating func readServerInit(_ text: String, _ actions: inout [Action]) throws {
        let bytes = Array(text.utf8)
        let type = try WireJSON.messageType(of: bytes)
        if type == "server/error" {
            let reason = (try? WireJSON.decode(ServerErrorPayload.self, from: bytes).reason) ?? "unknown"
            throw SendspinError.serverRefused(reason: reason)
        }
        guard type == "server/init" else { throw SendspinError.protocolViolation("expected server/init, got \(type)") }
        let payload = try WireJSON.decode(ServerInit.self, from: bytes)
        guard payload.version == 1 else { throw SendspinError.protocolViolation("server/init version \(payload.version); this client speaks 1") }
        guard payload.serverID.utf8.count == 43, let key = Base64URL.decode(payload.serverID), key.count == 32,
              let serverKey = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: key) else {
            throw SendspinError.protocolViolation("server/init carries an invalid server_id")
        }
        serverInitText = text
        serverID = payload.serverID
        handshake = NoiseKKpsk2Responder(suite: configuration.suite, localStatic: identity, remoteStatic: serverKey,
                                         prologue: Array(clientInitText.utf8) + Array(text.utf8))
        phase = .awaitingHandshake
    }

    private mutating func readHandshakeMessage1(_ text: String, _ actions: inout [Action]) throws {
        let bytes = Array(text.utf8)
        let type = try WireJSON.messageType(of: bytes)
        guard type == "noise/handshake" else { throw SendspinError.protocolViolation("expected noise/handshake, got \(type)") }
        let data = try WireJSON.decode(HandshakePayload.self, from: bytes).data
        guard var responder = handshake else { throw SendspinError.protocolViolation("no handshake in progress") }
        let (message2, category) = try answerMessage1(data, with: &responder, rehandshake: false)
        actions.append(.sendText(WireJSON.encode(type: "noise/handshake", payload: HandshakePayload(data: Base64URL.encode(message2)))))
        let (receive, send) = responder.split()
        receiveCipher = receive
        sendCipher = send
        handshake = responder
        phase = .awaitingHello
        pskCategory = category
        pairingIndex = 0
        actions.append(.event(.handshakeComplete(serverID: serverID ?? "", pskCategory: category)))
    }

    /// Reads message 1, picks the PSK its reference names, writes message 2.
    private func answerMessage1(_ data: String, with responder: inout NoiseKKpsk2Responder, rehandshake: Bool) throws -> ([UInt8], PSKCategory) {
        guard let message1 = Base64URL.decode(data) else { throw SendspinError.handshakeFailed("message 1 is not base64url") }
        let payload: [UInt8]
        do { payload = try responder.readMessage1(message1) } catch { throw SendspinError.handshakeFailed("\(error)") }
        guard let reference = try? JSONDecoder().decode(PSKReference.self, from: Data(payload)) else {
            throw SendspinError.handshakeFailed("message 1 does not carry a PSK reference")
        }
        let psk: [UInt8]
        switch reference.pskCategory {
        case .sentinel:
            guard reference.pskID == SendspinPSK.identifier(of: SendspinPSK.sentinel) else {
                throw SendspinError.handshakeFailed("a Sentinel reference with a wrong psk_id")
            }
            psk = SendspinPSK.sentinel
        case .longTerm, .pairing:
            if let held = credentials.psk(category: reference.pskCategory, id: reference.pskID, serverID: serverID) {
                psk = held
            } else {
                // A miss in the first handshake is answered under the Sentinel (the server sees
                // a credential mismatch and goes on unpaired); in a re-handshake it is fatal.
                guard !rehandshake else {
                    throw SendspinError.handshakeFailed("the server asked for a \(reference.pskCategory == .longTerm ? "long-term" : "pairing") PSK this client does not hold")
                }
                psk = SendspinPSK.sentinel
            }
        case .other(let name):
            throw SendspinError.handshakeFailed("unknown PSK category \(name)")
        }
        let message2: [UInt8]
        do { message2 = try responder.writeMessage2(payload: Array("{}".utf8), psk: psk) } catch { throw SendspinError.handshakeFailed("\(error)") }
        return (message2, psk == SendspinPSK.sentinel ? .sentinel : reference.pskCategory)
    }

    private mutating func readTransport(_ ciphertext: [UInt8], at time: Int64, _ actions: inout [Action]) throws {
        guard ciphertext.count <= 65_535 else { throw SendspinError.protocolViolation("a transport message over 65,535 bytes") }
        var plaintext: [UInt8]
        do {
            guard var cipher = receiveCipher else { throw SendspinError.protocolViolation("no receive cipher") }
            plaintext = try cipher.decrypt(ciphertext)
            receiveCipher = cipher
        } catch {
            // During a re-handshake the server's first message under the new keys ends it.
            guard var pending = pendingCiphers, let p = try? pending.receive.decrypt(ciphertext) else { throw SendspinError.decryptionFailed }
            receiveCipher = pending.receive
            sendCipher = pending.send
            pendingCiphers = nil
            if let pendingCategory { pskCategory = pendingCategory }
            pendingCategory = nil
            plaintext = p
            // The re-handshake is complete now that the server speaks under the new keys.
            actions.append(.event(.handshakeComplete(serverID: serverID ?? "", pskCategory: pskCategory ?? .sentinel)))
        }
        guard let (type, body) = try reassembler.accept(plaintext) else { return }
        switch type {
        case SendspinFraming.json:
            try readJSON(body, at: time, &actions)
        case SendspinFraming.playerAudio:
            guard phase == .active else { return }      // audio before activation is dropped
            if let chunk = AudioChunk.parse(body[...], arrival: time) {
                actions.append(.event(.audioChunk(chunk)))
            } else {
                actions.append(.event(.malformedAudio("an audio message of \(body.count + 1) bytes, shorter than the 13-byte header")))
            }
        case 2, 3:
            throw SendspinError.protocolViolation("deprecated fragment framing (type \(type)); this client speaks only the current framing")
        default:
            reportUnknown("binary type \(type)", &actions)
        }
    }

    /// Legacy audio: `[4][int64 BE timestamp]` and the payload, in a plain binary frame.
    private mutating func readLegacyAudio(_ bytes: [UInt8], at time: Int64, _ actions: inout [Action]) throws {
        guard let type = bytes.first else { throw SendspinError.protocolViolation("an empty binary message") }
        guard type == SendspinFraming.playerAudio else { return reportUnknown("legacy binary type \(type)", &actions) }
        guard bytes.count >= 9 else {
            actions.append(.event(.malformedAudio("an audio message of \(bytes.count) bytes, shorter than the legacy 9-byte header")))
            return
        }
        var reader = ByteReader(Array(bytes[1..<9]))
        let timestamp = try reader.readInteger(as: Int64.self)
        actions.append(.event(.audioChunk(AudioChunk(timestamp: timestamp, sendAhead: 0, payload: Array(bytes[9...]), arrival: time))))
    }

    private mutating func reportUnknown(_ what: String, _ actions: inout [Action]) {
        if reportedUnknown.insert(what).inserted { actions.append(.event(.unknownMessage(what))) }
    }

    private mutating func readJSON(_ body: [UInt8], at time: Int64, _ actions: inout [Action]) throws {
        let type = try WireJSON.messageType(of: body)
        switch (phase, type) {
        case (.awaitingHello, "server/hello") where configuration.legacyWire:
            // The legacy hello admits at once; it carries the server's id and active roles.
            let hello = try WireJSON.decode(LegacyServerHello.self, from: body)
            if configuration.encryptedServerIDs.contains(hello.serverID) {
                throw SendspinError.handshakeFailed("server \(hello.serverID) spoke the encrypted protocol before and now offers only the legacy wire; refusing the downgrade")
            }
            serverID = hello.serverID
            activeRoles = hello.activeRoles ?? []
            activities = [.playback]
            serverHello = ServerHello(name: hello.name, languages: nil)
            phase = .active
            actions.append(.event(.hello(ServerHello(name: hello.name, languages: nil))))
            actions.append(.event(.activated(activities: activities, roles: activeRoles)))
        case (.awaitingHello, "server/hello"):
            let hello = try WireJSON.decode(ServerHello.self, from: body)
            serverHello = hello
            phase = .awaitingActivation
            actions.append(.event(.hello(hello)))
            try send(type: "client/hello", payload: clientHello(), &actions)
        case (.awaitingHello, _):
            throw SendspinError.protocolViolation("expected server/hello, got \(type)")
        case (_, "server/activate"):
            let activate = try WireJSON.decode(ServerActivate.self, from: body)
            if let roles = activate.activeRoles { activeRoles = roles }
            activities = activate.activities
            if let refusal = admissibility(activate.activities) {
                try send(type: "client/goodbye", payload: ClientGoodbye(reason: refusal.reason), &actions)
                phase = .closed
                actions.append(.close(.notAdmitted(goodbyeReason: refusal.reason, detail: refusal.detail)))
                return
            }
            phase = .active
            // Any activation ends a pairing attempt still in progress (nothing was stored).
            if pendingLongTermPSK != nil || codeAttempt != nil {
                pendingLongTermPSK = nil
                codeAttempt = nil
                actions.append(.event(.pairingAborted("the server moved on before confirming")))
            }
            actions.append(.event(.activated(activities: activities, roles: activeRoles)))
            if activities.contains(.pairing) { try startPairing(activate.pairing, &actions) }
        case (.awaitingActivation, "group/update"), (.awaitingActivation, "server/state"), (.awaitingActivation, "server/time"):
            // Tolerated before activation; handled like in the active phase.
            try readActiveMessage(type, body, at: time, &actions)
        case (.awaitingActivation, _):
            reportUnknown("\(type) before server/activate", &actions)
        case (.active, "noise/handshake"):
            try readRehandshake(body, &actions)
        default:
            try readActiveMessage(type, body, at: time, &actions)
        }
    }

    private mutating func readActiveMessage(_ type: String, _ body: [UInt8], at time: Int64, _ actions: inout [Action]) throws {
        switch type {
        case "server/time":
            actions.append(.event(.serverTime(try WireJSON.decode(ServerTime.self, from: body), receivedAt: time)))
        case "stream/start":
            actions.append(.event(.streamStart(try WireJSON.decode(StreamStart.self, from: body).player)))
        case "stream/clear":
            if (try? WireJSON.decode(StreamRoles.self, from: body).roles).map({ $0?.contains("player") ?? true }) ?? true {
                actions.append(.event(.streamClear))
            }
        case "stream/end":
            if (try? WireJSON.decode(StreamRoles.self, from: body).roles).map({ $0?.contains("player") ?? true }) ?? true {
                actions.append(.event(.streamEnd))
            }
        case "group/update":
            actions.append(.event(.groupUpdate(try WireJSON.decode(GroupUpdate.self, from: body))))
        case "server/state":
            let state = try WireJSON.decode(ServerState.self, from: body)
            if let metadata = state.metadata { actions.append(.event(.metadata(metadata))) }
            if let controller = state.controller { actions.append(.event(.controller(controller))) }
        case "server/pair-auth":
            try readServerShare(body, &actions)
        case "server/pair-confirm":
            try readServerConfirmation(body, &actions)
        case "server/pair-finalize":
            guard let psk = pendingLongTermPSK, let serverID else { return reportUnknown("server/pair-finalize outside a pairing attempt", &actions) }
            pendingLongTermPSK = nil
            let record = PairedServer(psk: psk, serverID: serverID)
            credentials.add(record)
            actions.append(.event(.paired(record)))
        case "pair/abort":
            let reason = (try? WireJSON.decode(PairAbort.self, from: body).reason) ?? "unknown"
            pendingLongTermPSK = nil
            codeAttempt = nil
            actions.append(.event(.pairingAborted(reason)))
        case "server/unpair":
            // Only a paired session can be unpaired; elsewhere the message means nothing.
            guard pskCategory == .longTerm, let serverID else { return reportUnknown("server/unpair on an unpaired session", &actions) }
            credentials.servers.removeAll { $0.serverID == serverID }
            actions.append(.event(.unpaired(serverID: serverID)))
            try send(type: "client/goodbye", payload: ClientGoodbye(reason: "unpaired"), &actions)
            phase = .closed
            actions.append(.close(nil))
        case "server/command":
            if let player = try WireJSON.decode(ServerCommand.self, from: body).player {
                actions.append(.event(.playerCommand(player)))
            }
        default:
            reportUnknown(type, &actions)
        }
    }

    /// A server-initiated re-handshake: msg 1 arrives encrypted under the current keys; msg 2
    /// leaves under them too; the server's first message under the new keys completes it.
    private mutating func readRehandshake(_ body: [UInt8], _ actions: inout [Action]) throws {
        guard let previous = handshake, let serverID, let key = Base64URL.decode(serverID),
              let serverKey = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: key) else {
            throw SendspinError.protocolViolation("a re-handshake without a finished first handshake")
        }
        let data = try WireJSON.decode(HandshakePayload.self, from: body).data
        var responder = NoiseKKpsk2Responder(suite: configuration.suite, localStatic: identity, remoteStatic: serverKey,
                                             prologue: previous.handshakeHash)
        let (message2, category) = try answerMessage1(data, with: &responder, rehandshake: true)
        try send(type: "noise/handshake", payload: HandshakePayload(data: Base64URL.encode(message2)), &actions)
        handshake = responder
        pendingCiphers = responder.split()
        pendingCategory = category
        pairingIndex = 0
    }

    /// While a pairing activation is in force the server takes pairing messages only (anything
    /// else ends the attempt and the connection), so state and time requests wait for the
    /// activation that follows it.
    public var isPairing: Bool { activities.contains(.pairing) }

    /// The Pairing-PSK method: on a session keyed by our Pairing PSK, answer the pairing
    /// activation with pair-init and, at once, pair-finalize carrying a fresh long-term PSK.
    /// The codes (static, dynamic) are not offered, so any other method is refused.
    private mutating func startPairing(_ pairing: PairingActivation?, _ actions: inout [Action]) throws {
        pairingIndex += 1
        if let pairing, pairing.method == "static_pairing_code", configuration.staticPairingCode != nil, pskCategory == .sentinel {
            return try startCodeAttempt(&actions)
        }
        guard let pairing, pairing.method == "pairing_psk", pskCategory == .pairing else {
            let method = pairing?.method ?? "none"
            try send(type: "pair/abort", payload: PairAbort(reason: "method_not_supported"), &actions)
            actions.append(.event(.pairingAborted("the server asked for pairing method '\(method)' on a \(pskCategory?.rawValue ?? "?") session; this player pairs by its pairing token (pairing_psk)")))
            return
        }
        let longTerm = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        pendingLongTermPSK = longTerm
        try send(type: "client/pair-init", payload: PairInit(pairingIndex: pairingIndex), &actions)
        try send(type: "client/pair-finalize", payload: PairFinalize(longTermPSK: Base64URL.encode(longTerm), wrappedPSK: nil), &actions)
        actions.append(.event(.pairingStarted(method: pairing.method)))
    }

    /// The static code: inside the pairing window, pair-init and our CPace scalar; outside it,
    /// client/pair-pending until the window opens.
    private mutating func startCodeAttempt(_ actions: inout [Action]) throws {
        guard let until = pairingWindowUntil, now < until else {
            codeAttempt = .held
            try send(type: "client/pair-pending", payload: PairPending(pairingIndex: pairingIndex, message: "Open the pairing window on the player to pair with its code"), &actions)
            actions.append(.event(.pairingStarted(method: "static_pairing_code (waiting for the pairing window)")))
            return
        }
        codeAttempt = .awaitingShare(scalar: SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
        try send(type: "client/pair-init", payload: PairInit(pairingIndex: pairingIndex), &actions)
        actions.append(.event(.pairingStarted(method: "static_pairing_code")))
    }

    /// The user's gesture: opens the pairing window until `until`; a held code attempt starts.
    public mutating func openPairingWindow(until: Int64, now: Int64) -> [Action] {
        pairingWindowUntil = until
        self.now = now
        guard case .held = codeAttempt, phase == .active, isPairing else { return [] }
        var actions: [Action] = []
        do { try startCodeAttempt(&actions) } catch {
            phase = .closed
            return [.close((error as? SendspinError) ?? .protocolViolation("\(error)"))]
        }
        return actions
    }

    /// server/pair-auth: the server's share; answer with ours, derive the keys.
    private mutating func readServerShare(_ body: [UInt8], _ actions: inout [Action]) throws {
        guard case .awaitingShare(let scalar) = codeAttempt, let code = configuration.staticPairingCode,
              let hash = handshake?.handshakeHash else { return reportUnknown("server/pair-auth outside a code attempt", &actions) }
        let message = try WireJSON.decode(ServerPairAuth.self, from: body)
        guard let ya = Base64URL.decode(message.pakeMessage1), ya.count == 32 else {
            throw SendspinError.protocolViolation("server/pair-auth: pake_msg_1 is not 32 base64url bytes")
        }
        let sid = CPace.sessionID(handshakeHash: hash, pairingIndex: UInt32(pairingIndex))
        let g = CPace.generator(password: code, sessionID: sid)
        guard let yb = CPace.x25519(scalar: scalar, u: g), let k = CPace.x25519(scalar: scalar, u: ya) else {
            return try abortCode("pairing_code_mismatch", "the server's share is a low-order point", &actions)
        }
        codeAttempt = .awaitingConfirmation(keys: CPace.keys(sessionID: sid, k: k, ya: ya, yb: yb), ya: ya, yb: yb)
        try send(type: "client/pair-auth", payload: ClientPairAuth(pakeMessage2: Base64URL.encode(yb)), &actions)
    }

    /// server/pair-confirm: a right tag proves the server used the same code; then our tag and
    /// the new long-term PSK, wrapped.
    private mutating func readServerConfirmation(_ body: [UInt8], _ actions: inout [Action]) throws {
        guard case .awaitingConfirmation(let keys, let ya, let yb) = codeAttempt else {
            return reportUnknown("server/pair-confirm outside a code attempt", &actions)
        }
        let tag = Base64URL.decode(try WireJSON.decode(ServerPairConfirm.self, from: body).serverConfirmation) ?? []
        guard CPace.equal(tag, keys.serverConfirmation), ya != yb else {
            return try abortCode("pairing_code_mismatch", "the server's confirmation does not match: the code entered there differs from this player's", &actions)
        }
        let longTerm = SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
        let wrapped = try CPace.wrap(psk: longTerm, key: keys.pskWrapKey, suite: configuration.suite)
        codeAttempt = nil
        pendingLongTermPSK = longTerm
        try send(type: "client/pair-confirm", payload: ClientPairConfirm(clientConfirmation: Base64URL.encode(keys.clientConfirmation)), &actions)
        try send(type: "client/pair-finalize", payload: PairFinalize(longTermPSK: nil, wrappedPSK: Base64URL.encode(wrapped)), &actions)
    }

    private mutating func abortCode(_ reason: String, _ detail: String, _ actions: inout [Action]) throws {
        codeAttempt = nil
        try send(type: "pair/abort", payload: PairAbort(reason: reason), &actions)
        actions.append(.event(.pairingAborted("\(reason): \(detail)")))
    }

    private func admissibility(_ activities: [Activity]) -> (reason: String, detail: String)? {
        if let unknown = activities.first(where: { if case .other = $0 { true } else { false } }) {
            return ("unauthorized", "the server asked for unknown activity '\(unknown)'")
        }
        // Playback on a session that is not paired (Sentinel or pairing PSK) needs unpaired access.
        if activities.contains(.playback) && pskCategory != .longTerm && !configuration.unpairedAccess {
            return ("pairing_required", "the server wants playback but unpaired access is off; pair this player first")
        }
        return nil
    }

    private func clientHello() -> ClientHello {
        let wantsPlayer = configuration.roles.contains("player@v1")
        return ClientHello(name: configuration.name, supportedRoles: configuration.roles, deviceInfo: configuration.deviceInfo,
                           playerSupport: wantsPlayer ? PlayerSupport(supportedFormats: configuration.formats, bufferCapacity: configuration.bufferCapacity) : nil,
                           supportedPairMethods: configuration.staticPairingCode == nil ? ["pairing_psk": EmptyPayload()]
                               : ["pairing_psk": EmptyPayload(), "static_pairing_code": EmptyPayload()],
                           unpairedAccess: UnpairedAccess(enabled: configuration.unpairedAccess))
    }

    // MARK: - Sending

    private mutating func send<T: Encodable>(type: String, payload: T, _ actions: inout [Action]) throws(SendspinError) {
        let text = WireJSON.encode(type: type, payload: payload)
        if configuration.legacyWire {
            actions.append(.sendText(text))
            return
        }
        for plaintext in SendspinFraming.plaintexts(type: SendspinFraming.json, body: Array(text.utf8)) {
            guard var cipher = sendCipher else { throw .protocolViolation("sending before the handshake finished") }
            do { actions.append(.sendBinary(try cipher.encrypt(plaintext))) } catch { throw .protocolViolation("\(error)") }
            sendCipher = cipher
        }
    }

    private mutating func sendIfOpen<T: Encodable>(type: String, payload: T) -> [Action] {
        guard phase == .active || phase == .awaitingActivation else { return [] }
        // Between our re-handshake answer and the server's first message under the new keys
        // nothing else goes out: the server switches keys on our answer and would fail to
        // decrypt a message still sealed with the old ones.
        guard pendingCiphers == nil else { return [] }
        var actions: [Action] = []
        do { try send(type: type, payload: payload, &actions) } catch {
            phase = .closed
            return [.close(error)]
        }
        return actions
    }

    /// client/time, stamped with the client clock (µs) — T1 of an exchange.
    public mutating func sendTime(at clientTime: Int64) -> [Action] {
        guard phase == .active, !isPairing else { return [] }
        return sendIfOpen(type: "client/time", payload: ClientTime(clientTransmitted: clientTime))
    }

    /// client/state; `available` goes in every message.
    public mutating func sendState(available: Bool, player: PlayerStateReport?) -> [Action] {
        guard !isPairing else { return [] }
        if configuration.legacyWire {
            let legacy = player.map { LegacyPlayerState(volume: $0.volume, muted: $0.muted, staticDelayMs: $0.outputDelayMs) }
            return sendIfOpen(type: "client/state", payload: LegacyClientState(state: available ? "synchronized" : nil, player: legacy))
        }
        return sendIfOpen(type: "client/state", payload: ClientState(available: available, player: player))
    }

    /// A controller command.
    public mutating func sendCommand(_ command: ControllerCommand) -> [Action] {
        // A legacy server closes the connection on a message type it does not know.
        guard phase == .active, !configuration.legacyWire else { return [] }
        return sendIfOpen(type: "client/command", payload: ClientCommand(controller: command))
    }

    /// client/goodbye, then close.
    public mutating func goodbye(reason: String) -> [Action] {
        guard phase == .active || phase == .awaitingActivation else {
            let wasOpen = phase != .closed
            phase = .closed
            return wasOpen ? [.close(nil)] : []
        }
        var actions = sendIfOpen(type: "client/goodbye", payload: ClientGoodbye(reason: reason))
        phase = .closed
        actions.append(.close(nil))
        return actions
    }
}
