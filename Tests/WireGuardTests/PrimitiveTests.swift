import Testing
@testable import WireGuard

@Suite struct PrimitiveTests {
    typealias V = HandshakeVectors

    /// RFC 7693, appendix B: BLAKE2s-256("abc").
    @Test func blake2sOfABCIsRFC7693sExample() {
        #expect(BLAKE2s.hash(Array("abc".utf8)) == V.bytes("508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982"))
    }

    /// Lengths around the 64-byte block, keyed and not, 16- and 32-byte digests, against hashlib.
    @Test func blake2sMatchesHashlibAroundTheBlockSize() {
        for (length, key, digestLength, expected) in V.blake2s {
            let message = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 7 + 3) }
            #expect(BLAKE2s.hash(message, digestLength: digestLength, key: key) == expected,
                    "length \(length), key \(key.count) bytes, digest \(digestLength)")
            var incremental = BLAKE2s(digestLength: digestLength, key: key)
            for chunk in stride(from: 0, to: length, by: 13) { incremental.update(message[chunk..<min(chunk + 13, length)]) }
            #expect(incremental.finalize() == expected, "fed in 13-byte pieces: length \(length)")
        }
    }

    @Test func hmacBLAKE2sMatchesPythonsHMAC() {
        #expect(hmacBLAKE2s(key: V.hmacKey, Array("WireGuard".utf8)) == V.hmacOfWireGuard)
        #expect(hmacBLAKE2s(key: V.hmacKey, Array("Wire".utf8), Array("Guard".utf8)) == V.hmacOfWireGuard)
    }

    /// draft-irtf-cfrg-xchacha-03, section 2.2.1.
    @Test func hChaCha20MatchesTheDraftsVector() {
        let subkey = XChaCha20Poly1305.hChaCha20(key: Array(0..<32), nonce: V.bytes("000000090000004a0000000031415927"))
        #expect(subkey == V.bytes("82413b4227b27bfed30e42508a877d73a0f9e4d58a74a853c12ec41326d3ecdc"))
    }

    @Test func xChaCha20Poly1305RoundTripsAndRefusesTampering() throws {
        let key = Array<UInt8>(repeating: 7, count: 32), nonce = Array<UInt8>(0..<24)
        let sealed = try XChaCha20Poly1305.seal(Array("cookie".utf8), key: key, nonce: nonce, authenticating: [1, 2])
        #expect(try XChaCha20Poly1305.open(sealed, key: key, nonce: nonce, authenticating: [1, 2]) == Array("cookie".utf8))
        #expect(throws: (any Error).self) { try XChaCha20Poly1305.open(sealed, key: key, nonce: nonce, authenticating: [1, 3]) }
        #expect(throws: (any Error).self) { try XChaCha20Poly1305.open([1, 2, 3], key: key, nonce: nonce, authenticating: []) }
    }

    @Test func keysReadAndWriteBase64AsWgDoes() throws {
        let key = PrivateKey()
        let again = try PrivateKey(base64: key.base64 + "\n")
        #expect(again.publicKey == key.publicKey)
        #expect(try PublicKey(base64: key.publicKey.base64) == key.publicKey)
        let clamped = key.clampedBytes
        #expect(clamped[0] & 7 == 0 && clamped[31] & 0x80 == 0 && clamped[31] & 0x40 != 0)
        #expect(!"\(key)".contains(key.base64), "a private key's description does not show it")
        for bad in ["", "abc", String(repeating: "A", count: 43), String(repeating: "A", count: 44) + "=", String(repeating: "*", count: 44)] {
            #expect(throws: WireGuardError.self) { try PublicKey(base64: bad) }
        }
        #expect(throws: WireGuardError.self) { try PresharedKey(bytes: [1, 2, 3]) }
    }
}

@Suite struct ReplayWindowTests {
    /// Feeds `steps` in order: each counter, and whether the window must accept it.
    func check(_ steps: [(UInt64, Bool, String)], window: inout ReplayWindow) {
        for (counter, expected, why) in steps {
            let accepted = window.accept(counter)
            #expect(accepted == expected, "counter \(counter): \(why)")
        }
    }

    @Test func eachCounterIsAcceptedOnceInAnyOrderWithinTheWindow() {
        var window = ReplayWindow()
        check([(0, true, "first"), (0, false, "again"), (5, true, "ahead"), (3, true, "reordered, inside the window"),
               (3, false, "again"), (1, true, "late"), (2, true, "late"), (4, true, "late"), (5, false, "again")], window: &window)
    }

    @Test func countersTooFarBehindAreRefusedAndAJumpForgetsOnlyWhatItPassed() {
        var window = ReplayWindow()
        let w = ReplayWindow.width
        check([(10_000, true, "first"), (10_000 - w - 1, false, "older than the window"),
               (10_000 - w, true, "the oldest counter the window still judges"), (9_999, true, "late"),
               // A jump of more than the whole ring clears every block; old counters stay refused by age.
               (1_000_000, true, "a far jump"), (9_999, false, "now too old"), (999_999, true, "late"), (999_999, false, "again"),
               // A jump inside the ring keeps what is still within the window.
               (1_000_100, true, "a short jump"), (999_999, false, "still remembered"), (1_000_050, true, "late")], window: &window)
    }

    @Test func theLastCountersAreNeverAccepted() {
        var window = ReplayWindow()
        check([(TransportSession.rejectAfterMessages, false, "REJECT_AFTER_MESSAGES"), (UInt64.max, false, "the last counter"),
               (TransportSession.rejectAfterMessages - 1, true, "the last usable counter")], window: &window)
    }

    /// Every counter of a shuffled run within the window arrives exactly once.
    @Test func aShuffledRunIsAcceptedExactlyOnce() {
        var window = ReplayWindow()
        var generator = SystemRandomNumberGenerator()
        let counters = Array(UInt64(0)..<5000).shuffled(using: &generator)
        var accepted = 0
        for counter in counters + counters where window.accept(counter) { accepted += 1 }
        // Shuffled over 5000 < the window's width: none is too old when it arrives.
        #expect(accepted == 5000)
    }
}
