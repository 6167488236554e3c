import Crypto
import FarcastSupport
import Foundation

/// The encrypted Sendspin protocol, client side: client/init → server/init → Noise_KKpsk2
/// (the server initiates) → encrypted hello and activation → the session, with server-initiated
/// re-handshakes and pairing (delegated to `PairingExchange`).
///
/// Each state carries the data only it has: the responder exists only while the handshake
/// runs, the ciphers only once it has finished (`SessionTransport`), so an established
/// session without keys cannot be represented.
struct EncryptedSessionCore: SendspinSessionCore {
    enum State: Sendable {
        case idle
        /// client/init went out; its exact text is half the prologue.
        case awaitingServerInit(clientInit: String)
        /// server/init arrived; the responder waits for message 1.
        case awaitingHandshake(NoiseKKpsk2Responder, serverKey: Curve25519.KeyAgreement.PublicKey)
        case established(SessionTransport, Phase)
        /// `unansweredClientInit`: the connection closed before the server answered client/init
        /// (an older server that speaks only the legacy wire does that).
        case closed(unansweredClientInit: Bool)
        /// Only while a handler holds the established data (so mutating it copies nothing).
        case modifying
    }

    /// Where an established session stands.
    enum Phase: Sendable, Equatable {
        /// The handshake finished; the server's hello comes next.
        case awaitingHello
        /// Our hello went out; the server's activation comes next.
        case awaitingActivation
        case active
    }

    let configuration: SendspinSession.Configuration
    let clientID: String
    private let identity: Curve25519.KeyAgreement.PrivateKey
    private(set) var state: State = .idle
    private var pairing: PairingExchange
    private var reportedUnknown: Set<String> = []
    /// artwork@v1's transfer in flight.
    private var artwork = ArtworkTransfers()
    /// visualizer@v1's stream as the server set it up (nil: no stream; frames are dropped).
    private var visualizerStream: VisualizerStream?

    // What the session learned; it stays readable after the session closes.
    private(set) var serverID: String?
    private(set) var serverHello: ServerHello?
    private(set) var activeRoles: [String] = []
    private(set) var activities: [Activity] = []
    private(set) var pskCategory: PSKCategory?
    private(set) var credentials: PairingCredentials

    init(configuration: SendspinSession.Configuration, identity: Curve25519.KeyAgreement.PrivateKey, clientID: String) {
        self.configuration = configuration
        self.identity = identity
        self.clientID = clientID
        credentials = configuration.credentials
        pairing = PairingExchange(staticCode: configuration.staticPairingCode, suite: configuration.suite,
                                  windowUntil: configuration.pairingWindowUntil)
    }

    var isClosed: Bool { if case .closed = state { true } else { false } }
    var closedAwaitingServerInit: Bool { if case .closed(unansweredClientInit: true) = state { true } else { false } }
    /// The client offered artwork@v1: its messages are read, not reported as unknown.
    var wantsArtwork: Bool { configuration.roles.contains("artwork@v1") }
    var wantsVisualizer: Bool { configuration.roles.contains("visualizer@v1") }
    var wantsSource: Bool { configuration.roles.contains("source@v1") }
    /// The role families offered beyond the player, whose messages the session reads.
    private var roleFamilies: Set<String> {
        Set(configuration.roles.compactMap { $0.split(separator: "@").first.map(String.init) })
    }
    var isActive: Bool { if case .established(_, .active) = state { true } else { false } }
    private var isPairing: Bool { activities.contains(.pairing) }

    var handshakeHash: [UInt8]? {
        if case .established(let transport, _) = state { transport.handshakeHash } else { nil }
    }

    var openingStep: String? {
        switch state {
        case .idle: "the session to start"
        case .awaitingServerInit:
            "an answer to client/init (is it a Sendspin server that speaks the encrypted protocol? an older one may speak only the legacy wire: see --allow-legacy)"
        case .awaitingHandshake: "the server to finish the encrypted handshake"
        case .established(_, .awaitingHello): "an answer to client/hello"
        case .established, .closed, .modifying: nil
        }
    }

    // MARK: - Opening

    mutating func start() -> [Action] {
        guard case .idle = state else { return [] }
        let clientInit = WireJSON.encode(type: "client/init", payload: ClientInit(clientID: clientID, version: 1, suite: configuration.suite.rawValue))
        state = .awaitingServerInit(clientInit: clientInit)
        return [.sendText(clientInit)]
    }

    mutating func receive(_ message: SendspinSession.Inbound, at time: Int64) -> [Action] {
        var actions: [Action] = []
        do {
            switch (state, message) {
            case (.closed, _), (.modifying, _):
                return []
            case (.established(var transport, let phase), .binary(let bytes)):
                state = .modifying
                let next = try readTransport(bytes, at: time, &transport, phase, &actions)
                state = next.map { .established(transport, $0) } ?? .closed(unansweredClientInit: false)
            case (.awaitingServerInit(let clientInit), .text(let text)):
                state = try readServerInit(text, clientInit: clientInit)
            case (.awaitingHandshake(let responder, let serverKey), .text(let text)):
                state = try readHandshakeMessage1(text, responder, serverKey: serverKey, &actions)
            case (.awaitingServerInit, .binary), (.awaitingHandshake, .binary):
                throw SendspinError.protocolViolation("a binary message before the encrypted handshake finished")
            case (.established, .text), (.idle, .text):
                // After the handshake everything is encrypted: cleartext is a protocol failure.
                throw SendspinError.protocolViolation("a cleartext message after the encrypted handshake")
            case (.idle, .binary):
                throw SendspinError.protocolViolation("a message before the session started")
            }
        } catch {
            state = .closed(unansweredClientInit: false)
            actions.append(.close((error as? SendspinError) ?? .protocolViolation("\(error)")))
        }
        return actions
    }

    mutating func connectionClosed() -> [Action] {
        let context: String
        switch state {
        case .closed, .modifying: return []
        case .awaitingServerInit: context = "before the server answered client/init (is this a Sendspin server, and does it speak the encrypted protocol? an older server may speak only the legacy wire: see --allow-legacy)"
        case .awaitingHandshake: context = "during the encrypted handshake (the server rejected it silently)"
        case .established(_, .awaitingHello), .established(_, .awaitingActivation): context = "before the server activated this client"
        case .idle, .established(_, .active): context = "by the server"
        }
        let unanswered = if case .awaitingServerInit = state { true } else { false }
        state = .closed(unansweredClientInit: unanswered)
        return [.close(.connectionClosed(context))]
    }

    private mutating func readServerInit(_ text: String, clientInit: String) throws -> State {
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
        serverID = payload.serverID
        let responder = NoiseKKpsk2Responder(suite: configuration.suite, localStatic: identity, remoteStatic: serverKey,
                                             prologue: Array(clientInit.utf8) + Array(text.utf8))
        return .awaitingHandshake(responder, serverKey: serverKey)
    }

    private mutating func readHandshakeMessage1(_ text: String, _ responder: NoiseKKpsk2Responder,
                                                serverKey: Curve25519.KeyAgreement.PublicKey, _ actions: inout [Action]) throws -> State {
        let bytes = Array(text.utf8)
        let type = try WireJSON.messageType(of: bytes)
        guard type == "noise/handshake" else { throw SendspinError.protocolViolation("expected noise/handshake, got \(type)") }
        let data = try WireJSON.decode(HandshakePayload.self, from: bytes).data
        var responder = responder
        let (message2, category) = try answerMessage1(data, with: &responder, rehandshake: false)
        actions.append(.sendText(WireJSON.encode(type: "noise/handshake", payload: HandshakePayload(data: Base64URL.encode(message2)))))
        pskCategory = category
        pairing.restart()
        actions.append(.event(.handshakeComplete(serverID: serverID ?? "", pskCategory: category)))
        return .established(SessionTransport(handshake: responder, serverKey: serverKey, category: category), .awaitingHello)
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

    // MARK: - Established

    /// One transport message in `phase`; the phase after it, or nil when the session ended.
    private mutating func readTransport(_ ciphertext: [UInt8], at time: Int64, _ transport: inout SessionTransport, _ phase: Phase,
                                        _ actions: inout [Action]) throws -> Phase? {
        let (plaintext, rekeyed) = try transport.open(ciphertext)
        if rekeyed {
            // The re-handshake is complete now that the server speaks under the new keys.
            pskCategory = transport.category
            actions.append(.event(.handshakeComplete(serverID: serverID ?? "", pskCategory: transport.category)))
        }
        guard let (type, body) = try transport.reassemble(plaintext) else { return phase }
        switch type {
        case SendspinFraming.json:
            return try readJSON(body, at: time, &transport, phase, &actions)
        case SendspinFraming.playerAudio:
            guard phase == .active else { return phase }      // audio before activation is dropped
            if let chunk = AudioChunk.parse(body[...], arrival: time) {
                actions.append(.event(.audioChunk(chunk)))
            } else {
                actions.append(.event(.malformedAudio("an audio message of \(body.count + 1) bytes, shorter than the 13-byte header")))
            }
        case ArtworkTransfers.firstType...ArtworkTransfers.lastType where wantsArtwork:
            guard phase == .active else { return phase }
            switch try artwork.receive(type: type, body: body) {
            case .image(let image): actions.append(.event(.artwork(image)))
            case .cancelled(let channel): actions.append(.event(.artworkCancelled(channel: channel)))
            case nil: break
            }
        case 16...20 where wantsVisualizer:
            // Before the stream is set up (or after it ended) frames have no meaning: dropped.
            guard phase == .active, let stream = visualizerStream else { return phase }
            switch VisualizerFrame.parse(type: type, body: body, spectrumBins: stream.spectrum?.bins) {
            case .success(let frame): actions.append(.event(.visualizer(frame)))
            case .failure(let malformed): actions.append(.event(.malformedVisualization(malformed.reason)))
            }
        case 2, 3:
            throw SendspinError.protocolViolation("deprecated fragment framing (type \(type)); this client speaks only the current framing")
        default:
            reportUnknown("binary type \(type)", &actions)
        }
        return phase
    }

    private mutating func readJSON(_ body: [UInt8], at time: Int64, _ transport: inout SessionTransport, _ phase: Phase,
                                   _ actions: inout [Action]) throws -> Phase? {
        let type = try WireJSON.messageType(of: body)
        switch (phase, type) {
        case (.awaitingHello, "server/hello"):
            let hello = try WireJSON.decode(ServerHello.self, from: body)
            serverHello = hello
            actions.append(.event(.hello(hello)))
            try send(type: "client/hello", payload: clientHello(), &transport, &actions)
            return .awaitingActivation
        case (.awaitingHello, _):
            throw SendspinError.protocolViolation("expected server/hello, got \(type)")
        case (_, "server/activate"):
            return try readActivation(body, at: time, &transport, &actions)
        case (.awaitingActivation, "group/update"), (.awaitingActivation, "server/state"), (.awaitingActivation, "server/time"):
            // Tolerated before activation; handled like in the active phase.
            actions += try ServerMessages.events(type: type, body: body, at: time, roles: roleFamilies)?.map(Action.event) ?? []
            return phase
        case (.awaitingActivation, _):
            reportUnknown("\(type) before server/activate", &actions)
            return phase
        case (.active, "noise/handshake"):
            try readRehandshake(body, &transport, &actions)
            return phase
        case (.active, _):
            return try readActiveMessage(type, body, at: time, &transport, &actions)
        }
    }

    private mutating func readActivation(_ body: [UInt8], at time: Int64, _ transport: inout SessionTransport,
                                         _ actions: inout [Action]) throws -> Phase? {
        let activate = try WireJSON.decode(ServerActivate.self, from: body)
        if let roles = activate.activeRoles { activeRoles = roles }
        activities = activate.activities
        if let refusal = admissibility(activate.activities, category: transport.category) {
            try send(type: "client/goodbye", payload: ClientGoodbye(reason: refusal.reason), &transport, &actions)
            actions.append(.close(.notAdmitted(goodbyeReason: refusal.reason, detail: refusal.detail)))
            return nil
        }
        // Any activation ends a pairing attempt still in progress (nothing was stored).
        if pairing.abandon() {
            actions.append(.event(.pairingAborted("the server moved on before confirming")))
        }
        actions.append(.event(.activated(activities: activities, roles: activeRoles)))
        if activities.contains(.pairing) {
            try perform(pairing.start(activate.pairing, category: transport.category, now: time), &transport, &actions)
        }
        return .active
    }

    private func admissibility(_ activities: [Activity], category: PSKCategory) -> (reason: String, detail: String)? {
        if let unknown = activities.first(where: { if case .other = $0 { true } else { false } }) {
            return ("unauthorized", "the server asked for unknown activity '\(unknown)'")
        }
        // Playback on a session that is not paired (Sentinel or pairing PSK) needs unpaired access.
        if activities.contains(.playback) && category != .longTerm && !configuration.unpairedAccess {
            return ("pairing_required", "the server wants playback but unpaired access is off; pair this player first")
        }
        return nil
    }

    /// A message in the active phase; nil when it ended the session.
    private mutating func readActiveMessage(_ type: String, _ body: [UInt8], at time: Int64, _ transport: inout SessionTransport,
                                            _ actions: inout [Action]) throws -> Phase? {
        if let events = try ServerMessages.events(type: type, body: body, at: time, roles: roleFamilies) {
            for event in events {
                switch event {
                case .artworkEnded: artwork.reset()
                case .visualizerStream(let stream): visualizerStream = stream
                case .visualizerEnded: visualizerStream = nil
                default: break
                }
            }
            actions += events.map(Action.event)
            return .active
        }
        switch type {
        case "server/pair-auth":
            try perform(pairing.receiveShare(body, handshakeHash: transport.handshakeHash), &transport, &actions)
        case "server/pair-confirm":
            try perform(pairing.receiveConfirmation(body), &transport, &actions)
        case "server/pair-finalize":
            guard let serverID, let record = pairing.receiveFinalize(serverID: serverID) else {
                reportUnknown("server/pair-finalize outside a pairing attempt", &actions)
                return .active
            }
            credentials.add(record)
            actions.append(.event(.paired(record)))
        case "pair/abort":
            try perform(pairing.receiveAbort(body), &transport, &actions)
        case "server/unpair":
            // Only a paired session can be unpaired; elsewhere the message means nothing.
            guard transport.category == .longTerm, let serverID else {
                reportUnknown("server/unpair on an unpaired session", &actions)
                return .active
            }
            credentials.servers.removeAll { $0.serverID == serverID }
            actions.append(.event(.unpaired(serverID: serverID)))
            try send(type: "client/goodbye", payload: ClientGoodbye(reason: "unpaired"), &transport, &actions)
            actions.append(.close(nil))
            return nil
        default:
            reportUnknown(type, &actions)
        }
        return .active
    }

    /// A server-initiated re-handshake: msg 1 arrives encrypted under the current keys; msg 2
    /// leaves under them too; the server's first message under the new keys completes it.
    private mutating func readRehandshake(_ body: [UInt8], _ transport: inout SessionTransport, _ actions: inout [Action]) throws {
        let data = try WireJSON.decode(HandshakePayload.self, from: body).data
        var responder = NoiseKKpsk2Responder(suite: configuration.suite, localStatic: identity, remoteStatic: transport.serverKey,
                                             prologue: transport.handshakeHash)
        let (message2, category) = try answerMessage1(data, with: &responder, rehandshake: true)
        try send(type: "noise/handshake", payload: HandshakePayload(data: Base64URL.encode(message2)), &transport, &actions)
        transport.beginRekey(responder, category: category)
        pairing.restart()
    }

    private func clientHello() -> ClientHello {
        let wantsPlayer = configuration.roles.contains("player@v1")
        return ClientHello(name: configuration.name, supportedRoles: configuration.roles, deviceInfo: configuration.deviceInfo,
                           playerSupport: wantsPlayer ? PlayerSupport(supportedFormats: configuration.formats, bufferCapacity: configuration.bufferCapacity) : nil,
                           visualizerSupport: wantsVisualizer ? VisualizerSupport(bufferCapacity: configuration.visualizerBufferCapacity) : nil,
                           sourceSupport: wantsSource ? SourceSupport() : nil,
                           supportedPairMethods: configuration.staticPairingCode == nil ? ["pairing_psk": EmptyPayload()]
                               : ["pairing_psk": EmptyPayload(), "static_pairing_code": EmptyPayload()],
                           unpairedAccess: UnpairedAccess(enabled: configuration.unpairedAccess))
    }

    private mutating func reportUnknown(_ what: String, _ actions: inout [Action]) {
        if reportedUnknown.insert(what).inserted { actions.append(.event(.unknownMessage(what))) }
    }

    // MARK: - Sending

    private func send<T: Encodable>(type: String, payload: T, _ transport: inout SessionTransport, _ actions: inout [Action]) throws(SendspinError) {
        for frame in try transport.seal(json: WireJSON.encode(type: type, payload: payload)) { actions.append(.sendBinary(frame)) }
    }

    /// Carries out what the pairing exchange asked for: its messages sealed, its events reported.
    private mutating func perform(_ outputs: [PairingExchange.Output], _ transport: inout SessionTransport, _ actions: inout [Action]) throws(SendspinError) {
        for output in outputs {
            switch output {
            case .send(let text):
                for frame in try transport.seal(json: text) { actions.append(.sendBinary(frame)) }
            case .event(let event):
                actions.append(.event(event))
            case .unexpected(let what):
                reportUnknown(what, &actions)
            }
        }
    }

    /// Seals one message if the session may send now: after our hello, and not between our
    /// re-handshake answer and the server's first message under the new keys (the server
    /// switches keys on our answer and would fail to decrypt a message sealed with the old ones).
    private mutating func sendIfOpen<T: Encodable>(type: String, payload: T) -> [Action] {
        sendIfOpen(json: WireJSON.encode(type: type, payload: payload))
    }

    private mutating func sendIfOpen(json text: String) -> [Action] {
        guard case .established(var transport, let phase) = state, phase != .awaitingHello, !transport.isRekeying else { return [] }
        state = .modifying
        var actions: [Action] = []
        do throws(SendspinError) {
            for frame in try transport.seal(json: text) { actions.append(.sendBinary(frame)) }
        } catch {
            state = .closed(unansweredClientInit: false)
            return [.close(error)]
        }
        state = .established(transport, phase)
        return actions
    }

    mutating func sendTime(at clientTime: Int64) -> [Action] {
        guard isActive, !isPairing else { return [] }
        return sendIfOpen(json: WireJSON.clientTime(clientTime))
    }

    mutating func sendState(available: Bool, player: PlayerStateReport?) -> [Action] {
        guard !isPairing else { return [] }
        let channels = configuration.artworkChannels
        return sendIfOpen(type: "client/state", payload: ClientState(available: available, player: player,
                                                                     artwork: channels.isEmpty ? nil : ArtworkChannels(channels: channels),
                                                                     visualizer: wantsVisualizer ? configuration.visualizer : nil,
                                                                     source: wantsSource ? SourceState() : nil))
    }

    mutating func sendCommand(_ command: ControllerCommand) -> [Action] {
        guard isActive else { return [] }
        return sendIfOpen(type: "client/command", payload: ClientCommand(controller: command))
    }

    mutating func sendSourceStart(_ format: SourceFormat) -> [Action] {
        guard isActive, wantsSource else { return [] }
        return sendIfOpen(type: "client-stream/start", payload: ClientStreamStart(source: format))
    }

    mutating func sendSourceEnd() -> [Action] {
        guard isActive, wantsSource else { return [] }
        return sendIfOpen(type: "client-stream/end", payload: EmptyPayload())
    }

    mutating func sendSourceAudio(timestamp: Int64, payload: [UInt8]) -> [Action] {
        guard case .established(var transport, .active) = state, wantsSource, !transport.isRekeying else { return [] }
        state = .modifying
        let actions: [Action]
        do throws(SendspinError) {
            actions = try transport.seal(type: SourceFraming.audio, body: SourceFraming.chunk(timestamp: timestamp, payload: payload)).map(Action.sendBinary)
        } catch {
            state = .closed(unansweredClientInit: false)
            return [.close(error)]
        }
        state = .established(transport, .active)
        return actions
    }

    mutating func goodbye(reason: String) -> [Action] {
        guard case .established(_, let phase) = state, phase != .awaitingHello else {
            let wasOpen = !isClosed
            state = .closed(unansweredClientInit: false)
            return wasOpen ? [.close(nil)] : []
        }
        var actions = sendIfOpen(type: "client/goodbye", payload: ClientGoodbye(reason: reason))
        state = .closed(unansweredClientInit: false)
        actions.append(.close(nil))
        return actions
    }

    /// The user's gesture: the window opens until `until`; a held code attempt starts if the
    /// session is in a pairing activation. During a re-handshake only the window opens: nothing
    /// may leave then (the server switches keys on our answer), and the server's activation
    /// under the new keys ends the held attempt anyway — a pairing activation then finds the
    /// window open and starts the code exchange at once.
    mutating func openPairingWindow(until: Int64, now: Int64) -> [Action] {
        guard case .established(var transport, .active) = state, !transport.isRekeying else {
            _ = pairing.openWindow(until: until, now: now, resume: false)
            return []
        }
        let outputs = pairing.openWindow(until: until, now: now, resume: isPairing)
        guard !outputs.isEmpty else { return [] }
        state = .modifying
        var actions: [Action] = []
        do throws(SendspinError) {
            try perform(outputs, &transport, &actions)
        } catch {
            state = .closed(unansweredClientInit: false)
            return [.close(error)]
        }
        state = .established(transport, .active)
        return actions
    }
}
