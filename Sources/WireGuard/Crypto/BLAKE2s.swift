/// BLAKE2s (RFC 7693): the hash WireGuard's Noise construction is built on, plain or keyed, with
/// a digest of 1 to 32 bytes. swift-crypto has no BLAKE2s, so it is written here, straight from
/// the RFC: 32-bit words, 64-byte blocks, ten rounds of the G function over the message schedule.
public struct BLAKE2s: Sendable {
    public static let blockLength = 64
    public static let maximumDigestLength = 32

    static let initializationVector: [UInt32] = [
        0x6A09_E667, 0xBB67_AE85, 0x3C6E_F372, 0xA54F_F53A, 0x510E_527F, 0x9B05_688C, 0x1F83_D9AB, 0x5BE0_CD19,
    ]

    /// The message word order of each of the ten rounds (RFC 7693, section 2.7).
    static let schedule: [[Int]] = [
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
        [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
        [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
        [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
        [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
        [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
        [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
        [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
        [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
        [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
    ]

    private var state: [UInt32]
    private var buffer: [UInt8] = []
    private var bytesCompressed: UInt64 = 0
    private let digestLength: Int

    /// A hash with a digest of `digestLength` bytes (1…32), keyed when `key` is not empty (at
    /// most 32 bytes): the key is the first block, as RFC 7693 specifies.
    public init(digestLength: Int = 32, key: [UInt8] = []) {
        precondition((1...Self.maximumDigestLength).contains(digestLength), "BLAKE2s digests are 1 to 32 bytes")
        precondition(key.count <= 32, "BLAKE2s keys are at most 32 bytes")
        self.digestLength = digestLength
        state = Self.initializationVector
        state[0] ^= 0x0101_0000 ^ (UInt32(key.count) << 8) ^ UInt32(digestLength)
        if !key.isEmpty {
            buffer = key + [UInt8](repeating: 0, count: Self.blockLength - key.count)
        }
    }

    public mutating func update<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        for byte in bytes {
            // The last block is compressed with the final flag, so a full buffer waits until
            // more input proves it is not the last.
            if buffer.count == Self.blockLength {
                bytesCompressed &+= UInt64(Self.blockLength)
                compress(buffer, final: false)
                buffer.removeAll(keepingCapacity: true)
            }
            buffer.append(byte)
        }
    }

    public mutating func finalize() -> [UInt8] {
        bytesCompressed &+= UInt64(buffer.count)
        compress(buffer + [UInt8](repeating: 0, count: Self.blockLength - buffer.count), final: true)
        var digest: [UInt8] = []
        digest.reserveCapacity(32)
        for word in state {
            for shift in stride(from: 0, to: 32, by: 8) { digest.append(UInt8(truncatingIfNeeded: word >> UInt32(shift))) }
        }
        return Array(digest.prefix(digestLength))
    }

    /// The digest of the concatenation of `parts`.
    public static func hash(_ parts: [UInt8]..., digestLength: Int = 32, key: [UInt8] = []) -> [UInt8] {
        var hasher = BLAKE2s(digestLength: digestLength, key: key)
        for part in parts { hasher.update(part) }
        return hasher.finalize()
    }

    private mutating func compress(_ block: [UInt8], final: Bool) {
        var m = [UInt32](repeating: 0, count: 16)
        for i in 0..<16 {
            m[i] = UInt32(block[4 * i]) | UInt32(block[4 * i + 1]) << 8 | UInt32(block[4 * i + 2]) << 16 | UInt32(block[4 * i + 3]) << 24
        }
        var v = state + Self.initializationVector
        v[12] ^= UInt32(truncatingIfNeeded: bytesCompressed)
        v[13] ^= UInt32(truncatingIfNeeded: bytesCompressed >> 32)
        if final { v[14] = ~v[14] }
        func mix(_ a: Int, _ b: Int, _ c: Int, _ d: Int, _ x: UInt32, _ y: UInt32) {
            v[a] = v[a] &+ v[b] &+ x
            v[d] = rotateRight(v[d] ^ v[a], 16)
            v[c] = v[c] &+ v[d]
            v[b] = rotateRight(v[b] ^ v[c], 12)
            v[a] = v[a] &+ v[b] &+ y
            v[d] = rotateRight(v[d] ^ v[a], 8)
            v[c] = v[c] &+ v[d]
            v[b] = rotateRight(v[b] ^ v[c], 7)
        }
        for round in 0..<10 {
            let s = Self.schedule[round]
            mix(0, 4, 8, 12, m[s[0]], m[s[1]])
            mix(1, 5, 9, 13, m[s[2]], m[s[3]])
            mix(2, 6, 10, 14, m[s[4]], m[s[5]])
            mix(3, 7, 11, 15, m[s[6]], m[s[7]])
            mix(0, 5, 10, 15, m[s[8]], m[s[9]])
            mix(1, 6, 11, 12, m[s[10]], m[s[11]])
            mix(2, 7, 8, 13, m[s[12]], m[s[13]])
            mix(3, 4, 9, 14, m[s[14]], m[s[15]])
        }
        for i in 0..<8 { state[i] ^= v[i] ^ v[i + 8] }
    }
}

@inline(__always) private func rotateRight(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }

/// HMAC (RFC 2104) over BLAKE2s-256 with its 64-byte block: what WireGuard's KDF is made of.
/// (Not keyed BLAKE2s: the Noise specification builds its KDF on HMAC for every hash.)
public func hmacBLAKE2s(key: [UInt8], _ message: [UInt8]...) -> [UInt8] {
    var block = key.count > BLAKE2s.blockLength ? BLAKE2s.hash(key) : key
    block += [UInt8](repeating: 0, count: BLAKE2s.blockLength - block.count)
    var inner = BLAKE2s()
    inner.update(block.map { $0 ^ 0x36 })
    for part in message { inner.update(part) }
    var outer = BLAKE2s()
    outer.update(block.map { $0 ^ 0x5C })
    outer.update(inner.finalize())
    return outer.finalize()
}
