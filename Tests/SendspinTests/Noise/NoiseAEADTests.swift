import Crypto
import Foundation
@testable import Sendspin
import Testing

/// The Noise AEAD's two implementations — OpenSSL's EVP with one keyed context (Linux) and
/// swift-crypto (Apple platforms, or where libcrypto cannot be loaded) — give the same bytes and
/// refuse the same forgeries. The known-answer vectors in `NoiseTests` check whichever one this
/// platform uses against Python's `noiseprotocol`; this checks the other against it.
@Suite struct NoiseAEADTests {
    #if os(Linux)
    @Test func linuxUsesOpenSSL() {
        #expect(NoiseAEAD(suite: .chaChaPoly, key: SymmetricKey(size: .bits256)).usesOpenSSL)
        #expect(NoiseAEAD(suite: .aesGCM, key: SymmetricKey(size: .bits256)).usesOpenSSL)
        #expect(!NoiseAEAD(suite: .chaChaPoly, key: SymmetricKey(size: .bits256), portable: true).usesOpenSSL)
    }
    #endif

    @Test(arguments: NoiseSuite.allCases)
    func bothImplementationsSealAndOpenTheSameBytes(suite: NoiseSuite) throws {
        var rng = SystemRandomNumberGenerator()
        let key = SymmetricKey(size: .bits256)
        let fast = NoiseAEAD(suite: suite, key: key), portable = NoiseAEAD(suite: suite, key: key, portable: true)
        // Counters past 2^32 and 2^56 tell a little-endian nonce from a big-endian one.
        let nonces: [UInt64] = [0, 1, 255, 256, 1 << 32 | 7, 1 << 56 | 3, UInt64.max - 1]
        let lengths = [0, 1, 15, 16, 17, 64, 1000, 15_000, 65_519]
        for (index, length) in lengths.enumerated() {
            let plaintext = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let associatedData: [UInt8] = index.isMultiple(of: 2) ? [] : (0..<32).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let nonce = nonces[index % nonces.count]
            let sealed = try fast.seal(plaintext, nonce: nonce, associatedData: associatedData)
            #expect(sealed.count == length + 16)
            #expect(try portable.seal(plaintext, nonce: nonce, associatedData: associatedData) == sealed, "length \(length)")
            #expect(try fast.open(sealed, nonce: nonce, associatedData: associatedData) == plaintext)
            #expect(try portable.open(sealed, nonce: nonce, associatedData: associatedData) == plaintext)

            // A flipped bit anywhere (ciphertext or tag), another nonce or other associated data:
            // both refuse it.
            var tampered = sealed
            tampered[Int.random(in: 0..<tampered.count, using: &rng)] ^= 1 << UInt8.random(in: 0...7, using: &rng)
            for aead in [fast, portable] {
                #expect(throws: NoiseError.decryptionFailed) { try aead.open(tampered, nonce: nonce, associatedData: associatedData) }
                #expect(throws: NoiseError.decryptionFailed) { try aead.open(sealed, nonce: nonce &+ 1, associatedData: associatedData) }
                #expect(throws: NoiseError.decryptionFailed) { try aead.open(sealed, nonce: nonce, associatedData: associatedData + [0]) }
            }
        }
    }

    @Test(arguments: NoiseSuite.allCases)
    func aMessageShorterThanItsTagIsMalformed(suite: NoiseSuite) {
        let key = SymmetricKey(size: .bits256)
        for aead in [NoiseAEAD(suite: suite, key: key), NoiseAEAD(suite: suite, key: key, portable: true)] {
            for length in [0, 1, 15] {
                #expect(throws: NoiseError.self) { try aead.open([UInt8](repeating: 0, count: length), nonce: 0, associatedData: []) }
            }
        }
    }

    /// The same context serves many calls in a row, as a session's receiving cipher state does:
    /// a failed open in between leaves it usable.
    @Test func aContextIsReusedAcrossMessagesAndAfterAFailure() throws {
        let key = SymmetricKey(size: .bits256)
        let sender = NoiseAEAD(suite: .chaChaPoly, key: key), receiver = NoiseAEAD(suite: .chaChaPoly, key: key)
        for nonce in UInt64(0)..<200 {
            let plaintext = Array("message \(nonce)".utf8)
            let sealed = try sender.seal(plaintext, nonce: nonce, associatedData: [])
            if nonce.isMultiple(of: 7) {
                #expect(throws: NoiseError.decryptionFailed) { try receiver.open(sealed, nonce: nonce + 1, associatedData: []) }
            }
            #expect(try receiver.open(sealed, nonce: nonce, associatedData: []) == plaintext)
        }
    }
}
