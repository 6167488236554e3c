import FarcastSupport

/// The security phase: the server's list of types (or, in RFB 3.3, its one choice), the chosen
/// method's sub-machine (`SecurityHandshake`, in `Security/`), then the SecurityResult and, when
/// it says no, the reason.
struct SecurityPhase: Sendable {
    enum Step: Sendable {
        /// RFB 3.7 and later: the server lists its types, the client picks one.
        case chooseType
        /// RFB 3.3: the server names the one type it uses.
        case serverChosenType
        case method(SecurityHandshake)
        case result
        /// The server refused (before authentication: the connection; after: the credentials)
        /// and sends its reason.
        case failureReason(refusedBeforeAuth: Bool)
    }

    var step: Step
    /// The user's credentials, once supplied; dropped with the phase.
    var credentials: VNCCredentials?
    var credentialsRequested = false

    var waitingFor: String {
        switch step {
        case .chooseType, .serverChosenType: return "its list of security types"
        case .method(let machine): return machine.waitingFor
        case .result: return "the result of authentication"
        case .failureReason: return "the reason for its refusal"
        }
    }

    var closedContext: String {
        switch step {
        case .method(let machine): return machine.closedContext
        case .result: return SecurityHandshake.closedDuringAuthentication
        case .chooseType, .serverChosenType, .failureReason: return "during the handshake"
        }
    }
}

extension RFBConnection {
    /// Runs one step of the security phase. Returns false when blocked on something other than
    /// input.
    mutating func securityStep(_ phase: SecurityPhase, _ reader: inout ByteReader, _ out: inout ConnectionOutput) throws -> Bool {
        var phase = phase
        var context = SecurityContext(configuration: configuration, negotiation: negotiation,
                                      suppliedCredentials: phase.credentials, credentialsRequested: phase.credentialsRequested)
        let outcome: SecurityStep
        switch phase.step {
        case .chooseType:
            outcome = try chooseSecurityType(&reader, &context, &out, phase: &phase)
        case .serverChosenType:
            outcome = try readServerChosenType(&reader, &context, phase: &phase)
        case .method(var machine):
            outcome = try machine.step(&reader, &context, &out)
            phase.step = .method(machine)
        case .result:
            let result = try reader.readInteger(as: UInt32.self)
            guard result == 0 else {
                guard negotiation.minorVersion >= 8 else {
                    throw RFBError.authenticationFailed(reason: "the server rejected the credentials (RFB 3.\(negotiation.minorVersion) servers give no reason)")
                }
                phase.step = .failureReason(refusedBeforeAuth: false)
                state = .security(phase)
                return true
            }
            sendClientInit(&out)
            return true
        case .failureReason(let beforeAuth):
            var r = reader
            let reason = try Self.readReason(&r) ?? "the server's failure message was malformed"
            reader = r
            throw beforeAuth ? RFBError.serverRefused(reason: reason) : RFBError.authenticationFailed(reason: reason)
        }
        negotiation = context.negotiation
        phase.credentialsRequested = context.credentialsRequested
        return apply(outcome, to: phase, &out)
    }

    /// Moves the security phase on as a sub-machine asked. Returns false when it waits.
    mutating func apply(_ outcome: SecurityStep, to phase: SecurityPhase, _ out: inout ConnectionOutput) -> Bool {
        var phase = phase
        switch outcome {
        case .progressed:
            state = .security(phase)
            return true
        case .waiting:
            state = .security(phase)
            return false
        case .handOver(let machine):
            phase.step = .method(machine)
            state = .security(phase)
            return true
        case .authenticated(awaitsResult: true):
            phase.step = .result
            state = .security(phase)
            return true
        case .authenticated(awaitsResult: false):
            sendClientInit(&out)
            return true
        }
    }

    /// A failure reason, as text a terminal can show: control characters (C0, DEL and C1; QEMU
    /// ends its reasons with a NUL, and an escape sequence could repaint the user's terminal)
    /// dropped, bytes that are not UTF-8 shown as U+FFFD, surrounding space trimmed. nil when
    /// the length is absurd (x11vnc's -unixpw failure sends text where the length belongs): the
    /// session is over either way, and waiting for gigabytes would hang it.
    static func readReason(_ r: inout ByteReader) throws -> String? {
        let length = Int(try r.readInteger(as: UInt32.self))
        guard length <= 1 << 16 else { return nil }
        var text = String.UnicodeScalarView()
        for scalar in String(decoding: try r.readBytes(length), as: UTF8.self).unicodeScalars
        where scalar.value >= 0x20 && !(0x7F...0x9F).contains(scalar.value) {
            text.append(scalar)
        }
        let trimmed = String(text).trimmingSpaces
        return trimmed.isEmpty ? "no reason given" : trimmed
    }

    private func chooseSecurityType(_ reader: inout ByteReader, _ context: inout SecurityContext, _ out: inout ConnectionOutput,
                                    phase: inout SecurityPhase) throws -> SecurityStep {
        var r = reader
        let count = Int(try r.readUInt8())
        if count == 0 {
            reader = r
            phase.step = .failureReason(refusedBeforeAuth: true)
            return .progressed
        }
        let types = try r.readBytes(count).map(SecurityType.init)
        reader = r
        context.negotiation.offeredSecurityTypes = types
        for method in configuration.securityPreference {
            if let type = method.topLevelType, types.contains(type) {
                context.negotiation.chosenMethod = method
                out.send([type.rawValue])
                return try SecurityHandshake.enter(type: type, context)
            }
            // VeNCrypt reveals its subtypes only once chosen, so it is entered for the first
            // preferred method that needs it; inside, plain types listed as subtypes are usable
            // too, and if nothing inside can be completed the client reconnects without it.
            if method.onlyInsideVeNCrypt, SecurityMethod.implemented.contains(method), types.contains(.veNCrypt), !configuration.avoidVeNCrypt {
                context.negotiation.chosenMethod = nil
                out.send([SecurityType.veNCrypt.rawValue])
                return .handOver(.veNCrypt(VeNCryptHandshake()))
            }
        }
        var hint = SecurityChoice.hint(types, configuration)
        if hint == nil, types.contains(.veNCrypt), !configuration.avoidVeNCrypt {
            // VeNCrypt's subtypes are listed only once it is chosen, so none can be named here.
            let inside = SecurityMethod.allCases.filter { $0.onlyInsideVeNCrypt && SecurityMethod.implemented.contains($0) }
            hint = "the server offers VeNCrypt, which lists its subtypes only once chosen: --security with one of \(inside.map(\.rawValue).joined(separator: ", ")) may work (`farcast vnc info` with the default --security shows which it offers)"
        }
        throw RFBError.noCommonSecurityType(offered: types.map(\.description),
                                            accepted: configuration.securityPreference.map(\.description), hint: hint)
    }

    private func readServerChosenType(_ reader: inout ByteReader, _ context: inout SecurityContext, phase: inout SecurityPhase) throws -> SecurityStep {
        var r = reader
        let type = try r.readInteger(as: UInt32.self)
        reader = r
        if type == 0 {
            phase.step = .failureReason(refusedBeforeAuth: true)
            return .progressed
        }
        // RFB 3.3: the server chose, as a 32-bit number; only None and VNC Authentication exist there.
        let chosen = type < 256 ? SecurityType(rawValue: UInt8(type)) : nil
        context.negotiation.offeredSecurityTypes = chosen.map { [$0] } ?? []
        let method: SecurityMethod? = chosen == .noAuthentication ? SecurityMethod.none : chosen == .vncAuth ? .vncAuth : nil
        guard let method, let chosen, configuration.securityPreference.contains(method) else {
            throw RFBError.noCommonSecurityType(offered: [chosen?.description ?? "type \(type)"],
                                                accepted: configuration.securityPreference.map(\.description), hint: nil)
        }
        context.negotiation.chosenMethod = method
        return try SecurityHandshake.enter(type: chosen, context)
    }
}

/// What the user could try instead when nothing the configuration accepts is offered.
enum SecurityChoice {
    /// The top-level types offered that this client could complete without VeNCrypt.
    static func usableWithoutVeNCrypt(_ types: [SecurityType], _ configuration: RFBConnection.Configuration) -> [SecurityMethod] {
        configuration.securityPreference.filter { method in
            guard let type = method.topLevelType else { return false }
            return types.contains(type) && SecurityMethod.implemented.contains(method)
        }
    }

    /// The `--security` values that would work against what the server offers, for the "no
    /// common security type" message.
    static func hint(_ types: [SecurityType], subtypes: [UInt32] = [], _ configuration: RFBConnection.Configuration) -> String? {
        let usable = SecurityMethod.allCases.filter { method in
            guard SecurityMethod.implemented.contains(method), !configuration.securityPreference.contains(method) else { return false }
            if let type = method.topLevelType, types.contains(type) { return true }
            if let sub = method.veNCryptSubtype, subtypes.contains(sub) { return true }
            return false
        }
        guard !usable.isEmpty else { return nil }
        var hint = "--security \(usable.map(\.rawValue).joined(separator: ",")) would work"
        if usable.contains(.plain) { hint += " (Plain sends the password unencrypted)" }
        if usable.contains(.msLogonII) { hint += " (MS-Logon II is weak)" }
        return hint
    }
}

private extension String {
    /// Without leading and trailing spaces (U+0020 only: the rest were dropped already).
    var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
