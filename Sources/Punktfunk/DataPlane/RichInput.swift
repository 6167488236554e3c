/// Client → host rich input, the variable-length 0xCC QUIC datagram `[0xCC][kind][fields…]`
/// (little-endian): touchpad contacts and motion sensors that do not fit the 18-byte event.
/// Unknown kinds and short buffers read as nil (the host drops them the same way).
public enum RichInput: Sendable, Equatable, Hashable {
    /// A touchpad contact, 0…65535 from the top-left (+y down); `active` false lifts the finger.
    case touchpad(pad: UInt8, finger: UInt8, active: Bool, x: UInt16, y: UInt16)
    /// Gyro (pitch, yaw, roll) in 20 LSB per °/s and accelerometer in 10000 LSB per g.
    case motion(pad: UInt8, gyro: [Int16], accel: [Int16])
    /// A contact on one of several surfaces (0 the single/DualSense pad, 1 Steam left, 2 Steam
    /// right), centred signed coordinates (+y down), separate touch and click, pressure.
    case touchpadEx(pad: UInt8, surface: UInt8, finger: UInt8, touch: Bool, click: Bool, x: Int16, y: Int16, pressure: UInt16)

    public static let tag: UInt8 = 0xCC

    public var datagram: [UInt8] {
        var out: [UInt8] = [Self.tag]
        func le16(_ v: UInt16) { out.append(UInt8(v & 0xFF)); out.append(UInt8(v >> 8)) }
        switch self {
        case let .touchpad(pad, finger, active, x, y):
            out += [1, pad, finger, active ? 1 : 0]
            le16(x); le16(y)
        case let .motion(pad, gyro, accel):
            out += [2, pad]
            for i in 0..<3 { le16(UInt16(bitPattern: i < gyro.count ? gyro[i] : 0)) }
            for i in 0..<3 { le16(UInt16(bitPattern: i < accel.count ? accel[i] : 0)) }
        case let .touchpadEx(pad, surface, finger, touch, click, x, y, pressure):
            out += [3, pad, surface, finger, (touch ? 1 : 0) | (click ? 2 : 0)]
            le16(UInt16(bitPattern: x)); le16(UInt16(bitPattern: y)); le16(pressure)
        }
        return out
    }

    public init?(datagram b: [UInt8]) {
        guard b.count >= 2, b[0] == Self.tag else { return nil }
        func u16(_ o: Int) -> UInt16 { UInt16(b[o]) | UInt16(b[o + 1]) << 8 }
        func i16(_ o: Int) -> Int16 { Int16(bitPattern: u16(o)) }
        switch b[1] {
        case 1 where b.count >= 9: self = .touchpad(pad: b[2], finger: b[3], active: b[4] != 0, x: u16(5), y: u16(7))
        case 2 where b.count >= 15: self = .motion(pad: b[2], gyro: [i16(3), i16(5), i16(7)], accel: [i16(9), i16(11), i16(13)])
        case 3 where b.count >= 12:
            self = .touchpadEx(pad: b[2], surface: b[3], finger: b[4], touch: b[5] & 1 != 0, click: b[5] & 2 != 0,
                               x: i16(6), y: i16(8), pressure: u16(10))
        default: return nil
        }
    }

    /// A touchpad coordinate from a normalised position −1…+1 (as game controller APIs report,
    /// +y up) to the wire's 0…65535 from the top-left (+y down), clamped.
    public static func touchpadCoordinates(x: Double, y: Double) -> (x: UInt16, y: UInt16) {
        func scale(_ v: Double) -> UInt16 {
            guard v.isFinite else { return 32768 }
            let t = (min(1, max(-1, v)) + 1) / 2
            return UInt16((t * 65535).rounded())
        }
        return (scale(x), scale(-y))
    }

    /// Gyro in degrees per second to wire units (20 LSB per °/s), saturating.
    public static func gyroUnits(degreesPerSecond v: Double) -> Int16 { saturate(v * 20) }
    /// Acceleration in g to wire units (10000 LSB per g), saturating.
    public static func accelUnits(g v: Double) -> Int16 { saturate(v * 10_000) }

    private static func saturate(_ v: Double) -> Int16 {
        guard v.isFinite else { return v > 0 ? .max : (v < 0 ? .min : 0) }
        return Int16(max(Double(Int16.min), min(Double(Int16.max), v.rounded())))
    }
}
