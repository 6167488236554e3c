/// What plays, as a now-playing display shows it: the metadata role's track and progress, the
/// controller role's volume, mute, repeat and shuffle, the group and whether the clock is in
/// sync — and what a key asks the server for. Pure: a terminal (`farcast sendspin play --tui`)
/// or an app draws it and feeds it what the session reports.
public struct NowPlaying: Sendable, Equatable {
    public var metadata: Metadata?
    public var controller: ControllerState?
    public var groupName: String?
    public var groupState: GroupPlaybackState?
    public var synchronized = false
    /// Server time minus client time (µs), the clock filter's offset.
    public var offsetUs = 0.0
    public var filterErrorUs: Int64?
    public var bufferedMs = 0.0

    public init() {}

    /// Takes a telemetry report's clock and group.
    public mutating func apply(_ telemetry: SendspinPlayer.Telemetry) {
        synchronized = telemetry.synchronized
        offsetUs = telemetry.offsetUs
        filterErrorUs = telemetry.filterErrorUs
        bufferedMs = telemetry.bufferedMs
        if let name = telemetry.groupName { groupName = name }
        if let state = telemetry.groupState { groupState = state }
    }

    /// The track's position (ms) at client time `nowUs`: the progress the metadata gave for its
    /// timestamp (server time), advanced at its playback speed by the server time since, within
    /// the track's length. Nil without progress.
    public func positionMs(atClientUs nowUs: Int64) -> Int64? {
        guard let progress = metadata?.progress else { return nil }
        // The speed says whether it moves (0: paused), whatever the group's state.
        guard let timestamp = metadata?.timestamp else { return progress.trackProgress }
        let serverNow = Double(nowUs) + offsetUs
        let elapsedMs = max(0, (serverNow - Double(timestamp)) / 1000) * Double(progress.playbackSpeed) / 1000
        let position = progress.trackProgress + Int64(elapsedMs)
        return progress.trackDuration > 0 ? min(position, progress.trackDuration) : position
    }

    /// What a key press means.
    public enum Action: Sendable, Equatable {
        case send(ControllerCommand)
        case quit
    }

    /// The keys: space play/pause, n next, p previous, + and - volume by 5, m mute, r repeat
    /// (off → all → one → off), s shuffle, q quit. A command the server does not list as
    /// supported is not sent (nil).
    public func action(forKey key: Character) -> Action? {
        let command: ControllerCommand
        switch key {
        case "q", "Q": return .quit
        case " ": command = ControllerCommand(command: groupState == .playing ? .pause : .play)
        case "n": command = ControllerCommand(command: .next)
        case "p": command = ControllerCommand(command: .previous)
        case "+", "=": command = ControllerCommand(command: .volume, volume: min(100, (controller?.volume ?? 50) + 5))
        case "-", "_": command = ControllerCommand(command: .volume, volume: max(0, (controller?.volume ?? 50) - 5))
        case "m": command = ControllerCommand(command: .mute, mute: !(controller?.muted ?? false))
        case "r":
            switch controller?.repeat {
            case "all": command = ControllerCommand(command: .repeatOne)
            case "one": command = ControllerCommand(command: .repeatOff)
            default: command = ControllerCommand(command: .repeatAll)
            }
        case "s": command = ControllerCommand(command: (controller?.shuffle ?? false) ? .unshuffle : .shuffle)
        default: return nil
        }
        if let supported = controller?.supportedCommands, !supported.contains(command.command) { return nil }
        return .send(command)
    }

    /// The display, one string per line, each at most `width` characters.
    public func lines(width: Int, atClientUs nowUs: Int64) -> [String] {
        func clip(_ s: String) -> String { s.count <= width ? s : String(s.prefix(max(0, width - 1))) + "…" }
        func time(_ ms: Int64) -> String { String(format: "%d:%02d", ms / 60_000, (ms / 1000) % 60) }
        var out: [String] = []
        let m = metadata
        out.append(clip(m?.title ?? "Nothing playing"))
        out.append(clip([m?.artist, m?.album].compactMap { $0 }.joined(separator: " — ")))
        if let position = positionMs(atClientUs: nowUs), let duration = m?.progress?.trackDuration, duration > 0 {
            let label = " \(time(position)) / \(time(duration))"
            let barWidth = max(0, width - label.count - 2)
            let filled = Int(Double(barWidth) * Double(position) / Double(duration))
            out.append("[" + String(repeating: "#", count: filled) + String(repeating: "-", count: barWidth - filled) + "]" + label)
        } else {
            out.append("")
        }
        var status: [String] = []
        if let state = groupState { status.append(state == .playing ? "playing" : state == .stopped ? "stopped" : "\(state)") }
        if let c = controller {
            if let v = c.volume { status.append("volume \(v)" + (c.muted == true ? " (muted)" : "")) }
            if let r = c.repeat { status.append("repeat \(r)") }
            if let s = c.shuffle { status.append(s ? "shuffle on" : "shuffle off") }
        }
        if let group = groupName { status.append("group \(group)") }
        out.append(clip(status.joined(separator: "  ")))
        out.append(clip(synchronized ? String(format: "in sync (±%d µs), %.0f ms buffered", filterErrorUs ?? 0, bufferedMs) : "syncing the clock…"))
        out.append("")
        out.append(clip("space play/pause  n next  p previous  +/- volume  m mute  r repeat  s shuffle  q quit"))
        return out
    }
}
