import Foundation
@testable import Sendspin
import Testing

/// Differential test against aiosendspin 10.2.1's SendspinTimeFilter: the same measurement
/// sequences (scripts/vectors/make_timefilter_vectors.py → Fixtures/timefilter-vectors.json)
/// must give bit-identical state — well inside the required 1e-9 relative agreement.
@Suite struct TimeFilterTests {
    struct File: Decodable {
        struct Constructor: Decodable { var process_std_dev: Double; var forget_factor: Double; var drift_process_std_dev: Double }
        struct State: Decodable {
            var count: Int
            var last_update: Int64
            var offset_bits: String
            var drift_bits: String
            var offset_covariance_bits: String
            var offset_drift_covariance_bits: String
            var drift_covariance_bits: String
            var error: Int64?
            var is_synchronized: Bool
            var use_drift: Bool
        }
        struct Step: Decodable {
            var op: String?
            var T1: Int64?, T2: Int64?, T3: Int64?, T4: Int64?
            var z: Int64?, e: Int64?, t: Int64?
            var accepted: Bool?
            var state: State
            var compute_server_time: [[Int64]]
            var compute_client_time: [[Int64]]
        }
        struct Sequence: Decodable { var name: String; var constructor: Constructor; var steps: [Step] }
        var sequences: [Sequence]
    }

    static let file: File = {
        let url = Bundle.module.resourceURL!.appendingPathComponent("Fixtures/timefilter-vectors.json")
        return try! JSONDecoder().decode(File.self, from: Data(contentsOf: url))
    }()

    static func bits(_ d: Double) -> String { String(format: "%016llx", d.bitPattern) }

    @Test(arguments: file.sequences.map(\.name))
    func matchesTheReferenceBitForBit(name: String) {
        let sequence = Self.file.sequences.first { $0.name == name }!
        var filter = TimeFilter(parameters: .init(processStdDev: sequence.constructor.process_std_dev,
                                                  forgetFactor: sequence.constructor.forget_factor,
                                                  driftProcessStdDev: sequence.constructor.drift_process_std_dev))
        var worstRelative = 0.0
        for (index, step) in sequence.steps.enumerated() {
            if step.op == "reset" {
                filter.reset()
            } else if let t1 = step.T1, let t2 = step.T2, let t3 = step.T3, let t4 = step.T4 {
                let (z, e) = TimeFilter.measurement(t1: t1, t2: t2, t3: t3, t4: t4)
                #expect(z == step.z && e == step.e, "step \(index): measurement rounding")
                filter.update(t1: t1, t2: t2, t3: t3, t4: t4)
            } else {
                filter.update(measurement: step.z!, maxError: step.e!, time: step.t!)
            }
            let s = step.state
            #expect(filter.count == s.count && filter.lastUpdate == s.last_update, "step \(index)")
            #expect(Self.bits(filter.offset) == s.offset_bits, "step \(index): offset \(filter.offset)")
            #expect(Self.bits(filter.drift) == s.drift_bits, "step \(index): drift \(filter.drift)")
            #expect(Self.bits(filter.offsetCovariance) == s.offset_covariance_bits, "step \(index)")
            #expect(Self.bits(filter.offsetDriftCovariance) == s.offset_drift_covariance_bits, "step \(index)")
            #expect(Self.bits(filter.driftCovariance) == s.drift_covariance_bits, "step \(index)")
            #expect(filter.error == s.error && filter.isSynchronized == s.is_synchronized && filter.useDrift == s.use_drift, "step \(index)")
            for pair in step.compute_server_time { #expect(filter.serverTime(forClientTime: pair[0]) == pair[1], "step \(index)") }
            for pair in step.compute_client_time { #expect(filter.clientTime(forServerTime: pair[0]) == pair[1], "step \(index)") }
            let reference = Double(bitPattern: UInt64(s.offset_bits, radix: 16)!)
            if reference != 0 { worstRelative = max(worstRelative, abs(filter.offset - reference) / abs(reference)) }
        }
        #expect(worstRelative <= 1e-9)
    }

    @Test func halfRoundingIsToEvenLikePython() {
        #expect(TimeFilter.halfRoundedToEven(5) == 2)     // 2.5 → 2
        #expect(TimeFilter.halfRoundedToEven(7) == 4)     // 3.5 → 4
        #expect(TimeFilter.halfRoundedToEven(-5) == -2)   // -2.5 → -2
        #expect(TimeFilter.halfRoundedToEven(-7) == -4)   // -3.5 → -4
        #expect(TimeFilter.halfRoundedToEven(8) == 4)
        #expect(TimeFilter.halfRoundedToEven(Int64.max) == Int64.max / 2 + 1)
    }

    @Test func convergesOnASyntheticClock() {
        // Server clock = client + 1 s + 20 ppm; exchanges every 100 ms with ±50 µs jitter.
        var filter = TimeFilter()
        var state: UInt64 = 7
        for i in 0..<300 {
            state = state &* 6364136223846793005 &+ 1
            let jitter = Int64(state >> 58) - 32
            let t1 = Int64(i) * 100_000 + 1_000
            let server = { (c: Int64) -> Int64 in c + 1_000_000 + c / 50_000 }
            let t2 = server(t1 + 150 + jitter), t3 = t2 + 20
            let t4 = t1 + 320
            filter.update(t1: t1, t2: t2, t3: t3, t4: t4)
        }
        let now: Int64 = 30_000_000
        #expect(abs(filter.serverTime(forClientTime: now) - (now + 1_000_000 + now / 50_000)) < 100)
        #expect(filter.isSynchronized)
    }
}
