@testable import RFB
import Testing

@Suite struct DESTests {
    private func hex(_ s: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = s.startIndex
        while i < s.endIndex {
            let j = s.index(i, offsetBy: 2)
            out.append(UInt8(s[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    /// The worked example used throughout the DES literature (key 133457799BBCDFF1).
    @Test func classicWorkedExample() {
        let des = DES(key: hex("133457799BBCDFF1"))
        #expect(des.encrypt(block: hex("0123456789ABCDEF")) == hex("85E813540F0AB405"))
    }

    /// NIST SP 800-17 variable-plaintext known-answer entries (key 0101…01).
    @Test(arguments: [
        ("8000000000000000", "95F8A5E5DD31D900"),
        ("4000000000000000", "DD7F121CA5015619"),
        ("0000000000000001", "166B40B44ABA4BD6"),
    ])
    func nistVariablePlaintext(plain: String, cipher: String) {
        let des = DES(key: hex("0101010101010101"))
        #expect(des.encrypt(block: hex(plain)) == hex(cipher))
    }

    /// Vectors made with OpenSSL's DES-ECB (command at the end of this file): password
    /// "secret12" bit-reversed as the VNC key, over a fixed challenge.
    @Test func vncAuthenticationResponseMatchesOpenSSL() {
        let challenge = hex("000102030405060708090A0B0C0D0E0F")
        #expect(VNCAuthentication.response(challenge: challenge, password: "secret12") == hex(vncVectorSecret12))
        // Longer passwords are cut to 8 bytes, as servers do.
        #expect(VNCAuthentication.response(challenge: challenge, password: "secret12-and-more")
            == VNCAuthentication.response(challenge: challenge, password: "secret12"))
        #expect(VNCAuthentication.response(challenge: challenge, password: "pw") == hex(vncVectorPw))
    }

    @Test func bitReversal() {
        #expect(VNCAuthentication.reverseBits(0b0000_0001) == 0b1000_0000)
        #expect(VNCAuthentication.reverseBits(0b1100_1010) == 0b0101_0011)
    }
}

// openssl enc -des-ecb -K <bit-reversed key> -nopad -provider legacy -provider default
// over the bytes 00 01 … 0F.
private let vncVectorSecret12 = "ADCD997F8E16FEE575E973F93C2B62B4"
private let vncVectorPw = "858600D9AF143C9E6541D3DD92A835D0"
