import Crypto
import Foundation
@testable import Sendspin
import Testing

/// The static pairing code's CPace against known-answer values computed independently and
/// reproduced by aiosendspin's own static-code client and server (docs/sendspin-listen-pairing-digest.md §2.7).
struct CPaceTests {
    static func seed(_ label: String) -> [UInt8] { Array(SHA256.hash(data: Array("farcast-pairing-vector:\(label)".utf8))) }
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test func staticCodeKnownAnswers() throws {
        let h = Self.seed("handshake-hash")
        #expect(Self.hex(h) == "88c8bae810de82355a17cd2722c633c01dad5c283b776b6a662bfe5bf239849c")
        let sid = CPace.sessionID(handshakeHash: h, pairingIndex: 1)
        #expect(sid.count == 61)
        let g = CPace.generator(password: Array("12345678".utf8), sessionID: sid)
        #expect(Self.hex(g) == "a7c0261c491f3a92a8901fe029952073b022196daad033919f9b98ab2c219c52")
        let ya = try #require(CPace.x25519(scalar: Self.seed("server-scalar"), u: g))
        let yb = try #require(CPace.x25519(scalar: Self.seed("client-scalar"), u: g))
        #expect(Base64URL.encode(ya) == "ikrcn-_CEhKpG84g0OIG3-VsvBJOJ4exmjV2xH-IaA8")
        #expect(Base64URL.encode(yb) == "RLS79941awwioF9hEm5KqHxxfgVB9nRHJg8NVSjy8F8")
        let k = try #require(CPace.x25519(scalar: Self.seed("client-scalar"), u: ya))
        #expect(Self.hex(k) == "e7447b43a014380e5114ea05d0fd5872944e05bffa16a1026be907ef27f1625e")
        let keys = CPace.keys(sessionID: sid, k: k, ya: ya, yb: yb)
        #expect(Self.hex(keys.isk) == "772f2652400fb1b7bc4f0551793f10560c3b51a1f61752307a428e361d3e69e9d7721b0f132b682d2778e633a1659e16bc940376c9ad5afc13904fa891f159f7")
        #expect(Base64URL.encode(keys.serverConfirmation) == "htQ4GbRzBN-wfi1ptTxr2oXhpQ20dYc4kk_-3Rlh1218In0Lyiw4zjhlXolRoL5ZzWxd95NfgUmGTvd2uCJDsQ")
        #expect(Base64URL.encode(keys.clientConfirmation) == "FWfQHxtWXBkAEL5cx8v2Gt4CEIHgEGsEiCRcC9eAMx1Szgv-aDJkOkZ4SoM26MAyxt8Pd24qL5YOK8UNKVG_qg")
        #expect(Self.hex(keys.pskWrapKey) == "b99c50abcbd1050b90218816cc2849669e72330c0a8d0e7502c87271c9aa28cd")
        let psk = Self.seed("long-term-psk")
        #expect(Base64URL.encode(try CPace.wrap(psk: psk, key: keys.pskWrapKey, suite: .chaChaPoly)) == "r8BUBPbte_fgS50Ys4hs0bwThpwBa4VzcQKJZWW7UQndy2_TMcvW1n310USlmOtV")
        #expect(Base64URL.encode(try CPace.wrap(psk: psk, key: keys.pskWrapKey, suite: .aesGCM)) == "peIRo7bgpLXZJLw_tZdhiaNd0wWBvPIQ7Fr87wVC_CDVrhf2PHSgGeOCgiK-_h-w")
        #expect(SendspinPSK.identifier(of: psk) == "JwT26EOwm17G_18ziTi2bODTHVTyUeeTJK0ETO0Ylqw")
    }

    @Test func lengthPrefixesAreLEB128() {
        #expect(CPace.lv([1, 2]) == [2, 1, 2])
        #expect(CPace.lv([UInt8](repeating: 0, count: 200)).prefix(2) == [0xC8, 0x01])
    }
}
