/// Automatic quality, the way TigerVNC's viewer chooses: estimate the link's speed from how
/// long large updates take to arrive (first byte to last, idle time excluded), then ask for
/// lossless encodings on a fast link and Tight JPEG — at a level that fits — on a slow one.
/// Pure: fed with transfers, it answers with a new choice when one is due.
public struct AdaptiveQuality: Sendable, Equatable {
    public enum Choice: Sendable, Equatable, CustomStringConvertible {
        case lossless
        case jpeg(Int)

        public var description: String {
            switch self {
            case .lossless: "lossless"
            case .jpeg(let q): "JPEG quality \(q)"
            }
        }

        /// The JPEG quality level to ask for (nil: none).
        public var jpegQuality: Int? { if case .jpeg(let q) = self { q } else { nil } }
    }

    /// Transfers smaller than this say little about the link (latency dominates).
    public static let minimumSampleBytes = 16 * 1024
    /// Above this the link is fast (lossless); below `slowBelow` it is slow (JPEG); between the
    /// two the choice stays as it is, so a link near one threshold does not flap.
    public static let fastAbove = 16.0   // Mbit/s, TigerVNC's threshold for lossless
    public static let slowBelow = 10.0

    public private(set) var choice: Choice
    /// The smoothed estimate in Mbit/s (nil before the first usable sample).
    public private(set) var megabitsPerSecond: Double?

    public init(initial: Choice = .lossless) {
        choice = initial
    }

    /// Takes the transfers of recent updates; returns the new choice when it changed.
    public mutating func observe(_ transfers: [VNCClient.UpdateTransfer]) -> Choice? {
        for t in transfers where t.bytes >= Self.minimumSampleBytes && t.seconds > 0.0005 {
            let sample = min(Double(t.bytes) * 8 / t.seconds / 1e6, 1000)
            megabitsPerSecond = megabitsPerSecond.map { 0.6 * $0 + 0.4 * sample } ?? sample
        }
        guard let speed = megabitsPerSecond else { return nil }
        let next: Choice
        if speed > Self.fastAbove {
            next = .lossless
        } else if speed < Self.slowBelow || choice != .lossless {
            next = .jpeg(Self.level(for: speed))
        } else {
            next = choice
        }
        guard next != choice else { return nil }
        choice = next
        return next
    }

    /// The JPEG quality level for a link of this speed.
    public static func level(for megabitsPerSecond: Double) -> Int {
        switch megabitsPerSecond {
        case ..<1: 3
        case ..<3: 5
        case ..<6: 7
        default: 8
        }
    }
}
