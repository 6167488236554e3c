import CTurboJPEG

/// JPEG encode/decode through libturbojpeg's RGB interface, independent of the decoder's BGRX path.
enum JPEGTestCodec {
    static func compress(_ pixels: [UInt32], width: Int, height: Int, quality: Int32) -> [UInt8] {
        let rgb = pixels.flatMap { [UInt8($0 >> 16 & 255), UInt8($0 >> 8 & 255), UInt8($0 & 255)] }
        let handle = tjInitCompress()!
        defer { tjDestroy(handle) }
        var output: UnsafeMutablePointer<UInt8>?
        var size: UInt = 0
        let status = rgb.withUnsafeBufferPointer { src in
            tjCompress2(handle, src.baseAddress, Int32(width), 0, Int32(height), Int32(TJPF_RGB.rawValue),
                        &output, &size, Int32(TJSAMP_420.rawValue), quality, 0)
        }
        precondition(status == 0, "tjCompress2 failed")
        defer { tjFree(output) }
        return Array(UnsafeBufferPointer(start: output, count: Int(size)))
    }

    static func decompress(_ jpeg: [UInt8], width: Int, height: Int) -> [UInt32] {
        let handle = tjInitDecompress()!
        defer { tjDestroy(handle) }
        var rgb = [UInt8](repeating: 0, count: width * height * 3)
        let status = rgb.withUnsafeMutableBufferPointer { dst in
            jpeg.withUnsafeBufferPointer { src in
                tjDecompress2(handle, src.baseAddress, UInt(src.count), dst.baseAddress, Int32(width), 0, Int32(height),
                              Int32(TJPF_RGB.rawValue), 0)
            }
        }
        precondition(status == 0, "tjDecompress2 failed")
        return (0..<width * height).map { UInt32(rgb[$0 * 3]) << 16 | UInt32(rgb[$0 * 3 + 1]) << 8 | UInt32(rgb[$0 * 3 + 2]) }
    }
}
