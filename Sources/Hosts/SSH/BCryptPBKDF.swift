import Crypto

/// bcrypt-pbkdf, the key derivation OpenSSH uses for passphrase-protected private keys
/// (`kdfname "bcrypt"`): SHA-512 of the passphrase and salt feed an expensive Blowfish key
/// schedule; output bytes are interleaved across 32-byte blocks so that every block costs the
/// full number of rounds.
///
/// Invariants: `rounds` ≥ 1 and the output length 1…1024 (OpenSSH's own limits), checked before
/// any work; the result depends only on the inputs (known-answer tests against PyPI `bcrypt`).
enum BCryptPBKDF {
    enum Failure: Error, Equatable {
        case badParameters(String)
    }

    static func derive(passphrase: [UInt8], salt: [UInt8], rounds: Int, count: Int) throws(Failure) -> [UInt8] {
        guard rounds >= 1, rounds <= 1 << 20 else { throw .badParameters("\(rounds) rounds is outside 1…\(1 << 20)") }
        guard (1...1024).contains(count) else { throw .badParameters("a key of \(count) bytes is outside 1…1024") }
        guard !salt.isEmpty, salt.count <= 1 << 20 else { throw .badParameters("a salt of \(salt.count) bytes") }
        let blockSize = 32
        let stride = (count + blockSize - 1) / blockSize
        var amount = (count + stride - 1) / stride
        let hashedPassphrase = Array(SHA512.hash(data: passphrase))
        var key = [UInt8](repeating: 0, count: count)
        var remaining = count
        var counter: UInt32 = 1
        var blowfish = Blowfish()
        while remaining > 0 {
            var counted = salt
            counted += [UInt8(counter >> 24), UInt8(truncatingIfNeeded: counter >> 16), UInt8(truncatingIfNeeded: counter >> 8),
                        UInt8(truncatingIfNeeded: counter)]
            var hashedSalt = Array(SHA512.hash(data: counted))
            var block = blowfish.bcryptHash(passphrase: hashedPassphrase, salt: hashedSalt)
            var output = block
            for _ in 1..<rounds {
                hashedSalt = Array(SHA512.hash(data: block))
                block = blowfish.bcryptHash(passphrase: hashedPassphrase, salt: hashedSalt)
                for index in 0..<blockSize { output[index] ^= block[index] }
            }
            amount = min(amount, remaining)
            var written = 0
            while written < amount {
                let destination = written * stride + Int(counter - 1)
                if destination >= count { break }
                key[destination] = output[written]
                written += 1
            }
            remaining -= written
            counter += 1
        }
        return key
    }
}

/// Blowfish with the "expensive key schedule" variant bcrypt needs (`expandstate` mixes a salt
/// into the schedule). Only what bcrypt-pbkdf uses is here.
struct Blowfish {
    private var p = [UInt32](repeating: 0, count: 18)
    private var s = [UInt32](repeating: 0, count: 1024)

    private mutating func reset() {
        let initial = BlowfishTables.initialState
        for index in 0..<18 { p[index] = initial[index] }
        for index in 0..<1024 { s[index] = initial[18 + index] }
    }

    @inline(__always)
    private func f(_ x: UInt32) -> UInt32 {
        let a = s[Int(x >> 24)], b = s[256 + Int((x >> 16) & 0xff)]
        let c = s[512 + Int((x >> 8) & 0xff)], d = s[768 + Int(x & 0xff)]
        return ((a &+ b) ^ c) &+ d
    }

    @inline(__always)
    func encipher(_ left: inout UInt32, _ right: inout UInt32) {
        var l = left ^ p[0]
        var r = right
        var round = 1
        while round < 17 {
            r ^= f(l) ^ p[round]
            l ^= f(r) ^ p[round + 1]
            round += 2
        }
        left = r ^ p[17]
        right = l
    }

    /// The next 32-bit big-endian word of `bytes`, wrapping around at the end.
    @inline(__always)
    private static func word(_ bytes: [UInt8], _ position: inout Int) -> UInt32 {
        var word: UInt32 = 0
        for _ in 0..<4 {
            if position >= bytes.count { position = 0 }
            word = word << 8 | UInt32(bytes[position])
            position += 1
        }
        return word
    }

    private mutating func expand(data: [UInt8]?, key: [UInt8]) {
        var position = 0
        for index in 0..<18 { p[index] ^= Self.word(key, &position) }
        var left: UInt32 = 0, right: UInt32 = 0
        position = 0
        var index = 0
        while index < 18 {
            if let data {
                left ^= Self.word(data, &position)
                right ^= Self.word(data, &position)
            }
            encipher(&left, &right)
            p[index] = left
            p[index + 1] = right
            index += 2
        }
        index = 0
        while index < 1024 {
            if let data {
                left ^= Self.word(data, &position)
                right ^= Self.word(data, &position)
            }
            encipher(&left, &right)
            s[index] = left
            s[index + 1] = right
            index += 2
        }
    }

    /// OpenBSD's `bcrypt_hash`: 32 bytes from the SHA-512 digests of passphrase and salt.
    mutating func bcryptHash(passphrase: [UInt8], salt: [UInt8]) -> [UInt8] {
        reset()
        expand(data: salt, key: passphrase)
        for _ in 0..<64 {
            expand(data: nil, key: salt)
            expand(data: nil, key: passphrase)
        }
        let magic = Array("OxychromaticBlowfishSwatDynamite".utf8)
        var words = [UInt32](repeating: 0, count: 8)
        var position = 0
        for index in 0..<8 { words[index] = Self.word(magic, &position) }
        for _ in 0..<64 {
            var block = 0
            while block < 8 {
                var left = words[block], right = words[block + 1]
                encipher(&left, &right)
                words[block] = left
                words[block + 1] = right
                block += 2
            }
        }
        var out = [UInt8](repeating: 0, count: 32)
        for index in 0..<8 {
            // bcrypt_hash writes its words little-endian.
            out[4 * index] = UInt8(truncatingIfNeeded: words[index])
            out[4 * index + 1] = UInt8(truncatingIfNeeded: words[index] >> 8)
            out[4 * index + 2] = UInt8(truncatingIfNeeded: words[index] >> 16)
            out[4 * index + 3] = UInt8(truncatingIfNeeded: words[index] >> 24)
        }
        return out
    }
}
