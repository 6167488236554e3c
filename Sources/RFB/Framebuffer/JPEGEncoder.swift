#if canImport(CTurboJPEG)
import CTurboJPEG
#endif

/// Writes a framebuffer as a baseline JPEG (for screenshots named .jpg). libturbojpeg on Linux;
/// platforms without it throw `unavailable`, and an app uses its own image library.
public enum JPEGEncoder {
    public struct EncodingFailed: Error, CustomStringConvertible {
        public var description: String
    }

    /// The JPEG file bytes for `framebuffer`, at `quality` 1–100 with 4:4:4 chroma (screen
    /// content keeps its colour edges).
    public static func encode(_ framebuffer: Framebuffer, quality: Int = 92) throws -> [UInt8] {
        #if canImport(CTurboJPEG)
        guard framebuffer.width > 0, framebuffer.height > 0 else {
            throw EncodingFailed(description: "cannot write an empty (\(framebuffer.width)×\(framebuffer.height)) image")
        }
        guard let handle = tjInitCompress() else { throw EncodingFailed(description: "libturbojpeg could not start a compressor") }
        defer { tjDestroy(handle) }
        var output: UnsafeMutablePointer<UInt8>?
        var size: UInt = 0
        defer { if let output { tjFree(output) } }
        let status = framebuffer.pixels.withUnsafeBytes { raw in
            tjCompress2(handle, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(framebuffer.width), Int32(framebuffer.width * 4),
                        Int32(framebuffer.height), Int32(TJPF_BGRX.rawValue), &output, &size, Int32(TJSAMP_444.rawValue),
                        Int32(min(max(quality, 1), 100)), 0)
        }
        guard status == 0, let output else {
            throw EncodingFailed(description: tjGetErrorStr2(handle).map { String(cString: $0) } ?? "libturbojpeg failed")
        }
        return Array(UnsafeBufferPointer(start: output, count: Int(size)))
        #else
        throw EncodingFailed(description: "JPEG output needs libturbojpeg, which this build lacks; write a .png")
        #endif
    }
}
