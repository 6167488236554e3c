#if canImport(CFFmpeg)
import CFFmpeg
import CFFmpegLoader

/// The Linux decoder: FFmpeg's libavcodec (loaded on first use), HEVC, H.264 or AV1, low delay
/// (slice threads only: frame threads would hold pictures back), through VA-API when the machine
/// has it and software otherwise. Its pictures are references to libavcodec's own buffers.
///
/// Not thread-safe: one thread decodes (the stream's decode thread).
public final class FFmpegVideoDecoder: VideoDecoder {
    /// Where decoding runs.
    public enum Hardware: Sendable, Equatable {
        /// VA-API when a device opens, software otherwise.
        case automatic
        case software
        /// VA-API on this DRM render node (nil: libva's default), else software.
        case vaapi(device: String?)
    }

    public let codec: VideoCodec
    /// True when VA-API decodes; false for software.
    public let hardwareAccelerated: Bool
    /// Why VA-API is not used, when it was asked for (automatically or by name) and could not open.
    public let hardwareFallbackReason: String?
    private var context: UnsafeMutablePointer<AVCodecContext>?
    private let packet: UnsafeMutablePointer<AVPacket>
    private let frame: UnsafeMutablePointer<AVFrame>
    private let colourFallback: PictureColour

    public var description: String { "\(codec.rawValue) (\(hardwareAccelerated ? "vaapi" : "software"))" }

    /// Loads libavcodec when this is the first decoder; `colour` is what the Welcome says, used
    /// when the stream itself does not say.
    public init(codec: VideoCodec, hardware: Hardware = .automatic, colour: PictureColour = PictureColour(matrix: .bt709, fullRange: false),
                threads: Int = 0) throws(VideoDecodeError) {
        if let problem = farcast_ffmpeg_load() { throw .libraryMissing(String(cString: problem)) }
        cffmpeg_quiet()
        self.codec = codec
        colourFallback = colour
        let id: AVCodecID
        switch codec {
        case .hevc: id = AV_CODEC_ID_HEVC
        case .h264: id = AV_CODEC_ID_H264
        case .av1: id = AV_CODEC_ID_AV1
        }
        guard let decoder = avcodec_find_decoder(id) else { throw .codecUnavailable(codec) }
        guard let context = avcodec_alloc_context3(decoder), let packet = av_packet_alloc(), let frame = av_frame_alloc() else {
            throw .failed("out of memory making the decoder")
        }
        self.context = context
        self.packet = packet
        self.frame = frame
        context.pointee.flags |= Int32(AV_CODEC_FLAG_LOW_DELAY)
        context.pointee.thread_type = FF_THREAD_SLICE
        context.pointee.thread_count = Int32(threads)
        var fallback: String?
        var accelerated = false
        let device: String?? = {
            switch hardware {
            case .software: return .none
            case .automatic: return .some(nil)
            case .vaapi(let device): return .some(device)
            }
        }()
        if case .some(let path) = device {
            var deviceContext: UnsafeMutablePointer<AVBufferRef>?
            let status = av_hwdevice_ctx_create(&deviceContext, AV_HWDEVICE_TYPE_VAAPI, path, nil, 0)
            if status >= 0, let deviceContext {
                // libavcodec's default format choice picks VA-API's surfaces when a device is set.
                context.pointee.hw_device_ctx = deviceContext
                accelerated = true
            } else {
                fallback = "VA-API\(path.map { " (\($0))" } ?? "") did not open: \(Self.describe(status)); decoding in software"
            }
        }
        hardwareAccelerated = accelerated
        hardwareFallbackReason = fallback
        let opened = avcodec_open2(context, decoder, nil)
        guard opened >= 0 else {
            var c: UnsafeMutablePointer<AVCodecContext>? = context
            avcodec_free_context(&c)
            self.context = nil
            throw .failed("opening the \(codec.rawValue) decoder: \(Self.describe(opened))")
        }
    }

    deinit {
        var p: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&p)
        var f: UnsafeMutablePointer<AVFrame>? = frame
        av_frame_free(&f)
        avcodec_free_context(&context)
    }

    public func decode(_ accessUnit: UnsafeRawBufferPointer, frameIndex: UInt32, ptsNanoseconds: UInt64) throws(VideoDecodeError) -> DecodedPicture? {
        guard let context, let base = accessUnit.baseAddress, !accessUnit.isEmpty else { return nil }
        guard accessUnit.count < Int(Int32.max) else { throw .invalidData("an access unit of \(accessUnit.count) bytes") }
        // Not reference-counted: libavcodec copies what it keeps.
        packet.pointee.data = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: UInt8.self))
        packet.pointee.size = Int32(accessUnit.count)
        packet.pointee.pts = Int64(frameIndex)
        defer { packet.pointee.data = nil; packet.pointee.size = 0 }
        let sent = avcodec_send_packet(context, packet)
        if sent < 0 && sent != cffmpeg_error_again() {
            if sent == cffmpeg_error_invalid_data() { throw .invalidData(Self.describe(sent)) }
            throw .failed(Self.describe(sent))
        }
        var newest: DecodedPicture?
        while true {
            let received = avcodec_receive_frame(context, frame)
            if received == cffmpeg_error_again() || received == cffmpeg_error_eof() { break }
            guard received >= 0 else { throw .invalidData(Self.describe(received)) }
            defer { av_frame_unref(frame) }
            if frame.pointee.decode_error_flags != 0 || frame.pointee.flags & AV_FRAME_FLAG_CORRUPT != 0 {
                throw .invalidData("the decoder marked the picture corrupt")
            }
            newest = try picture(from: frame, frameIndex: frameIndex, ptsNanoseconds: ptsNanoseconds)
        }
        return newest
    }

    public func reset() {
        if let context { avcodec_flush_buffers(context) }
    }

    /// A reference to the decoded picture (downloaded from the GPU first when VA-API decoded it).
    private func picture(from decoded: UnsafeMutablePointer<AVFrame>, frameIndex: UInt32, ptsNanoseconds: UInt64) throws(VideoDecodeError) -> DecodedPicture {
        guard let kept = av_frame_alloc() else { throw .failed("out of memory") }
        var owned: UnsafeMutablePointer<AVFrame>? = kept
        if decoded.pointee.format == AV_PIX_FMT_VAAPI.rawValue {
            let status = av_hwframe_transfer_data(kept, decoded, 0)
            guard status >= 0 else {
                av_frame_free(&owned)
                throw .failed("downloading the VA-API picture: \(Self.describe(status))")
            }
            _ = av_frame_copy_props(kept, decoded)
        } else {
            let status = av_frame_ref(kept, decoded)
            guard status >= 0 else {
                av_frame_free(&owned)
                throw .failed(Self.describe(status))
            }
        }
        let layout: PictureLayout
        switch kept.pointee.format {
        case AV_PIX_FMT_YUV420P.rawValue, AV_PIX_FMT_YUVJ420P.rawValue: layout = .i420
        case AV_PIX_FMT_NV12.rawValue: layout = .nv12
        case AV_PIX_FMT_YUV420P10LE.rawValue: layout = .i420p10
        case AV_PIX_FMT_P010LE.rawValue: layout = .p010
        case AV_PIX_FMT_YUV444P.rawValue, AV_PIX_FMT_YUVJ444P.rawValue: layout = .i444
        case AV_PIX_FMT_YUV444P10LE.rawValue: layout = .i444p10
        default:
            let name = av_get_pix_fmt_name(AVPixelFormat(rawValue: kept.pointee.format)).map { String(cString: $0) } ?? "format \(kept.pointee.format)"
            av_frame_free(&owned)
            throw .unsupportedPicture("\(name) (4:2:0 and 4:4:4 at 8 or 10 bits are shown)")
        }
        var colour = colourFallback
        switch kept.pointee.colorspace {
        case AVCOL_SPC_BT709: colour.matrix = .bt709
        case AVCOL_SPC_BT470BG, AVCOL_SPC_SMPTE170M: colour.matrix = .bt601
        case AVCOL_SPC_BT2020_NCL, AVCOL_SPC_BT2020_CL: colour.matrix = .bt2020
        default: break
        }
        switch kept.pointee.color_range {
        case AVCOL_RANGE_JPEG: colour.fullRange = true
        case AVCOL_RANGE_MPEG: colour.fullRange = false
        default: if [AV_PIX_FMT_YUVJ420P.rawValue, AV_PIX_FMT_YUVJ444P.rawValue].contains(kept.pointee.format) { colour.fullRange = true }
        }
        return FFmpegPicture(frame: kept, layout: layout, colour: colour, frameIndex: frameIndex, ptsNanoseconds: ptsNanoseconds)
    }

    /// Loads libavcodec as a stream would and says which codecs it decodes and why VA-API does
    /// not open (nil when it does): what `farcast doctor` checks.
    public static func capabilities() throws(VideoDecodeError) -> (codecs: [VideoCodec], vaapiProblem: String?) {
        if let problem = farcast_ffmpeg_load() { throw .libraryMissing(String(cString: problem)) }
        cffmpeg_quiet()
        let codecs = VideoCodec.allCases.filter { codec in
            avcodec_find_decoder(codec == .hevc ? AV_CODEC_ID_HEVC : codec == .h264 ? AV_CODEC_ID_H264 : AV_CODEC_ID_AV1) != nil
        }
        var device: UnsafeMutablePointer<AVBufferRef>?
        let status = av_hwdevice_ctx_create(&device, AV_HWDEVICE_TYPE_VAAPI, nil, nil, 0)
        defer { av_buffer_unref(&device) }
        return (codecs, status >= 0 ? nil : describe(status))
    }

    static func describe(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 128)
        return String(cString: cffmpeg_describe(code, &buffer, buffer.count))
    }
}

/// A decoded picture: a reference to libavcodec's buffer, released when the picture is.
final class FFmpegPicture: DecodedPicture, @unchecked Sendable {
    // @unchecked: the frame is only read after init (its planes are immutable), and freed in deinit.
    private let frame: UnsafeMutablePointer<AVFrame>
    let layout: PictureLayout
    let colour: PictureColour
    let frameIndex: UInt32
    let ptsNanoseconds: UInt64
    var width: Int { Int(frame.pointee.width) }
    var height: Int { Int(frame.pointee.height) }

    init(frame: UnsafeMutablePointer<AVFrame>, layout: PictureLayout, colour: PictureColour, frameIndex: UInt32, ptsNanoseconds: UInt64) {
        self.frame = frame
        self.layout = layout
        self.colour = colour
        self.frameIndex = frameIndex
        self.ptsNanoseconds = ptsNanoseconds
    }

    deinit {
        var f: UnsafeMutablePointer<AVFrame>? = frame
        av_frame_free(&f)
    }

    func withPlanes<R>(_ body: ([UnsafePointer<UInt8>], [Int]) throws -> R) rethrows -> R {
        let count = layout.planeCount
        let data = frame.pointee.data, pitch = frame.pointee.linesize
        let all = [data.0, data.1, data.2]
        let pitches = [pitch.0, pitch.1, pitch.2]
        return try body((0..<count).map { UnsafePointer(all[$0]!) }, (0..<count).map { Int(pitches[$0]) })
    }
}
#endif
