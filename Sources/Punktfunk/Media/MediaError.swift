/// Why an access unit, an OBU or an audio packet could not be read.
public enum MediaError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A length field points past the end of the data.
    case truncated(what: String, needed: Int, available: Int)
    /// The bytes break the bitstream's rules.
    case malformed(String)
    /// The decoder library refused (its own message included).
    case decoder(String)

    public var description: String {
        switch self {
        case let .truncated(what, needed, available):
            return "\(what) is truncated: needs \(needed) byte(s), \(available) left"
        case let .malformed(reason):
            return "malformed media: \(reason)"
        case let .decoder(reason):
            return "decoder error: \(reason)"
        }
    }
}

/// The video codecs punktfunk/1 carries (HEVC by default; H.264 and AV1 when negotiated).
public enum VideoCodec: String, Sendable, CaseIterable {
    case h264, hevc, av1

    /// The codec a Welcome's `codec` byte names (the Hello's codec bits: H.264 1, HEVC 2, AV1 4);
    /// nil for one this client does not decode (PyroWave 8, or a bit it does not know).
    public init?(welcomeCodec: UInt8) {
        switch welcomeCodec {
        case 1: self = .h264
        case 2: self = .hevc
        case 4: self = .av1
        default: return nil
        }
    }

    /// The name people know it by ("HEVC").
    public var displayName: String {
        switch self {
        case .h264: "H.264"
        case .hevc: "HEVC"
        case .av1: "AV1"
        }
    }
}
