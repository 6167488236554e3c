import BigInt
import Crypto
import CryptoExtras
import FarcastSupport
import Foundation

/// TigerVNC's RSA-AES security types: RA2 (5), RA2ne (6), RA2_256 (129), RA2ne_256 (130).
///
/// Both sides send an RSA public key (U32 bits, then modulus and exponent each padded to the key
/// length) and a random encrypted to the other's key (RSAES-PKCS1-v1_5). The session keys are
/// H(serverRandom‖clientRandom) for client→server and H(clientRandom‖serverRandom) for
/// server→client (SHA-1 cut to 16 bytes, or SHA-256 for the _256 types); each side then proves
/// it saw the same key messages with H(ownBlob‖peerBlob). From there messages travel in EAX
/// frames until the credentials are through; the "ne" types drop back to plain text for the
/// SecurityResult and everything after, the others stay encrypted for the whole session.
enum RSAAES {
    struct Variant: Sendable, Equatable {
        var securityType: SecurityType
        /// AES-256 with SHA-256 and 32-byte randoms, else AES-128 with SHA-1 and 16 bytes.
        var wide: Bool
        /// The whole session stays encrypted (RA2, RA2_256), not just the login (the ne types).
        var encryptsSession: Bool

        var randomLength: Int { wide ? 32 : 16 }
        var hashLength: Int { wide ? 32 : 20 }

        func hash(_ parts: [UInt8]...) -> [UInt8] {
            let joined = parts.flatMap { $0 }
            return wide ? Array(SHA256.hash(data: joined)) : Array(Insecure.SHA1.hash(data: joined))
        }

        func sessionKey(_ first: [UInt8], _ second: [UInt8]) -> [UInt8] {
            let digest = hash(first, second)
            return wide ? digest : Array(digest.prefix(16))
        }

        static func forType(_ type: SecurityType) -> Variant? {
            switch type {
            case .ra2: return Variant(securityType: type, wide: false, encryptsSession: true)
            case .ra2ne: return Variant(securityType: type, wide: false, encryptsSession: false)
            case .ra2_256: return Variant(securityType: type, wide: true, encryptsSession: true)
            case .ra2ne_256: return Variant(securityType: type, wide: true, encryptsSession: false)
            default: return nil
            }
        }
    }

    static let minimumKeyBits = 1024
    static let maximumKeyBits = 8192

    /// A public key as it travels: the bits, the modulus and exponent, and the exact blob.
    struct PublicKey: Sendable, Equatable {
        var bits: Int
        var modulus: BigUInt
        var exponent: BigUInt
        var blob: [UInt8]
        var byteLength: Int { (bits + 7) / 8 }

        /// Reads a key message; returns nil when more bytes are needed.
        static func read(_ reader: inout ByteReader) throws -> PublicKey {
            var r = reader
            let bits = Int(try r.readInteger(as: UInt32.self))
            guard (minimumKeyBits...maximumKeyBits).contains(bits) else {
                throw RFBError.protocolViolation("the server's RSA key has \(bits) bits (1024–8192 accepted)")
            }
            let length = (bits + 7) / 8
            let n = try r.readBytes(length), e = try r.readBytes(length)
            reader = r
            let modulus = BigUInt(Data(n)), exponent = BigUInt(Data(e))
            guard modulus.bitWidth > bits - 8, exponent > 1, exponent < modulus else {
                throw RFBError.protocolViolation("the server's RSA key is invalid")
            }
            var blob = ByteWriter(capacity: 4 + 2 * length)
            blob.writeInteger(UInt32(bits))
            blob.writeBytes(n)
            blob.writeBytes(e)
            return PublicKey(bits: bits, modulus: modulus, exponent: exponent, blob: blob.bytes)
        }

        /// The blob for a key of `modulus` and `exponent` (big-endian bytes, any length).
        static func blob(modulus: [UInt8], exponent: [UInt8]) -> [UInt8] {
            let n = Array(modulus.drop { $0 == 0 })
            let length = n.count
            var w = ByteWriter(capacity: 4 + 2 * length)
            w.writeInteger(UInt32(length * 8))
            w.writeBytes(n)
            let e = Array(exponent.drop { $0 == 0 })
            w.writeZeros(length - e.count)
            w.writeBytes(e)
            return w.bytes
        }

        /// RSAES-PKCS1-v1_5: 00 02 PS 00 message, PS at least 8 non-zero random bytes.
        func encrypt(_ message: [UInt8], random: (Int) -> [UInt8]) -> [UInt8] {
            let k = byteLength
            precondition(message.count <= k - 11)
            var padding = random(k - 3 - message.count)
            for i in padding.indices where padding[i] == 0 {
                while padding[i] == 0 { padding[i] = random(1)[0] }
            }
            let block = [0, 2] + padding + [0] + message
            let c = BigUInt(Data(block)).power(exponent, modulus: modulus)
            let bytes = Array(c.serialize())
            return [UInt8](repeating: 0, count: k - bytes.count) + bytes
        }
    }

    /// The client's key pair: made fresh per connection unless one is supplied (tests).
    struct ClientKey: @unchecked Sendable {
        // @unchecked: the swift-crypto key is immutable after creation.
        let privateKey: _RSA.Encryption.PrivateKey
        let blob: [UInt8]

        init(_ privateKey: _RSA.Encryption.PrivateKey) throws {
            self.privateKey = privateKey
            let primitives = try privateKey.publicKey.getKeyPrimitives()
            blob = PublicKey.blob(modulus: Array(primitives.modulus), exponent: Array(primitives.publicExponent))
        }

        static func generate() throws -> ClientKey {
            try ClientKey(_RSA.Encryption.PrivateKey(keySize: .bits2048))
        }

        var byteLength: Int { (blob.count - 4) / 2 }

        func decrypt(_ ciphertext: [UInt8]) throws(RFBError) -> [UInt8] {
            do {
                return Array(try privateKey.decrypt(ciphertext, padding: ._WEAK_AND_INSECURE_PKCS_V1_5))
            } catch {
                throw .authenticationFailed(reason: "the server's RSA-AES random did not decrypt (\(error))")
            }
        }
    }

    /// The credentials message: U8 length, user name, U8 length, password (UTF-8).
    static func credentials(username: String?, password: String) throws(RFBError) -> [UInt8] {
        let user = Array((username ?? "").utf8), pass = Array(password.utf8)
        guard user.count <= 255, pass.count <= 255 else {
            throw .unsupported("RSA-AES carries user names and passwords of at most 255 bytes (UTF-8)")
        }
        return [UInt8(user.count)] + user + [UInt8(pass.count)] + pass
    }
}

/// The EAX record layer of the RSA-AES types: each frame is a U16 length, that many bytes of
/// ciphertext and a 16-byte tag. The associated data is the length field; the nonce is a
/// per-direction frame counter, a 16-byte little-endian integer from 0.
struct RA2RecordLayer: Sendable {
    /// Largest plaintext per frame we send (TigerVNC's choice); frames up to 65535 are read.
    static let maximumFrame = 8192

    private let sender: AESEAX
    private let receiver: AESEAX
    private var sendCounter = [UInt8](repeating: 0, count: 16)
    private var receiveCounter = [UInt8](repeating: 0, count: 16)
    /// Received bytes not yet a whole frame.
    private var pending: [UInt8] = []
    /// Frames still to decrypt before the server switches to plain text (nil: never).
    var framesBeforePlain: Int?
    /// Output is sealed into frames (the handshake seals its own messages before this is set).
    var sealsOutput = false

    init(clientToServerKey: [UInt8], serverToClientKey: [UInt8]) {
        sender = AESEAX(key: clientToServerKey)
        receiver = AESEAX(key: serverToClientKey)
    }

    private static func increment(_ counter: inout [UInt8]) {
        for i in counter.indices {
            counter[i] &+= 1
            if counter[i] != 0 { break }
        }
    }

    /// Frames `plaintext` (split into frames of at most 8192 bytes).
    mutating func seal(_ plaintext: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(plaintext.count + (plaintext.count / Self.maximumFrame + 1) * 18)
        var start = 0
        repeat {
            let chunk = Array(plaintext[start..<min(start + Self.maximumFrame, plaintext.count)])
            let header: [UInt8] = [UInt8(chunk.count >> 8), UInt8(chunk.count & 0xFF)]
            let (ciphertext, tag) = sender.seal(chunk, nonce: sendCounter, header: header)
            Self.increment(&sendCounter)
            out += header + ciphertext + tag
            start += chunk.count
        } while start < plaintext.count
        return out
    }

    /// Takes bytes from the server; returns the plaintext of every complete frame, followed by
    /// plain bytes once `framesBeforePlain` frames have been read.
    mutating func open(_ bytes: some Collection<UInt8>) throws(RFBError) -> [UInt8] {
        pending.append(contentsOf: bytes)
        var out: [UInt8] = []
        var offset = 0
        while true {
            if framesBeforePlain == 0 {
                out += pending[offset...]
                offset = pending.count
                break
            }
            guard pending.count - offset >= 2 else { break }
            let length = Int(pending[offset]) << 8 | Int(pending[offset + 1])
            guard pending.count - offset >= 2 + length + AESEAX.tagSize else { break }
            let header = Array(pending[offset..<offset + 2])
            let ciphertext = Array(pending[offset + 2..<offset + 2 + length])
            let tag = Array(pending[offset + 2 + length..<offset + 2 + length + AESEAX.tagSize])
            guard let plaintext = receiver.open(ciphertext, nonce: receiveCounter, header: header, tag: tag) else {
                throw .protocolViolation("an RSA-AES frame failed its integrity check (corrupted or forged data)")
            }
            Self.increment(&receiveCounter)
            out += plaintext
            offset += 2 + length + AESEAX.tagSize
            if let remaining = framesBeforePlain { framesBeforePlain = remaining - 1 }
        }
        pending.removeFirst(offset)
        return out
    }

    /// True once the server's side has switched back to plain text.
    var receivesPlain: Bool { framesBeforePlain == 0 && pending.isEmpty }
}
