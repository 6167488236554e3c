import CZlib
#if canImport(CISAL)
import CISAL
#endif

/// One persistent zlib inflate stream. RFB servers flush with Z_SYNC_FLUSH and never end their
/// streams, so a stream lives for the whole connection (Tight resets one only when told to).
///
/// The 2-byte zlib header is checked and stripped here and the rest inflated raw: the engine
/// then skips the adler-32 checksum of every output byte, which a never-ending stream cannot
/// verify anyway (its trailer never comes). A stream that does end has its trailer skipped and
/// may start again with a new header.
///
/// The raw deflate data goes through `RawInflateEngine`: Intel ISA-L on Linux (1.4–2.2× zlib's
/// speed on the benchmark's captures — least on noisy photos, which barely compress — and the
/// largest single cost of a lossless Tight or ZRLE session), zlib elsewhere.
///
/// `@unchecked Sendable`: the engine holds C state; an inflater is owned by exactly one
/// connection's decoder state and only used from that connection's serial processing, never
/// shared.
final class Inflater: @unchecked Sendable {
    private var engine: RawInflateEngine?
    /// zlib header bytes still to read (CMF, FLG) before deflate data.
    private var headerPending = 2
    private var headerFirstByte: UInt8 = 0
    /// adler-32 trailer bytes still to skip after a stream ended.
    private var trailerPending = 0
    let name: String

    init(name: String) { self.name = name }

    /// Forgets the dictionary and history (Tight's reset bits).
    func reset() {
        engine?.reset()
        headerPending = 2
        trailerPending = 0
    }

    private func ensureInitialized() throws(RFBError) -> RawInflateEngine {
        if let engine { return engine }
        guard let made = RawInflateEngine() else { throw .compressionError(encoding: name, detail: "the inflater could not start") }
        engine = made
        return made
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
            let (made, used) = try inflatePartially(remaining, into: &buffer, produced..<room)
            produced += made
            remaining = UnsafeRawBufferPointer(rebasing: remaining[used...])
            guard produced <= limit else {
                throw .compressionError(encoding: name, detail: "data inflates past the end of its rectangle (more than \(limit) bytes)")
            }
            if remaining.isEmpty && !(engine?.holdsOutput ?? false) { return produced }
            if produced == room {
                buffer += [UInt8](repeating: 0, count: min(buffer.count, capacity - buffer.count))
            }
        }
    }

    /// Inflates all of `input` a window at a time: the output goes into `window` (made
    /// `windowSize` bytes if smaller), and after each step `consume` is given the bytes waiting
    /// there and returns how many it used; the rest moves to the window's front and more is
    /// inflated after it. `consume`'s second argument is true on its last call (the input used
    /// up): what it leaves then is left over for good. Returns the total inflated.
    ///
    /// For data decoded in self-contained pieces (ZRLE's tiles): the inflated bytes are read
    /// while they are still in the cache, and a rectangle of any size needs one window, not
    /// its whole inflated size. A piece must fit the window; more than `limit` bytes in all is
    /// an error.
    func inflate(_ input: UnsafeRawBufferPointer, through window: inout [UInt8], windowSize: Int, limit: Int,
                 consume: (UnsafeRawBufferPointer, _ last: Bool) throws -> Int) throws -> Int {
        if window.count < windowSize { window = [UInt8](repeating: 0, count: windowSize) }
        var waiting = 0, total = 0
        var remaining = input
        while true {
            let (made, used) = try inflatePartially(remaining, into: &window, waiting..<window.count)
            waiting += made
            total += made
            remaining = UnsafeRawBufferPointer(rebasing: remaining[used...])
            guard total <= limit else {
                throw RFBError.compressionError(encoding: name, detail: "data inflates past the end of its rectangle (more than \(limit) bytes)")
            }
            let last = remaining.isEmpty && !(engine?.holdsOutput ?? false)
            let count = waiting
            let taken = try window.withUnsafeBytes { try consume(UnsafeRawBufferPointer(rebasing: $0[0..<count]), last) }
            if last { return total }
            if taken > 0 {
                window.withUnsafeMutableBytes { w in
                    if count > taken { w.baseAddress!.copyMemory(from: w.baseAddress! + taken, byteCount: count - taken) }
                }
                waiting -= taken
            } else if waiting == window.count {
                throw RFBError.compressionError(encoding: name, detail: "a piece of the inflated data is larger than its \(window.count)-byte window")
            }
        }
    }

    /// `inflatePartially(_:into:)` into `range` of `buffer` (the closure of
    /// `withUnsafeMutableBytes` cannot throw a typed error, so the outcome is carried out).
    private func inflatePartially(_ input: UnsafeRawBufferPointer, into buffer: inout [UInt8], _ range: Range<Int>) throws(RFBError) -> (Int, Int) {
        let outcome: Result<(Int, Int), RFBError> = buffer.withUnsafeMutableBytes { out in
            do throws(RFBError) {
                return .success(try inflatePartially(input, into: UnsafeMutableRawBufferPointer(rebasing: out[range])))
            } catch {
                return .failure(error)
            }
        }
        return try outcome.get()
    }

    /// Inflates until `output` is full or `input` is used up; returns (produced, consumed).
    private func inflatePartially(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws(RFBError) -> (Int, Int) {
        let engine = try ensureInitialized()
        var consumed = 0, produced = 0
        // Input used up but decoded output still held (ISA-L): run again with no input to get it.
        while produced < output.count && (consumed < input.count || engine.holdsOutput) {
            if consumed < input.count {
                consumed += try consumeFraming(input, from: consumed)
                guard consumed < input.count || engine.holdsOutput else { break }
            }
            let step = engine.run(UnsafeRawBufferPointer(rebasing: input[consumed...]),
                                  UnsafeMutableRawBufferPointer(rebasing: output[produced...]))
            produced += step.produced
            if let failure = step.failure { throw .compressionError(encoding: name, detail: failure) }
            consumed += max(0, step.consumed)
            if step.ended {
                try streamEnded(givenBack: max(0, -step.consumed))
            } else if step.produced == 0 && step.consumed == 0 {
                throw .compressionError(encoding: name, detail: "zlib made no progress")
            }
        }
        return (produced, consumed)
    }

    /// A finished stream: its checksum is skipped and whatever follows starts a new one.
    /// `givenBack` bytes after the deflate data were in an earlier input (already passed over):
    /// they count towards the 4-byte trailer.
    private func streamEnded(givenBack: Int) throws(RFBError) {
        guard givenBack <= 4 else {
            throw .compressionError(encoding: name, detail: "a new zlib stream started inside the previous one's last bytes")
        }
        engine?.reset()
        trailerPending = 4 - givenBack
        headerPending = 2
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
        let engine = try ensureInitialized()
        var consumed = 0
        var produced = 0
        var spare: UInt8 = 0
        while consumed < input.count {
            consumed += try consumeFraming(input, from: consumed)
            guard consumed < input.count else { break }
            let room = output.count - produced
            let step = withUnsafeMutableBytes(of: &spare) { spareBuffer in
                // Out of room: what is left may only be flush markers that produce nothing.
                engine.run(UnsafeRawBufferPointer(rebasing: input[consumed...]),
                           room > 0 ? UnsafeMutableRawBufferPointer(rebasing: output[produced...]) : spareBuffer)
            }
            if let failure = step.failure { throw .compressionError(encoding: name, detail: failure) }
            if room <= 0 && step.produced > 0 {
                throw .compressionError(encoding: name, detail: "data inflates past the end of its rectangle (more than \(output.count) bytes)")
            }
            produced += room > 0 ? step.produced : 0
            consumed += max(0, step.consumed)
            if step.ended {
                try streamEnded(givenBack: max(0, -step.consumed))
            } else if step.produced == 0 && step.consumed == 0 {
                // Never spin: the engine took nothing and gave nothing.
                throw .compressionError(encoding: name, detail: "zlib made no progress")
            }
        }
        // Output decoded but held back for want of room is data past the rectangle too.
        if engine.holdsOutput {
            throw .compressionError(encoding: name, detail: "data inflates past the end of its rectangle (more than \(output.count) bytes)")
        }
        return produced
    }
}

/// One raw deflate stream (no zlib header or trailer): ISA-L where it is available, zlib
/// otherwise. Each `run` inflates from `input` into `output` until one is used up, the stream
/// ends, or the data is bad.
final class RawInflateEngine {
    struct Step {
        var consumed: Int
        var produced: Int
        var ended: Bool
        var failure: String?
    }

    #if canImport(CISAL)
    private let state = UnsafeMutablePointer<inflate_state>.allocate(capacity: 1)

    init?() {
        isal_inflate_init(state)
        state.pointee.crc_flag = UInt32(ISAL_DEFLATE)
    }

    deinit { state.deallocate() }

    func reset() {
        isal_inflate_reset(state)
        state.pointee.crc_flag = UInt32(ISAL_DEFLATE)
    }

    /// ISA-L keeps decoded bytes that did not fit the last output buffer; they come out first
    /// on the next run.
    var holdsOutput: Bool { state.pointee.tmp_out_valid > state.pointee.tmp_out_processed }

    func run(_ input: UnsafeRawBufferPointer, _ output: UnsafeMutableRawBufferPointer) -> Step {
        let inCount = UInt32(clamping: input.count), outCount = UInt32(clamping: output.count)
        var none: UInt8 = 0
        state.pointee.next_in = input.baseAddress.map { UnsafeMutablePointer(mutating: $0.assumingMemoryBound(to: UInt8.self)) }
            ?? withUnsafeMutablePointer(to: &none) { $0 }
        state.pointee.avail_in = inCount
        state.pointee.next_out = output.baseAddress!.assumingMemoryBound(to: UInt8.self)
        state.pointee.avail_out = outCount
        let status = isal_inflate(state)
        defer {
            state.pointee.next_in = nil
            state.pointee.next_out = nil
        }
        let ended = state.pointee.block_state == ISAL_BLOCK_FINISH
        // At a raw stream's end ISA-L keeps the whole bytes it read past the last block in its
        // bit buffer; they are the trailer or the next stream, so they are given back — and may
        // be bytes of an earlier run's input: consumed is then negative.
        var givenBack = 0
        if ended {
            givenBack = Int(state.pointee.read_in_length) / 8
            state.pointee.read_in_length %= 8
        }
        let step = Step(consumed: Int(inCount) - Int(state.pointee.avail_in) - givenBack, produced: Int(outCount - state.pointee.avail_out),
                        ended: ended, failure: nil)
        switch status {
        case ISAL_DECOMP_OK, ISAL_END_INPUT, ISAL_OUT_OVERFLOW: return step
        case ISAL_INVALID_BLOCK: return Step(consumed: 0, produced: 0, ended: false, failure: "invalid deflate block")
        case ISAL_INVALID_SYMBOL: return Step(consumed: 0, produced: 0, ended: false, failure: "invalid deflate symbol")
        case ISAL_INVALID_LOOKBACK: return Step(consumed: 0, produced: 0, ended: false, failure: "invalid distance too far back")
        default: return Step(consumed: 0, produced: 0, ended: false, failure: "deflate data rejected (status \(status))")
        }
    }
    #else
    private var stream = z_stream()

    init?() {
        guard czlib_inflate_init_raw(&stream) == Z_OK else { return nil }
    }

    deinit { inflateEnd(&stream) }

    func reset() { inflateReset(&stream) }

    /// zlib writes everything it decodes; nothing is held back.
    var holdsOutput: Bool { false }

    func run(_ input: UnsafeRawBufferPointer, _ output: UnsafeMutableRawBufferPointer) -> Step {
        let inCount = uInt(clamping: input.count), outCount = uInt(clamping: output.count)
        stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress!.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = inCount
        stream.next_out = output.baseAddress!.assumingMemoryBound(to: Bytef.self)
        stream.avail_out = outCount
        let status = CZlib.inflate(&stream, Z_SYNC_FLUSH)
        defer {
            stream.next_in = nil
            stream.next_out = nil
        }
        let step = Step(consumed: Int(inCount - stream.avail_in), produced: Int(outCount - stream.avail_out),
                        ended: status == Z_STREAM_END, failure: nil)
        switch status {
        case Z_OK, Z_BUF_ERROR, Z_STREAM_END: return step
        default: return Step(consumed: 0, produced: 0, ended: false, failure: stream.msg.map { String(cString: $0) } ?? "status \(status)")
        }
    }
    #endif
}

/// Upper bound of the compressed size of `n` bytes for any honest zlib stream with sync
/// flushes (stored blocks cost 5 bytes per 64 KiB; each flush a few bytes more).
func zlibCompressedBound(_ n: Int) -> Int { n + n / 1000 + 1024 + 16 }
