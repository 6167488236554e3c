import FarcastSupport

/// A read cursor over raw memory for decoders' inner loops: one bounds check per field group
/// (`require`), then unchecked loads. Running past the end throws `TruncatedInput` with offsets
/// relative to the start of the region.
struct BoundedCursor {
    let base: UnsafeRawPointer
    let count: Int
    var position: Int = 0

    init(_ buffer: UnsafeRawBufferPointer) {
        // An empty buffer may have a nil base address; any valid pointer will do, nothing is read.
        base = buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 0x10)!
        count = buffer.count
    }

    var remaining: Int { count - position }

    /// Fails unless `n` more bytes are available.
    @inline(__always)
    func require(_ n: Int) throws(TruncatedInput) {
        if n > count - position || n < 0 { throw TruncatedInput(needed: n, available: count - position, offset: position) }
    }

    /// Pointer to the current position (after a `require`).
    @inline(__always)
    var pointer: UnsafeRawPointer { base + position }

    @inline(__always)
    mutating func u8() throws(TruncatedInput) -> UInt8 {
        try require(1)
        defer { position += 1 }
        return base.load(fromByteOffset: position, as: UInt8.self)
    }

    @inline(__always)
    mutating func u16() throws(TruncatedInput) -> UInt16 {
        try require(2)
        defer { position += 2 }
        return UInt16(bigEndian: base.loadUnaligned(fromByteOffset: position, as: UInt16.self))
    }

    @inline(__always)
    mutating func u32() throws(TruncatedInput) -> UInt32 {
        try require(4)
        defer { position += 4 }
        return UInt32(bigEndian: base.loadUnaligned(fromByteOffset: position, as: UInt32.self))
    }

    @inline(__always)
    mutating func skip(_ n: Int) throws(TruncatedInput) {
        try require(n)
        position += n
    }
}
