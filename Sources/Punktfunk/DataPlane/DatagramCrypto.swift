#if canImport(COpenSSL)
import COpenSSL
import COpenSSLLoader
#else
import Crypto
import Foundation
#endif

/// Which AEAD seals the session's datagrams (Welcome's `cipher`: 0 AES-128-GCM, 1 ChaCha20-Poly1305).
public enum DatagramCipher: UInt8, Sendable, CustomStringConvertible {
    case aes128GCM = 0
    case chaCha20Poly1305 = 1

    /// Key length the cipher needs.
    public var keyLength: Int { self == .aes128GCM ? 16 : 32 }

    public var description: String { self == .aes128GCM ? "AES-128-GCM" : "ChaCha20-Poly1305" }
}

/// Who sealed a datagram; the top bit of the nonce's first salt byte, so the two directions of a
/// session never share a nonce under one key.
public enum DatagramDirection: UInt8, Sendable {
    case hostToClient = 0
    case clientToHost = 1
}

/// The session's datagram key material from the Welcome: cipher, key and the 4-byte nonce salt.
/// Its description never shows the key.
public struct DatagramKey: Sendable, CustomStringConvertible {
    public let cipher: DatagramCipher
    public let key: [UInt8]
    public let salt: [UInt8]

    /// Throws `.badKeyLength` unless the key fits the cipher and the salt has 4 bytes.
    public init(cipher: DatagramCipher, key: [UInt8], salt: [UInt8]) throws(DataPlaneError) {
        guard key.count == cipher.keyLength else {
            throw .badKeyLength(cipher: cipher.description, expected: cipher.keyLength, actual: key.count)
        }
        guard salt.count == 4 else { throw .badKeyLength(cipher: "the nonce salt", expected: 4, actual: salt.count) }
        self.cipher = cipher
        self.key = key
        self.salt = salt
    }

    public var description: String { "DatagramKey(\(cipher), key redacted)" }
}

/// Seals or opens video datagrams of one direction in place:
/// `seq u64 BE (clear) ‖ AEAD(header ‖ shard) ‖ tag[16]`, nonce = salt with its top bit set to the
/// sender's direction ‖ seq BE, AAD = the 8 clear bytes.
///
/// One cipher context, keyed once and reused for every datagram: no allocation per packet on
/// Linux (OpenSSL's EVP). Not thread-safe: confine an instance to one thread or actor.
public final class DatagramCrypto {
    /// Clear sequence bytes in front of the ciphertext.
    public static let sequenceBytes = 8
    /// Authentication tag bytes at the end.
    public static let tagBytes = 16
    /// Sequence plus tag.
    public static let overhead = sequenceBytes + tagBytes

    public let cipher: DatagramCipher
    /// The direction whose datagrams this instance seals or opens.
    public let direction: DatagramDirection
    private var nonce: [UInt8]

    #if canImport(COpenSSL)
    private let context: OpaquePointer
    private let sealing: Bool
    #else
    private let key: SymmetricKey
    #endif

    /// - Parameters:
    ///   - direction: the sender of the datagrams (a client opens `.hostToClient`).
    ///   - sealing: true to seal, false to open.
    public init(key: DatagramKey, direction: DatagramDirection, sealing: Bool) throws(DataPlaneError) {
        cipher = key.cipher
        self.direction = direction
        nonce = [UInt8](repeating: 0, count: 12)
        nonce[0] = (key.salt[0] & 0x7F) | (direction.rawValue << 7)
        nonce[1] = key.salt[1]
        nonce[2] = key.salt[2]
        nonce[3] = key.salt[3]
        #if canImport(COpenSSL)
        self.sealing = sealing
        if let problem = farcast_openssl_load() { throw .libraryMissing(String(cString: problem)) }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw .badKeyLength(cipher: "OpenSSL cipher context", expected: 1, actual: 0) }
        context = ctx
        let evp = key.cipher == .aes128GCM ? EVP_aes_128_gcm() : EVP_chacha20_poly1305()
        let ok = key.key.withUnsafeBufferPointer { k in
            sealing ? EVP_EncryptInit_ex(ctx, evp, nil, k.baseAddress, nil) : EVP_DecryptInit_ex(ctx, evp, nil, k.baseAddress, nil)
        }
        guard ok == 1 else {
            EVP_CIPHER_CTX_free(ctx)
            throw .badKeyLength(cipher: key.cipher.description, expected: key.cipher.keyLength, actual: key.key.count)
        }
        #else
        self.key = SymmetricKey(data: key.key)
        #endif
    }

    deinit {
        #if canImport(COpenSSL)
        EVP_CIPHER_CTX_free(context)
        #endif
    }

    /// The clear sequence number of a sealed datagram, or nil when it is too short to be one.
    @inlinable
    public static func sequence(of datagram: UnsafeRawBufferPointer) -> UInt64? {
        guard datagram.count >= overhead else { return nil }
        return UInt64(bigEndian: datagram.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
    }

    /// Opens `datagram` in place. On success the plaintext (header ‖ shard) sits at
    /// `datagram[8 ..< 8 + returned length]`.
    /// Throws `.truncated` for a datagram shorter than 24 bytes and `.authenticationFailed` when
    /// the tag does not verify (the bytes are then garbage and must be dropped).
    public func open(_ datagram: UnsafeMutableRawBufferPointer) throws(DataPlaneError) -> Int {
        guard datagram.count >= Self.overhead, let base = datagram.baseAddress else {
            throw .truncated(what: "sealed datagram", needed: Self.overhead, available: datagram.count)
        }
        let sequence = UInt64(bigEndian: datagram.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        let length = datagram.count - Self.overhead
        setNonce(sequence)
        #if canImport(COpenSSL)
        precondition(!sealing, "this DatagramCrypto seals; make one with sealing: false to open")
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        var outLength: Int32 = 0
        let ok: Bool = nonce.withUnsafeBufferPointer { iv in
            guard EVP_DecryptInit_ex(context, nil, nil, nil, iv.baseAddress) == 1,
                  EVP_DecryptUpdate(context, nil, &outLength, bytes, Int32(Self.sequenceBytes)) == 1,
                  EVP_DecryptUpdate(context, bytes + Self.sequenceBytes, &outLength, bytes + Self.sequenceBytes, Int32(length)) == 1,
                  EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(Self.tagBytes), bytes + Self.sequenceBytes + length) == 1
            else { return false }
            var finalLength: Int32 = 0
            return EVP_DecryptFinal_ex(context, bytes + Self.sequenceBytes + Int(outLength), &finalLength) == 1
        }
        guard ok else { throw .authenticationFailed(sequence: sequence) }
        return length
        #else
        do {
            let raw = UnsafeRawBufferPointer(datagram)
            let aad = raw[0..<Self.sequenceBytes]
            let body = raw[Self.sequenceBytes..<(Self.sequenceBytes + length)]
            let tag = raw[(Self.sequenceBytes + length)...]
            let plain: Data
            switch cipher {
            case .aes128GCM:
                let box = try AES.GCM.SealedBox(nonce: AES.GCM.Nonce(data: nonce), ciphertext: body, tag: tag)
                plain = try AES.GCM.open(box, using: key, authenticating: aad)
            case .chaCha20Poly1305:
                let box = try ChaChaPoly.SealedBox(nonce: ChaChaPoly.Nonce(data: nonce), ciphertext: body, tag: tag)
                plain = try ChaChaPoly.open(box, using: key, authenticating: aad)
            }
            plain.copyBytes(to: UnsafeMutableRawBufferPointer(rebasing: datagram[Self.sequenceBytes...]), count: length)
            return length
        } catch {
            throw .authenticationFailed(sequence: sequence)
        }
        #endif
    }

    /// Seals in place: `datagram[8 ..< 8 + plaintextLength]` holds the plaintext, the first 8 bytes
    /// and the 16 after the plaintext are overwritten with the sequence and the tag.
    /// `datagram` must hold at least `plaintextLength + 24` bytes.
    public func seal(sequence: UInt64, plaintextLength: Int, in datagram: UnsafeMutableRawBufferPointer) {
        precondition(datagram.count >= plaintextLength + Self.overhead, "no room for the sequence and tag")
        let base = datagram.baseAddress!
        datagram.storeBytes(of: sequence.bigEndian, toByteOffset: 0, as: UInt64.self)
        setNonce(sequence)
        #if canImport(COpenSSL)
        precondition(sealing, "this DatagramCrypto opens; make one with sealing: true to seal")
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        var outLength: Int32 = 0
        let ok: Bool = nonce.withUnsafeBufferPointer { iv in
            guard EVP_EncryptInit_ex(context, nil, nil, nil, iv.baseAddress) == 1,
                  EVP_EncryptUpdate(context, nil, &outLength, bytes, Int32(Self.sequenceBytes)) == 1,
                  EVP_EncryptUpdate(context, bytes + Self.sequenceBytes, &outLength, bytes + Self.sequenceBytes, Int32(plaintextLength)) == 1
            else { return false }
            var finalLength: Int32 = 0
            guard EVP_EncryptFinal_ex(context, bytes + Self.sequenceBytes + Int(outLength), &finalLength) == 1 else { return false }
            return EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(Self.tagBytes), bytes + Self.sequenceBytes + plaintextLength) == 1
        }
        // Sealing a well-formed buffer with a keyed context cannot fail short of memory exhaustion.
        precondition(ok, "OpenSSL failed to seal a datagram")
        #else
        let raw = UnsafeRawBufferPointer(datagram)
        let aad = raw[0..<Self.sequenceBytes]
        let body = raw[Self.sequenceBytes..<(Self.sequenceBytes + plaintextLength)]
        let sealedCiphertext: Data, tag: Data
        do {
            switch cipher {
            case .aes128GCM:
                let box = try AES.GCM.seal(body, using: key, nonce: AES.GCM.Nonce(data: nonce), authenticating: aad)
                (sealedCiphertext, tag) = (box.ciphertext, box.tag)
            case .chaCha20Poly1305:
                let box = try ChaChaPoly.seal(body, using: key, nonce: ChaChaPoly.Nonce(data: nonce), authenticating: aad)
                (sealedCiphertext, tag) = (box.ciphertext, box.tag)
            }
        } catch {
            // A 12-byte nonce and a key of the right length were checked at init.
            preconditionFailure("CryptoKit failed to seal a datagram: \(error)")
        }
        sealedCiphertext.copyBytes(to: UnsafeMutableRawBufferPointer(rebasing: datagram[Self.sequenceBytes...]), count: plaintextLength)
        tag.copyBytes(to: UnsafeMutableRawBufferPointer(rebasing: datagram[(Self.sequenceBytes + plaintextLength)...]), count: Self.tagBytes)
        #endif
    }

    @inline(__always)
    private func setNonce(_ sequence: UInt64) {
        nonce.withUnsafeMutableBytes { $0.storeBytes(of: sequence.bigEndian, toByteOffset: 4, as: UInt64.self) }
    }
}
