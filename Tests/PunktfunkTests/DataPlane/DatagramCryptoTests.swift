@testable import Punktfunk
import Testing

/// Sealed datagrams against `cryptography`'s AES-128-GCM and ChaCha20-Poly1305 (the nonce and AAD
/// rule of punktfunk/1 §5), in both directions, and the refusals.
@Suite struct DatagramCryptoTests {
    struct Vectors: Decodable { let cases: [Case] }
    struct Case: Decodable {
        let cipher: String, key: String, salt: String, direction: UInt8, seq: String, plaintext: String, datagram: String
        var datagramKey: DatagramKey {
            get throws { try DatagramKey(cipher: cipher == "aes-128-gcm" ? .aes128GCM : .chaCha20Poly1305, key: [UInt8](hex: key), salt: [UInt8](hex: salt)) }
        }
    }

    static let vectors: [Case] = (try? Fixtures.json("aead-vectors.json", as: Vectors.self).cases) ?? []

    @Test func vectorFileIsPresent() throws {
        #expect(try Fixtures.json("aead-vectors.json", as: Vectors.self).cases.count == 24)
    }

    @Test(arguments: vectors.indices)
    func sealsAndOpensLikeTheOracle(index: Int) throws {
        let v = Self.vectors[index]
        let direction = try #require(DatagramDirection(rawValue: v.direction))
        let sequence = try #require(UInt64(v.seq))
        let plaintext = [UInt8](hex: v.plaintext)
        let expected = [UInt8](hex: v.datagram)

        let sealer = try DatagramCrypto(key: v.datagramKey, direction: direction, sealing: true)
        var buffer = [UInt8](repeating: 0, count: 8) + plaintext + [UInt8](repeating: 0, count: 16)
        buffer.withUnsafeMutableBytes { sealer.seal(sequence: sequence, plaintextLength: plaintext.count, in: $0) }
        #expect(buffer == expected)

        let opener = try DatagramCrypto(key: v.datagramKey, direction: direction, sealing: false)
        var received = expected
        let length = try received.withUnsafeMutableBytes { try opener.open($0) }
        #expect(length == plaintext.count)
        #expect(Array(received[8..<(8 + length)]) == plaintext)
        #expect(received.withUnsafeBytes { DatagramCrypto.sequence(of: $0) } == sequence)

        // The other direction's nonce space does not open it.
        let wrongWay = try DatagramCrypto(key: v.datagramKey, direction: direction == .hostToClient ? .clientToHost : .hostToClient, sealing: false)
        var again = expected
        #expect(throws: DataPlaneError.authenticationFailed(sequence: sequence)) { try again.withUnsafeMutableBytes { _ = try wrongWay.open($0) } }
    }

    @Test func tamperingAnyByteFailsAuthentication() throws {
        let v = try #require(Self.vectors.first)
        let opener = try DatagramCrypto(key: v.datagramKey, direction: .hostToClient, sealing: false)
        let sealed = [UInt8](hex: v.datagram)
        for position in stride(from: 0, to: sealed.count, by: 37) + [sealed.count - 1] {
            var bad = sealed
            bad[position] ^= 0x40
            #expect(throws: DataPlaneError.self) { try bad.withUnsafeMutableBytes { _ = try opener.open($0) } }
        }
        var short = [UInt8](repeating: 0, count: 23)
        #expect(throws: DataPlaneError.truncated(what: "sealed datagram", needed: 24, available: 23)) {
            try short.withUnsafeMutableBytes { _ = try opener.open($0) }
        }
    }

    @Test func keysOfTheWrongLengthAreRefused() {
        #expect(throws: DataPlaneError.badKeyLength(cipher: "AES-128-GCM", expected: 16, actual: 32)) {
            try DatagramKey(cipher: .aes128GCM, key: [UInt8](repeating: 1, count: 32), salt: [1, 2, 3, 4])
        }
        #expect(throws: DataPlaneError.self) { try DatagramKey(cipher: .chaCha20Poly1305, key: [UInt8](repeating: 1, count: 32), salt: [1, 2, 3]) }
        let key = try? DatagramKey(cipher: .aes128GCM, key: [UInt8](repeating: 7, count: 16), salt: [1, 2, 3, 4])
        #expect(key.map { String(describing: $0) } == "DatagramKey(AES-128-GCM, key redacted)")
    }
}

/// The anti-replay window: fresh, late, duplicate, far-future, and sliding without growing.
@Suite struct ReplayWindowTests {
    @Test func inOrderThenReplayed() {
        var w = ReplayWindow()
        for s in UInt64(0)..<2000 { let ok = w.accept(s); #expect(ok) }
        for s in UInt64(0)..<2000 { #expect(w.classify(s) == .duplicate) }
    }

    @Test func reorderingInsideTheWindowIsAcceptedOnce() {
        var w = ReplayWindow()
        do { let ok = w.accept(100); #expect(ok) }
        #expect(w.classify(80) == .fresh)
        do { let ok = w.accept(80); #expect(ok) }
        #expect(w.classify(80) == .duplicate)
        do { let ok = w.accept(80); #expect(!ok) }
        do { let ok = w.accept(99); #expect(ok) }
        #expect(w.classify(100) == .duplicate)
        #expect(w.classify(101) == .fresh)
    }

    @Test func olderThanTheWindowIsLate() {
        var w = ReplayWindow()
        do { let ok = w.accept(ReplayWindow.size * 2); #expect(ok) }
        #expect(w.classify(ReplayWindow.size) == .late)
        #expect(w.classify(0) == .late)
        #expect(w.classify(ReplayWindow.size + 1) == .fresh)
    }

    @Test func farFutureIsRefusedUnopened() {
        var w = ReplayWindow(farFutureLimit: 1000)
        do { let ok = w.accept(5); #expect(ok) }
        #expect(w.classify(1005) == .fresh)
        #expect(w.classify(1006) == .farFuture)
        do { let ok = w.accept(5000); #expect(!ok) }
        #expect(w.highest == 5)
    }

    @Test func jumpsClearTheSlotsTheyPassOver() {
        var w = ReplayWindow(farFutureLimit: UInt64.max)
        for s: UInt64 in [0, 1, 63, 64, 100, 4000] { let ok = w.accept(s); #expect(ok) }
        do { let ok = w.accept(ReplayWindow.size - 1); #expect(ok) }
        do { let ok = w.accept(50_000 + ReplayWindow.size); #expect(ok) }     // slides past 0...50_000
        for s: UInt64 in [4000] { #expect(w.classify(s) == .late) }
        #expect(w.classify(ReplayWindow.size - 1) == .duplicate)
        #expect(w.classify(ReplayWindow.size + 100) == .fresh)  // its slot held 100 before the slide
        do { let ok = w.accept(10 * ReplayWindow.size); #expect(ok) }              // past the whole window
        #expect(w.classify(10 * ReplayWindow.size - 1) == .fresh)
        #expect(w.classify(9 * ReplayWindow.size) == .late)
    }

    @Test func theFirstSequenceNeedNotBeZero() {
        var w = ReplayWindow()
        do { let ok = w.accept(42); #expect(ok) }
        #expect(w.classify(42) == .duplicate)
        do { let ok = w.accept(41); #expect(ok) }
        do { let ok = w.accept(43); #expect(ok) }
    }
}
