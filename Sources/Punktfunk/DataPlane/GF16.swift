import PunktfunkKernels

/// The arithmetic of GF(2^16) as the punktfunk host's FEC (reed-solomon-simd 3, the Leopard-RS
/// algorithm) defines it: field polynomial 0x1002D, elements written in a Cantor basis so that the
/// additive FFT works, logarithms and exponentials over that basis, the FFT's skew factors, the
/// Walsh-transformed logarithms used to evaluate erasure locators, and one 128-byte nibble
/// multiplication table per constant for the SIMD kernels.
///
/// Built once per process on first use (about 9 MiB) and immutable afterwards. Logarithms live in
/// 0...65535 where 65535 stands for the log of zero; `mul(x, log:)` treats a log of 65535 (or 0) as
/// multiplication by one, which is what the decoder's locator values rely on.
final class GF16: Sendable {
    static let shared = GF16()

    static let order = 65536
    static let modulus: UInt16 = 65535
    static let polynomial = 0x1002D
    static let cantorBasis: [UInt16] = [
        0x0001, 0xACCA, 0x3C0E, 0x163E, 0xC582, 0xED2E, 0x914C, 0x4012,
        0x6C98, 0x10D8, 0x6A72, 0xB900, 0xFDB8, 0xFB34, 0xFF38, 0x991E,
    ]

    /// exp[log[x]] == x for x != 0; exp[65535] == exp[0].
    let exp: [UInt16]
    /// log[0] == 65535.
    let log: [UInt16]
    /// FFT twiddle logarithms, 65535 entries; 65535 means "multiply by zero" (the butterfly skips it).
    let skew: [UInt16]
    /// `log` with entry 0 set to 0: the kernel the erasure locator convolves with.
    let logOfZeroIsZero: [UInt16]
    /// The Walsh transform of `logOfZeroIsZero` (erasure-locator evaluation by transform).
    let logWalsh: [UInt16]
    /// `luts[logM]`: the nibble tables for multiplication by exp[logM].
    let luts: [pk_gf16_lut]
    /// Sum over all x of log[x] (log[0] counted as 0), modulo 65535: the complement trick in
    /// `locatorLogs` needs it.
    let logSum: UInt32

    private init() {
        var exp = [UInt16](repeating: 0, count: Self.order)
        var log = [UInt16](repeating: 0, count: Self.order)
        // Logarithms in the polynomial basis first (held in `exp` for the moment).
        var state = 1
        for i in 0..<Int(Self.modulus) {
            exp[state] = UInt16(i)
            state <<= 1
            if state >= Self.order { state ^= Self.polynomial }
        }
        exp[0] = Self.modulus
        // The element with Cantor-basis coordinates i, then its logarithm.
        log[0] = 0
        for bit in 0..<16 {
            let width = 1 << bit
            for j in 0..<width { log[j + width] = log[j] ^ Self.cantorBasis[bit] }
        }
        for i in 0..<Self.order { log[i] = exp[Int(log[i])] }
        for i in 0..<Self.order { exp[Int(log[i])] = UInt16(i) }
        exp[Int(Self.modulus)] = exp[0]

        func mul(_ x: UInt16, _ logM: UInt16) -> UInt16 {
            x == 0 ? 0 : exp[Int(GF16.addMod(log[Int(x)], logM))]
        }

        // Skew factors of the additive FFT.
        var skew = [UInt16](repeating: 0, count: Int(Self.modulus))
        var temp = [UInt16](repeating: 0, count: 15)
        for i in 1..<16 { temp[i - 1] = UInt16(1 << i) }
        for m in 0..<15 {
            let step = 1 << (m + 1)
            skew[(1 << m) - 1] = 0
            for i in m..<15 {
                let s = 1 << (i + 1)
                var j = (1 << m) - 1
                while j < s {
                    skew[j + s] = skew[j] ^ temp[i]
                    j += step
                }
            }
            temp[m] = Self.modulus - log[Int(mul(temp[m], log[Int(temp[m] ^ 1)]))]
            for i in (m + 1)..<15 {
                let sum = GF16.addMod(log[Int(temp[i] ^ 1)], temp[m])
                temp[i] = mul(temp[i], sum)
            }
        }
        for i in 0..<Int(Self.modulus) { skew[i] = log[Int(skew[i])] }

        var logOfZeroIsZero = log
        logOfZeroIsZero[0] = 0
        var logWalsh = logOfZeroIsZero
        GF16.fwht(&logWalsh, truncatedTo: Self.order)

        var sum: UInt32 = 0
        for i in 1..<Self.order { sum = (sum + UInt32(log[i])) % UInt32(Self.modulus) }

        // Multiplication is linear, so each 16-entry nibble table is XORs of the products of the
        // four bits of that nibble: 16 field multiplications per constant instead of 64.
        var luts = [pk_gf16_lut](repeating: pk_gf16_lut(), count: Self.order)
        luts.withUnsafeMutableBufferPointer { out in
            exp.withUnsafeBufferPointer { e in
                log.withUnsafeBufferPointer { l in
                    var basis = [UInt16](repeating: 0, count: 16)
                    var table = [UInt16](repeating: 0, count: 16)
                    for logM in 0..<Self.order {
                        for b in 0..<16 {
                            let x = 1 << b
                            let s = UInt32(l[x]) + UInt32(logM)
                            basis[b] = e[Int(UInt16(truncatingIfNeeded: s + (s >> 16)))]
                        }
                        withUnsafeMutableBytes(of: &out[logM]) { raw in
                            for nibble in 0..<4 {
                                table[0] = 0
                                for x in 1..<16 {
                                    let low = x & -x
                                    table[x] = table[x ^ low] ^ basis[4 * nibble + low.trailingZeroBitCount]
                                }
                                for x in 0..<16 {
                                    raw[16 * nibble + x] = UInt8(truncatingIfNeeded: table[x])
                                    raw[64 + 16 * nibble + x] = UInt8(truncatingIfNeeded: table[x] >> 8)
                                }
                            }
                        }
                    }
                }
            }
        }

        self.exp = exp
        self.log = log
        self.skew = skew
        self.logWalsh = logWalsh
        self.logOfZeroIsZero = logOfZeroIsZero
        self.luts = luts
        self.logSum = sum
    }

    /// a + b modulo 65535, in reed-solomon-simd's representation (the result may be 65535 for 0).
    @inline(__always)
    static func addMod(_ a: UInt16, _ b: UInt16) -> UInt16 {
        let sum = UInt32(a) + UInt32(b)
        return UInt16(truncatingIfNeeded: sum + (sum >> 16))
    }

    /// a - b modulo 65535 in the same representation.
    @inline(__always)
    static func subMod(_ a: UInt16, _ b: UInt16) -> UInt16 {
        let dif = UInt32(a) &- UInt32(b)
        return UInt16(truncatingIfNeeded: dif &+ (dif >> 16))
    }

    /// x times the element whose logarithm is `logM`.
    @inline(__always)
    func mul(_ x: UInt16, log logM: UInt16) -> UInt16 {
        x == 0 ? 0 : exp[Int(GF16.addMod(log[Int(x)], logM))]
    }

    /// The fast Walsh–Hadamard transform modulo 65535 over 65536 entries, of which only the first
    /// `truncatedTo` may be non-zero. Unnormalised: applying it twice multiplies by 65536, which is
    /// 1 modulo 65535, so it is its own inverse here.
    static func fwht(_ data: inout [UInt16], truncatedTo truncated: Int) {
        data.withUnsafeMutableBufferPointer { d in
            var dist = 1
            while dist < order {
                let dist2 = dist << 1
                var r = 0
                while r < truncated {
                    for i in r..<(r + dist) {
                        let a = d[i], b = d[i + dist]
                        d[i] = addMod(a, b)
                        d[i + dist] = subMod(a, b)
                    }
                    r += dist2
                }
                dist = dist2
            }
        }
    }
}
