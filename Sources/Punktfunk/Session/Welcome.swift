import FarcastSupport

/// The host's answer to Hello: the resolved session parameters and the data-plane keys.
///
/// Decoded length-tolerantly: the fixed 53-byte head is required, every later field is read when
/// present and defaulted otherwise, and bytes past the last known field are ignored. Everything a
/// session configures comes from these resolved values, never from what the Hello asked for.
public struct Welcome: Equatable, Sendable {
    /// Bytes every Welcome must have (through `frames`).
    public static let minimumLength = 53

    public var wireVersion: UInt32
    /// The host's UDP port for the video data plane.
    public var udpPort: UInt16
    public var mode: StreamMode
    /// 0 = GF(2⁸), 1 = GF(2¹⁶) (punktfunk/1 hosts send 1).
    public var fecScheme: UInt8
    public var fecPercent: UInt8
    public var maxDataPerBlock: UInt16
    public var shardPayload: UInt16
    public var encrypt: Bool
    /// AES-128-GCM key for the data plane.
    public var key: [UInt8]
    /// Nonce salt for the data plane.
    public var salt: [UInt8]
    /// 0 = unbounded.
    public var frames: UInt32
    public var compositor: UInt8 = 0
    public var gamepad: UInt8 = 0
    public var bitrateKbps: UInt32 = 0
    public var bitDepth: UInt8 = 8
    /// CICP colour primaries, transfer, matrix, full range (default BT.709 SDR, limited range).
    public var colour: [UInt8] = [1, 1, 1, 0]
    public var chromaFormatIDC: UInt8 = 1
    public var audioChannels: UInt8 = 2
    /// Negotiated codec (Hello codec bits; 2 = HEVC).
    public var codec: UInt8 = 2

    /// The negotiated codec's name for people: "HEVC", "PyroWave", or "unknown codec N".
    public var codecName: String {
        if let known = VideoCodec(welcomeCodec: codec) { return known.displayName }
        return codec == 8 ? "PyroWave" : "unknown codec \(codec)"
    }
    /// Host capability bits (0x01 accepts full gamepad-state input).
    public var hostCaps: UInt8 = 0
    /// The datagrams' AEAD (wire byte 0 AES-128-GCM, 1 ChaCha20-Poly1305).
    public var cipher: DatagramCipher = .aes128GCM
    /// The ChaCha20 key when `cipher` is ChaCha20-Poly1305.
    public var chachaKey: [UInt8] = []

    /// The datagram key material this Welcome gives: the cipher with its key, and the salt.
    public func datagramKey() throws(DataPlaneError) -> DatagramKey {
        try DatagramKey(cipher: cipher, key: cipher == .chaCha20Poly1305 ? chachaKey : key, salt: salt)
    }

    public init(wireVersion: UInt32 = Hello.wireVersion, udpPort: UInt16, mode: StreamMode, fecScheme: UInt8 = 1,
                fecPercent: UInt8, maxDataPerBlock: UInt16 = 4096, shardPayload: UInt16 = 1408, encrypt: Bool = true,
                key: [UInt8], salt: [UInt8], frames: UInt32 = 0) {
        self.wireVersion = wireVersion
        self.udpPort = udpPort
        self.mode = mode
        self.fecScheme = fecScheme
        self.fecPercent = fecPercent
        self.maxDataPerBlock = maxDataPerBlock
        self.shardPayload = shardPayload
        self.encrypt = encrypt
        self.key = key
        self.salt = salt
        self.frames = frames
    }

    /// Decodes a Welcome payload. Throws for a wrong magic, a short head or impossible values.
    public static func decode(_ bytes: [UInt8]) throws(PunktfunkSessionError) -> Welcome {
        guard bytes.count >= 4, Array(bytes[0..<4]) == Hello.magic else {
            throw .malformed("Welcome does not start with PKF1")
        }
        guard bytes.count >= 8 else { throw .malformed("Welcome is \(bytes.count) bytes, shorter than its 8-byte version head") }
        var r = ByteReader(bytes, offset: 4)
        do {
            let version: UInt32 = try r.readInteger(endianness: .little)
            // A host on another wire version may use another layout: say so before anything else.
            guard version == Hello.wireVersion else { throw PunktfunkSessionError.wireVersionMismatch(ours: Hello.wireVersion, theirs: version) }
            guard bytes.count >= minimumLength else {
                throw PunktfunkSessionError.malformed("Welcome is \(bytes.count) bytes, shorter than the \(minimumLength)-byte minimum")
            }
            let port: UInt16 = try r.readInteger(endianness: .little)
            let mode = StreamMode(width: try r.readInteger(endianness: .little), height: try r.readInteger(endianness: .little),
                                  refreshHz: try r.readInteger(endianness: .little))
            var w = Welcome(wireVersion: version, udpPort: port, mode: mode, fecScheme: try r.readUInt8(),
                            fecPercent: try r.readUInt8(), maxDataPerBlock: try r.readInteger(endianness: .little),
                            shardPayload: try r.readInteger(endianness: .little), encrypt: try r.readUInt8() != 0,
                            key: try r.readBytes(16), salt: try r.readBytes(4), frames: try r.readInteger(endianness: .little))
            // Optional tail, in wire order; stop at the first field that is not all there.
            if r.remaining >= 1 { w.compositor = try r.readUInt8() } else { return try w.validated() }
            if r.remaining >= 1 { w.gamepad = try r.readUInt8() } else { return try w.validated() }
            if r.remaining >= 4 { w.bitrateKbps = try r.readInteger(endianness: .little) } else { return try w.validated() }
            if r.remaining >= 1 { w.bitDepth = try r.readUInt8() } else { return try w.validated() }
            if r.remaining >= 4 { w.colour = try r.readBytes(4) } else { return try w.validated() }
            if r.remaining >= 1 { w.chromaFormatIDC = try r.readUInt8() } else { return try w.validated() }
            if r.remaining >= 1 { w.audioChannels = try r.readUInt8() } else { return try w.validated() }
            if r.remaining >= 1 { w.codec = try r.readUInt8() } else { return try w.validated() }
            if r.remaining >= 1 { w.hostCaps = try r.readUInt8() } else { return try w.validated() }
            if r.remaining >= 1 {
                let byte = try r.readUInt8()
                guard let cipher = DatagramCipher(rawValue: byte) else { throw PunktfunkSessionError.malformed("Welcome names cipher \(byte), which this client does not know") }
                w.cipher = cipher
            } else { return try w.validated() }
            if r.remaining >= 32 { w.chachaKey = try r.readBytes(32) }
            return try w.validated()
        } catch let error as PunktfunkSessionError {
            throw error
        } catch {
            throw .malformed("Welcome: \(error)")
        }
    }

    /// Refuses values the data plane cannot work with, so a broken host fails here with a reason.
    func validated() throws(PunktfunkSessionError) -> Welcome {
        guard udpPort != 0 else { throw .malformed("Welcome names UDP port 0") }
        guard fecScheme == 1 else { throw .malformed("Welcome asks for FEC scheme \(fecScheme); punktfunk/1 uses 1 (GF(2^16))") }
        guard shardPayload >= 64, shardPayload <= 9000, shardPayload % 2 == 0 else {
            throw .malformed("Welcome shard payload \(shardPayload) is not an even size between 64 and 9000")
        }
        guard maxDataPerBlock >= 1, maxDataPerBlock <= 32768 else {
            throw .malformed("Welcome max data shards per block \(maxDataPerBlock) is outside 1...32768")
        }
        guard fecPercent <= 200 else { throw .malformed("Welcome FEC percent \(fecPercent) is above 200") }
        guard encrypt else { throw .malformed("Welcome turns data-plane encryption off, which this client refuses") }
        guard cipher == .aes128GCM || chachaKey.count == 32 else {
            throw .malformed("Welcome names \(cipher) without its key")
        }
        guard mode.width > 0, mode.height > 0, mode.refreshHz > 0 else { throw .malformed("Welcome mode \(mode) is empty") }
        return self
    }

    /// Encodes the Welcome (the stand-in host and tests use this layout; written through `cipher`).
    public func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: 101)
        w.writeBytes(Hello.magic)
        w.writeInteger(wireVersion, endianness: .little)
        w.writeInteger(udpPort, endianness: .little)
        w.writeInteger(mode.width, endianness: .little)
        w.writeInteger(mode.height, endianness: .little)
        w.writeInteger(mode.refreshHz, endianness: .little)
        w.writeUInt8(fecScheme)
        w.writeUInt8(fecPercent)
        w.writeInteger(maxDataPerBlock, endianness: .little)
        w.writeInteger(shardPayload, endianness: .little)
        w.writeUInt8(encrypt ? 1 : 0)
        w.writeBytes(key)
        w.writeBytes(salt)
        w.writeInteger(frames, endianness: .little)
        w.writeUInt8(compositor)
        w.writeUInt8(gamepad)
        w.writeInteger(bitrateKbps, endianness: .little)
        w.writeUInt8(bitDepth)
        w.writeBytes(colour)
        w.writeUInt8(chromaFormatIDC)
        w.writeUInt8(audioChannels)
        w.writeUInt8(codec)
        w.writeUInt8(hostCaps)
        if cipher != .aes128GCM {
            w.writeUInt8(cipher.rawValue)
            w.writeBytes(chachaKey)
        }
        return w.bytes
    }
}
