import Foundation
@testable import Tunnel

/// The known-answer vectors made by scripts/vectors/make_tun_offload_vectors.py (Scapy builds
/// every expected packet, with its own lengths and checksums).
struct OffloadVectors: Decodable {
    struct Split: Decodable, CustomTestStringConvertible {
        var name: String
        var header: String
        var packet: String
        var segments: [String]
        var testDescription: String { name }
    }
    struct Write: Decodable {
        var header: String
        var packet: String
    }
    struct Coalesce: Decodable, CustomTestStringConvertible {
        var name: String
        var udp: Bool
        var packets: [String]
        var writes: [Write]
        var testDescription: String { name }
    }
    struct Echo: Decodable, CustomTestStringConvertible {
        var name: String
        var request: String
        var reply: String?
        var testDescription: String { name }
    }
    var split: [Split]
    var coalesce: [Coalesce]
    var echo: [Echo]

    static let shared: OffloadVectors = {
        let url = Bundle.module.resourceURL!.appendingPathComponent("Fixtures/offload-vectors.json")
        guard let data = try? Data(contentsOf: url), let vectors = try? JSONDecoder().decode(OffloadVectors.self, from: data) else {
            return OffloadVectors(split: [], coalesce: [], echo: [])
        }
        return vectors
    }()
}

import Testing

extension Array where Element == UInt8 {
    init(hex: String) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(hex.utf8.count / 2)
        var high: UInt8?
        for c in hex.utf8 {
            let v: UInt8 = c >= 97 ? c - 87 : c >= 65 ? c - 55 : c - 48
            if let h = high { bytes.append(h << 4 | v); high = nil } else { high = v }
        }
        self = bytes
    }

    var hex: String { map { String(format: "%02x", $0) }.joined() }
}

/// A deterministic generator so fuzz failures reproduce.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The Internet checksum computed the plain way (big-endian 16-bit words, end-around carry),
/// as a reference for the fast one.
func referenceChecksum(_ bytes: [UInt8]) -> UInt16 {
    var sum: UInt32 = 0
    var i = 0
    while i + 1 < bytes.count {
        sum += UInt32(bytes[i]) << 8 | UInt32(bytes[i + 1])
        i += 2
    }
    if i < bytes.count { sum += UInt32(bytes[i]) << 8 }
    while sum >> 16 != 0 { sum = (sum & 0xffff) + (sum >> 16) }
    return ~UInt16(sum)
}

/// Whether a packet's IPv4 header and TCP/UDP checksums hold, computed the plain way.
func checksumsHold(_ packet: [UInt8]) -> Bool {
    let v6 = packet[0] >> 4 == 6
    let l4 = v6 ? 40 : Int(packet[0] & 0x0f) * 4
    if !v6 && referenceChecksum(Array(packet[0..<l4])) != 0 { return false }
    let proto = v6 ? packet[6] : packet[9]
    let src = v6 ? Array(packet[8..<24]) : Array(packet[12..<16])
    let dst = v6 ? Array(packet[24..<40]) : Array(packet[16..<20])
    let length = packet.count - l4
    var pseudo = src + dst + [0, proto]
    pseudo += v6 ? [UInt8(length >> 24 & 0xff), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff)]
        : [UInt8(length >> 8), UInt8(length & 0xff)]
    if pseudo.count % 2 != 0 { pseudo.append(0) }
    return referenceChecksum(pseudo + Array(packet[l4...])) == 0
}
