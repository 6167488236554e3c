/// An alert a TLS peer sends when it ends the handshake (RFC 8446 §6.2), by number; the ones
/// a client acts on are named.
public struct TLSAlert: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let handshakeFailure = TLSAlert(rawValue: 40)
    public static let badCertificate = TLSAlert(rawValue: 42)
    public static let unsupportedCertificate = TLSAlert(rawValue: 43)
    public static let certificateRevoked = TLSAlert(rawValue: 44)
    public static let certificateExpired = TLSAlert(rawValue: 45)
    public static let certificateUnknown = TLSAlert(rawValue: 46)
    public static let unknownCA = TLSAlert(rawValue: 48)
    public static let accessDenied = TLSAlert(rawValue: 49)
    public static let protocolVersion = TLSAlert(rawValue: 70)
    public static let certificateRequired = TLSAlert(rawValue: 116)
    public static let noApplicationProtocol = TLSAlert(rawValue: 120)

    /// The alerts by which a server that verifies clients turns away one that showed no
    /// certificate: TLS 1.3 servers send certificate_required, older ones handshake_failure.
    public static let clientCertificateMissing: Set<TLSAlert> = [.certificateRequired, .handshakeFailure]
    /// The alerts by which a server refuses the certificate a client showed.
    public static let clientCertificateRefused: Set<TLSAlert> = [
        .badCertificate, .unsupportedCertificate, .certificateRevoked, .certificateExpired, .certificateUnknown, .unknownCA, .certificateRequired,
    ]

    public var description: String {
        switch self {
        case .handshakeFailure: "handshake failure"
        case .badCertificate: "bad certificate"
        case .unsupportedCertificate: "unsupported certificate"
        case .certificateRevoked: "certificate revoked"
        case .certificateExpired: "certificate expired"
        case .certificateUnknown: "certificate unknown"
        case .unknownCA: "unknown ca"
        case .accessDenied: "access denied"
        case .protocolVersion: "protocol version"
        case .certificateRequired: "certificate required"
        case .noApplicationProtocol: "no application protocol"
        default: "alert \(rawValue)"
        }
    }
}
