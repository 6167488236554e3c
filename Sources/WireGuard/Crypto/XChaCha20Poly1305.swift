import Crypto
import Foundation

/// XChaCha20-Poly1305 (draft-irtf-cfrg-xchacha): ChaCha20-Poly1305 with a 24-byte nonce, used by
/// WireGuard only for the cookie in a cookie reply. swift-crypto has the 12-byte-nonce AEAD; the
/// extension is HChaCha20 over the key and the nonce's first 16 bytes, giving a subkey used with
/// the nonce's last 8 bytes behind four zero bytes.
enum XChaCha20Poly1305 {
    static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8], authenticating aad: [UInt8]) throws -> [UInt8] {
        let (subkey, shortNonce) = try derive(key: key, nonce: nonce)
        let box = try ChaChaPoly.seal(plaintext, using: subkey, nonce: shortNonce, authenticating: aad)
        return Array(box.ciphertext) + Array(box.tag)
    }

    static func open(_ sealed: [UInt8], key: [UInt8], nonce: [UInt8], authenticating aad: [UInt8]) throws -> [UInt8] {
        guard sealed.count >= 16 else { throw CryptoKitError.authenticationFailure }
        let (subkey, shortNonce) = try derive(key: key, nonce: nonce)
        let box = try ChaChaPoly.SealedBox(nonce: shortNonce, ciphertext: sealed.dropLast(16), tag: sealed.suffix(16))
        return Array(try ChaChaPoly.open(box, using: subkey, authenticating: aad))
    }

    private static func derive(key: [UInt8], nonce: [UInt8]) throws -> (SymmetricKey, ChaChaPoly.Nonce) {
        precondition(key.count == 32 && nonce.count == 24, "XChaCha20-Poly1305 takes a 32-byte key and a 24-byte nonce")
        let subkey = hChaCha20(key: key, nonce: Array(nonce[0..<16]))
        return (SymmetricKey(data: subkey), try ChaChaPoly.Nonce(data: [0, 0, 0, 0] + nonce[16..<24]))
    }

    /// HChaCha20: the ChaCha20 block function's twenty rounds over (constants, key, 16-byte
    /// nonce) without the final addition; the subkey is words 0–3 and 12–15.
    static func hChaCha20(key: [UInt8], nonce: [UInt8]) -> [UInt8] {
        func word(_ bytes: [UInt8], _ i: Int) -> UInt32 {
            UInt32(bytes[4 * i]) | UInt32(bytes[4 * i + 1]) << 8 | UInt32(bytes[4 * i + 2]) << 16 | UInt32(bytes[4 * i + 3]) << 24
        }
        var x: [UInt32] = [0x6170_7865, 0x3320_646E, 0x7962_2D32, 0x6B20_6574]
        x += (0..<8).map { word(key, $0) }
        x += (0..<4).map { word(nonce, $0) }
        func quarter(_ a: Int, _ b: Int, _ c: Int, _ d: Int) {
            x[a] = x[a] &+ x[b]; x[d] ^= x[a]; x[d] = (x[d] << 16) | (x[d] >> 16)
            x[c] = x[c] &+ x[d]; x[b] ^= x[c]; x[b] = (x[b] << 12) | (x[b] >> 20)
            x[a] = x[a] &+ x[b]; x[d] ^= x[a]; x[d] = (x[d] << 8) | (x[d] >> 24)
            x[c] = x[c] &+ x[d]; x[b] ^= x[c]; x[b] = (x[b] << 7) | (x[b] >> 25)
        }
        for _ in 0..<10 {
            quarter(0, 4, 8, 12); quarter(1, 5, 9, 13); quarter(2, 6, 10, 14); quarter(3, 7, 11, 15)
            quarter(0, 5, 10, 15); quarter(1, 6, 11, 12); quarter(2, 7, 8, 13); quarter(3, 4, 9, 14)
        }
        var out: [UInt8] = []
        for i in [0, 1, 2, 3, 12, 13, 14, 15] {
            for shift in stride(from: 0, to: 32, by: 8) { out.append(UInt8(truncatingIfNeeded: x[i] >> UInt32(shift))) }
        }
        return out
    }
}
