import FarcastSupport

/// The security method in progress, as a sub-machine of `RFBConnection`'s security phase. Each
/// case carries only its own method's data, and that data is never optional: an RSA-AES
/// handshake past the key exchange holds its keys, a Diffie-Hellman login past the parameters
/// holds them. Every sub-machine reads server bytes through the connection's record-layer stage
/// and writes through `ConnectionOutput`, so none of them frames or unframes anything itself.
enum SecurityHandshake: Sendable {
    /// VNC Authentication (type 2): the password's answer to a 16-byte challenge.
    case vncAuth
    /// VeNCrypt Plain (subtype 256, also after TLS): user name and password in the clear (or
    /// inside TLS).
    case plain
    case veNCrypt(VeNCryptHandshake)
    case rsaAES(RSAAESHandshake)
    case dhLogin(DHLoginHandshake)
    case tight(TightSecurityHandshake)
    /// The TLS type (18): anonymous TLS, then an inner type list.
    case anonTLS(AnonTLSHandshake)

    /// The sub-machine for a top-level security type (or a VeNCrypt subtype below 256, which
    /// means the same), or `.authenticated` for None.
    static func enter(type: SecurityType, _ context: SecurityContext) throws -> SecurityStep {
        switch type {
        case .noAuthentication:
            // RFB 3.3 and 3.7 send no SecurityResult after None.
            return .authenticated(awaitsResult: context.negotiation.minorVersion >= 8)
        case .vncAuth:
            return .handOver(.vncAuth)
        case .ra2, .ra2ne, .ra2_256, .ra2ne_256:
            return .handOver(.rsaAES(RSAAESHandshake(variant: RSAAES.Variant.forType(type)!)))
        case .appleDH:
            return .handOver(.dhLogin(DHLoginHandshake(kind: .appleDH)))
        case .msLogonII:
            return .handOver(.dhLogin(DHLoginHandshake(kind: .msLogonII)))
        case .tight:
            return .handOver(.tight(TightSecurityHandshake()))
        case .anonTLS:
            return .handOver(.anonTLS(AnonTLSHandshake()))
        default:
            throw RFBError.protocolViolation("security type \(type) chosen but not implemented")
        }
    }

    /// Runs one step of the method in progress.
    mutating func step(_ reader: inout ByteReader, _ context: inout SecurityContext, _ out: inout ConnectionOutput) throws -> SecurityStep {
        switch self {
        case .vncAuth:
            guard let password = try context.credentials(&out)?.password else { return .waiting }
            var r = reader
            let challenge = try r.readBytes(16)
            reader = r
            out.send(VNCAuthentication.response(challenge: challenge, password: password))
            return .authenticated(awaitsResult: true)
        case .plain:
            guard let credentials = try context.credentials(&out) else { return .waiting }
            out.send(PlainAuthentication.message(credentials))
            return .authenticated(awaitsResult: true)
        case .veNCrypt(var machine):
            defer { self = .veNCrypt(machine) }
            return try machine.step(&reader, &context, &out)
        case .rsaAES(var machine):
            defer { self = .rsaAES(machine) }
            return try machine.step(&reader, &context, &out)
        case .dhLogin(var machine):
            defer { self = .dhLogin(machine) }
            return try machine.step(&reader, &context, &out)
        case .tight(var machine):
            defer { self = .tight(machine) }
            return try machine.step(&reader, &context, &out)
        case .anonTLS(var machine):
            defer { self = .anonTLS(machine) }
            return try machine.step(&reader, &context, &out)
        }
    }

    /// The TLS handshake this method asked for is done: what comes next. nil when it asked for
    /// none.
    func tlsEstablished() -> SecurityStep? {
        switch self {
        case .veNCrypt(let machine): return machine.tlsEstablished()
        case .anonTLS(let machine): return machine.tlsEstablished()
        default: return nil
        }
    }

    /// What the client waits for from the server, for timeout messages.
    var waitingFor: String {
        switch self {
        case .vncAuth: return "its VNC authentication challenge"
        case .plain: return "the user name and password exchange"
        case .veNCrypt(let machine): return machine.isInTLSHandshake ? "the TLS handshake" : "the VeNCrypt negotiation"
        case .rsaAES: return "the RSA-AES key exchange"
        case .dhLogin: return "the Diffie-Hellman login"
        case .tight: return "the Tight security type's capability lists"
        case .anonTLS(let machine): return machine.isInTLSHandshake ? "the TLS handshake" : "its security types inside TLS"
        }
    }

    /// What a hang-up while credentials are checked most likely means.
    static let closedDuringAuthentication = "during authentication (the server may have rejected the credentials without a reason)"

    /// Why the connection may have closed here, for the message when the server hangs up.
    var closedContext: String {
        let authentication = Self.closedDuringAuthentication
        switch self {
        case .vncAuth, .plain: return authentication
        case .rsaAES(let machine):
            return machine.isExchangingKeys ? "during the RSA-AES key exchange (TigerVNC before 1.13 lists RA2 but cannot do it)" : authentication
        case .dhLogin(let machine): return machine.hasParameters ? authentication : "during the handshake"
        case .veNCrypt, .tight, .anonTLS: return "during the handshake"
        }
    }
}

/// What a sub-machine's step asks of the connection.
enum SecurityStep: Sendable {
    /// The step consumed input or produced output; run the next one.
    case progressed
    /// Blocked on something other than input: credentials, the TLS handshake or a key check.
    case waiting
    /// Continue with another sub-machine (VeNCrypt hands over to its subtype, Tight to VNC
    /// Authentication).
    case handOver(SecurityHandshake)
    /// Authentication is through; with `awaitsResult` the server sends a SecurityResult next,
    /// otherwise (None and Tight-without-auth before RFB 3.8) the client sends ClientInit.
    case authenticated(awaitsResult: Bool)
}

/// The connection's side of a security sub-machine: what the session has negotiated so far and
/// the credentials, which live only as long as the security phase.
struct SecurityContext: Sendable {
    let configuration: RFBConnection.Configuration
    var negotiation: RFBConnection.Negotiation
    var suppliedCredentials: VNCCredentials?
    var credentialsRequested = false

    /// The credentials, or nil after asking for them once (`needsUsername` overrides the
    /// method's own need: RSA-AES lets the server decide).
    mutating func credentials(needsUsername: Bool? = nil, _ out: inout ConnectionOutput) throws(RFBError) -> VNCCredentials? {
        if let suppliedCredentials { return suppliedCredentials }
        guard let method = negotiation.chosenMethod else { throw .protocolViolation("credentials needed before a security method was chosen") }
        if !credentialsRequested {
            credentialsRequested = true
            out.append(.requestCredentials(CredentialRequest(method: method, needsUsername: needsUsername ?? method.needsUsername)))
        }
        return nil
    }
}

/// VeNCrypt's Plain subtype: U32 user length, U32 password length, then both in UTF-8.
enum PlainAuthentication {
    static func message(_ credentials: VNCCredentials) -> [UInt8] {
        var w = ByteWriter()
        let user = Array((credentials.username ?? "").utf8), pass = Array(credentials.password.utf8)
        w.writeInteger(UInt32(user.count))
        w.writeInteger(UInt32(pass.count))
        w.writeBytes(user)
        w.writeBytes(pass)
        return w.bytes
    }
}
