import FarcastSupport

/// The older TLS security type (18), from vino and offered by x11vnc -ssl as "ANONTLS": right
/// after the client chooses it, an anonymous TLS handshake; inside TLS the server lists its
/// security types again (a count and the types, as at the top level) and the client chooses
/// the inner one, which runs as usual: None, or VNC Authentication.
struct AnonTLSHandshake: Sendable, Equatable {
    enum Step: Sendable, Equatable {
        /// The type was just chosen: TLS starts before any byte more.
        case start
        /// The TLS handshake runs on the transport; `tlsEstablished()` continues.
        case tls
        /// TLS is up: the inner list of security types comes next.
        case innerTypes
    }

    private(set) var step: Step = .start

    var isInTLSHandshake: Bool { step == .tls }

    /// The inner types this client carries out: VNC Authentication and None, the ones vino and
    /// x11vnc list inside TLS.
    static let innerTypes: [SecurityType] = [.vncAuth, .noAuthentication]

    mutating func step(_ reader: inout ByteReader, _ context: inout SecurityContext, _ out: inout ConnectionOutput) throws -> SecurityStep {
        switch step {
        case .start:
            // The TLS client speaks first; nothing may be buffered beyond the choice.
            guard reader.remaining == 0 else {
                throw RFBError.protocolViolation("\(reader.remaining) unexpected byte(s) before the TLS handshake")
            }
            step = .tls
            out.append(.startTLS)
            return .waiting
        case .tls:
            return .waiting
        case .innerTypes:
            var r = reader
            let count = Int(try r.readUInt8())
            if count == 0 {
                let reason = try RFBConnection.readReason(&r) ?? "the server's failure message was malformed"
                reader = r
                throw RFBError.serverRefused(reason: reason)
            }
            let types = try r.readBytes(count).map(SecurityType.init)
            reader = r
            // The user's order among the inner types, then VNC Authentication before None.
            let preferred = context.configuration.securityPreference.compactMap(\.topLevelType).filter(Self.innerTypes.contains) + Self.innerTypes
            guard let chosen = preferred.first(where: types.contains) else {
                throw RFBError.noCommonSecurityType(offered: types.map(\.description),
                                                    accepted: ["VncAuth", "None"], hint: "inside the TLS type (18) the server offers no type this client carries out")
            }
            out.send([chosen.rawValue])
            return try SecurityHandshake.enter(type: chosen, context)
        }
    }

    /// TLS is up: the inner type list is next. nil when no TLS was asked for.
    func tlsEstablished() -> SecurityStep? {
        guard step == .tls else { return nil }
        var next = self
        next.step = .innerTypes
        return .handOver(.anonTLS(next))
    }
}
