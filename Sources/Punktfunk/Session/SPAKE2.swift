import CSodium
import Crypto
import Foundation

/// SPAKE2 over Edwards25519 as side A (the client), as punktfunk/1 pairing uses it.
///
/// Matches the host's Rust `spake2` crate and PyPI `spake2` (`Ed25519Group`, asymmetric):
/// w = HKDF-SHA256(salt ∅, password, "SPAKE2 pw", 48 bytes) as a big-endian integer mod ℓ;
/// message A = 0x41 ‖ enc(x·G + w·M); key = SHA256(SHA256(pw) ‖ SHA256(idA) ‖ SHA256(idB) ‖ X ‖ Y ‖ K)
/// with K = x·(Y − w·N). The secret scalar lives only in this value and is never encoded.
public struct SPAKE2SideA: Sendable {
    /// The blinding points (compressed Edwards), from the spake2 crates' Ed25519 parameters.
    public static let pointM: [UInt8] = hexBytes("15cfd18e385952982b6a8f8c7854963b58e34388c8e6dae891db756481a02312")
    public static let pointN: [UInt8] = hexBytes("f04f2e7eb734b2a8f8b472eaf9c3c632576ac64aea650b496a8a20ff00e583c3")

    private let password: [UInt8]
    private let idA: [UInt8]
    private let idB: [UInt8]
    private let w: [UInt8]
    private let x: [UInt8]
    /// The 32-byte element X = x·G + w·M.
    private let elementX: [UInt8]

    /// Starts side A with a fresh random scalar.
    public init(password: [UInt8], idA: [UInt8], idB: [UInt8]) throws(PunktfunkSessionError) {
        var wide = [UInt8](repeating: 0, count: 64)
        randombytes_buf(&wide, 64)
        try self.init(password: password, idA: idA, idB: idB, scalar: Self.reduce(wide))
    }

    /// Starts side A with a given secret scalar (32 bytes little-endian, already reduced); for
    /// known-answer tests only.
    public init(password: [UInt8], idA: [UInt8], idB: [UInt8], scalar: [UInt8]) throws(PunktfunkSessionError) {
        guard Self.sodiumReady else { throw .pairingRefused("libsodium failed to initialise") }
        guard scalar.count == 32 else { throw .pairingRefused("SPAKE2 scalar must be 32 bytes") }
        self.password = password
        self.idA = idA
        self.idB = idB
        self.w = Self.passwordScalar(password)
        self.x = scalar
        guard let xG = Self.baseMultiply(scalar), let wM = Self.multiply(w, Self.pointM), let sum = Self.add(xG, wM) else {
            throw .pairingRefused("SPAKE2 arithmetic failed (degenerate scalar)")
        }
        self.elementX = sum
    }

    /// The message to send: `0x41 ‖ X` (33 bytes).
    public var outboundMessage: [UInt8] { [0x41] + elementX }

    /// Finishes with the host's message (`0x42 ‖ Y`) and returns the 32-byte shared key.
    public func finish(inboundMessage message: [UInt8]) throws(PunktfunkSessionError) -> [UInt8] {
        guard message.count == 33 else { throw .malformed("SPAKE2 message of \(message.count) bytes; expected 33") }
        guard message[0] == 0x42 else { throw .malformed("SPAKE2 message has side byte 0x\(String(message[0], radix: 16)); expected 0x42 (host)") }
        let elementY = Array(message[1...])
        guard elementY.withUnsafeBufferPointer({ crypto_core_ed25519_is_valid_point($0.baseAddress!) }) == 1 else {
            throw .malformed("SPAKE2 message is not a valid Edwards25519 point")
        }
        guard let wN = Self.multiply(w, Self.pointN), let unblinded = Self.subtract(elementY, wN),
              let k = Self.multiply(x, unblinded) else {
            throw .malformed("SPAKE2 message leads to a degenerate point")
        }
        var transcript = [UInt8]()
        transcript += SHA256.hash(data: password)
        transcript += SHA256.hash(data: idA)
        transcript += SHA256.hash(data: idB)
        transcript += elementX
        transcript += elementY
        transcript += k
        return Array(SHA256.hash(data: transcript))
    }

    // MARK: - arithmetic (libsodium, scalars little-endian)

    static let sodiumReady: Bool = sodium_init() >= 0

    /// w: HKDF output read big-endian, reduced mod ℓ, as 32 little-endian bytes.
    static func passwordScalar(_ password: [UInt8]) -> [UInt8] {
        let okm = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: password), salt: [UInt8](),
                                         info: Array("SPAKE2 pw".utf8), outputByteCount: 48)
        let bigEndian = okm.withUnsafeBytes { Array($0) }
        return reduce(Array(bigEndian.reversed()) + [UInt8](repeating: 0, count: 16))
    }

    static func reduce(_ wide: [UInt8]) -> [UInt8] {
        precondition(wide.count == 64)
        var out = [UInt8](repeating: 0, count: 32)
        crypto_core_ed25519_scalar_reduce(&out, wide)
        return out
    }

    static func baseMultiply(_ scalar: [UInt8]) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 32)
        return crypto_scalarmult_ed25519_base_noclamp(&out, scalar) == 0 ? out : nil
    }

    static func multiply(_ scalar: [UInt8], _ point: [UInt8]) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 32)
        return crypto_scalarmult_ed25519_noclamp(&out, scalar, point) == 0 ? out : nil
    }

    static func add(_ p: [UInt8], _ q: [UInt8]) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 32)
        return crypto_core_ed25519_add(&out, p, q) == 0 ? out : nil
    }

    static func subtract(_ p: [UInt8], _ q: [UInt8]) -> [UInt8]? {
        var out = [UInt8](repeating: 0, count: 32)
        return crypto_core_ed25519_sub(&out, p, q) == 0 ? out : nil
    }
}

/// Bytes from lowercase or uppercase hex; invalid digits become zero (constants only).
func hexBytes(_ hex: String) -> [UInt8] {
    let digits = Array(hex.utf8)
    var out = [UInt8]()
    out.reserveCapacity(digits.count / 2)
    func value(_ c: UInt8) -> UInt8 {
        switch c {
        case 48...57: return c - 48
        case 97...102: return c - 87
        case 65...70: return c - 55
        default: return 0
        }
    }
    var i = 0
    while i + 1 < digits.count {
        out.append(value(digits[i]) << 4 | value(digits[i + 1]))
        i += 2
    }
    return out
}
