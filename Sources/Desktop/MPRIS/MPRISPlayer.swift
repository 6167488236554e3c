import Foundation
import Synchronization

/// What a media player shows the desktop through MPRIS (`org.mpris.MediaPlayer2.Player`):
/// status, track, volume, loop and shuffle, what it can do. Protocol-neutral: a Sendspin
/// player or a Jellyfin playback fills it from what it knows.
public struct MPRISState: Equatable, Sendable {
    public enum Status: String, Sendable { case playing = "Playing", paused = "Paused", stopped = "Stopped" }
    public enum Loop: String, Sendable { case none = "None", track = "Track", playlist = "Playlist" }

    public var status = Status.stopped
    /// nil: the player cannot loop (the property is left out).
    public var loop: Loop?
    public var shuffle: Bool?
    /// 0…1; nil: no volume.
    public var volume: Double?
    /// An object path naming the track (`/org/mpris/MediaPlayer2/TrackList/NoTrack` for none).
    public var trackID = "/org/mpris/MediaPlayer2/TrackList/NoTrack"
    public var title: String?
    public var artists: [String] = []
    public var album: String?
    public var albumArtists: [String] = []
    public var trackNumber: Int?
    public var lengthUs: Int64?
    /// A file:// or http(s):// URL of the cover.
    public var artURL: String?
    public var canGoNext = false
    public var canGoPrevious = false
    public var canPlay = false
    public var canPause = false
    public var canSeek = false
    public var canControl = true

    public init() {}

    /// The `Metadata` property.
    var metadata: DBusValue {
        var entries: [(String, DBusValue)] = [("mpris:trackid", .objectPath(trackID))]
        if let lengthUs { entries.append(("mpris:length", .int64(lengthUs))) }
        if let title { entries.append(("xesam:title", .string(title))) }
        if !artists.isEmpty { entries.append(("xesam:artist", .strings(artists))) }
        if let album { entries.append(("xesam:album", .string(album))) }
        if !albumArtists.isEmpty { entries.append(("xesam:albumArtist", .strings(albumArtists))) }
        if let trackNumber { entries.append(("xesam:trackNumber", .int32(Int32(clamping: trackNumber)))) }
        if let artURL { entries.append(("mpris:artUrl", .string(artURL))) }
        return .properties(entries)
    }

    /// The player interface's properties but `Position` (read live, never signalled).
    var playerProperties: [(String, DBusValue)] {
        var properties: [(String, DBusValue)] = [
            ("PlaybackStatus", .string(status.rawValue)), ("Rate", .double(1)), ("MinimumRate", .double(1)), ("MaximumRate", .double(1)),
            ("Metadata", metadata), ("CanGoNext", .boolean(canGoNext)), ("CanGoPrevious", .boolean(canGoPrevious)),
            ("CanPlay", .boolean(canPlay)), ("CanPause", .boolean(canPause)), ("CanSeek", .boolean(canSeek)), ("CanControl", .boolean(canControl)),
        ]
        if let loop { properties.append(("LoopStatus", .string(loop.rawValue))) }
        if let shuffle { properties.append(("Shuffle", .boolean(shuffle))) }
        if let volume { properties.append(("Volume", .double(volume))) }
        return properties
    }
}

/// What the desktop asks of the player (media keys, `playerctl`, a panel's buttons).
public enum MPRISCommand: Equatable, Sendable {
    case play, pause, playPause, stop, next, previous
    /// Move by this many µs (negative: back).
    case seek(offsetUs: Int64)
    /// Go to this position (µs) of the track `trackID`.
    case setPosition(trackID: String, positionUs: Int64)
    case setVolume(Double)
    case setLoop(MPRISState.Loop)
    case setShuffle(Bool)
}

/// An MPRIS player on the session bus (`org.mpris.MediaPlayer2.NAME` at
/// `/org/mpris/MediaPlayer2`): answers `Get`, `GetAll`, `Set` and the player's methods from
/// `update`'s state and a live position, turns the desktop's requests into `MPRISCommand`s, and
/// signals `PropertiesChanged` (and `Seeked` on a jump) as the state changes.
public final class MPRISPlayer: Sendable {
    static let objectPath = "/org/mpris/MediaPlayer2"
    static let rootInterface = "org.mpris.MediaPlayer2"
    static let playerInterface = "org.mpris.MediaPlayer2.Player"
    static let propertiesInterface = "org.freedesktop.DBus.Properties"

    private let connection: DBusConnection
    /// The well-known name taken (`org.mpris.MediaPlayer2.farcast_Kitchen`).
    public let busName: String
    private let identity: String
    private let state = Mutex(MPRISState())
    private let position: @Sendable () -> Int64
    private let command: @Sendable (MPRISCommand) -> Void

    /// A bus name element from a player's name: letters, digits and `_` (others become `_`).
    public static func nameElement(_ name: String) -> String {
        let element = String(name.unicodeScalars.map { ($0.isASCII && (CharacterSet.alphanumerics.contains($0) || $0 == "_")) ? Character($0) : "_" })
        return element.isEmpty ? "_" : element
    }

    /// Takes `org.mpris.MediaPlayer2.<name>` on `connection` (with `.instance<pid>` when another
    /// player has the name) and starts answering. `identity`: the name panels show;
    /// `position`: the track position in µs, read when asked; `command`: what the desktop asks.
    public init(connection: DBusConnection, name: String, identity: String, position: @escaping @Sendable () -> Int64,
                command: @escaping @Sendable (MPRISCommand) -> Void, ended: @escaping @Sendable (DBusError?) -> Void = { _ in }) throws(DBusError) {
        self.connection = connection
        self.identity = identity
        self.position = position
        self.command = command
        let base = "\(Self.rootInterface).\(Self.nameElement(name))"
        if try connection.requestName(base) {
            busName = base
        } else {
            let instance = "\(base).instance\(getpid())"
            guard try connection.requestName(instance) else { throw .failed("neither \(base) nor \(instance) could be taken") }
            busName = instance
        }
        connection.serve({ [weak self] message in
            guard let self else { return .error(name: "org.freedesktop.DBus.Error.Failed", message: "the player has stopped") }
            return self.answer(message)
        }, ended: ended)
    }

    /// Leaves the bus.
    public func stop() { connection.close() }

    /// The state now; properties that changed are signalled. `seeked`: the position jumped
    /// (a seek, a new track), so listeners read it again.
    public func update(_ new: MPRISState, seeked: Bool = false) {
        let old = state.withLock { s in
            defer { s = new }
            return s
        }
        let before = Dictionary(old.playerProperties, uniquingKeysWith: { a, _ in a })
        let changed = new.playerProperties.filter { before[$0.0] != $0.1 }
        if !changed.isEmpty {
            try? connection.emit(path: Self.objectPath, interface: Self.propertiesInterface, member: "PropertiesChanged",
                                 body: [.string(Self.playerInterface), .properties(changed), .strings([])])
        }
        if seeked { try? connection.emit(path: Self.objectPath, interface: Self.playerInterface, member: "Seeked", body: [.int64(position())]) }
    }

    private var rootProperties: [(String, DBusValue)] {
        [("CanQuit", .boolean(false)), ("CanRaise", .boolean(false)), ("HasTrackList", .boolean(false)), ("Identity", .string(identity)),
         ("SupportedUriSchemes", .strings([])), ("SupportedMimeTypes", .strings([]))]
    }

    private func properties(of interface: String) -> [(String, DBusValue)]? {
        switch interface {
        case Self.rootInterface: return rootProperties
        case Self.playerInterface: return state.withLock { $0.playerProperties } + [("Position", .int64(position()))]
        default: return nil
        }
    }

    private static func error(_ name: String, _ message: String) -> DBusConnection.Reply {
        .error(name: "org.freedesktop.DBus.Error.\(name)", message: message)
    }

    /// One method call's answer.
    func answer(_ message: DBusMessage) -> DBusConnection.Reply {
        guard message.path == Self.objectPath else { return Self.error("UnknownObject", "no object at \(message.path ?? "?")") }
        let member = message.member ?? ""
        switch (message.interface ?? "", member) {
        case (Self.propertiesInterface, "Get"):
            guard message.body.count == 2, let interface = message.body[0].stringValue, let name = message.body[1].stringValue else {
                return Self.error("InvalidArgs", "Get takes an interface and a property name")
            }
            guard let value = properties(of: interface)?.first(where: { $0.0 == name })?.1 else {
                return Self.error("UnknownProperty", "no property \(name) on \(interface)")
            }
            return .values([.variant(value)])
        case (Self.propertiesInterface, "GetAll"):
            guard let interface = message.body.first?.stringValue else { return Self.error("InvalidArgs", "GetAll takes an interface") }
            return .values([.properties(properties(of: interface) ?? [])])
        case (Self.propertiesInterface, "Set"):
            guard message.body.count == 3, message.body[0].stringValue == Self.playerInterface, let name = message.body[1].stringValue else {
                return Self.error("InvalidArgs", "Set takes the player interface, a property and a value")
            }
            let value = message.body[2]
            switch name {
            case "Volume":
                guard let volume = value.doubleValue else { return Self.error("InvalidArgs", "Volume is a double") }
                command(.setVolume(min(1, max(0, volume))))
            case "LoopStatus":
                guard let loop = value.stringValue.flatMap(MPRISState.Loop.init(rawValue:)) else { return Self.error("InvalidArgs", "LoopStatus is None, Track or Playlist") }
                command(.setLoop(loop))
            case "Shuffle":
                guard let shuffle = value.boolValue else { return Self.error("InvalidArgs", "Shuffle is a boolean") }
                command(.setShuffle(shuffle))
            case "Rate":
                break                                   // only 1.0 is offered
            default:
                return Self.error("PropertyReadOnly", "\(name) cannot be set")
            }
            return .values([])
        case ("org.freedesktop.DBus.Introspectable", "Introspect"):
            return .values([.string(Self.introspection)])
        case ("org.freedesktop.DBus.Peer", "Ping"):
            return .values([])
        case (Self.rootInterface, "Raise"), (Self.rootInterface, "Quit"):
            return .values([])                          // CanRaise and CanQuit are false: nothing to do
        case (Self.playerInterface, _), ("", _):
            let request: MPRISCommand
            switch member {
            case "Play": request = .play
            case "Pause": request = .pause
            case "PlayPause": request = .playPause
            case "Stop": request = .stop
            case "Next": request = .next
            case "Previous": request = .previous
            case "Seek":
                guard let offset = message.body.first?.int64Value else { return Self.error("InvalidArgs", "Seek takes an offset in µs") }
                request = .seek(offsetUs: offset)
            case "SetPosition":
                guard message.body.count == 2, let track = message.body[0].stringValue, let at = message.body[1].int64Value else {
                    return Self.error("InvalidArgs", "SetPosition takes a track id and a position in µs")
                }
                request = .setPosition(trackID: track, positionUs: at)
            case "OpenUri":
                return Self.error("NotSupported", "this player plays what its server sends")
            default:
                return Self.error("UnknownMethod", "no method \(member)")
            }
            command(request)
            return .values([])
        default:
            return Self.error("UnknownMethod", "no method \(message.interface ?? "").\(member)")
        }
    }

    private static let introspection = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
        <node>
          <interface name="org.freedesktop.DBus.Properties">
            <method name="Get"><arg direction="in" type="s"/><arg direction="in" type="s"/><arg direction="out" type="v"/></method>
            <method name="GetAll"><arg direction="in" type="s"/><arg direction="out" type="a{sv}"/></method>
            <method name="Set"><arg direction="in" type="s"/><arg direction="in" type="s"/><arg direction="in" type="v"/></method>
            <signal name="PropertiesChanged"><arg type="s"/><arg type="a{sv}"/><arg type="as"/></signal>
          </interface>
          <interface name="org.mpris.MediaPlayer2">
            <method name="Raise"/><method name="Quit"/>
            <property name="CanQuit" type="b" access="read"/><property name="CanRaise" type="b" access="read"/>
            <property name="HasTrackList" type="b" access="read"/><property name="Identity" type="s" access="read"/>
            <property name="SupportedUriSchemes" type="as" access="read"/><property name="SupportedMimeTypes" type="as" access="read"/>
          </interface>
          <interface name="org.mpris.MediaPlayer2.Player">
            <method name="Next"/><method name="Previous"/><method name="Pause"/><method name="PlayPause"/><method name="Stop"/><method name="Play"/>
            <method name="Seek"><arg direction="in" type="x"/></method>
            <method name="SetPosition"><arg direction="in" type="o"/><arg direction="in" type="x"/></method>
            <method name="OpenUri"><arg direction="in" type="s"/></method>
            <signal name="Seeked"><arg type="x"/></signal>
            <property name="PlaybackStatus" type="s" access="read"/><property name="LoopStatus" type="s" access="readwrite"/>
            <property name="Rate" type="d" access="readwrite"/><property name="Shuffle" type="b" access="readwrite"/>
            <property name="Metadata" type="a{sv}" access="read"/><property name="Volume" type="d" access="readwrite"/>
            <property name="Position" type="x" access="read"/><property name="MinimumRate" type="d" access="read"/>
            <property name="MaximumRate" type="d" access="read"/><property name="CanGoNext" type="b" access="read"/>
            <property name="CanGoPrevious" type="b" access="read"/><property name="CanPlay" type="b" access="read"/>
            <property name="CanPause" type="b" access="read"/><property name="CanSeek" type="b" access="read"/>
            <property name="CanControl" type="b" access="read"/>
          </interface>
        </node>
        """
}
