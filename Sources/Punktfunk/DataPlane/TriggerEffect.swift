/// What a DualSense adaptive-trigger block means, for a client that replays it on a real
/// controller through a higher-level API (GameController's GCDualSenseAdaptiveTrigger, SDL).
///
/// The block is the controller's own: a mode byte and up to ten parameters. `init(parsing:)` is
/// total: every one of the 256 mode bytes gives an effect (an unknown mode, or a zone mode
/// naming no zone, is `.off`), and missing parameters read as zero, so nothing a host sends can
/// fail. Positions and strengths are normalised to 0…1: a position is a zone of ten (0…9) or a
/// byte (0…255) in the old modes; a strength is 1…8 (or a byte).
public enum TriggerEffect: Sendable, Equatable, Hashable {
    case off
    /// Resistance from `start` on (old mode 0x01).
    case feedback(start: Double, strength: Double)
    /// Resistance per zone, ten strengths, 0 = free (mode 0x21).
    case zonedFeedback([Double])
    /// A weapon trigger: resistance between `start` and `end` that gives way (0x02, 0x25).
    case weapon(start: Double, end: Double, strength: Double)
    /// Vibration from `start` on (old mode 0x06); frequency in Hz.
    case vibration(start: Double, amplitude: Double, frequency: Double)
    /// Vibration per zone, ten amplitudes, at one frequency in Hz (0x26).
    case zonedVibration(amplitudes: [Double], frequency: Double)
    /// Resistance rising from `startStrength` to `endStrength` between two positions; the bow
    /// (0x22), whose string tension and snap map onto it.
    case slope(start: Double, end: Double, startStrength: Double, endStrength: Double)
    /// Two feet of a galloping rhythm within a range (0x23); feet 0…1 of the cycle, Hz.
    case galloping(start: Double, end: Double, firstFoot: Double, secondFoot: Double, frequency: Double)
    /// Alternating amplitudes at a frequency (Hz), switching every `period` seconds (0x27).
    case machine(start: Double, end: Double, amplitudeA: Double, amplitudeB: Double, frequency: Double, period: Double)

    public init(parsing block: [UInt8]) {
        func p(_ i: Int) -> UInt8 { i < block.count ? block[i] : 0 }
        func zones() -> UInt16 { UInt16(p(1)) | UInt16(p(2)) << 8 }
        func forces() -> UInt32 { UInt32(p(3)) | UInt32(p(4)) << 8 | UInt32(p(5)) << 16 | UInt32(p(6)) << 24 }
        func perZone() -> [Double] {
            let active = zones(), force = forces()
            return (0..<10).map { i in active & (1 << i) == 0 ? 0 : Double((force >> (3 * UInt32(i))) & 7 + 1) / 8 }
        }
        /// The first and last of the zones a start/stop pair names; nil when fewer than two bits are set.
        func range() -> (Double, Double)? {
            let z = zones() & 0x3FF
            guard z.nonzeroBitCount >= 2 else { return nil }
            return (Double(z.trailingZeroBitCount) / 9, Double(15 - z.leadingZeroBitCount) / 9)
        }
        switch block.first ?? 0 {
        case 0x01:
            self = .feedback(start: Double(p(1)) / 255, strength: Double(p(2)) / 255)
        case 0x02:
            self = .weapon(start: Double(p(1)) / 255, end: Double(p(2)) / 255, strength: Double(p(3)) / 255)
        case 0x06:
            self = .vibration(start: Double(p(3)) / 255, amplitude: Double(p(2)) / 255, frequency: Double(p(1)))
        case 0x21:
            let strengths = perZone()
            self = strengths.allSatisfy { $0 == 0 } ? .off : .zonedFeedback(strengths)
        case 0x22:
            guard let (start, end) = range() else { self = .off; return }
            let pair = UInt16(p(3)) | UInt16(p(4)) << 8
            self = .slope(start: start, end: end, startStrength: Double(pair & 7 + 1) / 8, endStrength: Double((pair >> 3) & 7 + 1) / 8)
        case 0x23:
            guard let (start, end) = range() else { self = .off; return }
            self = .galloping(start: start, end: end, firstFoot: Double((p(3) >> 3) & 7) / 7, secondFoot: Double(p(3) & 7) / 7,
                              frequency: Double(p(4)))
        case 0x25:
            guard let (start, end) = range() else { self = .off; return }
            self = .weapon(start: start, end: end, strength: Double(p(3) & 7 + 1) / 8)
        case 0x26:
            let amplitudes = perZone()
            self = amplitudes.allSatisfy { $0 == 0 } ? .off : .zonedVibration(amplitudes: amplitudes, frequency: Double(p(9)))
        case 0x27:
            guard let (start, end) = range() else { self = .off; return }
            self = .machine(start: start, end: end, amplitudeA: Double(p(3) & 7) / 7, amplitudeB: Double((p(3) >> 3) & 7) / 7,
                            frequency: Double(p(4)), period: Double(p(5)) / 10)
        default:
            self = .off       // 0x00, 0x05, 0xFC and every mode the controller does not document
        }
    }
}
