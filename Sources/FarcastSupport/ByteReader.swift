/// The byte order of a multi-byte integer on the wire.
public enum Endianness: Sendable {
    case big
    case little
}

/// A read ran past the end of the available bytes. In a streaming parser this usually means
/// "wait for more data"; on a complete message it means the peer sent a truncated message.
public struct TruncatedInput: Error, Equatable, Sendable, CustomStringConvertible {
    /// Bytes the read asked for.
    public let needed: Int
    /// Bytes that were left when it asked.
    public let available: Int
    /// Offset of the read from the start of the reader's bytes.
    public let offset: Int

    public init(needed: Int, available: Int, offset: Int) {
        self.needed = needed
        self.available = available
        self.offset = offset
    }

    public var description: String {
        "truncated input: needed \(needed) byte(s) at offset \(offset) but only \(available) remain"
    }
}

/// A bounds-checked cursor over contiguous bytes.
///
/// Every read checks the remaining length first and throws `TruncatedInput` instead of trapping;
/// a negative length is treated as a truncation too, so a hostile length field can never
/// index outside the buffer. The reader never copies the underlying array unless asked to.
///
/// A reader walks either an array it holds or, made with `init(borrowing:offset:)`, memory it
/// borrows for the scope that made it (a stream parser reading straight from a socket's
/// buffer). `@unchecked Sendable`: an array reader is a value like any other; a borrowing
/// reader must not leave the scope of the memory it reads, let alone its thread.
public struct ByteReader: @unchecked Sendable {
    /// The whole buffer the reader walks over (empty for a borrowing reader).
    public let bytes: [UInt8]
    /// The borrowed memory's start, for a borrowing reader.
    @usableFromInline let borrowed: UnsafeRawPointer?
    /// Index of the next byte to read.
    @inlinable public var offset: Int { _offset }
    @usableFromInline var _offset: Int
    /// One past the last byte the reader may read.
    public let endIndex: Int

    /// A reader over `bytes[offset..<endIndex]` (the whole array by default).
    public init(_ bytes: [UInt8], offset: Int = 0, endIndex: Int? = nil) {
        let end = min(max(endIndex ?? bytes.count, 0), bytes.count)
        self.bytes = bytes
        borrowed = nil
        self.endIndex = end
        self._offset = min(max(offset, 0), end)
    }

    /// A reader over `memory[offset...]` that copies nothing: valid only while `memory` is, so
    /// use it within the scope that lends `memory` and do not keep it (or a copy of it) beyond.
    public init(borrowing memory: UnsafeRawBufferPointer, offset: Int = 0) {
        bytes = []
        borrowed = memory.count > 0 ? memory.baseAddress : nil
        endIndex = memory.baseAddress == nil ? 0 : memory.count
        _offset = min(max(offset, 0), endIndex)
    }

    /// The byte at `index` (already bounds-checked).
    @inlinable
    func byte(at index: Int) -> UInt8 {
        if let borrowed { return borrowed.load(fromByteOffset: index, as: UInt8.self) }
        return bytes[index]
    }

    /// Runs `body` over `count` bytes from `start` (already bounds-checked).
    @inlinable
    func withRegion<R>(_ start: Int, _ count: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        if let borrowed { return try body(UnsafeRawBufferPointer(start: borrowed + start, count: count)) }
        return try bytes.withUnsafeBytes { raw in try body(UnsafeRawBufferPointer(rebasing: raw[start..<start + count])) }
    }

    /// Bytes left to read.
    @inlinable public var remaining: Int { endIndex - offset }
    /// True when every byte has been read.
    @inlinable public var isAtEnd: Bool { offset >= endIndex }

    @inlinable
    func check(_ count: Int) throws(TruncatedInput) {
        guard count >= 0, count <= endIndex - offset else {
            throw TruncatedInput(needed: count, available: endIndex - offset, offset: offset)
        }
    }

    /// Reads one byte.
    @inlinable
    public mutating func readUInt8() throws(TruncatedInput) -> UInt8 {
        try check(1)
        defer { _offset += 1 }
        return byte(at: offset)
    }

    /// Reads a fixed-width integer in the given byte order (big-endian by default, as most
    /// network protocols use).
    @inlinable
    public mutating func readInteger<T: FixedWidthInteger>(
        as type: T.Type = T.self, endianness: Endianness = .big
    ) throws(TruncatedInput) -> T {
        let size = MemoryLayout<T>.size
        try check(size)
        var value: T = 0
        let start = offset
        switch endianness {
        case .big:
            for i in 0..<size { value = value << 8 | T(truncatingIfNeeded: byte(at: start + i)) }
        case .little:
            for i in (0..<size).reversed() { value = value << 8 | T(truncatingIfNeeded: byte(at: start + i)) }
        }
        _offset += size
        return value
    }

    /// Reads an unsigned integer of 1–8 bytes (such as a 24-bit field) in the given byte order.
    @inlinable
    public mutating func readUnsigned(byteCount: Int, endianness: Endianness = .big) throws(TruncatedInput) -> UInt64 {
        precondition((1...8).contains(byteCount), "byteCount must be 1...8")
        try check(byteCount)
        var value: UInt64 = 0
        let start = offset
        switch endianness {
        case .big:
            for i in 0..<byteCount { value = value << 8 | UInt64(byte(at: start + i)) }
        case .little:
            for i in (0..<byteCount).reversed() { value = value << 8 | UInt64(byte(at: start + i)) }
        }
        _offset += byteCount
        return value
    }

    /// Returns the next byte without consuming it.
    @inlinable
    public func peekUInt8() throws(TruncatedInput) -> UInt8 {
        try check(1)
        return byte(at: offset)
    }

    /// Reads `count` bytes as a slice of the underlying array (no copy; a borrowing reader
    /// copies them into a new array).
    @inlinable
    public mutating func readSlice(_ count: Int) throws(TruncatedInput) -> ArraySlice<UInt8> {
        try check(count)
        defer { _offset += count }
        if borrowed != nil { return ArraySlice(withRegion(offset, count) { Array($0) }) }
        return bytes[offset..<offset + count]
    }

    /// Reads `count` bytes into a new array.
    @inlinable
    public mutating func readBytes(_ count: Int) throws(TruncatedInput) -> [UInt8] {
        Array(try readSlice(count))
    }

    /// Reads `count` bytes and decodes them as UTF-8, replacing invalid sequences.
    public mutating func readUTF8(_ count: Int) throws(TruncatedInput) -> String {
        String(decoding: try readSlice(count), as: UTF8.self)
    }

    /// Reads `count` bytes as ISO 8859-1 (each byte is the Unicode scalar of the same value).
    public mutating func readLatin1(_ count: Int) throws(TruncatedInput) -> String {
        var s = String.UnicodeScalarView()
        for b in try readSlice(count) { s.append(Unicode.Scalar(b)) }
        return String(s)
    }

    /// Skips `count` bytes.
    @inlinable
    public mutating func skip(_ count: Int) throws(TruncatedInput) {
        try check(count)
        _offset += count
    }

    /// Gives `body` a pointer to the next `count` bytes and consumes them. For decoders' inner
    /// loops: one bounds check for the whole region instead of one per field. Throws
    /// `TruncatedInput` when fewer than `count` bytes remain, or whatever `body` throws.
    @inlinable
    public mutating func withUnsafeBytes<R>(count: Int, _ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        try check(count)
        let start = offset
        _offset += count
        return try withRegion(start, count, body)
    }

    /// Gives `body` a pointer to every remaining byte without consuming any; the caller skips
    /// what it used. For decoders that work through as much buffered input as there is.
    @inlinable
    public func withUnsafeRemainingBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withRegion(offset, endIndex - offset, body)
    }
}
