internal import Foundation

/// One message from the server's `/socket`, decoded into what a client acts on.
///
/// Command names are open string types (`PlaystateCommand`, `GeneralCommandName`, …): a name a
/// newer server adds arrives as itself instead of failing the message. A `MessageType` Farcast
/// does not model arrives as `.other`.
public enum LiveMessage: Sendable, Equatable {
    /// The server drops the socket unless it hears a KeepAlive within `seconds`.
    case forceKeepAlive(seconds: Int)
    /// The server's answer to our KeepAlive.
    case keepAlive
    /// The sessions the server knows (after `SessionsStart`).
    case sessions([LiveSessionSummary])
    case userDataChanged(userId: String, changes: [UserDataChange])
    case libraryChanged(LibraryChange)
    /// Another client asks this one to play items.
    case play(PlayRequest)
    /// Another client asks this one to pause, seek, stop….
    case playstate(PlaystateRequest)
    case generalCommand(GeneralCommand)
    /// SyncPlay: what the group's players do, and when (`SyncPlay.swift`).
    case syncPlayCommand(SyncPlayCommand)
    /// SyncPlay: the group changed (joined, left, its state, its queue).
    case syncPlayGroupUpdate(SyncPlayGroupUpdate)
    case serverRestarting
    case serverShuttingDown
    /// A message type this version does not model, with its raw JSON.
    case other(type: String)

    /// The `MessageType` on the wire.
    public var messageType: String {
        switch self {
        case .forceKeepAlive: return "ForceKeepAlive"
        case .keepAlive: return "KeepAlive"
        case .sessions: return "Sessions"
        case .userDataChanged: return "UserDataChanged"
        case .libraryChanged: return "LibraryChanged"
        case .play: return "Play"
        case .playstate: return "Playstate"
        case .generalCommand: return "GeneralCommand"
        case .syncPlayCommand: return "SyncPlayCommand"
        case .syncPlayGroupUpdate: return "SyncPlayGroupUpdate"
        case .serverRestarting: return "ServerRestarting"
        case .serverShuttingDown: return "ServerShuttingDown"
        case .other(let type): return type
        }
    }

    /// Decodes one JSON object `{"MessageType": …, "MessageId": …, "Data": …}`.
    public static func decode(_ object: [UInt8]) throws(JellyfinSocketError) -> LiveMessage {
        let data = Data(object)
        let decoder = JSONDecoder()
        let type: String
        do {
            type = try decoder.decode(Head.self, from: data).MessageType
        } catch {
            throw .undecodable("no MessageType (\(Self.reason(error)))")
        }
        do {
            switch type {
            case "ForceKeepAlive":
                let seconds = try decoder.decode(Envelope<Int>.self, from: data).Data
                guard let seconds else { throw JellyfinSocketError.undecodable("ForceKeepAlive without a timeout") }
                return .forceKeepAlive(seconds: seconds)
            case "KeepAlive": return .keepAlive
            case "Sessions":
                return .sessions(try decoder.decode(Envelope<[LiveSessionSummary]>.self, from: data).Data ?? [])
            case "UserDataChanged":
                let info = try decoder.decode(Envelope<UserDataChangeInfo>.self, from: data).Data
                return .userDataChanged(userId: info?.UserId ?? "", changes: info?.UserDataList ?? [])
            case "LibraryChanged":
                return .libraryChanged(try decoder.decode(Envelope<LibraryChange>.self, from: data).Data ?? LibraryChange())
            case "Play":
                guard let request = try decoder.decode(Envelope<PlayRequest>.self, from: data).Data else { throw JellyfinSocketError.undecodable("Play without data") }
                return .play(request)
            case "Playstate":
                guard let request = try decoder.decode(Envelope<PlaystateRequest>.self, from: data).Data else { throw JellyfinSocketError.undecodable("Playstate without data") }
                return .playstate(request)
            case "GeneralCommand":
                guard let command = try decoder.decode(Envelope<GeneralCommand>.self, from: data).Data else { throw JellyfinSocketError.undecodable("GeneralCommand without data") }
                return .generalCommand(command)
            case "SyncPlayCommand":
                guard let command = try decoder.decode(Envelope<SyncPlayCommand>.self, from: data).Data else { throw JellyfinSocketError.undecodable("SyncPlayCommand without data") }
                return .syncPlayCommand(command)
            case "SyncPlayGroupUpdate":
                guard let update = try decoder.decode(Envelope<SyncPlayGroupUpdate>.self, from: data).Data else { throw JellyfinSocketError.undecodable("SyncPlayGroupUpdate without data") }
                return .syncPlayGroupUpdate(update)
            case "ServerRestarting": return .serverRestarting
            case "ServerShuttingDown": return .serverShuttingDown
            default: return .other(type: type)
            }
        } catch let error as JellyfinSocketError {
            throw error
        } catch {
            throw .undecodable("\(type): \(Self.reason(error))")
        }
    }

    /// A short reason for a decoding failure (field path and what was wrong), for one line.
    static func reason(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "not JSON" }
        func path(_ context: DecodingError.Context) -> String {
            let p = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            return p.isEmpty ? "" : " at \(p)"
        }
        switch error {
        case .typeMismatch(let type, let c): return "expected \(type)\(path(c))"
        case .valueNotFound(let type, let c): return "missing \(type)\(path(c))"
        case .keyNotFound(let key, let c): return "missing \(key.stringValue)\(path(c))"
        case .dataCorrupted(let c): return "not valid JSON\(path(c))"
        @unknown default: return "cannot decode"
        }
    }

    private struct Head: Decodable { var MessageType: String }
    private struct Envelope<T: Decodable>: Decodable { var Data: T? }
    private struct UserDataChangeInfo: Decodable {
        var UserId: String?
        var UserDataList: [UserDataChange]?
    }
}

/// A session as the `Sessions` message lists it (the fields a remote-control picker shows).
public struct LiveSessionSummary: Sendable, Equatable, Decodable {
    public var id: String
    public var userName: String?
    public var client: String?
    public var deviceName: String?
    public var deviceId: String?
    public var nowPlaying: String?
    public var supportsRemoteControl: Bool

    enum CodingKeys: String, CodingKey {
        case id = "Id", userName = "UserName", client = "Client", deviceName = "DeviceName", deviceId = "DeviceId"
        case nowPlaying = "NowPlayingItem", supportsRemoteControl = "SupportsRemoteControl"
    }
    private struct Named: Decodable { var Name: String? }

    public init(id: String, userName: String? = nil, client: String? = nil, deviceName: String? = nil, deviceId: String? = nil,
                nowPlaying: String? = nil, supportsRemoteControl: Bool = false) {
        self.id = id
        self.userName = userName
        self.client = client
        self.deviceName = deviceName
        self.deviceId = deviceId
        self.nowPlaying = nowPlaying
        self.supportsRemoteControl = supportsRemoteControl
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decodeIfPresent(String.self, forKey: .id) ?? ""
        userName = try c.decodeIfPresent(String.self, forKey: .userName)
        client = try c.decodeIfPresent(String.self, forKey: .client)
        deviceName = try c.decodeIfPresent(String.self, forKey: .deviceName)
        deviceId = try c.decodeIfPresent(String.self, forKey: .deviceId)
        nowPlaying = try c.decodeIfPresent(Named.self, forKey: .nowPlaying)?.Name
        supportsRemoteControl = try c.decodeIfPresent(Bool.self, forKey: .supportsRemoteControl) ?? false
    }
}

/// One item's user data after a change (played, favourite, position).
public struct UserDataChange: Sendable, Equatable, Decodable {
    public var itemId: String
    public var played: Bool?
    public var isFavorite: Bool?
    public var playbackPositionTicks: Int64?
    public var playCount: Int?

    enum CodingKeys: String, CodingKey {
        case itemId = "ItemId", played = "Played", isFavorite = "IsFavorite"
        case playbackPositionTicks = "PlaybackPositionTicks", playCount = "PlayCount"
    }

    public init(itemId: String, played: Bool? = nil, isFavorite: Bool? = nil, playbackPositionTicks: Int64? = nil, playCount: Int? = nil) {
        self.itemId = itemId
        self.played = played
        self.isFavorite = isFavorite
        self.playbackPositionTicks = playbackPositionTicks
        self.playCount = playCount
    }
}

/// What changed in the library (item ids).
public struct LibraryChange: Sendable, Equatable, Decodable {
    public var itemsAdded: [String] = []
    public var itemsUpdated: [String] = []
    public var itemsRemoved: [String] = []
    public var foldersAddedTo: [String] = []
    public var foldersRemovedFrom: [String] = []

    enum CodingKeys: String, CodingKey {
        case itemsAdded = "ItemsAdded", itemsUpdated = "ItemsUpdated", itemsRemoved = "ItemsRemoved"
        case foldersAddedTo = "FoldersAddedTo", foldersRemovedFrom = "FoldersRemovedFrom"
    }

    public init(itemsAdded: [String] = [], itemsUpdated: [String] = [], itemsRemoved: [String] = []) {
        self.itemsAdded = itemsAdded
        self.itemsUpdated = itemsUpdated
        self.itemsRemoved = itemsRemoved
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        itemsAdded = try c.decodeIfPresent([String].self, forKey: .itemsAdded) ?? []
        itemsUpdated = try c.decodeIfPresent([String].self, forKey: .itemsUpdated) ?? []
        itemsRemoved = try c.decodeIfPresent([String].self, forKey: .itemsRemoved) ?? []
        foldersAddedTo = try c.decodeIfPresent([String].self, forKey: .foldersAddedTo) ?? []
        foldersRemovedFrom = try c.decodeIfPresent([String].self, forKey: .foldersRemovedFrom) ?? []
    }
}

/// `Play`: items to play and how (`PlayNow`, `PlayNext`, `PlayLast`, …).
public struct PlayRequest: Sendable, Equatable, Decodable {
    public var itemIds: [String]
    public var playCommand: String
    public var startPositionTicks: Int64?
    /// Which of `itemIds` to start with (the rest play after it).
    public var startIndex: Int?
    public var controllingUserId: String?

    enum CodingKeys: String, CodingKey {
        case itemIds = "ItemIds", playCommand = "PlayCommand", startPositionTicks = "StartPositionTicks", startIndex = "StartIndex"
        case controllingUserId = "ControllingUserId"
    }

    public init(itemIds: [String], playCommand: String, startPositionTicks: Int64? = nil, startIndex: Int? = nil, controllingUserId: String? = nil) {
        self.itemIds = itemIds
        self.playCommand = playCommand
        self.startPositionTicks = startPositionTicks
        self.startIndex = startIndex
        self.controllingUserId = controllingUserId
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        itemIds = try c.decodeIfPresent([String].self, forKey: .itemIds) ?? []
        playCommand = try c.decodeIfPresent(String.self, forKey: .playCommand) ?? "PlayNow"
        startPositionTicks = try c.decodeIfPresent(Int64.self, forKey: .startPositionTicks)
        startIndex = try c.decodeIfPresent(Int.self, forKey: .startIndex)
        controllingUserId = try c.decodeIfPresent(String.self, forKey: .controllingUserId)
    }
}

/// `Playstate`: `Stop`, `Pause`, `Unpause`, `NextTrack`, `PreviousTrack`, `Seek`, `Rewind`,
/// `FastForward`, `PlayPause` (or a newer name, as sent).
public struct PlaystateRequest: Sendable, Equatable, Decodable {
    public var command: String
    public var seekPositionTicks: Int64?
    public var controllingUserId: String?

    enum CodingKeys: String, CodingKey { case command = "Command", seekPositionTicks = "SeekPositionTicks", controllingUserId = "ControllingUserId" }

    public init(command: String, seekPositionTicks: Int64? = nil, controllingUserId: String? = nil) {
        self.command = command
        self.seekPositionTicks = seekPositionTicks
        self.controllingUserId = controllingUserId
    }
}

/// `GeneralCommand`: one of the server's command names (`DisplayMessage`, `SetVolume`, …) with
/// string arguments.
public struct GeneralCommand: Sendable, Equatable, Decodable {
    public var name: String
    public var arguments: [String: String]
    public var controllingUserId: String?

    enum CodingKeys: String, CodingKey { case name = "Name", arguments = "Arguments", controllingUserId = "ControllingUserId" }

    public init(name: String, arguments: [String: String] = [:], controllingUserId: String? = nil) {
        self.name = name
        self.arguments = arguments
        self.controllingUserId = controllingUserId
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        arguments = try c.decodeIfPresent([String: String].self, forKey: .arguments) ?? [:]
        controllingUserId = try c.decodeIfPresent(String.self, forKey: .controllingUserId)
    }
}
