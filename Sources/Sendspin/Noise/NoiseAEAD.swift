#if canImport(COpenSSL)
import COpenSSL
import COpenSSLLoader
#endif
import Crypto
import Foundation
import Synchronization

/// The AEAD under a keyed Noise CipherState: ChaCha20-Poly1305 or AES-256-GCM, a 12-byte nonce
/// of 4 zero bytes and the 64-bit counter (little-endian for ChaChaPoly, big-endian for AES-GCM,
/// as the Noise spec says), output = ciphertext ‖ 16-byte tag.
///
/// Every audio chunk passes here. On Linux it runs on OpenSSL's EVP (libcrypto opened on first
/// use, as for SSH and the punktfunk data plane) through one context keyed when the cipher state
/// is made: a message is read once and its result written once, with no allocation but the
/// result. swift-crypto's API builds a nonce, a sealed box and a keyed AEAD context for every
/// call and goes through `Data`; on a 15 KB chunk that cost five times the cipher itself (the
/// player's profile: 11 % of its network thread in decryption, 1.5 % in the cipher). Elsewhere,
/// or where libcrypto cannot be loaded, it is swift-crypto (CryptoKit on Apple platforms); the
/// two give the same bytes (`NoiseAEADTests`).
final class NoiseAEAD: Sendable {
    let suite: NoiseSuite
    static let tagBytes = 16
    private let key: SymmetricKey
    #if canImport(COpenSSL)
    /// The keyed EVP context (nil: libcrypto could not be loaded, swift-crypto does the work).
    private let context: EVPContext?
    #endif

    /// `portable`: use swift-crypto even where OpenSSL is available (the tests compare the two).
    init(suite: NoiseSuite, key: SymmetricKey, portable: Bool = false) {
        self.suite = suite
        self.key = key
        #if canImport(COpenSSL)
        context = portable ? nil : EVPContext.make(suite: suite, key: key)
        #endif
    }

    /// Whether OpenSSL does the work (false: swift-crypto).
    var usesOpenSSL: Bool {
        #if canImport(COpenSSL)
        return context != nil
        #else
        return false
        #endif
    }

    /// `plaintext` sealed under `nonce`: ciphertext ‖ tag.
    func seal(_ plaintext: [UInt8], nonce: UInt64, associatedData: [UInt8]) throws(NoiseError) -> [UInt8] {
        #if canImport(COpenSSL)
        if let context {
            let iv = nonceBytes(nonce)
            let sealed = plaintext.withUnsafeBufferPointer { input in
                associatedData.withUnsafeBufferPointer { ad in
                    iv.withUnsafeBufferPointer { iv in context.seal(input, iv: iv, associatedData: ad) }
                }
            }
            guard let sealed else { throw .malformedMessage("OpenSSL failed to encrypt") }
            return sealed
        }
        #endif
        return try portableSeal(plaintext, nonce: nonce, associatedData: associatedData)
    }

    /// `ciphertext` (ciphertext ‖ tag) opened under `nonce`; throws `.decryptionFailed` when the
    /// tag does not verify.
    func open(_ ciphertext: [UInt8], nonce: UInt64, associatedData: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard ciphertext.count >= Self.tagBytes else { throw .malformedMessage("ciphertext shorter than its 16-byte tag") }
        #if canImport(COpenSSL)
        if let context {
            let iv = nonceBytes(nonce)
            let opened = ciphertext.withUnsafeBufferPointer { input in
                associatedData.withUnsafeBufferPointer { ad in
                    iv.withUnsafeBufferPointer { iv in context.open(input, iv: iv, associatedData: ad) }
                }
            }
            guard let opened else { throw .decryptionFailed }
            return opened
        }
        #endif
        return try portableOpen(ciphertext, nonce: nonce, associatedData: associatedData)
    }

    private func nonceBytes(_ nonce: UInt64) -> [UInt8] {
        var iv = [UInt8](repeating: 0, count: 12)
        iv.withUnsafeMutableBytes { $0.storeBytes(of: suite == .chaChaPoly ? nonce.littleEndian : nonce.bigEndian, toByteOffset: 4, as: UInt64.self) }
        return iv
    }

    // MARK: swift-crypto

    /// Data in and out, one copy each way: swift-crypto's generic paths over arrays and slices
    /// (a `Data` assembled by generic appends, witness-table lookups per call) cost several times
    /// more. The sealed box's combined form is nonce ‖ ciphertext ‖ tag; the wire carries all but
    /// the nonce.
    private func portableSeal(_ plaintext: [UInt8], nonce: UInt64, associatedData: [UInt8]) throws(NoiseError) -> [UInt8] {
        let n = nonceBytes(nonce)
        let message = Data(plaintext), authenticated = associatedData.isEmpty ? Data() : Data(associatedData)
        let combined: Data
        do {
            switch suite {
            case .chaChaPoly:
                combined = try ChaChaPoly.seal(message, using: key, nonce: ChaChaPoly.Nonce(data: n), authenticating: authenticated).combined
            case .aesGCM:
                guard let sealed = try AES.GCM.seal(message, using: key, nonce: AES.GCM.Nonce(data: n), authenticating: authenticated).combined else {
                    throw NoiseError.malformedMessage("AES-GCM gave no combined form")
                }
                combined = sealed
            }
        } catch {
            throw .malformedMessage("encryption failed: \(error)")
        }
        return [UInt8](unsafeUninitializedCapacity: combined.count - 12) { buffer, count in
            count = combined.copyBytes(to: buffer, from: (combined.startIndex + 12)...)
        }
    }

    private func portableOpen(_ ciphertext: [UInt8], nonce: UInt64, associatedData: [UInt8]) throws(NoiseError) -> [UInt8] {
        var combined = Data(capacity: 12 + ciphertext.count)
        nonceBytes(nonce).withUnsafeBufferPointer { combined.append($0) }
        ciphertext.withUnsafeBufferPointer { combined.append($0) }
        let authenticated = associatedData.isEmpty ? Data() : Data(associatedData)
        let opened: Data
        do {
            switch suite {
            case .chaChaPoly:
                opened = try ChaChaPoly.open(ChaChaPoly.SealedBox(combined: combined), using: key, authenticating: authenticated)
            case .aesGCM:
                opened = try AES.GCM.open(AES.GCM.SealedBox(combined: combined), using: key, authenticating: authenticated)
            }
        } catch {
            throw .decryptionFailed
        }
        return [UInt8](unsafeUninitializedCapacity: opened.count) { buffer, count in count = opened.copyBytes(to: buffer) }
    }
}

#if canImport(COpenSSL)
/// One EVP cipher context keyed for a suite. Each call sets the nonce and the direction, so the
/// only state kept between calls is the key; the lock keeps two calls from using it at once (a
/// cipher state serves one session at a time, so it is never contended).
private final class EVPContext: Sendable {
    /// The context, reached only under the lock.
    private struct Handle: @unchecked Sendable { let pointer: OpaquePointer }
    private let context: Mutex<Handle>

    /// Nil when libcrypto cannot be loaded or refuses the key.
    static func make(suite: NoiseSuite, key: SymmetricKey) -> EVPContext? {
        guard farcast_openssl_load() == nil, let context = EVP_CIPHER_CTX_new() else { return nil }
        let cipher = suite == .chaChaPoly ? EVP_chacha20_poly1305() : EVP_aes_256_gcm()
        let keyed = key.withUnsafeBytes { key in
            key.count == 32 && EVP_CipherInit_ex(context, cipher, nil, key.assumingMemoryBound(to: UInt8.self).baseAddress, nil, 1) == 1
        }
        guard keyed else {
            EVP_CIPHER_CTX_free(context)
            return nil
        }
        return EVPContext(context)
    }

    // Not a failable initializer: Swift 6.3's optimizer crashes on one that returns nil after a
    // Mutex is initialized (CopyPropagation, "Found outside of lifetime use").
    private init(_ context: OpaquePointer) { self.context = Mutex(Handle(pointer: context)) }

    deinit { context.withLock { EVP_CIPHER_CTX_free($0.pointer) } }

    func seal(_ input: UnsafeBufferPointer<UInt8>, iv: UnsafeBufferPointer<UInt8>, associatedData: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        context.withLock { Self.seal(in: $0.pointer, input, iv: iv, associatedData: associatedData) }
    }

    func open(_ input: UnsafeBufferPointer<UInt8>, iv: UnsafeBufferPointer<UInt8>, associatedData: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        context.withLock { Self.open(in: $0.pointer, input, iv: iv, associatedData: associatedData) }
    }

    private static func seal(in context: OpaquePointer, _ input: UnsafeBufferPointer<UInt8>, iv: UnsafeBufferPointer<UInt8>, associatedData: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let length = input.count
        var ok = true
        let output = [UInt8](unsafeUninitializedCapacity: length + NoiseAEAD.tagBytes) { out, count in
            count = length + NoiseAEAD.tagBytes
            var written: Int32 = 0, final: Int32 = 0
            guard let base = out.baseAddress,
                  EVP_CipherInit_ex(context, nil, nil, nil, iv.baseAddress, 1) == 1,
                  associatedData.isEmpty || EVP_CipherUpdate(context, nil, &written, associatedData.baseAddress, Int32(associatedData.count)) == 1,
                  length == 0 || EVP_CipherUpdate(context, base, &written, input.baseAddress, Int32(length)) == 1,
                  EVP_CipherFinal_ex(context, base + (length == 0 ? 0 : Int(written)), &final) == 1,
                  EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, Int32(NoiseAEAD.tagBytes), base + length) == 1
            else {
                ok = false
                out.initialize(repeating: 0)
                return
            }
        }
        return ok ? output : nil
    }

    private static func open(in context: OpaquePointer, _ input: UnsafeBufferPointer<UInt8>, iv: UnsafeBufferPointer<UInt8>, associatedData: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let length = input.count - NoiseAEAD.tagBytes
        var ok = true
        let output = [UInt8](unsafeUninitializedCapacity: max(length, 1)) { out, count in
            var written: Int32 = 0, final: Int32 = 0
            let tag = UnsafeMutableRawPointer(mutating: input.baseAddress! + length)
            guard let base = out.baseAddress,
                  EVP_CipherInit_ex(context, nil, nil, nil, iv.baseAddress, 0) == 1,
                  associatedData.isEmpty || EVP_CipherUpdate(context, nil, &written, associatedData.baseAddress, Int32(associatedData.count)) == 1,
                  length == 0 || EVP_CipherUpdate(context, base, &written, input.baseAddress, Int32(length)) == 1,
                  EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(NoiseAEAD.tagBytes), tag) == 1,
                  EVP_CipherFinal_ex(context, base + (length == 0 ? 0 : Int(written)), &final) == 1
            else {
                ok = false
                count = 0
                return
            }
            count = length
        }
        return ok ? output : nil
    }
}
#endif
