import Crypto
@testable import Punktfunk
import PunktfunkKernels
import Testing

/// Leopard-RS over GF(2^16) against reed-solomon-leopard 0.2.1 (the host's own crate family):
/// parity bit for bit for every (k, m) in the vector file, every recorded erasure pattern, every
/// erasure pattern of small codes, and clean refusals.
@Suite struct FECTests {
    struct Vectors: Decodable { let cases: [Case] }
    struct Case: Decodable {
        let k: Int, m: Int, shard_bytes: Int, seed: UInt64
        let recovery_all_sha256: String
        let recovery_sha256: [String]?
        let recovery_hex: [String]?
        let decodes: [Decode]
    }
    struct Decode: Decodable { let lost_originals: [Int], lost_recovery: [Int], recoverable: Bool }

    static let vectors: [Case] = (try? Fixtures.json("fec-vectors.json", as: Vectors.self).cases) ?? []

    static func originals(_ c: Case) -> [[UInt8]] {
        let stream = SplitMix64.bytes(seed: c.seed, count: c.k * c.shard_bytes)
        return (0..<c.k).map { Array(stream[($0 * c.shard_bytes)..<(($0 + 1) * c.shard_bytes)]) }
    }

    @Test func vectorFileIsPresent() throws {
        let cases = try Fixtures.json("fec-vectors.json", as: Vectors.self).cases
        #expect(cases.count >= 40)
    }

    @Test(arguments: vectors.indices)
    func parityMatchesTheHostsCrate(index: Int) throws {
        let c = Self.vectors[index]
        var codec = LeopardCodec()
        let recovery = try codec.encode(Self.originals(c), recoveryCount: c.m)
        #expect(recovery.joined().map { $0 }.sha256Hex == c.recovery_all_sha256, "k=\(c.k) m=\(c.m) shard=\(c.shard_bytes)")
        if let each = c.recovery_sha256 {
            for j in 0..<c.m where recovery[j].sha256Hex != each[j] {
                Issue.record("k=\(c.k) m=\(c.m) shard=\(c.shard_bytes): recovery shard \(j) differs")
            }
        }
        if let hex = c.recovery_hex { #expect(recovery.map(\.hex) == hex) }
    }

    @Test(arguments: vectors.indices)
    func recordedErasurePatternsDecodeLikeTheHostsCrate(index: Int) throws {
        let c = Self.vectors[index]
        let originals = Self.originals(c)
        var codec = LeopardCodec()
        let recovery = try codec.encode(originals, recoveryCount: c.m)
        for d in c.decodes {
            let lostO = Set(d.lost_originals), lostR = Set(d.lost_recovery)
            var haveO: [Int: [UInt8]] = [:], haveR: [Int: [UInt8]] = [:]
            for i in 0..<c.k where !lostO.contains(i) { haveO[i] = originals[i] }
            for j in 0..<c.m where !lostR.contains(j) { haveR[j] = recovery[j] }
            if d.recoverable {
                let restored = try codec.decode(originalCount: c.k, recoveryCount: c.m, originals: haveO, recovery: haveR)
                #expect(Set(restored.keys) == lostO)
                for (i, shard) in restored where shard != originals[i] {
                    Issue.record("k=\(c.k) m=\(c.m): original \(i) restored wrong (lost \(d.lost_originals), \(d.lost_recovery))")
                }
            } else {
                #expect(throws: DataPlaneError.unrecoverable(received: haveO.count + haveR.count, needed: c.k)) {
                    try codec.decode(originalCount: c.k, recoveryCount: c.m, originals: haveO, recovery: haveR)
                }
            }
        }
    }

    /// Every subset of the k + m shards of small codes, recoverable (at least k kept) or not.
    @Test(arguments: [(4, 2, 64), (3, 3, 44), (2, 5, 6), (5, 5, 130), (6, 3, 64), (7, 9, 2), (9, 4, 64), (1, 4, 8)])
    func everyErasurePatternOfSmallCodes(k: Int, m: Int, shardBytes: Int) throws {
        let stream = SplitMix64.bytes(seed: UInt64(k * 1000 + m), count: k * shardBytes)
        let originals = (0..<k).map { Array(stream[($0 * shardBytes)..<(($0 + 1) * shardBytes)]) }
        var codec = LeopardCodec()
        let recovery = try codec.encode(originals, recoveryCount: m)
        let n = k + m
        for mask in 0..<(1 << n) {
            var haveO: [Int: [UInt8]] = [:], haveR: [Int: [UInt8]] = [:]
            for i in 0..<k where mask & (1 << i) != 0 { haveO[i] = originals[i] }
            for j in 0..<m where mask & (1 << (k + j)) != 0 { haveR[j] = recovery[j] }
            if haveO.count + haveR.count >= k {
                let restored = try codec.decode(originalCount: k, recoveryCount: m, originals: haveO, recovery: haveR)
                #expect(restored.count == k - haveO.count)
                for (i, shard) in restored where shard != originals[i] {
                    Issue.record("(\(k), \(m)) kept mask \(String(mask, radix: 2)): original \(i) wrong")
                }
            } else {
                #expect(throws: DataPlaneError.self) {
                    try codec.decode(originalCount: k, recoveryCount: m, originals: haveO, recovery: haveR)
                }
            }
        }
    }

    /// The direct erasure-locator sum and the host crate's two Walsh transforms agree (the decoder
    /// picks whichever is cheaper).
    @Test(arguments: [(30, 6, 64), (16, 9, 44), (5, 20, 64), (100, 20, 130), (2, 40, 64)])
    func directLocatorsEqualTheWalshTransform(k: Int, m: Int, shardBytes: Int) throws {
        let stream = SplitMix64.bytes(seed: 77, count: k * shardBytes)
        let originals = (0..<k).map { Array(stream[($0 * shardBytes)..<(($0 + 1) * shardBytes)]) }
        var direct = LeopardCodec()
        var transform = LeopardCodec()
        transform.alwaysUseTransformForLocators = true
        let recovery = try direct.encode(originals, recoveryCount: m)
        var haveO: [Int: [UInt8]] = [:], haveR: [Int: [UInt8]] = [:]
        let lost = min(k, m)
        for i in lost..<k { haveO[i] = originals[i] }
        for j in 0..<m { haveR[j] = recovery[j] }
        let a = try direct.decode(originalCount: k, recoveryCount: m, originals: haveO, recovery: haveR)
        let b = try transform.decode(originalCount: k, recoveryCount: m, originals: haveO, recovery: haveR)
        #expect(a == b)
        #expect(a.count == lost)
        for (i, shard) in a { #expect(shard == originals[i]) }
    }

    /// The portable, SSSE3 and AVX2 kernels compute the same bytes (each level this CPU has).
    @Test func everyKernelLevelAgrees() throws {
        let supported = pk_kernel_level_supported()
        let stream = SplitMix64.bytes(seed: 9, count: 40 * 1388)
        let originals = (0..<40).map { Array(stream[($0 * 1388)..<(($0 + 1) * 1388)]) }
        var results: [[[UInt8]]] = []
        defer { pk_kernel_set_level(supported) }
        for level in 0...supported {
            #expect(pk_kernel_set_level(Int32(level)) == level)
            var codec = LeopardCodec()
            var recovery = try codec.encode(originals, recoveryCount: 9)
            var have: [Int: [UInt8]] = [:]
            for i in 9..<40 { have[i] = originals[i] }
            let restored = try codec.decode(originalCount: 40, recoveryCount: 9, originals: have,
                                            recovery: Dictionary(uniqueKeysWithValues: recovery.enumerated().map { ($0, $1) }))
            recovery += (0..<9).map { restored[$0] ?? [] }
            results.append(recovery)
        }
        #expect(results.allSatisfy { $0 == results[0] })
        #expect(results[0].suffix(9) == originals.prefix(9))
    }

    @Test func unsupportedGeometriesAreRefused() {
        var codec = LeopardCodec(maxWorkBytes: 1 << 20)
        let one = [[UInt8](repeating: 1, count: 64)]
        #expect(throws: DataPlaneError.self) { try codec.encode([[1, 2, 3]], recoveryCount: 1) }      // odd length
        #expect(throws: DataPlaneError.self) { try codec.encode(one, recoveryCount: 0) }               // m = 0
        #expect(throws: DataPlaneError.self) { try codec.encode([], recoveryCount: 1) }                // k = 0
        #expect(throws: DataPlaneError.self) { try codec.encode(one, recoveryCount: 65536) }           // k + m too big
        #expect(throws: DataPlaneError.self) {                                                        // scratch beyond the cap
            try codec.encode([[UInt8]](repeating: [UInt8](repeating: 0, count: 1024), count: 2048), recoveryCount: 10)
        }
        #expect(LeopardCodec.supports(originalCount: 32768, recoveryCount: 32768))
        #expect(!LeopardCodec.supports(originalCount: 32769, recoveryCount: 32768))
        #expect(LeopardCodec.usesHighRate(originalCount: 16, recoveryCount: 8))
        #expect(!LeopardCodec.usesHighRate(originalCount: 16, recoveryCount: 9))
        #expect(LeopardCodec.usesHighRate(originalCount: 16, recoveryCount: 16))
        #expect(!LeopardCodec.usesHighRate(originalCount: 4, recoveryCount: 5))
    }
}
