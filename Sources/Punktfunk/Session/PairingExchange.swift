import Crypto

/// The client's side of punktfunk/1 pairing (PairRequest → PairChallenge → PairProof → PairResult).
///
/// Sans-I/O: `start()` gives the PairRequest, `receive(challenge:)` checks the host's confirmation
/// and gives the PairProof, `receive(result:)` concludes. A host confirmation that does not match
/// means a wrong PIN (it is the only way a wrong PIN shows), reported as `.wrongPIN`.
public struct PairingExchange: Sendable {
    public static let hostLabel = Array("punktfunk-pair-host".utf8)
    public static let clientLabel = Array("punktfunk-pair-client".utf8)

    private let spake: SPAKE2SideA
    private let clientFingerprint: [UInt8]
    private let hostFingerprint: [UInt8]
    private let name: String
    private var key: [UInt8]?

    /// Checks the PIN locally (exactly 4 ASCII digits) before anything reaches the host.
    public static func validatePIN(_ pin: String) throws(PunktfunkSessionError) -> [UInt8] {
        let bytes = Array(pin.utf8)
        guard bytes.count == 4, bytes.allSatisfy({ (48...57).contains($0) }) else { throw .invalidPIN }
        return bytes
    }

    /// `clientFingerprint`/`hostFingerprint`: raw SHA-256 of the two certificates' DER (32 bytes each).
    public init(pin: String, name: String, clientFingerprint: [UInt8], hostFingerprint: [UInt8],
                scalar: [UInt8]? = nil) throws(PunktfunkSessionError) {
        let password = try Self.validatePIN(pin)
        if let scalar {
            spake = try SPAKE2SideA(password: password, idA: clientFingerprint, idB: hostFingerprint, scalar: scalar)
        } else {
            spake = try SPAKE2SideA(password: password, idA: clientFingerprint, idB: hostFingerprint)
        }
        self.clientFingerprint = clientFingerprint
        self.hostFingerprint = hostFingerprint
        self.name = name
    }

    /// The PairRequest to send first.
    public func start() -> ControlMessage {
        .pairRequest(name: name, spakeA: spake.outboundMessage)
    }

    /// Takes the host's PairChallenge; returns the PairProof, or throws `.wrongPIN`.
    public mutating func receive(challenge spakeB: [UInt8], confirmHost: [UInt8]) throws(PunktfunkSessionError) -> ControlMessage {
        let key = try spake.finish(inboundMessage: spakeB)
        let expected = Self.confirmation(key: key, label: Self.hostLabel, client: clientFingerprint, host: hostFingerprint)
        // Constant-time comparison through HMAC's own validator.
        guard HMAC<SHA256>.isValidAuthenticationCode(confirmHost, authenticating: Self.hostLabel + clientFingerprint + hostFingerprint,
                                                     using: SymmetricKey(data: key)), expected.count == confirmHost.count else {
            throw .wrongPIN
        }
        self.key = key
        return .pairProof(confirmClient: Self.confirmation(key: key, label: Self.clientLabel, client: clientFingerprint, host: hostFingerprint))
    }

    /// HMAC-SHA256(key, label ‖ client_fp ‖ host_fp).
    public static func confirmation(key: [UInt8], label: [UInt8], client: [UInt8], host: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: label + client + host, using: SymmetricKey(data: key)))
    }

    /// The shared key once the challenge was verified (tests).
    public var sharedKey: [UInt8]? { key }
}
