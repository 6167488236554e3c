/// DNS-SD TXT record data (RFC 6763 §6): a sequence of length-prefixed `key=value` strings.
/// Pure coding, no I/O, so the rules are unit-tested without a responder.
public enum TXTRecord {
    /// Encodes key/value pairs, keys sorted so the bytes are deterministic. An empty dictionary
    /// encodes as one empty string (a single zero byte), as RFC 6763 §6.1 requires.
    public static func encode(_ entries: [String: String]) throws -> [UInt8] {
        var bytes: [UInt8] = []
        for key in entries.keys.sorted() {
            guard !key.isEmpty, !key.contains("="), key.utf8.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E }) else {
                throw DiscoveryError.invalidArgument("TXT key \"\(key)\" must be printable ASCII without \"=\"")
            }
            let entry = Array("\(key)=\(entries[key]!)".utf8)
            guard entry.count <= 255 else {
                throw DiscoveryError.invalidArgument("TXT entry \"\(key)\" is \(entry.count) bytes; at most 255 fit")
            }
            bytes.append(UInt8(entry.count))
            bytes += entry
        }
        guard bytes.count <= Int(UInt16.max) else {
            throw DiscoveryError.invalidArgument("TXT record is \(bytes.count) bytes; at most 65535 fit")
        }
        return bytes.isEmpty ? [0] : bytes
    }

    /// Decodes TXT data from the network. Keys are case-insensitive (lower-cased here) and the
    /// first occurrence wins (RFC 6763 §6.4); an entry without "=" is a boolean key (value "").
    /// A length running past the end ends the record instead of failing it.
    public static func decode<Bytes: Collection>(_ data: Bytes) -> [String: String] where Bytes.Element == UInt8 {
        let bytes = Array(data)
        var result: [String: String] = [:]
        var offset = 0
        while offset < bytes.count {
            let length = Int(bytes[offset])
            offset += 1
            guard offset + length <= bytes.count else { break }
            let entry = bytes[offset..<offset + length]
            offset += length
            guard !entry.isEmpty else { continue }
            let key: String, value: String
            if let equals = entry.firstIndex(of: UInt8(ascii: "=")) {
                key = String(decoding: entry[entry.startIndex..<equals], as: UTF8.self)
                value = String(decoding: entry[(equals + 1)...], as: UTF8.self)
            } else {
                key = String(decoding: entry, as: UTF8.self)
                value = ""
            }
            guard !key.isEmpty else { continue }
            let folded = key.lowercased()
            if result[folded] == nil { result[folded] = value }
        }
        return result
    }
}
