import PunktfunkKernels

/// The punktfunk host's erasure code: systematic Reed–Solomon over GF(2^16) with the Leopard-RS
/// additive FFT, bit-identical to reed-solomon-simd 3 (PyPI `reed-solomon-leopard` is its oracle).
///
/// k original shards and m recovery shards of `shardBytes` (even) bytes each; any k of the k + m
/// rebuild the originals. Which of the two transforms ("high rate" or "low rate") the code uses
/// depends on k and m exactly as the host's crate decides, so parity is only reproducible with the
/// block's own (k, m). Shard bytes pair into field elements per 64-byte block, 32 low bytes then 32
/// high bytes; a shorter tail of 2n bytes holds n low bytes then n high bytes.
///
/// A codec owns its scratch and reuses it: after the first block of the largest geometry it never
/// allocates. It refuses any geometry whose scratch would exceed `maxWorkBytes`.
public struct LeopardCodec: Sendable {
    /// Largest scratch this codec will allocate.
    public let maxWorkBytes: Int
    private var work: [UInt8] = []
    private var erasures: [UInt16] = []
    private var locators: [UInt16] = []
    private var marks: [Bool] = []
    private var erased: [Int] = []
    /// Tests set this to evaluate erasure locators with the host crate's Walsh transforms even
    /// when the direct sum would be cheaper, to prove both give the same values.
    var alwaysUseTransformForLocators = false

    public init(maxWorkBytes: Int = 256 << 20) {
        self.maxWorkBytes = maxWorkBytes
    }

    /// Whether the code exists for k originals and m recovery shards (the host crate's rule).
    public static func supports(originalCount k: Int, recoveryCount m: Int) -> Bool {
        guard k > 0, m > 0, k <= GF16.order, m <= GF16.order else { return false }
        return min(k.nextPowerOfTwo, m.nextPowerOfTwo) + max(k, m) <= GF16.order
    }

    /// True when (k, m) is coded with the high-rate transform (chunks of next_pow2(m) shards),
    /// false for the low-rate one (chunks of next_pow2(k)). Equal powers of two pick the "wrong"
    /// rate on purpose, as the host crate does: high rate when k <= m.
    public static func usesHighRate(originalCount k: Int, recoveryCount m: Int) -> Bool {
        let kp = k.nextPowerOfTwo, mp = m.nextPowerOfTwo
        if kp != mp { return kp > mp }
        return k <= m
    }

    static func validate(k: Int, m: Int, shardBytes: Int) throws(DataPlaneError) {
        guard supports(originalCount: k, recoveryCount: m) else {
            throw .fecParameters("\(k) original and \(m) recovery shards are outside the GF(2^16) code's range")
        }
        guard shardBytes > 0, shardBytes % 2 == 0 else {
            throw .fecParameters("shard length \(shardBytes) is not a positive even number of bytes")
        }
    }

    /// Bytes of scratch a block of this geometry needs (encoding or decoding, whichever is larger).
    public static func workBytes(originalCount k: Int, recoveryCount m: Int, shardBytes: Int) -> Int {
        let stride = (shardBytes + 63) / 64 * 64
        let count: Int
        if usesHighRate(originalCount: k, recoveryCount: m) {
            count = max((m.nextPowerOfTwo + k).nextPowerOfTwo, roundUp(k, m.nextPowerOfTwo))
        } else {
            count = max((k.nextPowerOfTwo + m).nextPowerOfTwo, roundUp(m, k.nextPowerOfTwo))
        }
        return count * stride
    }

    // MARK: - Encoding

    /// Computes the m recovery shards of k originals.
    /// - Parameters:
    ///   - originals: k × shardBytes bytes, shard i at offset i × shardBytes.
    ///   - recovery: room for m × shardBytes bytes; recovery shard j is written at j × shardBytes.
    public mutating func encode(
        originals: UnsafeRawBufferPointer, originalCount k: Int, recoveryCount m: Int, shardBytes: Int,
        into recovery: UnsafeMutableRawBufferPointer
    ) throws(DataPlaneError) {
        try Self.validate(k: k, m: m, shardBytes: shardBytes)
        guard originals.count >= k * shardBytes, recovery.count >= m * shardBytes else {
            throw .fecParameters("encode buffers are smaller than \(k) + \(m) shards of \(shardBytes) bytes")
        }
        let stride = (shardBytes + 63) / 64 * 64
        let highRate = Self.usesHighRate(originalCount: k, recoveryCount: m)
        let chunk = highRate ? m.nextPowerOfTwo : k.nextPowerOfTwo
        let count = highRate ? Self.roundUp(k, chunk) : Self.roundUp(m, chunk)
        try reserveWork(count * stride)
        let gf = GF16.shared
        work.withUnsafeMutableBytes { raw in
            let shards = Shards(base: raw.baseAddress!, stride: stride, shardBytes: shardBytes)
            for i in 0..<k { shards.load(i, from: originals.baseAddress! + i * shardBytes) }
            shards.zero(k..<count)
            gf.skew.withUnsafeBufferPointer { skew in
                gf.luts.withUnsafeBufferPointer { luts in
                    let t = Transform(shards: shards, skew: skew, luts: luts)
                    if highRate {
                        // IFFT each chunk of originals with its own skew, XOR them together, FFT once.
                        t.ifft(pos: 0, size: chunk, truncated: min(k, chunk), skewDelta: chunk)
                        var start = chunk
                        while start < k {
                            let n = min(chunk, k - start)
                            t.ifft(pos: start, size: chunk, truncated: n, skewDelta: start + chunk)
                            shards.xor(into: 0, from: start, count: chunk)
                            start += chunk
                        }
                        t.fft(pos: 0, size: chunk, truncated: m, skewDelta: 0)
                    } else {
                        // IFFT the originals once, then FFT a copy per chunk of recovery shards.
                        t.ifft(pos: 0, size: chunk, truncated: k, skewDelta: 0)
                        var start = chunk
                        while start < m {
                            shards.copy(from: 0, to: start, count: chunk)
                            start += chunk
                        }
                        start = 0
                        while start < m {
                            t.fft(pos: start, size: chunk, truncated: min(chunk, m - start), skewDelta: start + chunk)
                            start += chunk
                        }
                    }
                }
            }
            for j in 0..<m { shards.store(j, to: recovery.baseAddress! + j * shardBytes) }
        }
    }

    // MARK: - Decoding

    /// Rebuilds the missing originals of a block in place from any k of its k + m shards.
    /// - Parameters:
    ///   - originals: k × shardBytes bytes; shard i at offset i × shardBytes is read when
    ///     `originalPresent[i]` and written when it is not.
    ///   - recovery: recovery shard j, or nil when it did not arrive.
    /// - Returns: how many originals were rebuilt.
    /// - Throws: `.unrecoverable` when fewer than k shards are present, `.fecParameters` for a
    ///   geometry outside the code or beyond `maxWorkBytes`.
    @discardableResult
    public mutating func reconstruct(
        originals: UnsafeMutableRawBufferPointer, originalPresent: UnsafeBufferPointer<Bool>,
        originalCount k: Int, recoveryCount m: Int, shardBytes: Int,
        recovery: (Int) -> UnsafeRawPointer?
    ) throws(DataPlaneError) -> Int {
        try Self.validate(k: k, m: m, shardBytes: shardBytes)
        guard originals.count >= k * shardBytes, originalPresent.count >= k else {
            throw .fecParameters("decode buffers are smaller than \(k) shards of \(shardBytes) bytes")
        }
        var originalsPresent = 0
        for i in 0..<k where originalPresent[i] { originalsPresent += 1 }
        if originalsPresent == k { return 0 }
        var recoveryPresent = 0
        for j in 0..<m where recovery(j) != nil { recoveryPresent += 1 }
        guard originalsPresent + recoveryPresent >= k else {
            throw .unrecoverable(received: originalsPresent + recoveryPresent, needed: k)
        }

        let stride = (shardBytes + 63) / 64 * 64
        let highRate = Self.usesHighRate(originalCount: k, recoveryCount: m)
        let chunk = highRate ? m.nextPowerOfTwo : k.nextPowerOfTwo
        // Positions in the codeword: high rate puts recovery first, then originals at `chunk`;
        // low rate puts originals first, then recovery at `chunk`.
        let originalBase = highRate ? chunk : 0
        let recoveryBase = highRate ? 0 : chunk
        let end = chunk + (highRate ? k : m)
        let count = end.nextPowerOfTwo
        try reserveWork(count * stride)

        // Which positions hold known values (received, or the zero padding the code defines).
        if marks.count < count { marks = [Bool](repeating: false, count: count) }
        for p in 0..<count { marks[p] = false }
        for i in 0..<k where originalPresent[i] { marks[originalBase + i] = true }
        for j in 0..<m where recovery(j) != nil { marks[recoveryBase + j] = true }
        if !highRate { for p in k..<chunk { marks[p] = true } }   // low rate: padding originals are known zeros
        computeLocators(highRate: highRate, end: end, count: count, k: k, m: m, chunk: chunk)

        let gf = GF16.shared
        var rebuilt = 0
        work.withUnsafeMutableBytes { raw in
            let shards = Shards(base: raw.baseAddress!, stride: stride, shardBytes: shardBytes)
            locators.withUnsafeBufferPointer { loc in
                gf.skew.withUnsafeBufferPointer { skew in
                    gf.luts.withUnsafeBufferPointer { luts in
                        for i in 0..<k {
                            let p = originalBase + i
                            if originalPresent[i] {
                                shards.load(p, from: UnsafeRawPointer(originals.baseAddress! + i * shardBytes))
                                pk_gf16_mul(shards.at(p), stride, luts.baseAddress! + Int(loc[p]))
                            } else {
                                shards.zero(p..<(p + 1))
                            }
                        }
                        for j in 0..<m {
                            let p = recoveryBase + j
                            if let src = recovery(j) {
                                shards.load(p, from: src)
                                pk_gf16_mul(shards.at(p), stride, luts.baseAddress! + Int(loc[p]))
                            } else {
                                shards.zero(p..<(p + 1))
                            }
                        }
                        // Padding between the first part and `chunk`, and everything after `end`.
                        if highRate { shards.zero(m..<chunk) } else { shards.zero(k..<chunk) }
                        shards.zero(end..<count)

                        let t = Transform(shards: shards, skew: skew, luts: luts)
                        t.ifft(pos: 0, size: count, truncated: end, skewDelta: 0)
                        // Formal derivative of the polynomial in the novel basis.
                        for i in 1..<count {
                            let width = 1 << i.trailingZeroBitCount
                            shards.xor(into: i - width, from: i, count: width)
                        }
                        t.fft(pos: 0, size: count, truncated: end, skewDelta: 0)

                        for i in 0..<k where !originalPresent[i] {
                            let p = originalBase + i
                            pk_gf16_mul(shards.at(p), stride, luts.baseAddress! + Int(GF16.modulus - loc[p]))
                            shards.store(p, to: originals.baseAddress! + i * shardBytes)
                            rebuilt += 1
                        }
                    }
                }
            }
        }
        return rebuilt
    }

    /// The logarithm of the erasure locator's value (with the erased point itself left out) at every
    /// codeword position below `end`: sum over erased q of log(p ^ q), modulo 65535. The host crate
    /// evaluates this with two 65536-point Walsh transforms; when few positions are erased (high rate)
    /// or few are known (low rate, where everything past `end` counts as erased) the direct sum is far
    /// cheaper and gives the same values, so that is used whenever it costs less.
    private mutating func computeLocators(highRate: Bool, end: Int, count: Int, k: Int, m: Int, chunk: Int) {
        if locators.count < count { locators = [UInt16](repeating: 0, count: count) }
        let gf = GF16.shared
        // High rate: sum over the (few) erased positions; everything past `end` is a known zero.
        // Low rate: everything past `end` is erased, so sum over all (a constant) minus the (few)
        // known positions.
        var terms = erased
        erased = []
        terms.removeAll(keepingCapacity: true)
        for p in 0..<end where marks[p] != highRate { terms.append(p) }
        var out = locators
        locators = []
        if !alwaysUseTransformForLocators && end * terms.count <= (1 << 19) {
            let modulus = UInt32(GF16.modulus)
            let total = gf.logSum
            gf.logOfZeroIsZero.withUnsafeBufferPointer { lg in
                terms.withUnsafeBufferPointer { set in
                    out.withUnsafeMutableBufferPointer { loc in
                        for p in 0..<end {
                            var sum: UInt32 = 0
                            for q in set { sum &+= UInt32(lg[p ^ q]) }
                            sum %= modulus
                            loc[p] = UInt16(highRate ? sum : (total + modulus - sum) % modulus)
                        }
                    }
                }
            }
        } else {
            var e = erasures
            erasures = []
            if e.count != GF16.order { e = [UInt16](repeating: 0, count: GF16.order) }
            for p in 0..<GF16.order { e[p] = 0 }
            for p in 0..<end where !marks[p] { e[p] = 1 }
            if !highRate { for p in end..<GF16.order { e[p] = 1 } }
            GF16.fwht(&e, truncatedTo: highRate ? end : GF16.order)
            gf.logWalsh.withUnsafeBufferPointer { lw in
                for p in 0..<GF16.order {
                    let product = UInt32(e[p]) * UInt32(lw[p])
                    e[p] = GF16.addMod(UInt16(truncatingIfNeeded: product), UInt16(truncatingIfNeeded: product >> 16))
                }
            }
            GF16.fwht(&e, truncatedTo: GF16.order)
            for p in 0..<end { out[p] = e[p] }
            erasures = e
        }
        locators = out
        erased = terms
    }

    private mutating func reserveWork(_ bytes: Int) throws(DataPlaneError) {
        guard bytes <= maxWorkBytes else {
            throw .fecParameters("block needs \(bytes) bytes of FEC scratch, more than the \(maxWorkBytes)-byte limit")
        }
        if work.count < bytes { work = [UInt8](repeating: 0, count: bytes) }
    }

    static func roundUp(_ value: Int, _ multiple: Int) -> Int { (value + multiple - 1) / multiple * multiple }
}

extension Int {
    /// The smallest power of two at least `self` (1 for 0 and 1).
    var nextPowerOfTwo: Int {
        self <= 1 ? 1 : 1 << (Int.bitWidth - (self - 1).leadingZeroBitCount)
    }
}

/// Shards in the work layout: `stride` (a multiple of 64) bytes each, elements paired per 64-byte
/// block, the wire's short tail spread to the block's two halves.
struct Shards {
    let base: UnsafeMutableRawPointer
    let stride: Int
    let shardBytes: Int

    @inline(__always) func at(_ p: Int) -> UnsafeMutablePointer<UInt8> {
        (base + p * stride).assumingMemoryBound(to: UInt8.self)
    }

    /// Copies a wire-layout shard into position p.
    @inline(__always) func load(_ p: Int, from src: UnsafeRawPointer) {
        let whole = shardBytes & ~63
        let dst = base + p * stride
        dst.copyMemory(from: src, byteCount: whole)
        let tail = shardBytes - whole
        if tail > 0 {
            let half = tail / 2
            let block = dst + whole
            block.initializeMemory(as: UInt8.self, repeating: 0, count: 64)
            block.copyMemory(from: src + whole, byteCount: half)
            (block + 32).copyMemory(from: src + whole + half, byteCount: half)
        }
    }

    /// Copies position p out in the wire layout.
    @inline(__always) func store(_ p: Int, to dst: UnsafeMutableRawPointer) {
        let whole = shardBytes & ~63
        let src = base + p * stride
        dst.copyMemory(from: src, byteCount: whole)
        let tail = shardBytes - whole
        if tail > 0 {
            let half = tail / 2
            (dst + whole).copyMemory(from: src + whole, byteCount: half)
            (dst + whole + half).copyMemory(from: src + whole + 32, byteCount: half)
        }
    }

    func zero(_ range: Range<Int>) {
        guard !range.isEmpty else { return }
        (base + range.lowerBound * stride).initializeMemory(as: UInt8.self, repeating: 0, count: range.count * stride)
    }

    /// Positions x..<x+count ^= positions y..<y+count (non-overlapping).
    @inline(__always) func xor(into x: Int, from y: Int, count: Int) {
        pk_xor(at(x), at(y), count * stride)
    }

    func copy(from src: Int, to dst: Int, count: Int) {
        (base + dst * stride).copyMemory(from: base + src * stride, byteCount: count * stride)
    }
}

/// The additive FFT and its inverse over a run of shards, exactly as the host crate computes them
/// (including which butterflies a truncated transform skips).
struct Transform {
    let shards: Shards
    let skew: UnsafeBufferPointer<UInt16>
    let luts: UnsafeBufferPointer<pk_gf16_lut>

    func fft(pos: Int, size: Int, truncated: Int, skewDelta: Int) {
        var dist = size >> 1
        while dist > 0 {
            var r = 0
            while r < truncated {
                let logM = skew[r + dist + skewDelta - 1]
                for i in r..<(r + dist) {
                    let a = shards.at(pos + i), b = shards.at(pos + i + dist)
                    if logM == GF16.modulus {
                        pk_xor(b, a, shards.stride)
                    } else {
                        pk_gf16_fft_butterfly(a, b, shards.stride, luts.baseAddress! + Int(logM))
                    }
                }
                r += dist << 1
            }
            dist >>= 1
        }
    }

    func ifft(pos: Int, size: Int, truncated: Int, skewDelta: Int) {
        var dist = 1
        while dist < size {
            var r = 0
            while r < truncated {
                let logM = skew[r + dist + skewDelta - 1]
                for i in r..<(r + dist) {
                    let a = shards.at(pos + i), b = shards.at(pos + i + dist)
                    if logM == GF16.modulus {
                        pk_xor(b, a, shards.stride)
                    } else {
                        pk_gf16_ifft_butterfly(a, b, shards.stride, luts.baseAddress! + Int(logM))
                    }
                }
                r += dist << 1
            }
            dist <<= 1
        }
    }
}

extension LeopardCodec {
    /// Recovery shards for `originals` (all the same even length). Allocates its result: for tests,
    /// tools and the stand-in host, not the receive path.
    public mutating func encode(_ originals: [[UInt8]], recoveryCount m: Int) throws(DataPlaneError) -> [[UInt8]] {
        guard let shardBytes = originals.first?.count, originals.allSatisfy({ $0.count == shardBytes }) else {
            throw .fecParameters("originals must be one or more shards of one length")
        }
        let k = originals.count
        var flat = [UInt8]()
        flat.reserveCapacity(k * shardBytes)
        for shard in originals { flat += shard }
        var out = [UInt8](repeating: 0, count: m * shardBytes)
        let result = flat.withUnsafeBytes { input in
            out.withUnsafeMutableBytes { output in
                Result { () throws(DataPlaneError) in
                    try encode(originals: input, originalCount: k, recoveryCount: m, shardBytes: shardBytes, into: output)
                }
            }
        }
        try result.get()
        return (0..<m).map { Array(out[($0 * shardBytes)..<(($0 + 1) * shardBytes)]) }
    }

    /// The missing originals, keyed by index, from the shards that arrived (the oracle's
    /// `decode(k, m, originals, recovery)` shape). Allocates: for tests and tools.
    public mutating func decode(
        originalCount k: Int, recoveryCount m: Int, originals: [Int: [UInt8]], recovery: [Int: [UInt8]]
    ) throws(DataPlaneError) -> [Int: [UInt8]] {
        if originals.isEmpty && recovery.isEmpty { throw .unrecoverable(received: 0, needed: k) }
        guard let shardBytes = (originals.values.first ?? recovery.values.first)?.count,
              originals.values.allSatisfy({ $0.count == shardBytes }), recovery.values.allSatisfy({ $0.count == shardBytes }),
              originals.keys.allSatisfy({ (0..<k).contains($0) }), recovery.keys.allSatisfy({ (0..<m).contains($0) })
        else { throw .fecParameters("shards must share one length and have indices inside the block") }
        var flat = [UInt8](repeating: 0, count: k * shardBytes)
        var present = [Bool](repeating: false, count: k)
        for (i, shard) in originals {
            flat.replaceSubrange((i * shardBytes)..<((i + 1) * shardBytes), with: shard)
            present[i] = true
        }
        var recoveryFlat = [UInt8](repeating: 0, count: m * shardBytes)
        for (j, shard) in recovery { recoveryFlat.replaceSubrange((j * shardBytes)..<((j + 1) * shardBytes), with: shard) }
        let result = flat.withUnsafeMutableBytes { out in
            present.withUnsafeBufferPointer { have in
                recoveryFlat.withUnsafeBytes { rec in
                    Result { () throws(DataPlaneError) in
                        try reconstruct(originals: out, originalPresent: have, originalCount: k, recoveryCount: m,
                                        shardBytes: shardBytes,
                                        recovery: { recovery[$0] == nil ? nil : rec.baseAddress! + $0 * shardBytes })
                    }
                }
            }
        }
        _ = try result.get()
        var restored: [Int: [UInt8]] = [:]
        for i in 0..<k where !present[i] { restored[i] = Array(flat[(i * shardBytes)..<((i + 1) * shardBytes)]) }
        return restored
    }
}
