import Foundation

// The Sendspin JSON messages Farcast sends and understands. Field names are the wire's
// (snake_case, role-versioned keys such as "player@v1_support"); unknown fields are ignored on
// decoding and optional fields are omitted when encoding, so nothing undefined is ever sent.

/// `{"type": …, "payload": …}`.
struct OutgoingEnvelope<Payload: Encodable>: Encodable {
    var type: String
    var payload: Payload
}

struct IncomingType: Decodable {
    var type: String
}

struct IncomingEnvelope<Payload: Decodable>: Decodable {
    var type: String
    var payload: Payload
}

struct EmptyPayload: Codable {}

public struct ClientInit: Codable, Sendable {
    public var clientID: String
    public var version: Int
    public var suite: String
    enum CodingKeys: String, CodingKey { case clientID = "client_id", version, suite }
}

public struct ServerInit: Codable, Sendable {
    public var serverID: String
    public var version: Int
    enum CodingKeys: String, CodingKey { case serverID = "server_id", version }
}

struct ServerErrorPayload: Codable { var reason: String }
struct HandshakePayload: Codable { var data: String }

struct PSKReference: Codable {
    var pskID: String
    var pskCategory: PSKCategory
    enum CodingKeys: String, CodingKey { case pskID = "psk_id", pskCategory = "psk_category" }
}

public struct ServerHello: Codable, Sendable, Equatable {
    public var name: String
    public var languages: [String]?
    /// What the server takes from a source client (source@v1).
    public var sourceSupport: ServerSourceSupport?

    public init(name: String, languages: [String]? = nil, sourceSupport: ServerSourceSupport? = nil) {
        self.name = name
        self.languages = languages
        self.sourceSupport = sourceSupport
    }

    enum CodingKeys: String, CodingKey { case name, languages, sourceSupport = "source@v1_support" }
}

/// One audio format a player can take.
public struct AudioFormatSpec: Codable, Sendable, Hashable, CustomStringConvertible {
    public var codec: String
    public var channels: Int
    public var sampleRate: Int
    public var bitDepth: Int

    public init(codec: String, channels: Int, sampleRate: Int, bitDepth: Int) {
        self.codec = codec
        self.channels = channels
        self.sampleRate = sampleRate
        self.bitDepth = bitDepth
    }

    enum CodingKeys: String, CodingKey { case codec, channels, sampleRate = "sample_rate", bitDepth = "bit_depth" }

    public var description: String { "\(codec) \(sampleRate) Hz \(bitDepth)-bit \(channels) ch" }
}

public struct DeviceInfo: Codable, Sendable {
    public var productName: String?
    public var manufacturer: String?
    public var softwareVersion: String?
    public var macAddress: String?

    public init(productName: String? = nil, manufacturer: String? = nil, softwareVersion: String? = nil, macAddress: String? = nil) {
        self.productName = productName
        self.manufacturer = manufacturer
        self.softwareVersion = softwareVersion
        self.macAddress = macAddress
    }

    enum CodingKeys: String, CodingKey {
        case productName = "product_name", manufacturer, softwareVersion = "software_version", macAddress = "mac_address"
    }
}

struct PlayerSupport: Codable {
    var supportedFormats: [AudioFormatSpec]
    var bufferCapacity: Int
    enum CodingKeys: String, CodingKey { case supportedFormats = "supported_formats", bufferCapacity = "buffer_capacity" }
}

struct UnpairedAccess: Codable { var enabled: Bool }

struct ClientHello: Codable {
    var name: String
    var supportedRoles: [String]
    var deviceInfo: DeviceInfo?
    var playerSupport: PlayerSupport?
    var visualizerSupport: VisualizerSupport?
    var sourceSupport: SourceSupport?
    var supportedPairMethods: [String: EmptyPayload]
    var unpairedAccess: UnpairedAccess

    enum CodingKeys: String, CodingKey {
        case name, supportedRoles = "supported_roles", deviceInfo = "device_info", playerSupport = "player@v1_support"
        case visualizerSupport = "visualizer@v1_support", sourceSupport = "source@v1_support"
        case supportedPairMethods = "supported_pair_methods", unpairedAccess = "unpaired_access"
    }
}

public struct ServerActivate: Codable, Sendable, Equatable {
    public var activities: [Activity]
    public var activeRoles: [String]?
    /// Present iff `pairing` is among the activities.
    public var pairing: PairingActivation?
    enum CodingKeys: String, CodingKey { case activities, activeRoles = "active_roles", pairing }
}

public struct PairingActivation: Codable, Sendable, Equatable {
    public var method: String
    public var format: String?
}

struct PairInit: Codable {
    var pairingIndex: Int
    enum CodingKeys: String, CodingKey { case pairingIndex = "pairing_index" }
}

/// Exactly one of the two: the PSK itself (Pairing-PSK method) or wrapped under CPace (codes).
struct PairFinalize: Codable {
    var longTermPSK: String?
    var wrappedPSK: String?
    enum CodingKeys: String, CodingKey { case longTermPSK = "long_term_psk", wrappedPSK = "wrapped_psk" }
}

struct PairPending: Codable {
    var pairingIndex: Int
    var message: String?
    enum CodingKeys: String, CodingKey { case pairingIndex = "pairing_index", message }
}

struct ServerPairAuth: Codable {
    var pakeMessage1: String
    enum CodingKeys: String, CodingKey { case pakeMessage1 = "pake_msg_1" }
}

struct ClientPairAuth: Codable {
    var pakeMessage2: String
    enum CodingKeys: String, CodingKey { case pakeMessage2 = "pake_msg_2" }
}

struct ServerPairConfirm: Codable {
    var serverConfirmation: String
    enum CodingKeys: String, CodingKey { case serverConfirmation = "server_kc" }
}

struct ClientPairConfirm: Codable {
    var clientConfirmation: String
    enum CodingKeys: String, CodingKey { case clientConfirmation = "client_kc" }
}

struct PairAbort: Codable { var reason: String }

struct ClientTime: Codable {
    var clientTransmitted: Int64
    enum CodingKeys: String, CodingKey { case clientTransmitted = "client_transmitted" }
}

public struct ServerTime: Codable, Sendable, Equatable {
    public var clientTransmitted: Int64
    public var serverReceived: Int64
    public var serverTransmitted: Int64
    enum CodingKeys: String, CodingKey {
        case clientTransmitted = "client_transmitted", serverReceived = "server_received", serverTransmitted = "server_transmitted"
    }
}

/// The player role's state, reported in every `client/state` that carries a player object.
public struct PlayerStateReport: Codable, Sendable, Equatable {
    public var volume: Int?
    public var muted: Bool?
    public var outputDelayMs: Int
    public var requiredLeadTimeMs: Int
    public var minBufferMs: Int
    public var supportedCommands: [String]
    public var format: AudioFormatSpec?

    enum CodingKeys: String, CodingKey {
        case volume, muted, outputDelayMs = "output_delay_ms", requiredLeadTimeMs = "required_lead_time_ms"
        case minBufferMs = "min_buffer_ms", supportedCommands = "supported_commands", format
    }
}

struct ClientState: Codable {
    var available: Bool
    var player: PlayerStateReport?
    var artwork: ArtworkChannels?
    var visualizer: VisualizerRequest?
    var source: SourceState?
}

public struct PlayerCommand: Codable, Sendable, Equatable {
    public var command: String
    public var volume: Int?
    public var mute: Bool?
    public var outputDelayMs: Int?
    enum CodingKeys: String, CodingKey { case command, volume, mute, outputDelayMs = "output_delay_ms" }
}

struct ServerCommand: Codable {
    var player: PlayerCommand?
    var source: ServerSourceCommand?
}

/// A group's playback state in group/update: the spec's two, or a newer server's word kept as
/// it was said (an unknown state is no reason to drop the message).
public enum GroupPlaybackState: Codable, Sendable, Equatable, CustomStringConvertible {
    case playing
    case stopped
    case other(String)

    public init(_ word: String) {
        switch word {
        case "playing": self = .playing
        case "stopped": self = .stopped
        default: self = .other(word)
        }
    }

    public var description: String {
        switch self {
        case .playing: "playing"
        case .stopped: "stopped"
        case .other(let word): word
        }
    }

    public init(from decoder: any Decoder) throws { self.init(try decoder.singleValueContainer().decode(String.self)) }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

public struct GroupUpdate: Codable, Sendable, Equatable {
    public var playbackState: GroupPlaybackState?
    public var groupID: String?
    public var groupName: String?
    enum CodingKeys: String, CodingKey { case playbackState = "playback_state", groupID = "group_id", groupName = "group_name" }
}

public struct TrackProgress: Codable, Sendable, Equatable {
    public var trackProgress: Int64
    public var trackDuration: Int64
    /// Playback speed × 1000 (1000 = normal).
    public var playbackSpeed: Int64
    enum CodingKeys: String, CodingKey { case trackProgress = "track_progress", trackDuration = "track_duration", playbackSpeed = "playback_speed" }
}

public struct Metadata: Codable, Sendable, Equatable {
    /// Server time (µs) the metadata refers to; a future value schedules the change.
    public var timestamp: Int64?
    public var title: String?
    public var artist: String?
    public var albumArtist: String?
    public var album: String?
    public var artworkURL: String?
    public var year: Int?
    public var track: Int?
    public var progress: TrackProgress?
    /// The legacy wire's repeat mode (off, one, all) and shuffle; the current wire carries them
    /// in `ControllerState` instead.
    public var `repeat`: String?
    public var shuffle: Bool?

    enum CodingKeys: String, CodingKey {
        case timestamp, title, artist, albumArtist = "album_artist", album, artworkURL = "artwork_url", year, track, progress, `repeat`, shuffle
    }

    /// Track position in ms at server time `now` (µs): progress + elapsed × speed.
    public func position(atServerTime now: Int64) -> Int64? {
        guard let progress, let timestamp else { return progress?.trackProgress }
        let elapsedMs = Double(now - timestamp) / 1000
        var position = Int64((Double(progress.trackProgress) + elapsedMs * Double(progress.playbackSpeed) / 1000).rounded())
        position = max(0, position)
        if progress.trackDuration > 0 { position = min(position, progress.trackDuration) }
        return position
    }
}

public struct ControllerState: Codable, Sendable, Equatable {
    public var supportedCommands: [ControllerCommand.Name]?
    public var volume: Int?
    public var muted: Bool?
    public var `repeat`: String?
    public var shuffle: Bool?
    public var seekMaxMs: Int64?
    enum CodingKeys: String, CodingKey {
        case supportedCommands = "supported_commands", volume, muted, `repeat`, shuffle, seekMaxMs = "seek_max_ms"
    }
}

struct ServerState: Codable {
    var metadata: Metadata?
    var controller: ControllerState?
}

/// `server/state.color`, read apart from the rest so a palette the client cannot use does not
/// cost the message's metadata and controller state.
struct ServerStateColor: Codable {
    var color: ColorPalette?
}

public struct StreamFormat: Codable, Sendable, Equatable {
    public var codec: String
    public var sampleRate: Int
    public var channels: Int
    public var bitDepth: Int?
    /// Standard base64 with padding (FLAC: "fLaC" + STREAMINFO).
    public var codecHeader: String?

    public init(codec: String, sampleRate: Int, channels: Int, bitDepth: Int?, codecHeader: String? = nil) {
        self.codec = codec
        self.sampleRate = sampleRate
        self.channels = channels
        self.bitDepth = bitDepth
        self.codecHeader = codecHeader
    }

    enum CodingKeys: String, CodingKey { case codec, sampleRate = "sample_rate", channels, bitDepth = "bit_depth", codecHeader = "codec_header" }
}

struct StreamStart: Codable {
    var serverTransmitted: Int64?
    var player: StreamFormat?
    var artwork: ArtworkChannels?
    var visualizer: VisualizerStream?
    enum CodingKeys: String, CodingKey { case serverTransmitted = "server_transmitted", player, artwork, visualizer }
}

struct StreamRoles: Codable { var roles: [String]? }

/// A controller command (`client/command`).
public struct ControllerCommand: Codable, Sendable, Equatable {
    public var command: Name
    public var volume: Int?
    public var mute: Bool?
    public var positionMs: Int64?
    public var offsetMs: Int64?

    public init(command: Name, volume: Int? = nil, mute: Bool? = nil, positionMs: Int64? = nil, offsetMs: Int64? = nil) {
        self.command = command
        self.volume = volume
        self.mute = mute
        self.positionMs = positionMs
        self.offsetMs = offsetMs
    }

    enum CodingKeys: String, CodingKey { case command, volume, mute, positionMs = "position_ms", offsetMs = "offset_ms" }

    /// The commands the controller role defines, and a catch-all for any other a caller sends.
    public enum Name: SendspinWireName {
        case play, pause, stop, next, previous, volume, mute
        case repeatOff, repeatOne, repeatAll
        case shuffle, unshuffle
        case `switch`
        case seek, seekRelative
        case other(String)

        /// The defined commands in the role's order.
        public static let defined: [Name] = [.play, .pause, .stop, .next, .previous, .volume, .mute, .repeatOff, .repeatOne,
                                             .repeatAll, .shuffle, .unshuffle, .switch, .seek, .seekRelative]

        public init(rawValue: String) {
            self = Self.defined.first { $0.rawValue == rawValue } ?? .other(rawValue)
        }

        public var rawValue: String {
            switch self {
            case .play: "play"
            case .pause: "pause"
            case .stop: "stop"
            case .next: "next"
            case .previous: "previous"
            case .volume: "volume"
            case .mute: "mute"
            case .repeatOff: "repeat_off"
            case .repeatOne: "repeat_one"
            case .repeatAll: "repeat_all"
            case .shuffle: "shuffle"
            case .unshuffle: "unshuffle"
            case .switch: "switch"
            case .seek: "seek"
            case .seekRelative: "seek_relative"
            case .other(let name): name
            }
        }
    }

    /// The commands the controller role defines, as the wire spells them.
    public static let all = Name.defined.map(\.rawValue)
}

struct ClientCommand: Codable { var controller: ControllerCommand }

struct ClientGoodbye: Codable { var reason: String }

/// Compact JSON for the wire.
// MARK: - The legacy (pre-encryption) wire, as aiosendspin 5.x serves it

/// Legacy `client/hello`: the client speaks first, in clear, with an id of its choosing.
struct LegacyClientHello: Codable {
    var clientID: String
    var name: String
    var version = 1
    var supportedRoles: [String]
    var playerSupport: LegacyPlayerSupport?
    var artworkSupport: LegacyArtworkSupport?
    enum CodingKeys: String, CodingKey {
        case clientID = "client_id", name, version, supportedRoles = "supported_roles", playerSupport = "player@v1_support"
        case artworkSupport = "artwork@v1_support"
    }
}

/// Legacy `artwork@v1_support`: the channels are declared once, in the hello (the current wire
/// sends them in every client/state), with the size as `media_width`/`media_height`.
struct LegacyArtworkSupport: Codable {
    var channels: [LegacyArtworkChannel]
}

struct LegacyArtworkChannel: Codable {
    var source: String
    var format: String
    var mediaWidth: Int
    var mediaHeight: Int
    enum CodingKeys: String, CodingKey { case source, format, mediaWidth = "media_width", mediaHeight = "media_height" }

    /// The legacy hello wants a format and a size even for a disabled ("none") channel.
    init(_ channel: ArtworkChannel) {
        source = channel.source.rawValue
        format = (channel.format ?? .jpeg).rawValue
        mediaWidth = channel.width ?? 1
        mediaHeight = channel.height ?? 1
    }
}

struct LegacyPlayerSupport: Codable {
    var supportedFormats: [AudioFormatSpec]
    var bufferCapacity: Int
    var supportedCommands: [String]
    enum CodingKeys: String, CodingKey {
        case supportedFormats = "supported_formats", bufferCapacity = "buffer_capacity", supportedCommands = "supported_commands"
    }
}

/// Legacy `server/hello`: the whole admission (there is no server/activate).
struct LegacyServerHello: Codable {
    var serverID: String
    var name: String
    var version: Int?
    var activeRoles: [String]?
    var connectionReason: String?
    enum CodingKeys: String, CodingKey {
        case serverID = "server_id", name, version, activeRoles = "active_roles", connectionReason = "connection_reason"
    }
}

/// Legacy `client/state`: a `state` word once the clock is synchronised, and the player's
/// volume, mute and delay (`static_delay_ms`).
struct LegacyClientState: Codable {
    var state: String?
    var player: LegacyPlayerState?
}

struct LegacyPlayerState: Codable {
    var volume: Int?
    var muted: Bool?
    var staticDelayMs: Int
    enum CodingKeys: String, CodingKey { case volume, muted, staticDelayMs = "static_delay_ms" }
}

enum WireJSON {
    static func encode<T: Encodable>(type: String, payload: T) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        // Encoding these plain value types cannot fail.
        let data = try! encoder.encode(OutgoingEnvelope(type: type, payload: payload))
        return String(decoding: data, as: UTF8.self)
    }

    /// A `client/time` request, written directly: a player sends several a second, and the
    /// encoder's generic path costs far more than the text (the document it would make).
    static func clientTime(_ clientTransmitted: Int64) -> String {
        #"{"type":"client/time","payload":{"client_transmitted":\#(clientTransmitted)}}"#
    }

    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws(SendspinError) -> T {
        if T.self == ServerTime.self, let time = ServerTimeReader.read(bytes) as? T { return time }
        do {
            return try JSONDecoder().decode(IncomingEnvelope<T>.self, from: Data(bytes)).payload
        } catch {
            throw .protocolViolation("cannot read \(T.self) (\(describe(error)))")
        }
    }

    static func messageType(of bytes: [UInt8]) throws(SendspinError) -> String {
        // The clock exchange's answers, most of the JSON a playing player reads, skip the decoder.
        if ServerTimeReader.read(bytes) != nil { return "server/time" }
        do {
            return try JSONDecoder().decode(IncomingType.self, from: Data(bytes)).type
        } catch {
            throw .protocolViolation("a message that is not a JSON envelope (\(describe(error)))")
        }
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "missing \(key.stringValue)"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "wrong type at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        case DecodingError.dataCorrupted: return "not valid JSON"
        default: return "\(error)"
        }
    }
}
