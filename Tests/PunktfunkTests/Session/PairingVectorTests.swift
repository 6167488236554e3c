import Crypto
import Foundation
@testable import Punktfunk
import Testing

/// SPAKE2 side A and the pairing confirmations against vectors made by PyPI `spake2` 0.9 (the
/// same construction as the host's Rust crate) with deterministic entropy:
/// scripts/vectors/make_punktfunk_pairing_vectors.py writes Fixtures/pairing-vectors.json.
struct PairingVectorTests {
    struct Vector: Decodable {
        var pin: String
        var host_pin: String
        var id_a: String
        var id_b: String
        var scalar_le: String
        var password_scalar_le: String
        var message_a: String
        var message_b: String
        var key_a: String
        var key_b: String
        var confirm_host: String
        var confirm_client: String
    }

    struct File: Decodable {
        var M: String
        var N: String
        var cases: [Vector]
    }

    static func load() throws -> File {
        let url = try #require(Bundle.module.url(forResource: "Fixtures/pairing-vectors", withExtension: "json"))
        return try JSONDecoder().decode(File.self, from: Data(contentsOf: url))
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    @Test func blindingPointsMatchTheOracle() throws {
        let file = try Self.load()
        #expect(Self.hex(SPAKE2SideA.pointM) == file.M)
        #expect(Self.hex(SPAKE2SideA.pointN) == file.N)
    }

    @Test func passwordScalarMatchesHKDFReadBigEndianModL() throws {
        for v in try Self.load().cases {
            #expect(Self.hex(SPAKE2SideA.passwordScalar(Array(v.pin.utf8))) == v.password_scalar_le)
        }
    }

    @Test func sideAMessageAndKeyMatchPyPISpake2() throws {
        for v in try Self.load().cases {
            let a = try SPAKE2SideA(password: Array(v.pin.utf8), idA: hexBytes(v.id_a), idB: hexBytes(v.id_b), scalar: hexBytes(v.scalar_le))
            #expect(Self.hex(a.outboundMessage) == v.message_a)
            let key = try a.finish(inboundMessage: hexBytes(v.message_b))
            #expect(Self.hex(key) == v.key_a)
        }
    }

    @Test func rightPINGivesTheClientProofAndWrongPINIsDetected() throws {
        for v in try Self.load().cases {
            var exchange = try PairingExchange(pin: v.pin, name: "test", clientFingerprint: hexBytes(v.id_a),
                                               hostFingerprint: hexBytes(v.id_b), scalar: hexBytes(v.scalar_le))
            guard case .pairRequest(_, let spakeA) = exchange.start() else { Issue.record("not a PairRequest"); continue }
            #expect(Self.hex(spakeA) == v.message_a)
            if v.pin == v.host_pin {
                let proof = try exchange.receive(challenge: hexBytes(v.message_b), confirmHost: hexBytes(v.confirm_host))
                #expect(proof == .pairProof(confirmClient: hexBytes(v.confirm_client)))
            } else {
                #expect(v.key_a != v.key_b)
                #expect(throws: PunktfunkSessionError.wrongPIN) {
                    try exchange.receive(challenge: hexBytes(v.message_b), confirmHost: hexBytes(v.confirm_host))
                }
            }
        }
    }

    @Test func wrongLengthPINsAreRefusedLocally() {
        for pin in ["", "123", "12345", "12a4", "１２３４", " 1234"] {
            #expect(throws: PunktfunkSessionError.invalidPIN) { try PairingExchange.validatePIN(pin) }
        }
        #expect((try? PairingExchange.validatePIN("0042")) == Array("0042".utf8))
    }

    @Test func malformedHostMessagesAreTypedErrors() throws {
        let v = try #require(try Self.load().cases.first)
        let a = try SPAKE2SideA(password: Array(v.pin.utf8), idA: hexBytes(v.id_a), idB: hexBytes(v.id_b), scalar: hexBytes(v.scalar_le))
        var wrongSide = hexBytes(v.message_b)
        wrongSide[0] = 0x41
        #expect(throws: PunktfunkSessionError.self) { try a.finish(inboundMessage: wrongSide) }
        #expect(throws: PunktfunkSessionError.self) { try a.finish(inboundMessage: Array(hexBytes(v.message_b).prefix(20))) }
        var notAPoint = hexBytes(v.message_b)
        notAPoint[1...] = [UInt8](repeating: 0xFF, count: 32)[...]
        #expect(throws: PunktfunkSessionError.self) { try a.finish(inboundMessage: notAPoint) }
        // The identity element (small order) is refused too.
        #expect(throws: PunktfunkSessionError.self) { try a.finish(inboundMessage: [0x42, 1] + [UInt8](repeating: 0, count: 31)) }
    }
}
