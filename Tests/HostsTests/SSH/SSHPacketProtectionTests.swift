#if canImport(COpenSSL)
import Crypto
import Foundation
@testable import Hosts
import NIOCore
import NIOSSH
import Testing

/// farcast's AES-GCM packet protection (OpenSSL EVP) checked against an independent
/// implementation, swift-crypto's AES.GCM (BoringSSL), on OpenSSH's framing: the 4-byte length in
/// clear as associated data, the IV's last 8 bytes a big-endian counter bumped per packet.
/// Interoperation with OpenSSH's sshd itself is in IntegrationTests/SSHTunnelTests.
struct SSHPacketProtectionTests {
    static func keys(size: Int, seed: UInt8) -> NIOSSHSessionKeys {
        func bytes(_ count: Int, _ start: UInt8) -> [UInt8] { (0..<count).map { start &+ UInt8($0) &* 7 } }
        return NIOSSHSessionKeys(initialInboundIV: bytes(12, seed), initialOutboundIV: bytes(12, seed &+ 50),
                                 inboundEncryptionKey: SymmetricKey(data: bytes(size, seed &+ 100)),
                                 outboundEncryptionKey: SymmetricKey(data: bytes(size, seed &+ 150)),
                                 inboundMACKey: SymmetricKey(data: bytes(16, 0)), outboundMACKey: SymmetricKey(data: bytes(16, 0)))
    }

    /// The IV for packet `n` of a direction that started at `iv`.
    static func nonce(_ iv: [UInt8], plus n: UInt64) throws -> AES.GCM.Nonce {
        var counter: UInt64 = 0
        for byte in iv[4..<12] { counter = counter << 8 | UInt64(byte) }
        counter &+= n
        return try AES.GCM.Nonce(data: Array(iv[0..<4]) + (0..<8).map { UInt8(truncatingIfNeeded: counter >> (56 - 8 * UInt64($0))) })
    }

    /// An SSH binary packet's clear form: length ‖ padding length ‖ payload ‖ padding, the
    /// encrypted part a multiple of 16 bytes.
    static func clearPacket(payload: [UInt8], padding: Int? = nil) -> [UInt8] {
        var pad = padding ?? (16 - (1 + payload.count) % 16)
        if padding == nil && pad < 4 { pad += 16 }
        let body = [UInt8(pad)] + payload + [UInt8](repeating: 0xA5, count: pad)
        return withUnsafeBytes(of: UInt32(body.count).bigEndian, Array.init) + body
    }

    /// What swift-crypto seals for packet `n` under the server's outbound keys (our inbound).
    static func sealedByReference(_ clear: [UInt8], keys: NIOSSHSessionKeys, packet n: UInt64) throws -> ByteBuffer {
        let box = try AES.GCM.seal(clear[4...], using: keys.inboundEncryptionKey, nonce: nonce(keys.initialInboundIV, plus: n),
                                   authenticating: clear[0..<4])
        return ByteBuffer(bytes: Array(clear[0..<4]) + box.ciphertext + box.tag)
    }

    @Test(arguments: [16, 32])
    func opensWhatAnIndependentAESGCMSealedPacketAfterPacket(keySize: Int) throws {
        let keys = Self.keys(size: keySize, seed: 3)
        let protection: any NIOSSHTransportProtection = keySize == 32
            ? try SSHAES256GCMProtection(initialKeys: keys) : try SSHAES128GCMProtection(initialKeys: keys)
        for n in 0..<4 {
            let payload = (0..<(1000 * n + 7)).map { UInt8(truncatingIfNeeded: $0 * 31 + n) }
            var packet = try Self.sealedByReference(Self.clearPacket(payload: payload), keys: keys, packet: UInt64(n))
            let content = try protection.decryptAndVerifyRemainingPacket(&packet, sequenceNumber: UInt32(n))
            #expect(Array(content.readableBytesView) == payload)
            #expect(packet.readableBytes == 0)
        }
    }

    @Test func sealsWhatAnIndependentAESGCMOpens() throws {
        let keys = Self.keys(size: 32, seed: 9)
        let protection = try SSHAES256GCMProtection(initialKeys: keys)
        for n in 0..<3 {
            let clear = Self.clearPacket(payload: Array("message \(n)".utf8))
            var packet = ByteBuffer(bytes: clear)
            try protection.encryptPacket(&packet, sequenceNumber: UInt32(n))
            let sealed = Array(packet.readableBytesView)
            #expect(sealed.count == clear.count + 16)
            #expect(sealed[0..<4] == clear[0..<4])
            let box = try AES.GCM.SealedBox(nonce: Self.nonce(keys.initialOutboundIV, plus: UInt64(n)),
                                            ciphertext: sealed[4..<(sealed.count - 16)], tag: sealed[(sealed.count - 16)...])
            let opened = try AES.GCM.open(box, using: keys.outboundEncryptionKey, authenticating: sealed[0..<4])
            #expect(Array(opened) == Array(clear[4...]))
        }
    }

    @Test func theCounterWrapsAtTheTopOfItsEightBytes() throws {
        var keys = Self.keys(size: 16, seed: 1)
        keys.initialInboundIV = [1, 2, 3, 4] + [UInt8](repeating: 0xFF, count: 8)
        let protection = try SSHAES128GCMProtection(initialKeys: keys)
        for n in 0..<2 {
            var packet = try Self.sealedByReference(Self.clearPacket(payload: [UInt8(n)]), keys: keys, packet: UInt64(n))
            #expect(Array(try protection.decryptAndVerifyRemainingPacket(&packet, sequenceNumber: 0).readableBytesView) == [UInt8(n)])
        }
    }

    @Test func newKeysTakeEffectAtTheRekey() throws {
        let first = Self.keys(size: 32, seed: 5), second = Self.keys(size: 32, seed: 77)
        let protection = try SSHAES256GCMProtection(initialKeys: first)
        var packet = try Self.sealedByReference(Self.clearPacket(payload: [1, 2, 3]), keys: first, packet: 0)
        _ = try protection.decryptAndVerifyRemainingPacket(&packet, sequenceNumber: 0)
        try protection.updateKeys(second)
        packet = try Self.sealedByReference(Self.clearPacket(payload: [4, 5, 6]), keys: second, packet: 0)
        #expect(Array(try protection.decryptAndVerifyRemainingPacket(&packet, sequenceNumber: 1).readableBytesView) == [4, 5, 6])
    }

    @Test func anyAlteredByteFailsTheIntegrityCheck() throws {
        let keys = Self.keys(size: 32, seed: 11)
        let clear = Self.clearPacket(payload: Array(repeating: 0x42, count: 40))
        let sealed = Array(try Self.sealedByReference(clear, keys: keys, packet: 0).readableBytesView)
        // The length (associated data), a ciphertext byte, the tag.
        for index in [1, 10, sealed.count - 1] {
            var altered = sealed
            altered[index] ^= 0x01
            let protection = try SSHAES256GCMProtection(initialKeys: keys)
            var packet = ByteBuffer(bytes: altered)
            #expect(throws: SSHPacketProtectionError.authenticationFailed(cipher: "aes256-gcm@openssh.com")) {
                _ = try protection.decryptAndVerifyRemainingPacket(&packet, sequenceNumber: 0)
            }
        }
    }

    @Test func malformedPacketsAreTypedErrors() throws {
        let keys = Self.keys(size: 32, seed: 13)
        let protection = try SSHAES256GCMProtection(initialKeys: keys)
        // Not a whole number of blocks, and nothing at all between the length and the tag.
        for bytes in [[UInt8](repeating: 0, count: 4 + 15 + 16), [UInt8](repeating: 0, count: 4 + 16)] {
            var packet = ByteBuffer(bytes: bytes)
            #expect(throws: SSHPacketProtectionError.malformedPacket(encryptedBytes: bytes.count - 20)) {
                _ = try protection.decryptAndVerifyRemainingPacket(&packet, sequenceNumber: 0)
            }
        }
        // Authentic, but its padding claims more than the packet holds; then 3 bytes (under 4).
        for (n, padding) in [(0, 200), (1, 3)] {
            var clear = Self.clearPacket(payload: Array(repeating: 7, count: 12), padding: 3)
            clear[4] = UInt8(padding)
            var packet = try Self.sealedByReference(clear, keys: keys, packet: UInt64(n))
            #expect(throws: SSHPacketProtectionError.badPadding(paddingLength: padding, packetBytes: 16)) {
                _ = try protection.decryptAndVerifyRemainingPacket(&packet, sequenceNumber: 0)
            }
        }
    }

    @Test func wrongKeySizesAreRefused() {
        #expect(throws: SSHPacketProtectionError.keySize(cipher: "aes256-gcm@openssh.com", expected: 32, actual: 16)) {
            _ = try SSHAES256GCMProtection(initialKeys: Self.keys(size: 16, seed: 0))
        }
    }
}
#endif
