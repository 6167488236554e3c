import BigInt
import Crypto
import Foundation

/// CPACE-X25519-SHA512 (draft-irtf-cfrg-cpace) as Sendspin's static pairing code uses it: the
/// server is party A (initiator), the client party B (responder); the password is the 8-digit
/// code, the channel identifier empty, the session id bound to the current Noise handshake.
/// Written from the draft and Sendspin's pairing.md; checked against their known-answer values.
public enum CPace {
    /// Curve25519's field prime 2^255 − 19 and Montgomery coefficient.
    private static let p = (BigUInt(1) << 255) - 19
    private static let a = BigUInt(486662)

    /// LEB128 length prefix, then the bytes.
    static func lv(_ bytes: [UInt8]) -> [UInt8] {
        var length = bytes.count
        var prefix: [UInt8] = []
        repeat {
            var byte = UInt8(length & 0x7F)
            length >>= 7
            if length > 0 { byte |= 0x80 }
            prefix.append(byte)
        } while length > 0
        return prefix + bytes
    }

    /// The session id: "sendspin-pair-pake-v1" ‖ handshake hash ‖ pairing index ‖ round (u32 BE).
    public static func sessionID(handshakeHash: [UInt8], pairingIndex: UInt32, round: UInt32 = 1) -> [UInt8] {
        func u32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        return Array("sendspin-pair-pake-v1".utf8) + handshakeHash + u32(pairingIndex) + u32(round)
    }

    /// The generator: SHA-512 of the generator string, its first 32 bytes read as a field
    /// element (top bit cleared, little-endian), mapped to the curve by Elligator 2 (Z = 2).
    public static func generator(password: [UInt8], sessionID: [UInt8], channelID: [UInt8] = []) -> [UInt8] {
        let dsi = lv(Array("CPace255".utf8))
        let prs = lv(password)
        let padding = lv([UInt8](repeating: 0, count: max(0, 127 - prs.count - dsi.count)))
        var hash = Array(SHA512.hash(data: dsi + prs + padding + lv(channelID) + lv(sessionID)).prefix(32))
        hash[31] &= 0x7F
        let r = BigUInt(Data(hash.reversed())) % p
        return littleEndian32(elligator2(r))
    }

    /// Elligator 2 onto Curve25519 (RFC 9380's map_to_curve_elligator2 with Z = 2): the
    /// u-coordinate of the point.
    static func elligator2(_ r: BigUInt) -> BigUInt {
        let z = BigUInt(2)
        var denominator = (1 + z * r * r) % p
        var x1: BigUInt
        if denominator == 0 {
            x1 = p - a
        } else {
            denominator = denominator.power(p - 2, modulus: p)            // 1 / (1 + Z r²)
            x1 = (p - a) * denominator % p                                // −A / (1 + Z r²)
        }
        let gx1 = (x1 * x1 % p * x1 + a * x1 % p * x1 + x1) % p
        // Euler's criterion: gx1 is a square (or zero) iff gx1^((p−1)/2) ≠ p − 1.
        if gx1.power((p - 1) / 2, modulus: p) != p - 1 { return x1 }
        return (2 * p - x1 - a) % p                                        // x2 = −x1 − A
    }

    private static func littleEndian32(_ value: BigUInt) -> [UInt8] {
        var bytes = Array(value.serialize().reversed())
        bytes += [UInt8](repeating: 0, count: max(0, 32 - bytes.count))
        return Array(bytes.prefix(32))
    }

    /// X25519(scalar, u); nil for an all-zero result (a low-order input).
    public static func x25519(scalar: [UInt8], u: [UInt8]) -> [UInt8]? {
        guard let key = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: scalar),
              let point = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: u),
              let shared = try? key.sharedSecretFromKeyAgreement(with: point) else { return nil }
        let bytes = shared.withUnsafeBytes { Array($0) }
        return bytes.allSatisfy { $0 == 0 } ? nil : bytes
    }

    /// What both parties derive once the shares are exchanged.
    public struct Keys: Sendable, Equatable {
        public var isk: [UInt8]
        public var macKey: [UInt8]
        /// A's (the server's) and B's (the client's) key confirmation tags.
        public var serverConfirmation: [UInt8]
        public var clientConfirmation: [UInt8]
        /// The key that wraps the long-term PSK the client sends.
        public var pskWrapKey: [UInt8]
    }

    /// Derives the keys from the shared point K and both shares (Ya the server's, Yb ours).
    public static func keys(sessionID: [UInt8], k: [UInt8], ya: [UInt8], yb: [UInt8]) -> Keys {
        let adA = Array("server".utf8), adB = Array("client".utf8)
        let isk = Array(SHA512.hash(data: lv(Array("CPace255_ISK".utf8)) + lv(sessionID) + lv(k) + lv(ya) + lv(adA) + lv(yb) + lv(adB)))
        let macKey = Array(SHA512.hash(data: Array("CPaceMac".utf8) + sessionID + isk))
        let key = SymmetricKey(data: macKey)
        let ta = Array(HMAC<SHA512>.authenticationCode(for: lv(ya) + lv(adA), using: key))
        let tb = Array(HMAC<SHA512>.authenticationCode(for: lv(yb) + lv(adB), using: key))
        let wrap = Array(SHA256.hash(data: Array("sendspin-pair-psk-wrap-v1".utf8) + sessionID + isk))
        return Keys(isk: isk, macKey: macKey, serverConfirmation: ta, clientConfirmation: tb, pskWrapKey: wrap)
    }

    /// Seals the long-term PSK under the wrap key with the session's cipher, a zero nonce and no
    /// associated data (32 + 16 bytes).
    public static func wrap(psk: [UInt8], key: [UInt8], suite: NoiseSuite) throws -> [UInt8] {
        let symmetric = SymmetricKey(data: key)
        switch suite {
        case .chaChaPoly:
            let box = try ChaChaPoly.seal(psk, using: symmetric, nonce: try ChaChaPoly.Nonce(data: [UInt8](repeating: 0, count: 12)))
            return Array(box.ciphertext) + Array(box.tag)
        case .aesGCM:
            let box = try AES.GCM.seal(psk, using: symmetric, nonce: try AES.GCM.Nonce(data: [UInt8](repeating: 0, count: 12)))
            return Array(box.ciphertext) + Array(box.tag)
        }
    }

    /// Constant-time comparison of two tags.
    static func equal(_ x: [UInt8], _ y: [UInt8]) -> Bool {
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for i in 0..<x.count { difference |= x[i] ^ y[i] }
        return difference == 0
    }
}
