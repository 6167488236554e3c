import BigInt
import Crypto
import CryptoExtras
import FarcastSupport
import Foundation

/// Apple Remote Desktop's Diffie-Hellman login (security type 30), as macOS Screen Sharing
/// offers it. The server sends g (U16), the key length L (U16, bytes), the prime p and its
/// public value A (L bytes each). The client answers with the user name and password, each
/// NUL-terminated in a 64-byte field, encrypted with AES-128-ECB under MD5 of the L-byte shared
/// secret, followed by its own public value B (L bytes).
enum AppleDH {
    struct Parameters: Sendable {
        var generator: BigUInt
        var keyLength: Int
        var prime: BigUInt
        var serverPublic: BigUInt
    }

    static func readParameters(_ reader: inout ByteReader) throws -> Parameters {
        var r = reader
        let g = BigUInt(try r.readInteger(as: UInt16.self))
        let length = Int(try r.readInteger(as: UInt16.self))
        guard (128...1024).contains(length) else {
            throw RFBError.protocolViolation("Apple DH key length of \(length) bytes (128–1024 accepted)")
        }
        let p = BigUInt(Data(try r.readBytes(length)))
        let a = BigUInt(Data(try r.readBytes(length)))
        reader = r
        guard p > 3, g > 1, g < p, a > 1, a < p - 1 else { throw RFBError.protocolViolation("invalid Apple DH parameters") }
        return Parameters(generator: g, keyLength: length, prime: p, serverPublic: a)
    }

    /// The response: encrypted credentials (128 bytes), then B (L bytes). `random` supplies the
    /// private value (L bytes), then the 128 bytes of filler the fields are written over.
    static func response(_ parameters: Parameters, username: String, password: String,
                         random: (Int) -> [UInt8]) throws(RFBError) -> [UInt8] {
        let user = Array(username.utf8), pass = Array(password.utf8)
        guard user.count < 64, pass.count < 64 else {
            throw .unsupported("Apple Remote Desktop logins carry user names and passwords of at most 63 bytes (UTF-8)")
        }
        let L = parameters.keyLength
        var b = BigUInt(Data(random(L))) % parameters.prime
        if b < 2 { b = 2 }
        let publicValue = parameters.generator.power(b, modulus: parameters.prime)
        let secret = parameters.serverPublic.power(b, modulus: parameters.prime)
        let key = Array(Insecure.MD5.hash(data: padded(secret, to: L)))

        // Random filler, the NUL-terminated fields written over its start.
        var block = random(128)
        block.replaceSubrange(0..<user.count + 1, with: user + [0])
        block.replaceSubrange(64..<64 + pass.count + 1, with: pass + [0])
        let aes = SymmetricKey(data: key)
        var ciphertext: [UInt8] = []
        for start in stride(from: 0, to: 128, by: 16) {
            var chunk = Array(block[start..<start + 16])
            try? AES.permute(&chunk, key: aes)     // 16-byte block and key: cannot fail
            ciphertext += chunk
        }
        return ciphertext + padded(publicValue, to: L)
    }

    /// A big-endian integer in exactly `length` bytes, zeros in front.
    static func padded(_ value: BigUInt, to length: Int) -> [UInt8] {
        let bytes = Array(value.serialize())
        return [UInt8](repeating: 0, count: max(0, length - bytes.count)) + bytes.suffix(length)
    }
}

/// UltraVNC's MS-Logon II (security type 113): a Diffie-Hellman exchange on 64-bit numbers (g,
/// p and A, U64 each), then the user name (256-byte field) and password (64-byte field), each
/// NUL-terminated, DES-CBC encrypted with the shared secret as key (bits of each byte reversed,
/// as in VNC Authentication) and as IV (not reversed), the chain restarting for each field.
/// The client sends B (U64) first. Weak by design: offered only when asked for.
enum MSLogonII {
    struct Parameters: Sendable {
        var generator: BigUInt
        var modulus: BigUInt
        var serverPublic: BigUInt
    }

    static func readParameters(_ reader: inout ByteReader) throws -> Parameters {
        var r = reader
        let g = BigUInt(try r.readInteger(as: UInt64.self))
        let p = BigUInt(try r.readInteger(as: UInt64.self))
        let a = BigUInt(try r.readInteger(as: UInt64.self))
        reader = r
        guard p > 2, g > 0, a < p else { throw RFBError.protocolViolation("invalid MS-Logon II parameters") }
        return Parameters(generator: g, modulus: p, serverPublic: a)
    }

    /// `random` supplies the private value (8 bytes), then filler for the 256- and 64-byte fields.
    static func response(_ parameters: Parameters, username: String, password: String,
                         random: (Int) -> [UInt8]) throws(RFBError) -> [UInt8] {
        let user = Array(username.utf8), pass = Array(password.utf8)
        guard user.count < 256, pass.count < 64 else {
            throw .unsupported("MS-Logon II carries user names of at most 255 bytes and passwords of at most 63 (UTF-8)")
        }
        var b = BigUInt(Data(random(8)))
        if b < 2 { b = 2 }
        let publicValue = parameters.generator.power(b, modulus: parameters.modulus)
        let key = AppleDH.padded(parameters.serverPublic.power(b, modulus: parameters.modulus), to: 8)
        let des = DES(key: key.map(VNCAuthentication.reverseBits))
        func cbc(_ plain: [UInt8]) -> [UInt8] {
            var previous = key, out: [UInt8] = []
            for start in stride(from: 0, to: plain.count, by: 8) {
                let block = des.encrypt(block: (0..<8).map { plain[start + $0] ^ previous[$0] })
                out += block
                previous = block
            }
            return out
        }
        var userField = random(256), passField = random(64)
        userField.replaceSubrange(0..<user.count + 1, with: user + [0])
        passField.replaceSubrange(0..<pass.count + 1, with: pass + [0])
        return AppleDH.padded(publicValue, to: 8) + cbc(userField) + cbc(passField)
    }
}
