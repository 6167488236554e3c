import FarcastSupport

/// The RSA-AES security types (RA2, RA2ne, RA2_256, RA2ne_256) as a sub-machine: the server's
/// key (checked by the caller, trust on first use), the client's key and random, the server's
/// random, both key hashes, the subtype, and the credentials. From the moment the session keys
/// are agreed the connection's record-layer stage frames everything both ways; the ne types
/// return to plain text after the credentials.
struct RSAAESHandshake: Sendable {
    /// Both keys and the client's random: everything the exchange needs once the client has
    /// answered the server's key.
    struct Keys: Sendable {
        var serverKey: RSAAES.PublicKey
        var clientKey: RSAAES.ClientKey
        var clientRandom: [UInt8]
    }

    enum Step: Sendable {
        case serverKey
        /// The caller is checking the server's key; `serverKeyVerified` continues.
        case verifyingKey(RSAAES.PublicKey)
        case serverRandom(Keys)
        case serverHash(Keys)
        case subtype
        case credentials(needsUsername: Bool)
    }

    let variant: RSAAES.Variant
    private(set) var step: Step = .serverKey

    init(variant: RSAAES.Variant) {
        self.variant = variant
    }

    /// True until the keys are confirmed (closing here usually means the server cannot do RA2).
    var isExchangingKeys: Bool {
        switch step {
        case .serverKey, .verifyingKey, .serverRandom, .serverHash: return true
        case .subtype, .credentials: return false
        }
    }

    mutating func step(_ reader: inout ByteReader, _ context: inout SecurityContext, _ out: inout ConnectionOutput) throws -> SecurityStep {
        switch step {
        case .serverKey:
            var r = reader
            let key = try RSAAES.PublicKey.read(&r)
            reader = r
            step = .verifyingKey(key)
            out.append(.verifyServerKey(ServerKeyCheck(method: context.negotiation.chosenMethod ?? .ra2, blob: key.blob)))
            return .waiting
        case .verifyingKey:
            return .waiting
        case .serverRandom(let keys):
            var r = reader
            let length = Int(try r.readInteger(as: UInt16.self))
            guard length == keys.clientKey.byteLength else {
                throw RFBError.protocolViolation("the server's RSA-AES random is \(length) bytes; our key is \(keys.clientKey.byteLength)")
            }
            let encrypted = try r.readBytes(length)
            reader = r
            let serverRandom = try keys.clientKey.decrypt(encrypted)
            guard serverRandom.count == variant.randomLength else {
                throw RFBError.protocolViolation("the server's RSA-AES random is \(serverRandom.count) bytes, not \(variant.randomLength)")
            }
            var layer = RA2RecordLayer(clientToServerKey: variant.sessionKey(serverRandom, keys.clientRandom),
                                       serverToClientKey: variant.sessionKey(keys.clientRandom, serverRandom))
            // The ne types go plain after the server's hash and subtype frames.
            layer.framesBeforePlain = variant.encryptsSession ? nil : 2
            out.beginRecordLayer(layer)
            out.send(variant.hash(keys.clientKey.blob, keys.serverKey.blob))
            step = .serverHash(keys)
            return .progressed
        case .serverHash(let keys):
            let received = try reader.readBytes(variant.hashLength)
            guard received == variant.hash(keys.serverKey.blob, keys.clientKey.blob) else {
                throw RFBError.authenticationFailed(reason: "the server's RSA-AES key confirmation does not match what was exchanged (a man in the middle?)")
            }
            step = .subtype
            return .progressed
        case .subtype:
            let subtype = try reader.readUInt8()
            let needsUsername: Bool
            switch subtype {
            case 1: needsUsername = true
            case 2: needsUsername = false
            default: throw RFBError.protocolViolation("unknown RSA-AES subtype \(subtype)")
            }
            step = .credentials(needsUsername: needsUsername)
            _ = try context.credentials(needsUsername: needsUsername, &out)
            return .progressed
        case .credentials(let needsUsername):
            guard let credentials = try context.credentials(needsUsername: needsUsername, &out) else { return .waiting }
            out.send(try RSAAES.credentials(username: needsUsername ? credentials.username : nil, password: credentials.password))
            if !variant.encryptsSession { out.endOutputFraming() }
            return .authenticated(awaitsResult: true)
        }
    }

    /// The server's key is trusted: send the client's key and its random, encrypted to the
    /// server's key. Returns nil unless a key check was pending.
    mutating func serverKeyVerified(_ configuration: RFBConnection.Configuration, _ out: inout ConnectionOutput) throws -> SecurityStep? {
        guard case .verifyingKey(let serverKey) = step else { return nil }
        let clientKey: RSAAES.ClientKey
        do {
            clientKey = try configuration.rsaClientKey ?? RSAAES.ClientKey.generate()
        } catch {
            throw RFBError.authenticationFailed(reason: "could not make an RSA key: \(error)")
        }
        let random = configuration.randomBytes(variant.randomLength)
        var w = ByteWriter()
        w.writeBytes(clientKey.blob)
        w.writeInteger(UInt16(serverKey.byteLength))
        w.writeBytes(serverKey.encrypt(random, random: configuration.randomBytes))
        out.send(w.bytes)
        step = .serverRandom(Keys(serverKey: serverKey, clientKey: clientKey, clientRandom: random))
        return .progressed
    }
}
