/// WireGuard's four messages, as laid out on the wire: a little-endian 32-bit type (1–4, so
/// the three "reserved" bytes are zero), then fixed fields. Handshake messages have exact
/// lengths; a transport message is a 16-byte header and at least a 16-byte tag.
public enum MessageType: UInt32, Sendable {
    case initiation = 1
    case response = 2
    case cookieReply = 3
    case transport = 4
}

/// Handshake initiation (148 bytes). `mac1`/`mac2` are zero until `MessageMACs` stamps them.
public struct HandshakeInitiation: Equatable, Sendable {
    public static let length = 148
    public var senderIndex: UInt32
    public var ephemeral: [UInt8]          // 32
    public var encryptedStatic: [UInt8]    // 32 + 16
    public var encryptedTimestamp: [UInt8] // 12 + 16
    public var mac1 = [UInt8](repeating: 0, count: 16)
    public var mac2 = [UInt8](repeating: 0, count: 16)

    public var bytes: [UInt8] {
        var out = wireWord(MessageType.initiation.rawValue) + wireWord(senderIndex)
        out += ephemeral + encryptedStatic + encryptedTimestamp + mac1 + mac2
        return out
    }

    init(senderIndex: UInt32, ephemeral: [UInt8], encryptedStatic: [UInt8], encryptedTimestamp: [UInt8]) {
        self.senderIndex = senderIndex
        self.ephemeral = ephemeral
        self.encryptedStatic = encryptedStatic
        self.encryptedTimestamp = encryptedTimestamp
    }

    init(parsing b: [UInt8]) {
        senderIndex = readWord(b, 4)
        ephemeral = Array(b[8..<40])
        encryptedStatic = Array(b[40..<88])
        encryptedTimestamp = Array(b[88..<116])
        mac1 = Array(b[116..<132])
        mac2 = Array(b[132..<148])
    }
}

/// Handshake response (92 bytes).
public struct HandshakeResponse: Equatable, Sendable {
    public static let length = 92
    public var senderIndex: UInt32
    public var receiverIndex: UInt32
    public var ephemeral: [UInt8]          // 32
    public var encryptedNothing: [UInt8]   // 0 + 16
    public var mac1 = [UInt8](repeating: 0, count: 16)
    public var mac2 = [UInt8](repeating: 0, count: 16)

    public var bytes: [UInt8] {
        wireWord(MessageType.response.rawValue) + wireWord(senderIndex) + wireWord(receiverIndex)
            + ephemeral + encryptedNothing + mac1 + mac2
    }

    init(senderIndex: UInt32, receiverIndex: UInt32, ephemeral: [UInt8], encryptedNothing: [UInt8]) {
        self.senderIndex = senderIndex
        self.receiverIndex = receiverIndex
        self.ephemeral = ephemeral
        self.encryptedNothing = encryptedNothing
    }

    init(parsing b: [UInt8]) {
        senderIndex = readWord(b, 4)
        receiverIndex = readWord(b, 8)
        ephemeral = Array(b[12..<44])
        encryptedNothing = Array(b[44..<60])
        mac1 = Array(b[60..<76])
        mac2 = Array(b[76..<92])
    }
}

/// Cookie reply (64 bytes): sent instead of a response when the responder is under load.
public struct CookieReply: Equatable, Sendable {
    public static let length = 64
    public var receiverIndex: UInt32
    public var nonce: [UInt8]              // 24
    public var encryptedCookie: [UInt8]    // 16 + 16

    public var bytes: [UInt8] {
        wireWord(MessageType.cookieReply.rawValue) + wireWord(receiverIndex) + nonce + encryptedCookie
    }

    init(receiverIndex: UInt32, nonce: [UInt8], encryptedCookie: [UInt8]) {
        self.receiverIndex = receiverIndex
        self.nonce = nonce
        self.encryptedCookie = encryptedCookie
    }

    init(parsing b: [UInt8]) {
        receiverIndex = readWord(b, 4)
        nonce = Array(b[8..<32])
        encryptedCookie = Array(b[32..<64])
    }
}

/// One datagram, classified. Parsing checks the type and length only; what the fields mean is
/// checked by the handshake and the session that own them.
public enum Message: Equatable, Sendable {
    case initiation(HandshakeInitiation)
    case response(HandshakeResponse)
    case cookieReply(CookieReply)
    /// A transport message: the receiver's session index, the counter, and the sealed packet
    /// (ciphertext and tag).
    case transport(receiverIndex: UInt32, counter: UInt64, sealed: ArraySlice<UInt8>)

    /// The smallest transport message: the header and the tag of an empty (keepalive) packet.
    public static let minimumTransportLength = 32
    public static let transportHeaderLength = 16

    public init(parsing datagram: [UInt8]) throws(WireGuardError) {
        guard datagram.count >= 4 else { throw .malformedMessage("\(datagram.count) bytes, shorter than a message type") }
        let rawType = readWord(datagram, 0)
        guard let type = MessageType(rawValue: rawType) else {
            throw .malformedMessage("unknown message type \(rawType & 0xFF) (reserved bytes \(rawType >> 8))")
        }
        func expect(_ length: Int) throws(WireGuardError) {
            guard datagram.count == length else {
                throw .malformedMessage("a \(type) message is \(length) bytes, this one \(datagram.count)")
            }
        }
        switch type {
        case .initiation:
            try expect(HandshakeInitiation.length)
            self = .initiation(HandshakeInitiation(parsing: datagram))
        case .response:
            try expect(HandshakeResponse.length)
            self = .response(HandshakeResponse(parsing: datagram))
        case .cookieReply:
            try expect(CookieReply.length)
            self = .cookieReply(CookieReply(parsing: datagram))
        case .transport:
            guard datagram.count >= Self.minimumTransportLength else {
                throw .malformedMessage("a transport message is at least \(Self.minimumTransportLength) bytes, this one \(datagram.count)")
            }
            let counter = UInt64(readWord(datagram, 8)) | UInt64(readWord(datagram, 12)) << 32
            self = .transport(receiverIndex: readWord(datagram, 4), counter: counter, sealed: datagram[Self.transportHeaderLength...])
        }
    }
}

func wireWord(_ value: UInt32) -> [UInt8] {
    [UInt8(truncatingIfNeeded: value), UInt8(truncatingIfNeeded: value >> 8),
     UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 24)]
}

func readWord(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
    UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16 | UInt32(bytes[offset + 3]) << 24
}
