/// Annex-B elementary streams (H.264 and HEVC): NAL units separated by start codes
/// (00 00 01, or 00 00 00 01), and the NAL unit types the client needs to tell apart.
public enum AnnexB {
    /// The NAL units of an Annex-B buffer as ranges without their start codes. Bytes before the
    /// first start code are ignored, and the zero bytes in front of a start code (a 4-byte start
    /// code's leading zero, trailing_zero_8bits) are not part of the unit before it.
    public static func nalUnits(in buffer: UnsafeRawBufferPointer) -> [Range<Int>] {
        var units: [Range<Int>] = []
        forEachNALUnit(in: buffer) { units.append($0) }
        return units
    }

    public static func nalUnits(in bytes: [UInt8]) -> [Range<Int>] {
        bytes.withUnsafeBytes { nalUnits(in: $0) }
    }

    /// Calls `body` with each NAL unit's range, without allocating.
    public static func forEachNALUnit(in buffer: UnsafeRawBufferPointer, _ body: (Range<Int>) -> Void) {
        let n = buffer.count
        var start = -1
        var i = 0
        while i + 2 < n {
            // Skip fast over bytes that cannot end a start code.
            if buffer[i + 2] > 1 { i += 3; continue }
            if buffer[i] == 0 && buffer[i + 1] == 0 && buffer[i + 2] == 1 {
                if start >= 0 {
                    var end = i
                    while end > start && buffer[end - 1] == 0 { end -= 1 }
                    if end > start { body(start..<end) }
                }
                start = i + 3
                i += 3
            } else {
                i += 1
            }
        }
        if start >= 0 && start < n {
            var end = n
            while end > start && buffer[end - 1] == 0 { end -= 1 }
            if end > start { body(start..<end) }
        }
    }

    /// The NAL unit type from a unit's first byte(s).
    @inlinable
    public static func nalType(_ firstByte: UInt8, codec: VideoCodec) -> UInt8 {
        codec == .hevc ? (firstByte >> 1) & 0x3F : firstByte & 0x1F
    }

    /// Converts Annex-B to length-prefixed units (AVCC/HVCC: each unit preceded by its length as a
    /// 4-byte big-endian integer), as VideoToolbox and MP4 want. `dropping` removes unit types
    /// (parameter sets that travel separately, access unit delimiters).
    public static func lengthPrefixed(_ annexB: [UInt8], codec: VideoCodec, dropping: Set<UInt8> = []) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(annexB.count + 16)
        annexB.withUnsafeBytes { raw in
            forEachNALUnit(in: raw) { range in
                if !dropping.isEmpty && dropping.contains(nalType(raw[range.lowerBound], codec: codec)) { return }
                let length = UInt32(range.count)
                out.append(UInt8(length >> 24)); out.append(UInt8((length >> 16) & 0xFF))
                out.append(UInt8((length >> 8) & 0xFF)); out.append(UInt8(length & 0xFF))
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: raw[range]))
            }
        }
        return out
    }

    /// The reverse: 4-byte length-prefixed units back to Annex-B with 4-byte start codes.
    /// Throws when a length runs past the end.
    public static func annexB(fromLengthPrefixed bytes: [UInt8]) throws(MediaError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            guard bytes.count - i >= 4 else { throw .truncated(what: "NAL unit length", needed: 4, available: bytes.count - i) }
            let length = Int(bytes[i]) << 24 | Int(bytes[i + 1]) << 16 | Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
            i += 4
            guard length <= bytes.count - i else { throw .truncated(what: "NAL unit", needed: length, available: bytes.count - i) }
            out += [0, 0, 0, 1]
            out.append(contentsOf: bytes[i..<(i + length)])
            i += length
        }
        return out
    }
}

/// HEVC NAL unit types (ITU-T H.265 Table 7-1) the client acts on.
public enum HEVCNALType {
    public static let blaWithLeadingPictures: UInt8 = 16
    public static let blaNoLeadingPictures: UInt8 = 18
    public static let idrWithRADL: UInt8 = 19
    public static let idrNoLeadingPictures: UInt8 = 20
    public static let cra: UInt8 = 21
    public static let vps: UInt8 = 32
    public static let sps: UInt8 = 33
    public static let pps: UInt8 = 34
    public static let accessUnitDelimiter: UInt8 = 35
    public static let prefixSEI: UInt8 = 39
    public static let suffixSEI: UInt8 = 40
    /// Slices (VCL units) are types 0...31.
    public static func isVCL(_ type: UInt8) -> Bool { type < 32 }
    /// IDR pictures (19, 20): decoding can start here with nothing before.
    public static func isIDR(_ type: UInt8) -> Bool { type == idrWithRADL || type == idrNoLeadingPictures }
    /// Intra random access points (BLA, IDR, CRA: 16...23).
    public static func isRandomAccessPoint(_ type: UInt8) -> Bool { (16...23).contains(type) }
}

/// H.264 NAL unit types (ITU-T H.264 Table 7-1) the client acts on.
public enum H264NALType {
    public static let nonIDRSlice: UInt8 = 1
    public static let idrSlice: UInt8 = 5
    public static let sei: UInt8 = 6
    public static let sps: UInt8 = 7
    public static let pps: UInt8 = 8
    public static let accessUnitDelimiter: UInt8 = 9
    /// Slices (VCL units) are types 1...5.
    public static func isVCL(_ type: UInt8) -> Bool { (1...5).contains(type) }
    public static func isIDR(_ type: UInt8) -> Bool { type == idrSlice }
}
