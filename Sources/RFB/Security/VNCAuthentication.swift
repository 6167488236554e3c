/// VNC Authentication (security type 2): DES-encrypt the server's 16-byte challenge with the
/// password as key.
public enum VNCAuthentication {
    /// The response to a challenge. The key is the password's first 8 bytes (UTF-8, NUL-padded;
    /// longer passwords are truncated, as every VNC server does) with each byte's bits reversed —
    /// the historic quirk of the original implementation that every server expects.
    public static func response(challenge: [UInt8], password: String) -> [UInt8] {
        precondition(challenge.count == 16, "VNC challenges are 16 bytes")
        var key = Array(password.utf8.prefix(8))
        key += repeatElement(0, count: 8 - key.count)
        let des = DES(key: key.map(reverseBits))
        return des.encrypt(block: Array(challenge[0..<8])) + des.encrypt(block: Array(challenge[8..<16]))
    }

    static func reverseBits(_ b: UInt8) -> UInt8 {
        var v = b, r: UInt8 = 0
        for _ in 0..<8 {
            r = r << 1 | v & 1
            v >>= 1
        }
        return r
    }
}
