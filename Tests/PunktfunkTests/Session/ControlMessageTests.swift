import Foundation
@testable import Punktfunk
import Testing

struct ControlMessageTests {
    static let all: [ControlMessage] = [
        .reconfigure(StreamMode(width: 2560, height: 1440, refreshHz: 120)),
        .reconfigured(accepted: true, mode: StreamMode(width: 1280, height: 720, refreshHz: 60)),
        .requestKeyframe,
        .lossReport(lossPPM: 12345),
        .setBitrate(kbps: 50000),
        .bitrateChanged(kbps: 0),
        .rfiRequest(firstFrame: 100, lastFrame: 120),
        .pairRequest(name: "desk", spakeA: [0x41] + [UInt8](repeating: 7, count: 32)),
        .pairChallenge(spakeB: [0x42] + [UInt8](repeating: 9, count: 32), confirmHost: [UInt8](repeating: 1, count: 32)),
        .pairProof(confirmClient: [UInt8](repeating: 2, count: 32)),
        .pairResult(ok: true),
        .probeRequest(targetKbps: 1_000_000, durationMs: 2000),
        .probeResult(.init(bytesSent: 1 << 33, packetsSent: 9, durationMs: 2000)),
        .probeResult(.init(bytesSent: 5, packetsSent: 9, durationMs: 2000, wirePacketsSent: 8, sendDropped: 1)),
        .clockProbe(t1: 0x0102030405060708),
        .clockEcho(t1: 1, t2: 2, t3: 3),
    ]

    @Test func everyMessageRoundTrips() throws {
        for message in Self.all {
            #expect(try ControlMessage.decode(message.encoded()) == message)
        }
    }

    @Test func lengthsMatchTheNotes() {
        #expect(ControlMessage.reconfigure(StreamMode(width: 1, height: 1, refreshHz: 1)).encoded().count == 17)
        #expect(ControlMessage.reconfigured(accepted: true, mode: StreamMode(width: 1, height: 1, refreshHz: 1)).encoded().count == 18)
        #expect(ControlMessage.requestKeyframe.encoded() == Array("PKFc".utf8) + [3])
        #expect(ControlMessage.lossReport(lossPPM: 1).encoded().count == 9)
        #expect(ControlMessage.rfiRequest(firstFrame: 1, lastFrame: 2).encoded().count == 13)
        #expect(ControlMessage.pairProof(confirmClient: [UInt8](repeating: 0, count: 32)).encoded().count == 37)
        #expect(ControlMessage.pairResult(ok: false).encoded().count == 6)
        #expect(ControlMessage.probeRequest(targetKbps: 1, durationMs: 1).encoded().count == 13)
        #expect(ControlMessage.probeResult(.init(bytesSent: 1, packetsSent: 1, durationMs: 1)).encoded().count == 21)
        #expect(ControlMessage.probeResult(.init(bytesSent: 1, packetsSent: 1, durationMs: 1, wirePacketsSent: 1, sendDropped: 0)).encoded().count == 29)
        #expect(ControlMessage.clockProbe(t1: 1).encoded().count == 13)
        #expect(ControlMessage.clockEcho(t1: 1, t2: 2, t3: 3).encoded().count == 29)
        #expect(ControlMessage.lossReport(lossPPM: 0x01020304).encoded().suffix(4) == [4, 3, 2, 1])
    }

    @Test func unknownTypesAreKeptForTheCallerToSkip() throws {
        #expect(try ControlMessage.decode(Array("PKFc".utf8) + [0x40, 1, 2]) == .unknown(type: 0x40, body: [1, 2]))
    }

    @Test func truncatedKnownTypesAreTypedErrors() {
        for message in Self.all where message.encoded().count > 5 {
            // The 29-byte ProbeResult cut short is still a whole 21-byte one plus a partial tail.
            if case .probeResult(let p) = message, p.wirePacketsSent != nil { continue }
            let bytes = message.encoded()
            #expect(throws: PunktfunkSessionError.self) { try ControlMessage.decode(Array(bytes.dropLast())) }
        }
        #expect(throws: PunktfunkSessionError.self) { try ControlMessage.decode(Array("PKF1".utf8) + [3]) }
        #expect(throws: PunktfunkSessionError.self) { try ControlMessage.decode([]) }
        // A pairing name longer than 64 bytes is refused.
        #expect(throws: PunktfunkSessionError.self) { try ControlMessage.decode(Array("PKFc".utf8) + [0x10, 65] + [UInt8](repeating: 0x61, count: 70)) }
    }

    @Test func framingSurvivesAnySplit() {
        let payloads: [[UInt8]] = Self.all.map { $0.encoded() } + [[], [UInt8](repeating: 0xAB, count: 65535)]
        let stream = payloads.flatMap(ControlFrameDecoder.frame)
        for chunk in [1, 2, 3, 7, 100, 4096, stream.count] {
            var decoder = ControlFrameDecoder()
            var out: [[UInt8]] = []
            var i = 0
            while i < stream.count {
                decoder.append(stream[i..<min(i + chunk, stream.count)])
                while let p = decoder.next() { out.append(p) }
                i += chunk
            }
            #expect(out == payloads)
            #expect(decoder.pendingByteCount == 0)
        }
    }

    /// A short fuzz run of the decoders over random and mutated input: typed errors only, never a
    /// trap. (The longer run: PUNKTFUNK_FUZZ_ITERATIONS=1000000 swift test --filter ControlMessageTests/decodersSurvive.)
    @Test func decodersSurviveRandomAndMutatedInput() {
        var rng = SplitMix64(seed: 0x5EED)
        let iterations = Int(ProcessInfo.processInfo.environment["PUNKTFUNK_FUZZ_ITERATIONS"] ?? "") ?? 20000
        let seeds = Self.all.map { $0.encoded() } + [HandshakeMessageTests.fullWelcome().encoded(),
                                                      Hello(mode: StreamMode(width: 1, height: 1, refreshHz: 1), name: "x").encoded()]
        for i in 0..<iterations {
            var bytes: [UInt8]
            if i % 2 == 0 {
                bytes = seeds[Int(rng.next() % UInt64(seeds.count))]
                for _ in 0..<(1 + Int(rng.next() % 4)) where !bytes.isEmpty {
                    bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next())
                }
                bytes = Array(bytes.prefix(Int(rng.next() % UInt64(bytes.count + 8))))
            } else {
                bytes = (0..<Int(rng.next() % 120)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                if i % 3 == 0 { bytes = Array("PKFc".utf8) + bytes }
                if i % 5 == 0 { bytes = Array("PKF1".utf8) + [2, 0, 0, 0] + bytes }
            }
            _ = try? ControlMessage.decode(bytes)
            _ = try? Welcome.decode(bytes)
            _ = try? Hello.decode(bytes)
            var decoder = ControlFrameDecoder()
            decoder.append(bytes)
            while decoder.next() != nil {}
        }
    }
}
