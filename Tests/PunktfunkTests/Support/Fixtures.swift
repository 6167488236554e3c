import Crypto
import Foundation

/// Reading the committed known-answer files and regenerating the byte streams they describe.
enum Fixtures {
    static func data(_ name: String) throws -> Data {
        guard let url = Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Fixtures") else {
            throw FixtureMissing(name: name)
        }
        return try Data(contentsOf: url)
    }

    static func json<T: Decodable>(_ name: String, as type: T.Type = T.self) throws -> T {
        try JSONDecoder().decode(T.self, from: data(name))
    }

    struct FixtureMissing: Error, CustomStringConvertible {
        let name: String
        var description: String { "fixture \(name) is missing; run scripts/vectors/make_punktfunk_vectors.py" }
    }
}

/// The splitmix64 byte stream the vector script uses for shard contents (each word little-endian).
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    static func bytes(seed: UInt64, count: Int) -> [UInt8] {
        var generator = SplitMix64(seed: seed)
        var out = [UInt8]()
        out.reserveCapacity(count + 8)
        while out.count < count {
            let word = generator.next()
            for i in 0..<8 { out.append(UInt8(truncatingIfNeeded: word >> (8 * UInt64(i)))) }
        }
        return Array(out.prefix(count))
    }
}

extension Array where Element == UInt8 {
    init(hex: String) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.utf8.count / 2)
        var high: UInt8?
        for c in hex.utf8 {
            let v: UInt8 = c >= 97 ? c - 87 : (c >= 65 ? c - 55 : c - 48)
            if let h = high { bytes.append(h << 4 | v); high = nil } else { high = v }
        }
        self = bytes
    }

    var hex: String { map { String(format: "%02x", $0) }.joined() }
    var sha256Hex: String { Array(SHA256.hash(data: self)).hex }
}
