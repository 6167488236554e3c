/// The category of the PSK that keys a session (`psk_category` in Noise message 1).
public enum PSKCategory: SendspinWireName {
    /// `sn`: the well-known Sentinel; the session is unpaired.
    case sentinel
    /// `pr`: this device's Pairing PSK, which a server holds from the pairing token.
    case pairing
    /// `lt`: the long-term PSK of a server this player is paired with.
    case longTerm
    /// A category this client does not know (a handshake naming one fails).
    case other(String)

    public init(rawValue: String) {
        switch rawValue {
        case "sn": self = .sentinel
        case "pr": self = .pairing
        case "lt": self = .longTerm
        default: self = .other(rawValue)
        }
    }

    public var rawValue: String {
        switch self {
        case .sentinel: "sn"
        case .pairing: "pr"
        case .longTerm: "lt"
        case .other(let name): name
        }
    }
}
