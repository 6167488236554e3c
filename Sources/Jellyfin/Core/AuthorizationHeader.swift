/// Who this program is to a Jellyfin server: the four fields every request's `Authorization`
/// header carries. `deviceId` must stay the same for an installation (the server ties tokens to
/// it and rewrites a token's device when it changes).
public struct ClientIdentity: Sendable, Hashable, Codable {
    public var client: String
    public var device: String
    public var deviceId: String
    public var version: String

    public init(client: String, device: String, deviceId: String, version: String) {
        self.client = client
        self.device = device
        self.deviceId = deviceId
        self.version = version
    }
}

/// The `Authorization: MediaBrowser …` header value Jellyfin parses.
///
/// The server splits the value on commas, strips the quotes and URL-decodes each value, so every
/// value is percent-encoded here: everything but ASCII letters, digits and `-._~` becomes `%XX`
/// of its UTF-8 bytes. That keeps commas, quotes, `=`, `+` and newlines in a device name from
/// breaking the header. `Token` is left out until there is one.
public enum AuthorizationHeader {
    public static func value(identity: ClientIdentity, token: String?) -> String {
        var fields = [
            ("Client", identity.client), ("Device", identity.device),
            ("DeviceId", identity.deviceId), ("Version", identity.version),
        ]
        if let token, !token.isEmpty { fields.append(("Token", token)) }
        return "MediaBrowser " + fields.map { "\($0.0)=\"\(percentEncode($0.1))\"" }.joined(separator: ", ")
    }

    /// RFC 3986 unreserved characters stay; every other byte of the UTF-8 form becomes `%XX`.
    public static func percentEncode(_ text: String) -> String {
        let hex: [Character] = Array("0123456789ABCDEF")
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(Character(Unicode.Scalar(byte)))
            default:
                out.append("%")
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            }
        }
        return out
    }

    /// Parses a header the way the server does (for the stand-in and tests): scheme
    /// `MediaBrowser` (case-insensitive), comma-separated `Key="value"` pairs, values
    /// percent-decoded. Returns nil for another scheme.
    public static func parse(_ header: String) -> [String: String]? {
        let trimmed = header.drop(while: { $0 == " " })
        guard let space = trimmed.firstIndex(of: " ") else { return nil }
        let scheme = trimmed[..<space]
        guard scheme.lowercased() == "mediabrowser" else { return nil }
        var result: [String: String] = [:]
        for part in trimmed[space...].split(separator: ",") {
            guard let eq = part.firstIndex(of: "=") else { continue }
            let key = part[..<eq].trimmingSpaces()
            var value = part[part.index(after: eq)...].trimmingSpaces()
            if value.hasPrefix("\"") { value.removeFirst() }
            if value.hasSuffix("\"") { value.removeLast() }
            result[key] = percentDecode(value)
        }
        return result
    }

    /// `%XX` to bytes and `+` to a space, as .NET's `WebUtility.UrlDecode` does.
    public static func percentDecode(_ text: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var it = Array(text.utf8)[...]
        while let byte = it.popFirst() {
            if byte == UInt8(ascii: "+") {
                bytes.append(0x20)
            } else if byte == UInt8(ascii: "%"), it.count >= 2,
                      let high = hexValue(it[it.startIndex]), let low = hexValue(it[it.startIndex + 1]) {
                bytes.append(high << 4 | low)
                it = it.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
