#if canImport(COpenSSL)
import COpenSSL
import COpenSSLLoader
import Crypto
import NIOCore
import NIOSSH

/// Why an SSH packet could not be sealed or opened. Raised inside the SSH handler, it ends the
/// connection (an SSH peer never recovers from a bad packet).
enum SSHPacketProtectionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Key exchange produced a key or IV of the wrong size for the negotiated cipher.
    case keySize(cipher: String, expected: Int, actual: Int)
    /// OpenSSL could not set up the cipher (out of memory, or a broken libcrypto).
    case cipherUnavailable(String)
    /// The packet's encrypted part is empty or not a whole number of 16-byte blocks.
    case malformedPacket(encryptedBytes: Int)
    /// The decrypted padding length is under 4 or longer than the packet.
    case badPadding(paddingLength: Int, packetBytes: Int)
    /// The tag did not verify: the packet was altered, or the two ends disagree on the keys.
    case authenticationFailed(cipher: String)
    /// OpenSSL, which does the packet encryption, could not be loaded; `detail` is the reason.
    case libraryMissing(String)

    var description: String {
        switch self {
        case .keySize(let cipher, let expected, let actual):
            return "SSH key exchange gave a \(actual)-byte key or IV for \(cipher), which needs \(expected)"
        case .cipherUnavailable(let cipher):
            return "OpenSSL could not set up \(cipher)"
        case .libraryMissing(let detail):
            return "SSH packet encryption needs OpenSSL, which could not be loaded (\(detail)); install it: apt install libssl3"
        case .malformedPacket(let bytes):
            return "the SSH server sent a malformed packet (\(bytes) encrypted bytes, not a whole number of 16-byte blocks)"
        case .badPadding(let padding, let bytes):
            return "the SSH server sent a packet with \(padding) bytes of padding in \(bytes) bytes (SSH requires 4 or more, inside the packet)"
        case .authenticationFailed(let cipher):
            return "an SSH packet failed its \(cipher) integrity check: the connection was tampered with or the keys disagree"
        }
    }
}

/// AES-GCM as OpenSSH frames it (`aes256-gcm@openssh.com`, `aes128-gcm@openssh.com`: RFC 5647
/// with the 4-byte length in clear as associated data, the 12-byte IV's last 8 bytes a big-endian
/// counter bumped per packet, the MAC negotiation ignored), through OpenSSL's EVP interface with
/// one cipher context per direction kept for the connection.
///
/// Why not swift-nio-ssh's own scheme: it opens each packet through swift-crypto into a new
/// `Data` and writes that back into the packet's buffer, which it shares with the parser, so the
/// buffer is copied first — every byte received is copied twice beyond the decryption. Here the
/// ciphertext is decrypted once, straight into the buffer that carries the payload on.
class SSHAESGCMProtection {
    class var cipherName: String { fatalError("subclasses name the cipher") }
    class var keySizes: ExpectedKeySizes { fatalError("subclasses give the key sizes") }
    class func evpCipher() -> OpaquePointer? { fatalError("subclasses give the EVP cipher") }

    static let tagBytes = 16
    static let blockBytes = 16

    private let sealer: OpaquePointer
    private let opener: OpaquePointer
    private var outboundIV: [UInt8]
    private var inboundIV: [UInt8]

    required init(initialKeys: NIOSSHSessionKeys) throws {
        if let problem = farcast_openssl_load() { throw SSHPacketProtectionError.libraryMissing(String(cString: problem)) }
        guard let sealer = EVP_CIPHER_CTX_new() else { throw SSHPacketProtectionError.cipherUnavailable(Self.cipherName) }
        guard let opener = EVP_CIPHER_CTX_new() else {
            EVP_CIPHER_CTX_free(sealer)
            throw SSHPacketProtectionError.cipherUnavailable(Self.cipherName)
        }
        self.sealer = sealer
        self.opener = opener
        outboundIV = []
        inboundIV = []
        try updateKeys(initialKeys)
    }

    deinit {
        EVP_CIPHER_CTX_free(sealer)
        EVP_CIPHER_CTX_free(opener)
    }

    func updateKeys(_ keys: NIOSSHSessionKeys) throws {
        let sizes = Self.keySizes
        for (key, iv) in [(keys.outboundEncryptionKey, keys.initialOutboundIV), (keys.inboundEncryptionKey, keys.initialInboundIV)] {
            guard key.bitCount == sizes.encryptionKeySize * 8 else {
                throw SSHPacketProtectionError.keySize(cipher: Self.cipherName, expected: sizes.encryptionKeySize, actual: key.bitCount / 8)
            }
            guard iv.count == sizes.ivSize else {
                throw SSHPacketProtectionError.keySize(cipher: Self.cipherName, expected: sizes.ivSize, actual: iv.count)
            }
        }
        let cipher = Self.evpCipher()
        let ok = keys.outboundEncryptionKey.withUnsafeBytes { out in
            keys.inboundEncryptionKey.withUnsafeBytes { inbound in
                EVP_EncryptInit_ex(sealer, cipher, nil, out.bindMemory(to: UInt8.self).baseAddress, nil) == 1
                    && EVP_DecryptInit_ex(opener, cipher, nil, inbound.bindMemory(to: UInt8.self).baseAddress, nil) == 1
            }
        }
        guard ok else { throw SSHPacketProtectionError.cipherUnavailable(Self.cipherName) }
        outboundIV = keys.initialOutboundIV
        inboundIV = keys.initialInboundIV
    }

    /// The invocation counter (the IV's last 8 bytes, big-endian) goes up by one per packet and
    /// wraps, as RFC 5647 §7.1 says.
    private static func advance(_ iv: inout [UInt8]) {
        iv.withUnsafeMutableBytes { raw in
            let counter = UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: 4, as: UInt64.self))
            raw.storeBytes(of: (counter &+ 1).bigEndian, toByteOffset: 4, as: UInt64.self)
        }
    }

    /// Decrypts `source` (length ‖ ciphertext ‖ tag, the whole packet) into a new buffer and
    /// returns the payload's slice of it; `source` is left fully read. Nothing decrypted is
    /// handed on unless the tag verified.
    fileprivate func open(_ source: inout ByteBuffer) throws -> ByteBuffer {
        let encrypted = source.readableBytes - 4 - Self.tagBytes
        guard encrypted > 0, encrypted % Self.blockBytes == 0 else {
            throw SSHPacketProtectionError.malformedPacket(encryptedBytes: max(0, encrypted))
        }
        var plaintext = ByteBufferAllocator().buffer(capacity: encrypted)
        let opener = self.opener
        let verified: Bool = inboundIV.withUnsafeBufferPointer { iv in
            source.withUnsafeReadableBytes { packet in
                let bytes = packet.bindMemory(to: UInt8.self).baseAddress!
                return plaintext.writeWithUnsafeMutableBytes(minimumWritableBytes: encrypted) { out in
                    let outBytes = out.bindMemory(to: UInt8.self).baseAddress!
                    var written: Int32 = 0, final: Int32 = 0
                    guard EVP_DecryptInit_ex(opener, nil, nil, nil, iv.baseAddress) == 1,
                          EVP_DecryptUpdate(opener, nil, &written, bytes, 4) == 1,
                          EVP_DecryptUpdate(opener, outBytes, &written, bytes + 4, Int32(encrypted)) == 1,
                          EVP_CIPHER_CTX_ctrl(opener, EVP_CTRL_AEAD_SET_TAG, Int32(Self.tagBytes),
                                              UnsafeMutableRawPointer(mutating: bytes + 4 + encrypted)) == 1,
                          EVP_DecryptFinal_ex(opener, outBytes + Int(written), &final) == 1
                    else { return 0 }
                    return encrypted
                } == encrypted
            }
        }
        guard verified else { throw SSHPacketProtectionError.authenticationFailed(cipher: Self.cipherName) }
        Self.advance(&inboundIV)
        source.moveReaderIndex(to: source.writerIndex)
        // First byte: the padding length; then the payload; then the padding.
        let padding = Int(plaintext.getInteger(at: plaintext.readerIndex, as: UInt8.self)!)
        guard padding >= 4, padding + 1 <= encrypted else {
            throw SSHPacketProtectionError.badPadding(paddingLength: padding, packetBytes: encrypted)
        }
        return plaintext.getSlice(at: plaintext.readerIndex + 1, length: encrypted - 1 - padding)!
    }

    /// Encrypts `packet` (length ‖ padding length ‖ payload ‖ padding) in place and appends the tag.
    fileprivate func seal(_ packet: inout ByteBuffer) throws {
        let plain = packet.readableBytes - 4
        let sealer = self.sealer
        let ok: Bool = outboundIV.withUnsafeBufferPointer { iv in
            packet.withUnsafeMutableReadableBytes { raw in
                let bytes = raw.bindMemory(to: UInt8.self).baseAddress!
                var written: Int32 = 0, final: Int32 = 0
                return EVP_EncryptInit_ex(sealer, nil, nil, nil, iv.baseAddress) == 1
                    && EVP_EncryptUpdate(sealer, nil, &written, bytes, 4) == 1
                    && EVP_EncryptUpdate(sealer, bytes + 4, &written, bytes + 4, Int32(plain)) == 1
                    && EVP_EncryptFinal_ex(sealer, bytes + 4 + Int(written), &final) == 1
            }
        }
        guard ok else { throw SSHPacketProtectionError.cipherUnavailable(Self.cipherName) }
        let tagged = packet.writeWithUnsafeMutableBytes(minimumWritableBytes: Self.tagBytes) { out in
            EVP_CIPHER_CTX_ctrl(sealer, EVP_CTRL_AEAD_GET_TAG, Int32(Self.tagBytes), out.baseAddress) == 1 ? Self.tagBytes : 0
        }
        guard tagged == Self.tagBytes else { throw SSHPacketProtectionError.cipherUnavailable(Self.cipherName) }
        Self.advance(&outboundIV)
    }
}

extension SSHAESGCMProtection: NIOSSHTransportProtection {
    static var macName: String? { nil }
    static var cipherBlockSize: Int { blockBytes }
    var macBytes: Int { Self.tagBytes }
    var lengthEncrypted: Bool { false }

    /// The length is sent in clear (it is the associated data): nothing to decrypt early.
    func decryptFirstBlock(_ source: inout ByteBuffer) throws {}

    func decryptAndVerifyRemainingPacket(_ source: inout ByteBuffer, sequenceNumber: UInt32) throws -> ByteBuffer {
        try open(&source)
    }

    func encryptPacket(_ destination: inout ByteBuffer, sequenceNumber: UInt32) throws {
        try seal(&destination)
    }
}

/// `aes256-gcm@openssh.com` (OpenSSH's and swift-nio-ssh's first AES-GCM preference).
final class SSHAES256GCMProtection: SSHAESGCMProtection {
    override class var cipherName: String { "aes256-gcm@openssh.com" }
    override class var keySizes: ExpectedKeySizes { ExpectedKeySizes(ivSize: 12, encryptionKeySize: 32, macKeySize: 16) }
    override class func evpCipher() -> OpaquePointer? { EVP_aes_256_gcm() }
}

/// `aes128-gcm@openssh.com`.
final class SSHAES128GCMProtection: SSHAESGCMProtection {
    override class var cipherName: String { "aes128-gcm@openssh.com" }
    override class var keySizes: ExpectedKeySizes { ExpectedKeySizes(ivSize: 12, encryptionKeySize: 16, macKeySize: 16) }
    override class func evpCipher() -> OpaquePointer? { EVP_aes_128_gcm() }
}

extension SSHAESGCMProtection {
    /// The schemes offered, in swift-nio-ssh's order.
    static var offered: [NIOSSHTransportProtection.Type] { [SSHAES256GCMProtection.self, SSHAES128GCMProtection.self] }

    /// `offered` when OpenSSL can be loaded; otherwise nil and why, so the caller keeps
    /// swift-nio-ssh's own (slower) AES-GCM rather than failing every connection.
    static func offeredIfLoadable() -> (schemes: [NIOSSHTransportProtection.Type]?, problem: String?) {
        if let problem = farcast_openssl_load() { return (nil, String(cString: problem)) }
        return (offered, nil)
    }
}
#endif
