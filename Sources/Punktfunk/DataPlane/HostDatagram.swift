/// A host → client QUIC datagram of the side planes, told apart by its first byte
/// (punktfunk/1 §7): audio (0xC9), rumble (0xCA) and HID output (0xCD). Anything else, and any
/// buffer too short for its tag, reads as nil: the session drops it and carries on.
public enum HostDatagram: Sendable, Equatable {
    case audio(AudioPacket)
    case rumble(Rumble)
    case hidOutput(HIDOutput)

    public init?(_ bytes: [UInt8]) {
        guard let tag = bytes.first else { return nil }
        switch tag {
        case AudioPacket.tag: guard let a = AudioPacket(datagram: bytes) else { return nil }; self = .audio(a)
        case Rumble.tag: guard let r = Rumble(datagram: bytes) else { return nil }; self = .rumble(r)
        case HIDOutput.tag: guard let h = HIDOutput(datagram: bytes) else { return nil }; self = .hidOutput(h)
        default: return nil
        }
    }
}

/// One audio datagram: `[0xC9][seq u32 LE][pts_ns u64 LE][Opus]`, one 5 ms frame (48 kHz).
/// An empty payload is legal (discontinuous transmission).
public struct AudioPacket: Sendable, Equatable {
    public static let tag: UInt8 = 0xC9
    public var sequence: UInt32
    public var ptsNanoseconds: UInt64
    public var opus: [UInt8]

    public init(sequence: UInt32, ptsNanoseconds: UInt64, opus: [UInt8]) {
        self.sequence = sequence
        self.ptsNanoseconds = ptsNanoseconds
        self.opus = opus
    }

    public init?(datagram b: [UInt8]) {
        guard b.count >= 13, b[0] == Self.tag else { return nil }
        var seq: UInt32 = 0, pts: UInt64 = 0
        for i in 0..<4 { seq |= UInt32(b[1 + i]) << (8 * UInt32(i)) }
        for i in 0..<8 { pts |= UInt64(b[5 + i]) << (8 * UInt64(i)) }
        sequence = seq
        ptsNanoseconds = pts
        opus = Array(b[13...])
    }

    /// The client's microphone sends the same layout under its own tag (0xCB, any Opus frame up to 120 ms).
    public static let microphoneTag: UInt8 = 0xCB

    public var datagram: [UInt8] { datagram(tag: Self.tag) }

    /// This packet as a microphone datagram (0xCB).
    public var microphoneDatagram: [UInt8] { datagram(tag: Self.microphoneTag) }

    private func datagram(tag: UInt8) -> [UInt8] {
        var out: [UInt8] = [tag]
        for i in 0..<4 { out.append(UInt8(truncatingIfNeeded: sequence >> (8 * UInt32(i)))) }
        for i in 0..<8 { out.append(UInt8(truncatingIfNeeded: ptsNanoseconds >> (8 * UInt64(i)))) }
        return out + opus
    }
}

/// Force feedback for one pad: `[0xCA][pad u16][low u16][high u16]` (7 bytes), optionally
/// `[seq u8][ttl_ms u16]` (10) and `[left trigger u16][right trigger u16]` (14). Amplitudes
/// 0…65535; 0/0 stops. A longer datagram's unknown tail is ignored.
public struct Rumble: Sendable, Equatable {
    public static let tag: UInt8 = 0xCA
    public var pad: UInt16
    public var low: UInt16
    public var high: UInt16
    /// Present from 10 bytes: the command's sequence and how long it holds without a refresh.
    public var sequence: UInt8?
    public var timeToLiveMilliseconds: UInt16?
    /// Present from 14 bytes: impulse-trigger motors.
    public var leftTrigger: UInt16?
    public var rightTrigger: UInt16?

    public init(pad: UInt16, low: UInt16, high: UInt16, sequence: UInt8? = nil, timeToLiveMilliseconds: UInt16? = nil,
                leftTrigger: UInt16? = nil, rightTrigger: UInt16? = nil) {
        self.pad = pad
        self.low = low
        self.high = high
        self.sequence = sequence
        self.timeToLiveMilliseconds = timeToLiveMilliseconds
        self.leftTrigger = leftTrigger
        self.rightTrigger = rightTrigger
    }

    public init?(datagram b: [UInt8]) {
        guard b.count >= 7, b[0] == Self.tag else { return nil }
        func u16(_ o: Int) -> UInt16 { UInt16(b[o]) | UInt16(b[o + 1]) << 8 }
        pad = u16(1)
        low = u16(3)
        high = u16(5)
        if b.count >= 10 {
            sequence = b[7]
            timeToLiveMilliseconds = u16(8)
        }
        if b.count >= 14 {
            leftTrigger = u16(10)
            rightTrigger = u16(12)
        }
    }

    public var datagram: [UInt8] {
        var out: [UInt8] = [Self.tag]
        func le(_ v: UInt16) { out.append(UInt8(v & 0xFF)); out.append(UInt8(v >> 8)) }
        le(pad); le(low); le(high)
        if let sequence {
            out.append(sequence)
            le(timeToLiveMilliseconds ?? 0)
            if let leftTrigger { le(leftTrigger); le(rightTrigger ?? 0) }
        }
        return out
    }
}

/// Controller feedback a game wrote to the host's virtual pad: `[0xCD][kind][pad][fields…]`.
public enum HIDOutput: Sendable, Equatable {
    /// Lightbar colour.
    case lightbar(pad: UInt8, red: UInt8, green: UInt8, blue: UInt8)
    /// Player-indicator LEDs, the low 5 bits.
    case playerLEDs(pad: UInt8, bits: UInt8)
    /// An adaptive-trigger effect for L2 (0) or R2 (1): the raw block and what it means.
    case trigger(pad: UInt8, which: UInt8, effect: TriggerEffect, raw: [UInt8])
    /// A trackpad voice-coil pulse train (Steam Controller): side 0 right, 1 left.
    case trackpadHaptic(pad: UInt8, side: UInt8, amplitude: UInt16, period: UInt16, count: UInt16)
    /// A raw HID report for a pad passed through as-is (kind 5; its bytes after the pad byte).
    case rawHID(pad: UInt8, data: [UInt8])
    /// Pad audio control (kind 6; its bytes after the pad byte).
    case audioControl(pad: UInt8, data: [UInt8])

    public static let tag: UInt8 = 0xCD

    public init?(datagram b: [UInt8]) {
        guard b.count >= 3, b[0] == Self.tag else { return nil }
        let pad = b[2]
        switch b[1] {
        case 1 where b.count >= 6: self = .lightbar(pad: pad, red: b[3], green: b[4], blue: b[5])
        case 2 where b.count >= 4: self = .playerLEDs(pad: pad, bits: b[3] & 0x1F)
        case 3 where b.count >= 4:
            let raw = Array(b[4...])
            self = .trigger(pad: pad, which: b[3], effect: TriggerEffect(parsing: raw), raw: raw)
        case 4 where b.count >= 10:
            func u16(_ o: Int) -> UInt16 { UInt16(b[o]) | UInt16(b[o + 1]) << 8 }
            self = .trackpadHaptic(pad: pad, side: b[3], amplitude: u16(4), period: u16(6), count: u16(8))
        case 5: self = .rawHID(pad: pad, data: Array(b[3...]))
        case 6: self = .audioControl(pad: pad, data: Array(b[3...]))
        default: return nil
        }
    }

    public var datagram: [UInt8] {
        switch self {
        case let .lightbar(pad, r, g, b): return [Self.tag, 1, pad, r, g, b]
        case let .playerLEDs(pad, bits): return [Self.tag, 2, pad, bits]
        case let .trigger(pad, which, _, raw): return [Self.tag, 3, pad, which] + raw
        case let .trackpadHaptic(pad, side, a, p, c):
            return [Self.tag, 4, pad, side, UInt8(a & 0xFF), UInt8(a >> 8), UInt8(p & 0xFF), UInt8(p >> 8), UInt8(c & 0xFF), UInt8(c >> 8)]
        case let .rawHID(pad, data): return [Self.tag, 5, pad] + data
        case let .audioControl(pad, data): return [Self.tag, 6, pad] + data
        }
    }
}
