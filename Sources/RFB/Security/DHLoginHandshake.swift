import FarcastSupport

/// Apple's Diffie-Hellman login (type 30) and UltraVNC's MS-Logon II (type 113): read the
/// server's parameters, then answer with the credentials encrypted under the agreed key.
struct DHLoginHandshake: Sendable {
    enum Kind: Sendable { case appleDH, msLogonII }

    enum Step: Sendable {
        case parameters(Kind)
        case appleDHCredentials(AppleDH.Parameters)
        case msLogonIICredentials(MSLogonII.Parameters)
    }

    private(set) var step: Step

    init(kind: Kind) {
        step = .parameters(kind)
    }

    var hasParameters: Bool {
        if case .parameters = step { return false }
        return true
    }

    mutating func step(_ reader: inout ByteReader, _ context: inout SecurityContext, _ out: inout ConnectionOutput) throws -> SecurityStep {
        let random = context.configuration.randomBytes
        switch step {
        case .parameters(let kind):
            var r = reader
            switch kind {
            case .appleDH: step = .appleDHCredentials(try AppleDH.readParameters(&r))
            case .msLogonII: step = .msLogonIICredentials(try MSLogonII.readParameters(&r))
            }
            reader = r
            _ = try context.credentials(&out)
            return .progressed
        case .appleDHCredentials(let parameters):
            guard let credentials = try context.credentials(&out) else { return .waiting }
            out.send(try AppleDH.response(parameters, username: credentials.username ?? "", password: credentials.password, random: random))
            return .authenticated(awaitsResult: true)
        case .msLogonIICredentials(let parameters):
            guard let credentials = try context.credentials(&out) else { return .waiting }
            out.send(try MSLogonII.response(parameters, username: credentials.username ?? "", password: credentials.password, random: random))
            return .authenticated(awaitsResult: true)
        }
    }
}
