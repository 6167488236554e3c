#if canImport(CTurboJPEG)
import CTurboJPEG
#endif

/// Decodes one JPEG image straight into a region of the framebuffer.
///
/// A seam for platforms: on Linux `TurboJPEGDecoder` (libturbojpeg); an Apple app can supply
/// an ImageIO-backed decoder. Without a decoder the client never asks for JPEG.
public protocol JPEGDecoding: AnyObject, Sendable {
    /// Decodes `jpeg` into `width`×`height` pixels at `destination` (rows `stride` words apart),
    /// as framebuffer words. The image must have exactly that size.
    func decode(_ jpeg: UnsafeRawBufferPointer, into destination: UnsafeMutablePointer<UInt32>,
                stride: Int, width: Int, height: Int) throws(RFBError)
}

#if canImport(CTurboJPEG)
/// libturbojpeg-backed JPEG decoding into BGRX (the framebuffer's memory layout), with the
/// accurate IDCT and smooth upsampling, so results match libjpeg-based clients bit for bit.
///
/// `@unchecked Sendable`: the tjhandle is used by one connection's decoder only, serially.
public final class TurboJPEGDecoder: JPEGDecoding, @unchecked Sendable {
    private let handle: tjhandle

    public init?() {
        guard let h = tjInitDecompress() else { return nil }
        handle = h
    }

    deinit { tjDestroy(handle) }

    public func decode(_ jpeg: UnsafeRawBufferPointer, into destination: UnsafeMutablePointer<UInt32>,
                       stride: Int, width: Int, height: Int) throws(RFBError) {
        guard let base = jpeg.baseAddress, jpeg.count > 0 else { throw .jpegError("empty JPEG data") }
        var w: Int32 = 0, h: Int32 = 0, subsampling: Int32 = 0, colourspace: Int32 = 0
        let source = base.assumingMemoryBound(to: UInt8.self)
        guard tjDecompressHeader3(handle, source, UInt(jpeg.count), &w, &h, &subsampling, &colourspace) == 0 else {
            throw .jpegError(lastError())
        }
        guard Int(w) == width, Int(h) == height else {
            throw .jpegError("image is \(w)×\(h) but its rectangle is \(width)×\(height)")
        }
        let status = destination.withMemoryRebound(to: UInt8.self, capacity: stride * height * 4) { out in
            tjDecompress2(handle, source, UInt(jpeg.count), out, w, Int32(stride * 4), h,
                          Int32(TJPF_BGRX.rawValue), 0)
        }
        guard status == 0 else { throw .jpegError(lastError()) }
    }

    private func lastError() -> String {
        guard let message = tjGetErrorStr2(handle) else { return "libturbojpeg failed" }
        return String(cString: message)
    }
}
#endif

/// The JPEG decoder this platform provides by default, if any.
public func makeDefaultJPEGDecoder() -> (any JPEGDecoding)? {
    #if canImport(CTurboJPEG)
    return TurboJPEGDecoder()
    #else
    return nil
    #endif
}
