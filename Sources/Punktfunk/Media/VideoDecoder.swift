/// Turning access units into pictures. A platform plugs in its decoder here (FFmpeg's libavcodec
/// on Linux, `FFmpegVideoDecoder`; VideoToolbox in an Apple shell); `DecodeGate` decides which
/// access units may reach it, so a gap or a decode error never shows garbage.
public protocol VideoDecoder: AnyObject {
    /// What decodes: "hevc (software)", "h264 (vaapi)".
    var description: String { get }
    /// Decodes one access unit. Returns the picture it completed, if any (a low-delay decoder
    /// returns the access unit's own picture). A unit the decoder cannot use throws; the
    /// decoder is then ready for the next random-access point.
    func decode(_ accessUnit: UnsafeRawBufferPointer, frameIndex: UInt32, ptsNanoseconds: UInt64) throws(VideoDecodeError) -> DecodedPicture?
    /// Forgets every reference picture (after a gap: the next unit decoded is a keyframe).
    func reset()
}

/// Why a decoder could not be made or could not decode.
public enum VideoDecodeError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The decoding library is not installed (or lacks a function).
    case libraryMissing(String)
    /// The library has no decoder for this codec.
    case codecUnavailable(VideoCodec)
    /// The decoder refused the access unit (corrupt, or it needs a reference it does not have).
    case invalidData(String)
    /// The decoder produced a picture layout the window cannot show.
    case unsupportedPicture(String)
    case failed(String)

    public var description: String {
        switch self {
        case .libraryMissing(let detail):
            return "cannot load FFmpeg's libavcodec to decode the stream: \(detail) (on Debian: apt install libavcodec59)"
        case .codecUnavailable(let codec):
            return "this libavcodec has no \(codec.rawValue) decoder (on Debian the full libavcodec59 has hevc, h264 and av1 through dav1d)"
        case .invalidData(let detail): return "the decoder refused an access unit: \(detail)"
        case .unsupportedPicture(let detail): return "the decoder produced a picture the window cannot show: \(detail)"
        case .failed(let detail): return "decoding failed: \(detail)"
        }
    }
}

/// How a decoded picture's samples lie in memory.
public enum PictureLayout: String, Sendable, Equatable, CaseIterable {
    /// 8-bit 4:2:0, three planes (Y, then U and V at half size).
    case i420
    /// 8-bit 4:2:0, Y then interleaved UV (what hardware decoders give).
    case nv12
    /// 10-bit 4:2:0 in three planes of 16-bit little-endian samples (values 0…1023).
    case i420p10
    /// 10-bit 4:2:0, Y then interleaved UV, 16-bit samples with the value in the top ten bits
    /// (a hardware decoder's 10-bit output).
    case p010
    /// 8-bit 4:4:4, three full-size planes.
    case i444
    /// 10-bit 4:4:4, three full-size planes of 16-bit little-endian samples.
    case i444p10

    /// Planes in memory: 2 for the interleaved layouts, 3 otherwise.
    public var planeCount: Int { self == .nv12 || self == .p010 ? 2 : 3 }
    /// 8-bit 4:2:0: what a window can take as it is.
    public var isEightBit420: Bool { self == .i420 || self == .nv12 }
}

/// The colour the samples mean: the matrix from YUV to RGB and the range of the values.
public struct PictureColour: Sendable, Equatable {
    public enum Matrix: String, Sendable, Equatable { case bt601, bt709, bt2020 }
    public var matrix: Matrix
    public var fullRange: Bool

    public init(matrix: Matrix, fullRange: Bool) {
        self.matrix = matrix
        self.fullRange = fullRange
    }

    /// From the Welcome's CICP description (primaries, transfer, matrix, full range).
    public init(cicp: [UInt8]) {
        let matrix = cicp.count > 2 ? cicp[2] : 1
        switch matrix {
        case 5, 6: self.matrix = .bt601
        case 9, 10: self.matrix = .bt2020
        default: self.matrix = .bt709
        }
        fullRange = cicp.count > 3 && cicp[3] != 0
    }
}

/// One decoded picture: its planes stay valid while the object lives (a decoder hands out a
/// reference to its own buffer, not a copy).
public protocol DecodedPicture: AnyObject, Sendable {
    var width: Int { get }
    var height: Int { get }
    var layout: PictureLayout { get }
    var colour: PictureColour { get }
    var frameIndex: UInt32 { get }
    /// Host capture time (CLOCK_REALTIME nanoseconds, the host's clock).
    var ptsNanoseconds: UInt64 { get }
    /// The planes' first bytes and row pitches in bytes (`layout.planeCount` of each), valid during `body`.
    func withPlanes<R>(_ body: (_ planes: [UnsafePointer<UInt8>], _ pitches: [Int]) throws -> R) rethrows -> R
}

/// Which access units may be decoded: every one while the stream is whole; after a gap in the
/// frame numbers (frames the data plane gave up on) or a decode error, none until the next
/// random-access point — so the window freezes on the last good picture instead of showing
/// pictures built on missing references — and the caller asks the host for that keyframe once.
public struct DecodeGate: Sendable, Equatable {
    public enum Verdict: Sendable, Equatable {
        case decode
        /// Skip this unit; `requestKeyframe` is true the first time after the stream broke.
        case skip(requestKeyframe: Bool)
    }

    /// Waiting for a random-access point (at the start, too: a decoder cannot start elsewhere).
    public private(set) var waitingForKeyframe = true
    private var asked = false
    private var nextFrame: UInt32?
    /// Units skipped while waiting, since the start.
    public private(set) var skipped = 0

    public init() {}

    /// An access unit arrived: decode it or skip it.
    public mutating func admit(frameIndex: UInt32, isRandomAccessPoint: Bool) -> Verdict {
        defer { nextFrame = frameIndex &+ 1 }
        if let expected = nextFrame, frameIndex != expected, !isRandomAccessPoint { waitingForKeyframe = true }
        if isRandomAccessPoint {
            waitingForKeyframe = false
            asked = false
            return .decode
        }
        guard waitingForKeyframe else { return .decode }
        skipped += 1
        // At the very start the host's first unit is its IDR: only a stream that broke asks.
        let ask = !asked && nextFrame != nil
        if ask { asked = true }
        return .skip(requestKeyframe: ask)
    }

    /// The data plane declared frames lost: the next unit waits for a keyframe.
    public mutating func framesLost() {
        waitingForKeyframe = true
    }

    /// The decoder refused a unit: wait for a keyframe (the caller asks for one now).
    public mutating func decodeFailed() {
        waitingForKeyframe = true
        asked = true
    }
}
