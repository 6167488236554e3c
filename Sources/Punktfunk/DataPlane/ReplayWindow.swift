/// Sliding anti-replay window over the clear datagram sequence numbers of one sender.
///
/// `classify` tells, before any decryption, whether a sequence is worth opening: older than the
/// window (late), already seen (duplicate), implausibly far ahead (far future), or fresh. Only an
/// authenticated datagram may `accept` its sequence, so forged packets can never poison the window.
/// The window is a fixed 131072-bit ring (16 KiB), covering 120 ms of reordering at about a million
/// packets per second; the state never grows.
public struct ReplayWindow: Sendable {
    /// Sequences the window remembers behind the newest.
    public static let size: UInt64 = 131_072
    private static let words = Int(size / 64)

    /// A fresh sequence more than this far ahead of the newest is refused unopened (a burst of
    /// junk must not make the receiver spend AES on every packet or slide the window).
    public let farFutureLimit: UInt64
    /// The newest accepted sequence (meaningless before the first).
    public private(set) var highest: UInt64 = 0
    /// Whether any sequence was accepted yet.
    public private(set) var started = false
    private var bits: [UInt64]

    /// Verdict on a sequence before opening its datagram.
    public enum Verdict: Sendable, Equatable {
        case fresh, late, duplicate, farFuture
    }

    public init(farFutureLimit: UInt64 = 1 << 24) {
        self.farFutureLimit = farFutureLimit
        bits = [UInt64](repeating: 0, count: Self.words)
    }

    /// Whether a datagram with this sequence should be opened.
    @inlinable
    public func classify(_ sequence: UInt64) -> Verdict {
        guard started else { return .fresh }
        if sequence > highest { return sequence - highest > farFutureLimit ? .farFuture : .fresh }
        if highest - sequence >= Self.size { return .late }
        return isSet(sequence) ? .duplicate : .fresh
    }

    /// Records an authenticated sequence; returns false (and changes nothing) when `classify`
    /// would not have called it fresh.
    @discardableResult
    public mutating func accept(_ sequence: UInt64) -> Bool {
        guard classify(sequence) == .fresh else { return false }
        if !started {
            started = true
            highest = sequence
        } else if sequence > highest {
            if sequence - highest >= Self.size {
                for i in 0..<Self.words { bits[i] = 0 }
            } else {
                clear(from: highest + 1, to: sequence)
            }
            highest = sequence
        }
        set(sequence)
        return true
    }

    @usableFromInline func isSet(_ s: UInt64) -> Bool {
        let index = Int(s % Self.size)
        return bits[index >> 6] & (1 << UInt64(index & 63)) != 0
    }

    private mutating func set(_ s: UInt64) {
        let index = Int(s % Self.size)
        bits[index >> 6] |= 1 << UInt64(index & 63)
    }

    /// Clears the bits of sequences from..<to (fewer than `size` of them), a word at a time.
    private mutating func clear(from: UInt64, to: UInt64) {
        var s = from
        while s < to {
            let bit = s & 63
            let run = min(64 - bit, to - s)
            let mask: UInt64 = run == 64 ? ~0 : ((1 << run) - 1) << bit
            bits[Int((s % Self.size) >> 6)] &= ~mask
            s += run
        }
    }
}
