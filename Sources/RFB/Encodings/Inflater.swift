import CZlib

/// One persistent zlib inflate stream. RFB servers flush with Z_SYNC_FLUSH and never end their
/// streams, so a stream lives for the whole connection (Tight resets one only when told to).
///
/// `@unchecked Sendable`: the z_stream holds C pointers into zlib's own state; an inflater is
/// owned by exactly one connection's decoder state and only used from that connection's
/// serial processing, never shared.
final class Inflater: @unchecked Sendable {
    private var stream = z_stream()
    private var initialized = false
    private var ended = false
    let name: String

    init(name: String) { self.name = name }

    deinit {
        if initialized { inflateEnd(&stream) }
    }

    /// Forgets the dictionary and history (Tight's reset bits).
    func reset() {
        if initialized { inflateReset(&stream) }
        ended = false
    }

    private func ensureInitialized() throws(RFBError) {
        guard !initialized else { return }
        let status = czlib_inflate_init(&stream)
        guard status == Z_OK else { throw .compressionError(encoding: name, detail: "zlib could not start (status \(status))") }
        initialized = true
    }

    /// Inflates all of `input` into `output`, which must be filled exactly: fewer bytes means the
    /// data ended early, more means it would spill past the rectangle. Both are errors.
    func inflate(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(RFBError) {
        let produced = try inflate(input, upTo: output)
        guard produced == output.count else {
            throw .compressionError(encoding: name, detail: "data inflated to \(produced) bytes, the rectangle needs \(output.count)")
        }
    }

    /// Inflates all of `input` into `output`, returning how many bytes came out. Output beyond
    /// `output.count` is an error (the data claims more than the rectangle can hold).
    func inflate(_ input: UnsafeRawBufferPointer, upTo output: UnsafeMutableRawBufferPointer) throws(RFBError) -> Int {
        try ensureInitialized()
        if ended {
            // A server that ended its stream and keeps sending starts a new one.
            inflateReset(&stream)
            ended = false
        }
        guard input.count > 0 else { return 0 }
        stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress!.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(input.count)
        var spare: UInt8 = 0
        var produced = 0
        defer {
            stream.next_in = nil
            stream.next_out = nil
        }
        while stream.avail_in > 0 {
            let room = output.count - produced
            if room > 0 {
                stream.next_out = output.baseAddress!.advanced(by: produced).assumingMemoryBound(to: Bytef.self)
                stream.avail_out = uInt(min(room, Int(UInt32.max)))
            } else {
                // Out of room: what is left may only be flush markers that produce nothing.
                withUnsafeMutablePointer(to: &spare) { stream.next_out = $0 }
                stream.avail_out = 1
            }
            let before = stream.avail_out
            let status = CZlib.inflate(&stream, Z_SYNC_FLUSH)
            let made = Int(before - stream.avail_out)
            if room <= 0 && made > 0 {
                throw .compressionError(encoding: name, detail: "data inflates past the end of its rectangle (more than \(output.count) bytes)")
            }
            produced += room > 0 ? made : 0
            switch status {
            case Z_OK:
                continue
            case Z_STREAM_END:
                ended = true
                if stream.avail_in > 0 {
                    throw .compressionError(encoding: name, detail: "\(stream.avail_in) bytes follow the end of the zlib stream")
                }
            case Z_BUF_ERROR:
                if made == 0 && stream.avail_in > 0 && room > 0 {
                    throw .compressionError(encoding: name, detail: "zlib made no progress")
                }
            case Z_NEED_DICT:
                throw .compressionError(encoding: name, detail: "stream asks for a preset dictionary")
            default:
                let message = stream.msg.map { String(cString: $0) } ?? "status \(status)"
                throw .compressionError(encoding: name, detail: message)
            }
        }
        return produced
    }
}

/// Upper bound of the compressed size of `n` bytes for any honest zlib stream with sync
/// flushes (stored blocks cost 5 bytes per 64 KiB; each flush a few bytes more).
func zlibCompressedBound(_ n: Int) -> Int { n + n / 1000 + 1024 + 16 }
