/// What a `server/activate` asks of the client (`activities`).
public enum Activity: SendspinWireName {
    case playback
    case pairing
    /// An activity this client does not know: the activation is refused (`unauthorized`).
    case other(String)

    public init(rawValue: String) {
        switch rawValue {
        case "playback": self = .playback
        case "pairing": self = .pairing
        default: self = .other(rawValue)
        }
    }

    public var rawValue: String {
        switch self {
        case .playback: "playback"
        case .pairing: "pairing"
        case .other(let name): name
        }
    }
}
