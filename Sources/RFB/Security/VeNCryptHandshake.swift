import FarcastSupport

/// VeNCrypt (type 19): agree version 0.2, choose a subtype from the server's list, and for the
/// TLS subtypes start TLS before the inner authentication. Subtypes below 256 are the plain
/// top-level types and hand over to their own sub-machines at once.
struct VeNCryptHandshake: Sendable {
    enum Step: Sendable, Equatable {
        case version
        case versionAck
        case subtypes
        /// The TLS subtype chosen; the server acknowledges it with one byte (1 = go ahead).
        case subtypeAck(SecurityMethod)
        /// The TLS handshake runs on the transport; `tlsEstablished()` continues.
        case tls(SecurityMethod)
    }

    private(set) var step: Step = .version

    var isInTLSHandshake: Bool {
        if case .tls = step { return true }
        return false
    }

    mutating func step(_ reader: inout ByteReader, _ context: inout SecurityContext, _ out: inout ConnectionOutput) throws -> SecurityStep {
        switch step {
        case .version:
            var r = reader
            let major = try r.readUInt8(), minor = try r.readUInt8()
            reader = r
            guard major > 0 || minor >= 2 else {
                throw RFBError.protocolViolation("the server speaks VeNCrypt \(major).\(minor); Farcast needs 0.2")
            }
            out.send([0, 2])
            step = .versionAck
            return .progressed
        case .versionAck:
            let status = try reader.readUInt8()
            guard status == 0 else { throw RFBError.protocolViolation("the server refused VeNCrypt version 0.2 (status \(status))") }
            step = .subtypes
            return .progressed
        case .subtypes:
            return try chooseSubtype(&reader, &context, &out)
        case .subtypeAck(let method):
            let status = try reader.readUInt8()
            guard status == 1 else { throw RFBError.authenticationFailed(reason: "the server refused VeNCrypt subtype \(method)") }
            // The TLS client speaks first; nothing may be buffered beyond this point.
            guard reader.remaining == 0 else {
                throw RFBError.protocolViolation("\(reader.remaining) unexpected byte(s) before the TLS handshake")
            }
            step = .tls(method)
            out.append(.startTLS)
            return .waiting
        case .tls:
            return .waiting
        }
    }

    /// TLS is up: continue with the authentication inside it. nil when no TLS was asked for.
    func tlsEstablished() -> SecurityStep? {
        guard case .tls(let method) = step else { return nil }
        switch method {
        case .x509None, .tlsNone: return .authenticated(awaitsResult: true)
        case .x509Vnc, .tlsVnc: return .handOver(.vncAuth)
        default: return .handOver(.plain)
        }
    }

    private mutating func chooseSubtype(_ reader: inout ByteReader, _ context: inout SecurityContext, _ out: inout ConnectionOutput) throws -> SecurityStep {
        var r = reader
        let count = Int(try r.readUInt8())
        var subtypes: [UInt32] = []
        for _ in 0..<count { subtypes.append(try r.readInteger(as: UInt32.self)) }
        reader = r
        context.negotiation.offeredVeNCryptSubtypes = subtypes
        guard count > 0 else { throw RFBError.serverRefused(reason: "the server offered no VeNCrypt subtypes") }
        let configuration = context.configuration
        for method in configuration.securityPreference where SecurityMethod.implemented.contains(method) {
            guard let sub = method.veNCryptSubtype, subtypes.contains(sub) else { continue }
            context.negotiation.chosenMethod = method
            var w = ByteWriter()
            w.writeInteger(sub)
            out.send(w.bytes)
            if method.usesTLS {
                // Only the TLS subtypes are acknowledged before the handshake; every other
                // subtype starts its own exchange at once.
                step = .subtypeAck(method)
                if method.needsPassword { _ = try context.credentials(&out) }
                return .progressed
            }
            if let type = method.topLevelType { return try SecurityHandshake.enter(type: type, context) }
            return .handOver(.plain)
        }
        let names = subtypes.map(veNCryptSubtypeName)
        let offered = context.negotiation.offeredSecurityTypes
        let fallback = SecurityChoice.usableWithoutVeNCrypt(offered, configuration)
        if !fallback.isEmpty {
            throw RFBError.veNCryptUnusable(subtypes: names, fallback: fallback.map(\.description))
        }
        let anonymous = subtypes.compactMap { sub in SecurityMethod.allCases.first { $0.veNCryptSubtype == sub && $0.x509Alternative != nil } }
        var hint = SecurityChoice.hint(offered, subtypes: subtypes, configuration)
        if hint == nil, let anon = anonymous.first, let alternative = anon.x509Alternative, !SecurityMethod.implemented.contains(anon) {
            hint = "\(anon) needs anonymous TLS cipher suites, which the TLS library here (BoringSSL) does not have; configure the server with a certificate for \(alternative) (TigerVNC: -SecurityTypes \(alternative) -X509Cert … -X509Key …) or allow VncAuth"
        }
        throw RFBError.noCommonSecurityType(offered: names, accepted: configuration.securityPreference.map(\.description), hint: hint)
    }
}
