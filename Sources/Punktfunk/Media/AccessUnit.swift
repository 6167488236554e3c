/// What an access unit holds, read from its NAL units (HEVC, H.264) or OBUs (AV1): whether it is
/// a keyframe a decoder can start from, its in-band parameter sets, and whether it carries a
/// picture at all. The ranges point into the access unit's bytes.
public struct AccessUnit: Sendable, Equatable {
    public let codec: VideoCodec
    /// NAL unit (or OBU) ranges in order.
    public let units: [Range<Int>]
    /// NAL unit types (or OBU types), parallel to `units`.
    public let types: [UInt8]
    /// An IDR (H.264 5; HEVC 19/20) or an AV1 key frame: a decoder can start here.
    public let isKeyframe: Bool
    /// An HEVC random access point (BLA, IDR, CRA); for the other codecs equal to `isKeyframe`.
    public let isRandomAccessPoint: Bool
    /// At least one slice (VCL unit) or AV1 frame / tile group.
    public let hasPicture: Bool
    /// Parameter sets in band (HEVC VPS/SPS/PPS, H.264 SPS/PPS, AV1 sequence header).
    public let videoParameterSets: [Range<Int>]
    public let sequenceParameterSets: [Range<Int>]
    public let pictureParameterSets: [Range<Int>]

    /// Reads an access unit's structure. HEVC and H.264 never fail (bytes without start codes are
    /// an access unit without units); AV1 throws when an OBU's size runs past the end.
    public init(_ bytes: [UInt8], codec: VideoCodec) throws(MediaError) {
        self.codec = codec
        var units: [Range<Int>] = [], types: [UInt8] = []
        var vps: [Range<Int>] = [], sps: [Range<Int>] = [], pps: [Range<Int>] = []
        var keyframe = false, randomAccess = false, picture = false
        switch codec {
        case .hevc, .h264:
            bytes.withUnsafeBytes { raw in
                AnnexB.forEachNALUnit(in: raw) { range in
                    let type = AnnexB.nalType(raw[range.lowerBound], codec: codec)
                    units.append(range)
                    types.append(type)
                    if codec == .hevc {
                        switch type {
                        case HEVCNALType.vps: vps.append(range)
                        case HEVCNALType.sps: sps.append(range)
                        case HEVCNALType.pps: pps.append(range)
                        default: break
                        }
                        if HEVCNALType.isVCL(type) { picture = true }
                        if HEVCNALType.isIDR(type) { keyframe = true }
                        if HEVCNALType.isRandomAccessPoint(type) { randomAccess = true }
                    } else {
                        switch type {
                        case H264NALType.sps: sps.append(range)
                        case H264NALType.pps: pps.append(range)
                        default: break
                        }
                        if H264NALType.isVCL(type) { picture = true }
                        if H264NALType.isIDR(type) { keyframe = true; randomAccess = true }
                    }
                }
            }
        case .av1:
            let obus = try AV1.obus(in: bytes)
            var reducedStillPicture = false
            for obu in obus {
                units.append(obu.range)
                types.append(obu.type)
                switch obu.type {
                case AV1.OBUType.sequenceHeader:
                    sps.append(obu.payload)
                    // seq_profile (3 bits), still_picture (1), reduced_still_picture_header (1).
                    if !obu.payload.isEmpty { reducedStillPicture = bytes[obu.payload.lowerBound] & 0x08 != 0 }
                case AV1.OBUType.frame, AV1.OBUType.frameHeader:
                    picture = true
                    if reducedStillPicture {
                        keyframe = true
                    } else if !obu.payload.isEmpty {
                        // show_existing_frame (1 bit), then frame_type (2 bits; 0 = KEY_FRAME).
                        let first = bytes[obu.payload.lowerBound]
                        if first & 0x80 == 0 && (first >> 5) & 0x03 == 0 { keyframe = true }
                    }
                case AV1.OBUType.tileGroup:
                    picture = true
                default: break
                }
            }
            randomAccess = keyframe
        }
        self.units = units
        self.types = types
        isKeyframe = keyframe
        isRandomAccessPoint = randomAccess
        hasPicture = picture
        videoParameterSets = vps
        sequenceParameterSets = sps
        pictureParameterSets = pps
    }

    /// Whether the keyframe carries every parameter set a decoder needs to start (HEVC: VPS, SPS
    /// and PPS; H.264: SPS and PPS; AV1: a sequence header).
    public var carriesParameterSets: Bool {
        switch codec {
        case .hevc: return !videoParameterSets.isEmpty && !sequenceParameterSets.isEmpty && !pictureParameterSets.isEmpty
        case .h264: return !sequenceParameterSets.isEmpty && !pictureParameterSets.isEmpty
        case .av1: return !sequenceParameterSets.isEmpty
        }
    }
}
