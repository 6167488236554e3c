/// The player's side of the server's `player` commands, as rules with no lock or engine: which
/// commands it takes, what each one changes (clamped to what the player can do), and the
/// figures its state report declares.
enum PlayerControls {
    /// The commands this player carries out (the `supported_commands` of its state report).
    enum Command: String, CaseIterable, Sendable {
        case volume
        case mute
        case setOutputDelay = "set_output_delay"
    }

    /// What a command changes.
    enum Effect: Equatable, Sendable {
        /// Volume 0–100.
        case volume(Int)
        case muted(Bool)
        /// Extra output delay, 0–`maximumOutputDelayMs`.
        case outputDelayMs(Int)
    }

    /// The lead time and buffer the state report declares (ms).
    static let requiredLeadTimeMs = 250
    static let minimumBufferMs = 250
    /// The longest output delay a server may set (ms); more is clamped to it.
    static let maximumOutputDelayMs = 5000

    static var supportedCommands: [String] { Command.allCases.map(\.rawValue) }

    /// The change `command` asks for, clamped; nil when this player does not take the command
    /// or the command lacks its value.
    static func effect(of command: PlayerCommand) -> Effect? {
        switch Command(rawValue: command.command) {
        case .volume: command.volume.map { .volume(min(max($0, 0), 100)) }
        case .mute: command.mute.map { .muted($0) }
        case .setOutputDelay: command.outputDelayMs.map { .outputDelayMs(min(max($0, 0), maximumOutputDelayMs)) }
        case nil: nil
        }
    }
}
