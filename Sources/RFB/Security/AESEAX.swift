import Crypto
import CryptoExtras

/// AES in EAX mode (Bellare, Rogaway, Wagner 2004), built from swift-crypto's AES-CMAC and
/// AES-CTR: N = OMAC⁰(nonce), H = OMAC¹(header), C = CTR_N(P), tag = N ⊕ H ⊕ OMAC²(C), where
/// OMACᵗ(x) is CMAC over a block holding t followed by x. Nonces of any length are allowed; the
/// CTR counter is the whole 128-bit block, incremented big-endian.
struct AESEAX: Sendable {
    static let tagSize = 16
    private let key: SymmetricKey

    /// `key` is 16 (AES-128) or 32 (AES-256) bytes.
    init(key: [UInt8]) {
        precondition(key.count == 16 || key.count == 32, "AES-EAX keys are 16 or 32 bytes")
        self.key = SymmetricKey(data: key)
    }

    private func omac(_ t: UInt8, _ data: [UInt8]) -> [UInt8] {
        // Key sizes are checked in init, so CMAC cannot fail here.
        var mac = try! AES.CMAC(key: key)
        var prefix = [UInt8](repeating: 0, count: 16)
        prefix[15] = t
        mac.update(data: prefix)
        mac.update(data: data)
        return mac.finalize().withUnsafeBytes { Array($0) }
    }

    private func ctr(_ input: [UInt8], start: [UInt8]) -> [UInt8] {
        guard !input.isEmpty else { return [] }
        // A 16-byte nonce is the full initial counter block.
        let nonce = try! AES._CTR.Nonce(nonceBytes: start)
        return Array(try! AES._CTR.encrypt(input, using: key, nonce: nonce))
    }

    /// Encrypts and authenticates; returns the ciphertext (same length as `plaintext`) and tag.
    func seal(_ plaintext: [UInt8], nonce: [UInt8], header: [UInt8]) -> (ciphertext: [UInt8], tag: [UInt8]) {
        let n = omac(0, nonce), h = omac(1, header)
        let ciphertext = ctr(plaintext, start: n)
        let c = omac(2, ciphertext)
        let tag = (0..<16).map { n[$0] ^ h[$0] ^ c[$0] }
        return (ciphertext, tag)
    }

    /// Checks the tag and decrypts; nil when the message was altered.
    func open(_ ciphertext: [UInt8], nonce: [UInt8], header: [UInt8], tag: [UInt8]) -> [UInt8]? {
        guard tag.count == Self.tagSize else { return nil }
        let n = omac(0, nonce), h = omac(1, header), c = omac(2, ciphertext)
        var difference: UInt8 = 0
        for i in 0..<16 { difference |= n[i] ^ h[i] ^ c[i] ^ tag[i] }
        guard difference == 0 else { return nil }
        return ctr(ciphertext, start: n)
    }
}
