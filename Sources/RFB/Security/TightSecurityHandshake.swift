import FarcastSupport

/// TightVNC's security type 16: a list of tunnels (only "none" can be taken), then a list of
/// authentication types inside (VNC Authentication or none). After it, ServerInit carries
/// Tight's interaction capabilities.
struct TightSecurityHandshake: Sendable {
    enum Step: Sendable { case tunnels, authenticationTypes }

    /// One Tight capability: a code, a 4-byte vendor and an 8-byte name ("STDVVNCAUTH_").
    struct Capability: Sendable, Equatable {
        var code: UInt32
        var vendor: String
        var name: String
    }

    private(set) var step: Step = .tunnels

    static func readCapabilities(_ r: inout ByteReader, count: Int, what: String) throws -> [Capability] {
        guard count <= 256 else { throw RFBError.protocolViolation("the server listed \(count) Tight \(what) capabilities") }
        return try (0..<count).map { _ in
            let code = try r.readInteger(as: UInt32.self)
            let vendor = String(decoding: try r.readBytes(4), as: UTF8.self)
            let name = String(decoding: try r.readBytes(8), as: UTF8.self)
            return Capability(code: code, vendor: vendor, name: name)
        }
    }

    mutating func step(_ reader: inout ByteReader, _ context: inout SecurityContext, _ out: inout ConnectionOutput) throws -> SecurityStep {
        var r = reader
        let count = Int(try r.readInteger(as: UInt32.self))
        switch step {
        case .tunnels:
            let tunnels = try Self.readCapabilities(&r, count: count, what: "tunnel")
            reader = r
            if !tunnels.isEmpty {
                guard tunnels.contains(where: { $0.code == 0 }) else {
                    throw RFBError.unsupported("the server's Tight security type requires a tunnel (\(tunnels.map { $0.vendor + $0.name }.joined(separator: ", "))), which farcast does not implement")
                }
                out.send([0, 0, 0, 0])
            }
            step = .authenticationTypes
            return .progressed
        case .authenticationTypes:
            let types = try Self.readCapabilities(&r, count: count, what: "authentication")
            reader = r
            // With no authentication at all the server goes on as after None.
            let afterNone = SecurityStep.authenticated(awaitsResult: context.negotiation.minorVersion >= 8)
            guard !types.isEmpty else { return afterNone }
            let codes = types.map(\.code)
            if codes.contains(2) {
                out.send([0, 0, 0, 2])
                return .handOver(.vncAuth)
            }
            if codes.contains(1) {
                out.send([0, 0, 0, 1])
                return afterNone
            }
            throw RFBError.unsupported("the server's Tight security type offers only \(types.map { "\($0.vendor)\($0.name) (\($0.code))" }.joined(separator: ", ")) inside, which farcast does not implement")
        }
    }
}
