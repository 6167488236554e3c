import Foundation
@testable import Punktfunk
import Testing

/// Host → client side planes: audio 0xC9, rumble 0xCA in all three lengths, HID output 0xCD,
/// and the adaptive-trigger parser over every mode byte against vectors built from the
/// documented block layouts. Unknown tags and short buffers are dropped, never fatal.
@Suite struct HostDatagramTests {
    @Test func audioPacketsRoundTrip() {
        let p = AudioPacket(sequence: 0xA1B2C3D4, ptsNanoseconds: 1_700_000_000_000_000_001, opus: [0xFC, 1, 2])
        let bytes = p.datagram
        #expect(bytes.prefix(5) == [0xC9, 0xD4, 0xC3, 0xB2, 0xA1])
        #expect(HostDatagram(bytes) == .audio(p))
        #expect(AudioPacket(datagram: Array(bytes.prefix(13)))?.opus == [])     // DTX: empty payload is legal
        #expect(AudioPacket(datagram: Array(bytes.prefix(12))) == nil)
    }

    @Test func rumbleInAllThreeLengths() {
        let seven: [UInt8] = [0xCA, 1, 0, 0xFF, 0xFF, 0x00, 0x80]
        #expect(Rumble(datagram: seven) == Rumble(pad: 1, low: 0xFFFF, high: 0x8000))
        let ten = seven + [9, 0xF4, 0x01]
        #expect(Rumble(datagram: ten) == Rumble(pad: 1, low: 0xFFFF, high: 0x8000, sequence: 9, timeToLiveMilliseconds: 500))
        let fourteen = ten + [0x10, 0, 0x20, 0]
        let full = Rumble(pad: 1, low: 0xFFFF, high: 0x8000, sequence: 9, timeToLiveMilliseconds: 500, leftTrigger: 16, rightTrigger: 32)
        #expect(Rumble(datagram: fourteen) == full)
        #expect(full.datagram == fourteen)
        #expect(Rumble(datagram: fourteen + [1, 2, 3]) == full)        // a newer host's longer tail
        #expect(Rumble(datagram: Array(seven.prefix(6))) == nil)
        #expect(Rumble(datagram: Array(ten.prefix(9)))?.sequence == nil)  // 9 bytes: the 7-byte prefix only
    }

    @Test func hidOutputKinds() {
        #expect(HIDOutput(datagram: [0xCD, 1, 2, 0xAA, 0xBB, 0xCC]) == .lightbar(pad: 2, red: 0xAA, green: 0xBB, blue: 0xCC))
        #expect(HIDOutput(datagram: [0xCD, 2, 0, 0b1110_0101]) == .playerLEDs(pad: 0, bits: 0b00101))
        let trigger = HIDOutput(datagram: [0xCD, 3, 1, 1, 0x25, 0x04, 0x01, 0x07])
        #expect(trigger == .trigger(pad: 1, which: 1, effect: .weapon(start: 2.0 / 9, end: 8.0 / 9, strength: 1), raw: [0x25, 0x04, 0x01, 0x07]))
        #expect(HIDOutput(datagram: [0xCD, 4, 0, 1, 0x10, 0, 0x20, 0, 3, 0]) == .trackpadHaptic(pad: 0, side: 1, amplitude: 16, period: 32, count: 3))
        #expect(HIDOutput(datagram: [0xCD, 5, 1, 9, 8, 7]) == .rawHID(pad: 1, data: [9, 8, 7]))
        for bad: [UInt8] in [[0xCD], [0xCD, 1, 2, 3], [0xCD, 2, 0], [0xCD, 4, 0, 1, 2], [0xCD, 9, 0, 0], [0xCE, 1, 2, 3, 4, 5]] {
            #expect(HIDOutput(datagram: bad) == nil, "\(bad)")
        }
        for d: HIDOutput in [.lightbar(pad: 2, red: 1, green: 2, blue: 3), .playerLEDs(pad: 1, bits: 4),
                              .trackpadHaptic(pad: 0, side: 1, amplitude: 500, period: 600, count: 7), .audioControl(pad: 3, data: [1])] {
            #expect(HIDOutput(datagram: d.datagram) == d)
        }
    }

    @Test func unknownTagsAndShortBuffersAreDropped() {
        for bad: [UInt8] in [[], [0xC9], [0xCA, 0], [0xCD], [0xCE] + Array(repeating: 0, count: 28), [0xC8] + Array(repeating: 0, count: 17), [0x00]] {
            #expect(HostDatagram(bad) == nil)
        }
        var rng = SplitMix64(seed: 11)
        for n in 0..<5000 {
            var b = SplitMix64.bytes(seed: rng.next(), count: n % 40)
            if !b.isEmpty { b[0] = [0xC9, 0xCA, 0xCD, 0xCE][n % 4] }
            _ = HostDatagram(b)
        }
    }

    struct TriggerVectors: Decodable {
        struct Case: Decodable { let block: String; let effect: [String: JSONValue] }
        let cases: [Case], modes: [Case]
    }
    enum JSONValue: Decodable {
        case number(Double), string(String), array([Double])
        init(from decoder: Decoder) throws {
            let c = try decoder.singleValueContainer()
            if let d = try? c.decode(Double.self) { self = .number(d) }
            else if let s = try? c.decode(String.self) { self = .string(s) }
            else { self = .array(try c.decode([Double].self)) }
        }
    }

    /// The effect as (kind, named numbers) in the vector file's vocabulary.
    static func describe(_ e: TriggerEffect) -> (String, [String: Double], [Double]) {
        switch e {
        case .off: return ("off", [:], [])
        case let .feedback(s, k): return ("feedback", ["start": s, "strength": k], [])
        case let .zonedFeedback(v): return ("zonedFeedback", [:], v)
        case let .weapon(s, e, k): return ("weapon", ["start": s, "end": e, "strength": k], [])
        case let .vibration(s, a, f): return ("vibration", ["start": s, "amplitude": a, "frequency": f], [])
        case let .zonedVibration(v, f): return ("zonedVibration", ["frequency": f], v)
        case let .slope(s, e, a, b): return ("slope", ["start": s, "end": e, "startStrength": a, "endStrength": b], [])
        case let .galloping(s, e, a, b, f): return ("galloping", ["start": s, "end": e, "firstFoot": a, "secondFoot": b, "frequency": f], [])
        case let .machine(s, e, a, b, f, p):
            return ("machine", ["start": s, "end": e, "amplitudeA": a, "amplitudeB": b, "frequency": f, "period": p], [])
        }
    }

    @Test func triggerEffectsOfEveryModeMatchTheVectors() throws {
        let v = try JSONDecoder().decode(TriggerVectors.self, from: Data(try Fixtures.data("trigger-vectors.json")).dropFirstCommentKey())
        #expect(v.modes.count == 256 && v.cases.count > 150)
        for c in v.cases + v.modes {
            let parsed = TriggerEffect(parsing: [UInt8](hex: c.block))
            let (kind, numbers, values) = Self.describe(parsed)
            guard case .string(let expectedKind)? = c.effect["kind"] else { Issue.record("vector without kind"); continue }
            #expect(kind == expectedKind, "block \(c.block)")
            for (key, value) in c.effect where key != "kind" {
                switch value {
                case .number(let n):
                    #expect(abs((numbers[key] ?? .nan) - n) < 1e-9, "block \(c.block) \(key)")
                case .array(let a):
                    #expect(a.count == values.count && zip(a, values).allSatisfy { abs($0 - $1) < 1e-9 }, "block \(c.block)")
                case .string: Issue.record("unexpected string field \(key)")
                }
            }
        }
        #expect(TriggerEffect(parsing: []) == .off)
        #expect(TriggerEffect(parsing: [0xFC, 1, 2, 3]) == .off)
    }
}
