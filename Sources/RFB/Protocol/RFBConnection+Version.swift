import FarcastSupport

extension RFBConnection {
    /// The server's 12-byte banner ("RFB 003.008\n"); the client answers with the version both
    /// speak and the security phase begins.
    mutating func readVersion(_ reader: inout ByteReader, _ out: inout ConnectionOutput) throws {
        var r = reader
        let bytes = try r.readBytes(12)
        reader = r
        let text = String(decoding: bytes, as: UTF8.self)
        guard bytes.starts(with: Array("RFB ".utf8)), bytes[11] == 0x0A, bytes[7] == 0x2E,
              let major = Int(String(decoding: bytes[4..<7], as: UTF8.self)),
              let minor = Int(String(decoding: bytes[8..<11], as: UTF8.self)) else {
            throw RFBError.notAnRFBServer(greeting: bytes)
        }
        negotiation.banner = String(text.dropLast())
        if major < 3 { throw RFBError.unsupportedVersion("\(major).\(minor)") }
        let agreed: Int
        if major > 3 || minor >= 8 {
            agreed = 8        // 3.8, Apple's 3.889 and anything newer speak 3.8
        } else if minor == 7 {
            agreed = 7
        } else {
            agreed = 3        // 3.3, and the 3.5 some old servers wrongly announce
        }
        negotiation.minorVersion = agreed
        out.send(Array("RFB 003.00\(agreed)\n".utf8))
        state = .security(SecurityPhase(step: agreed >= 7 ? .chooseType : .serverChosenType))
    }
}
