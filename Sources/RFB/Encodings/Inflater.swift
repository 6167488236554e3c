import CZlib

/// One persistent zlib inflate stream. RFB servers flush with Z_SYNC_FLUSH and never end their
/// streams, so a stream lives for the whole connection (Tight resets one only when told to).
///
/// The 2-byte zlib header is checked and stripped here and the rest inflated raw: zlib then
/// skips the adler-32 checksum of every output byte, which a never-ending stream cannot verify
/// anyway (its trailer never comes). A stream that does end has its trailer skipped and may
/// start again with a new header.
///
/// `@unchecked Sendable`: the z_stream holds C pointers into zlib's own state; an inflater is
/// owned by exactly one connection's decoder state and only used from that connection's
/// serial processing, never shared.
final class Inflater: @unchecked Sendable {
    private var stream = z_stream()
    private var initialized = false
    /// zlib header bytes still to read (CMF, FLG) before deflate data.
    private var headerPending = 2
    private var headerFirstByte: UInt8 = 0
    /// adler-32 trailer bytes still to skip after a stream ended.
    private var trailerPending = 0
    let name: String

    init(name: String) { self.name = name }

    deinit {
        if initialized { inflateEnd(&stream) }
    }

    /// Forgets the dictionary and history (Tight's reset bits).
    func reset() {
        if initialized { inflateReset(&stream) }
        headerPending = 2
        trailerPending = 0
    }

    private func ensureInitialized() throws(RFBError) {
        guard !initialized else { return }
        let status = czlib_inflate_init_raw(&stream)
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

    /// Inflates all of `input` into `buffer`, growing it (doubling, from at least 64 KiB) up to
    /// `limit` bytes as the output needs; returns the bytes produced. For encodings whose
    /// inflated size is only bounded, not known, so the buffer tracks real sizes.
    func inflate(_ input: UnsafeRawBufferPointer, growing buffer: inout [UInt8], limit: Int) throws(RFBError) -> Int {
        // One byte of headroom past the limit: output of exactly `limit` bytes must still let
        // the stream's end and trailer be consumed, and a byte beyond it proves an overflow.
        let capacity = limit + 1
        if buffer.count < min(capacity, 1 << 16) { buffer = [UInt8](repeating: 0, count: min(capacity, 1 << 16)) }
        var produced = 0
        var remaining = input
        while true {
            let room = min(buffer.count, capacity)
            let start = produced
            let part = remaining
            let outcome: Result<(Int, Int), RFBError> = buffer.withUnsafeMutableBytes { out in
                do throws(RFBError) {
                    return .success(try inflatePartially(part, into: UnsafeMutableRawBufferPointer(rebasing: out[start..<room])))
                } catch {
                    return .failure(error)
                }
            }
            let (made, used) = try outcome.get()
            produced += made
            remaining = UnsafeRawBufferPointer(rebasing: remaining[used...])
            guard produced <= limit else {
                throw .compressionError(encoding: name, detail: "data inflates past the end of its rectangle (more than \(limit) bytes)")
            }
            if remaining.isEmpty { return produced }
            if produced == room {
                buffer += [UInt8](repeating: 0, count: min(buffer.count, capacity - buffer.count))
            }
        }
    }

    /// Inflates until `output` is full or `input` is used up; returns (produced, consumed).
    private func inflatePartially(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(RFBError) -> (Int, Int) {
        try ensureInitialized()
        var consumed = 0, produced = 0
        defer {
            stream.next_in = nil
            stream.next_out = nil
        }
        while consumed < input.count && produced < output.count {
            consumed += try consumeFraming(input, from: consumed)
            guard consumed < input.count else { break }
            stream.next_in = UnsafeMutablePointer(mutating: (input.baseAddress! + consumed).assumingMemoryBound(to: Bytef.self))
            stream.avail_in = uInt(input.count - consumed)
            stream.next_out = output.baseAddress!.advanced(by: produced).assumingMemoryBound(to: Bytef.self)
            stream.avail_out = uInt(output.count - produced)
            let before = stream.avail_out, inputBefore = stream.avail_in
            let status = CZlib.inflate(&stream, Z_SYNC_FLUSH)
            produced += Int(before - stream.avail_out)
            consumed = input.count - Int(stream.avail_in)
            switch status {
            case Z_OK, Z_BUF_ERROR:
                if stream.avail_out == before && stream.avail_in == inputBefore {
                    throw .compressionError(encoding: name, detail: "zlib made no progress")
                }
            case Z_STREAM_END:
                inflateReset(&stream)
                trailerPending = 4
                headerPending = 2
            default:
                throw .compressionError(encoding: name, detail: stream.msg.map { String(cString: $0) } ?? "status \(status)")
            }
        }
        return (produced, consumed)
    }

    /// Consumes header or trailer bytes at the front of `input`; returns how many it took.
    private func consumeFraming(_ input: UnsafeRawBufferPointer, from start: Int) throws(RFBError) -> Int {
        var i = start
        while i < input.count && (trailerPending > 0 || headerPending > 0) {
            if trailerPending > 0 {
                let n = min(trailerPending, input.count - i)
                trailerPending -= n
                i += n
                continue
            }
            let byte = input[i]
            i += 1
            if headerPending == 2 {
                guard byte & 0x0F == 8, byte >> 4 <= 7 else {
                    throw .compressionError(encoding: name, detail: "not a zlib stream (header byte 0x\(String(byte, radix: 16)))")
                }
                headerFirstByte = byte
            } else {
                guard (UInt16(headerFirstByte) << 8 | UInt16(byte)) % 31 == 0 else {
                    throw .compressionError(encoding: name, detail: "corrupt zlib header")
                }
                guard byte & 0x20 == 0 else {
                    throw .compressionError(encoding: name, detail: "stream asks for a preset dictionary")
                }
            }
            headerPending -= 1
        }
        return i - start
    }

    /// Inflates all of `input` into `output`, returning how many bytes came out. Output beyond
    /// `output.count` is an error (the data claims more than the rectangle can hold).
    func inflate(_ input: UnsafeRawBufferPointer, upTo output: UnsafeMutableRawBufferPointer) throws(RFBError) -> Int {
        try ensureInitialized()
        var consumed = 0
        var produced = 0
        var spare: UInt8 = 0
        defer {
            stream.next_in = nil
            stream.next_out = nil
        }
        while consumed < input.count {
            consumed += try consumeFraming(input, from: consumed)
            guard consumed < input.count else { break }
            stream.next_in = UnsafeMutablePointer(mutating: (input.baseAddress! + consumed).assumingMemoryBound(to: Bytef.self))
            stream.avail_in = uInt(input.count - consumed)
            var streamEnded = false
            while stream.avail_in > 0 && !streamEnded {
                let room = output.count - produced
                if room > 0 {
                    stream.next_out = output.baseAddress!.advanced(by: produced).assumingMemoryBound(to: Bytef.self)
                    stream.avail_out = uInt(min(room, Int(UInt32.max)))
                } else {
                    // Out of room: what is left may only be flush markers that produce nothing.
                    withUnsafeMutablePointer(to: &spare) { stream.next_out = $0 }
                    stream.avail_out = 1
                }
                let before = stream.avail_out, inputBefore = stream.avail_in
                let status = CZlib.inflate(&stream, Z_SYNC_FLUSH)
                let made = Int(before - stream.avail_out)
                if made == 0 && stream.avail_in == inputBefore && status != Z_STREAM_END {
                    // Never spin: zlib took nothing and gave nothing.
                    throw .compressionError(encoding: name, detail: status == Z_OK || status == Z_BUF_ERROR
                        ? "zlib made no progress" : (stream.msg.map { String(cString: $0) } ?? "status \(status)"))
                }
                if room <= 0 && made > 0 {
                    throw .compressionError(encoding: name, detail: "data inflates past the end of its rectangle (more than \(output.count) bytes)")
                }
                produced += room > 0 ? made : 0
                switch status {
                case Z_OK:
                    continue
                case Z_STREAM_END:
                    // A finished stream: skip its checksum; whatever follows starts a new one.
                    inflateReset(&stream)
                    trailerPending = 4
                    headerPending = 2
                    streamEnded = true
                case Z_BUF_ERROR:
                    continue
                default:
                    let message = stream.msg.map { String(cString: $0) } ?? "status \(status)"
                    throw .compressionError(encoding: name, detail: message)
                }
            }
            consumed = input.count - Int(stream.avail_in)
        }
        return produced
    }
}

/// Upper bound of the compressed size of `n` bytes for any honest zlib stream with sync
/// flushes (stored blocks cost 5 bytes per 64 KiB; each flush a few bytes more).
func zlibCompressedBound(_ n: Int) -> Int { n + n / 1000 + 1024 + 16 }
