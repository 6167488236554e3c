import FarcastSupport

/// The legacy, pre-encryption wire (aiosendspin 5.x; servers in transition mode), client side:
/// clear JSON, the client's hello and a first state at once, the server's hello as the whole
/// admission (no activation), 9-byte audio and artwork headers, no pairing. Of the offered roles
/// it speaks player, metadata, controller and artwork (the channels declared once, in the
/// hello); controller commands go out only when the server's hello activated that role (a
/// legacy server closes the connection on a message type it does not expect). Only ever chosen
/// deliberately (`Configuration.legacyWire`).
struct LegacySessionCore: SendspinSessionCore {
    enum State: Sendable, Equatable {
        case idle
        /// Our hello went out; the server's hello admits us.
        case awaitingHello
        case active
        case closed
    }

    let configuration: SendspinSession.Configuration
    let clientID: String
    private(set) var state: State = .idle
    private var reportedUnknown: Set<String> = []
    private(set) var serverID: String?
    private(set) var serverHello: ServerHello?
    private(set) var activeRoles: [String] = []
    private(set) var activities: [Activity] = []

    /// The roles this wire can carry, in the order offered.
    static let legacyRoles = ["player@v1", "metadata@v1", "controller@v1", "artwork@v1"]
    /// The offered roles the legacy wire carries (artwork only with channels to declare).
    let offeredRoles: [String]

    init(configuration: SendspinSession.Configuration, clientID: String) {
        self.configuration = configuration
        self.clientID = clientID
        offeredRoles = configuration.roles.filter {
            Self.legacyRoles.contains($0) && ($0 != "artwork@v1" || !configuration.artworkChannels.isEmpty)
        }
    }

    private var offersPlayer: Bool { offeredRoles.contains("player@v1") }
    private var offersArtwork: Bool { offeredRoles.contains("artwork@v1") }

    // The legacy wire has no PSKs, no pairing and no client/init.
    var pskCategory: PSKCategory? { nil }
    var credentials: PairingCredentials { configuration.credentials }
    var closedAwaitingServerInit: Bool { false }
    var isActive: Bool { state == .active }
    var isClosed: Bool { state == .closed }

    var openingStep: String? {
        switch state {
        case .idle: "the session to start"
        case .awaitingHello: "an answer to the legacy client/hello"
        case .active, .closed: nil
        }
    }

    mutating func start() -> [Action] {
        guard state == .idle else { return [] }
        // The hello and a first state at once: a legacy server holds the stream until it has
        // a client/state, and the state may precede its hello.
        state = .awaitingHello
        let player = offersPlayer ? LegacyPlayerSupport(supportedFormats: configuration.formats, bufferCapacity: configuration.bufferCapacity,
                                                        supportedCommands: ["volume", "mute"]) : nil
        let artwork = offersArtwork ? LegacyArtworkSupport(channels: configuration.artworkChannels.prefix(4).map(LegacyArtworkChannel.init)) : nil
        let hello = LegacyClientHello(clientID: clientID, name: configuration.name, supportedRoles: offeredRoles,
                                      playerSupport: player, artworkSupport: artwork)
        return [.sendText(WireJSON.encode(type: "client/hello", payload: hello)),
                .sendText(WireJSON.encode(type: "client/state", payload: LegacyClientState(state: nil, player: nil)))]
    }

    mutating func receive(_ message: SendspinSession.Inbound, at time: Int64) -> [Action] {
        var actions: [Action] = []
        do {
            switch (state, message) {
            case (.closed, _):
                return []
            case (.awaitingHello, .text(let text)):
                try readHello(Array(text.utf8), &actions)
            case (.active, .text(let text)):
                try readMessage(Array(text.utf8), at: time, &actions)
            case (.active, .binary(let bytes)):
                try readAudio(bytes, at: time, &actions)
            case (.idle, .binary), (.awaitingHello, .binary):
                throw SendspinError.protocolViolation("audio before server/hello")
            case (.idle, .text):
                throw SendspinError.protocolViolation("a message before the session started")
            }
        } catch {
            state = .closed
            actions.append(.close((error as? SendspinError) ?? .protocolViolation("\(error)")))
        }
        return actions
    }

    /// The legacy hello admits at once; it carries the server's id and active roles.
    private mutating func readHello(_ body: [UInt8], _ actions: inout [Action]) throws {
        let type = try WireJSON.messageType(of: body)
        guard type == "server/hello" else { throw SendspinError.protocolViolation("expected server/hello, got \(type)") }
        let hello = try WireJSON.decode(LegacyServerHello.self, from: body)
        if configuration.encryptedServerIDs.contains(hello.serverID) {
            throw SendspinError.handshakeFailed("server \(hello.serverID) spoke the encrypted protocol before and now offers only the legacy wire; refusing the downgrade")
        }
        serverID = hello.serverID
        activeRoles = hello.activeRoles ?? []
        activities = [.playback]
        serverHello = ServerHello(name: hello.name, languages: nil)
        state = .active
        actions.append(.event(.hello(ServerHello(name: hello.name, languages: nil))))
        actions.append(.event(.activated(activities: activities, roles: activeRoles)))
    }

    private mutating func readMessage(_ body: [UInt8], at time: Int64, _ actions: inout [Action]) throws {
        let type = try WireJSON.messageType(of: body)
        guard let events = try ServerMessages.events(type: type, body: body, at: time) else {
            if reportedUnknown.insert(type).inserted { actions.append(.event(.unknownMessage(type))) }
            return
        }
        actions += events.map(Action.event)
    }

    /// Legacy binary messages: `[type][int64 BE timestamp]` and the payload, in a plain binary
    /// frame — audio (type 4), or a channel's whole picture (types 8–11; empty clears it).
    private mutating func readAudio(_ bytes: [UInt8], at time: Int64, _ actions: inout [Action]) throws {
        guard let type = bytes.first else { throw SendspinError.protocolViolation("an empty binary message") }
        if (ArtworkTransfers.firstType...ArtworkTransfers.lastType).contains(type) && offersArtwork {
            guard bytes.count >= 9 else {
                throw SendspinError.protocolViolation("an artwork message of \(bytes.count) bytes, shorter than the legacy 9-byte header")
            }
            guard bytes.count - 9 <= ArtworkTransfers.maximumImage else {
                throw SendspinError.protocolViolation("an artwork picture of \(bytes.count - 9) bytes (at most \(ArtworkTransfers.maximumImage) accepted)")
            }
            var reader = ByteReader(Array(bytes[1..<9]))
            let timestamp = try reader.readInteger(as: Int64.self)
            actions.append(.event(.artwork(ArtworkImage(channel: Int(type - ArtworkTransfers.firstType), timestamp: timestamp, data: Array(bytes[9...])))))
            return
        }
        guard type == SendspinFraming.playerAudio else {
            let what = "legacy binary type \(type)"
            if reportedUnknown.insert(what).inserted { actions.append(.event(.unknownMessage(what))) }
            return
        }
        guard bytes.count >= 9 else {
            actions.append(.event(.malformedAudio("an audio message of \(bytes.count) bytes, shorter than the legacy 9-byte header")))
            return
        }
        var reader = ByteReader(Array(bytes[1..<9]))
        let timestamp = try reader.readInteger(as: Int64.self)
        actions.append(.event(.audioChunk(AudioChunk(timestamp: timestamp, sendAhead: 0, payload: Array(bytes[9...]), arrival: time))))
    }

    mutating func connectionClosed() -> [Action] {
        let context: String
        switch state {
        case .closed: return []
        case .awaitingHello: context = "before the server answered the legacy client/hello (it refused it, or is no legacy Sendspin server)"
        case .idle, .active: context = "by the server"
        }
        state = .closed
        return [.close(.connectionClosed(context))]
    }

    /// Messages go out in clear once the server's hello has admitted us.
    private func sendIfActive<T: Encodable>(type: String, payload: T) -> [Action] {
        guard state == .active else { return [] }
        return [.sendText(WireJSON.encode(type: type, payload: payload))]
    }

    mutating func sendTime(at clientTime: Int64) -> [Action] {
        state == .active ? [.sendText(WireJSON.clientTime(clientTime))] : []
    }

    mutating func sendState(available: Bool, player: PlayerStateReport?) -> [Action] {
        let legacy = offersPlayer ? player.map { LegacyPlayerState(volume: $0.volume, muted: $0.muted, staticDelayMs: $0.outputDelayMs) } : nil
        return sendIfActive(type: "client/state", payload: LegacyClientState(state: available ? "synchronized" : nil, player: legacy))
    }

    /// Only to a server whose hello activated the controller role: a legacy server closes the
    /// connection on a message type it does not expect.
    mutating func sendCommand(_ command: ControllerCommand) -> [Action] {
        guard activeRoles.contains("controller@v1") else { return [] }
        return sendIfActive(type: "client/command", payload: ClientCommand(controller: command))
    }

    /// No pairing on the legacy wire.
    mutating func openPairingWindow(until: Int64, now: Int64) -> [Action] { [] }

    /// The legacy wire has the player role only.
    mutating func sendSourceStart(_ format: SourceFormat) -> [Action] { [] }
    mutating func sendSourceAudio(timestamp: Int64, payload: [UInt8]) -> [Action] { [] }
    mutating func sendSourceEnd() -> [Action] { [] }

    mutating func goodbye(reason: String) -> [Action] {
        guard state == .active else {
            let wasOpen = state != .closed
            state = .closed
            return wasOpen ? [.close(nil)] : []
        }
        let actions = sendIfActive(type: "client/goodbye", payload: ClientGoodbye(reason: reason))
        state = .closed
        return actions + [.close(nil)]
    }
}
