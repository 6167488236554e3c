import FarcastSupport
import Testing

@Suite struct ByteReaderTests {
    @Test func readsBigAndLittleEndianIntegers() throws {
        var r = ByteReader([0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0xFF, 0xFE])
        #expect(try r.readInteger(as: UInt16.self) == 0x0102)
        #expect(try r.readInteger(as: UInt16.self, endianness: .little) == 0x0403)
        #expect(try r.readInteger(as: UInt32.self, endianness: .big) == 0x0506_0708)
        #expect(try r.readInteger(as: Int16.self) == -2)
        #expect(r.isAtEnd)
    }

    @Test func readsSignedAndWideIntegers() throws {
        var r = ByteReader([0xFF, 0xFF, 0xFF, 0x20, 0x80, 0, 0, 0, 0, 0, 0, 1])
        #expect(try r.readInteger(as: Int32.self) == -224)
        #expect(try r.readInteger(as: UInt64.self) == 0x8000_0000_0000_0001)
    }

    @Test func readsOddWidthUnsigned() throws {
        var r = ByteReader([0x12, 0x34, 0x56, 0x12, 0x34, 0x56])
        #expect(try r.readUnsigned(byteCount: 3) == 0x123456)
        #expect(try r.readUnsigned(byteCount: 3, endianness: .little) == 0x563412)
    }

    @Test func truncationThrowsTypedErrorWithPosition() throws {
        var r = ByteReader([0xAA, 0xBB, 0xCC])
        _ = try r.readUInt8()
        #expect(throws: TruncatedInput(needed: 4, available: 2, offset: 1)) { try r.readInteger(as: UInt32.self) }
        // A failed read consumes nothing, so a streaming parser can retry after more data arrives.
        #expect(r.offset == 1)
        #expect(try r.readInteger(as: UInt16.self) == 0xBBCC)
        #expect(throws: TruncatedInput.self) { try r.readUInt8() }
        #expect(throws: TruncatedInput.self) { try r.peekUInt8() }
    }

    @Test func negativeOrHugeLengthsAreTruncationNotATrap() {
        var r = ByteReader([1, 2, 3])
        #expect(throws: TruncatedInput.self) { try r.readSlice(-1) }
        #expect(throws: TruncatedInput.self) { try r.skip(Int.max) }
        #expect(throws: TruncatedInput.self) { try r.readBytes(4) }
        #expect(throws: TruncatedInput.self) { try r.withUnsafeBytes(count: 1 << 40) { _ in 0 } }
        #expect(r.remaining == 3)
    }

    @Test func slicesAndSubrangesRespectBounds() throws {
        var r = ByteReader([0, 1, 2, 3, 4, 5, 6], offset: 2, endIndex: 5)
        #expect(r.remaining == 3)
        #expect(Array(try r.readSlice(2)) == [2, 3])
        #expect(throws: TruncatedInput.self) { try r.readSlice(2) }
        #expect(try r.readBytes(1) == [4])
        #expect(r.isAtEnd)
    }

    @Test func stringsDecode() throws {
        var r = ByteReader(Array("héllo".utf8) + [0xE9])
        #expect(try r.readUTF8(6) == "héllo")
        #expect(try r.readLatin1(1) == "é")
    }

    @Test func unsafeRegionReadsOnce() throws {
        var r = ByteReader([9, 8, 7, 6])
        let sum = try r.withUnsafeBytes(count: 3) { raw in raw.reduce(0) { $0 + Int($1) } }
        #expect(sum == 24)
        #expect(r.remaining == 1)
    }

    @Test func aBorrowingReaderReadsTheSameAsAnArrayReader() throws {
        let bytes: [UInt8] = [0xFF, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x68, 0x69, 0xE9, 0xAA]
        try bytes.withUnsafeBytes { (memory: UnsafeRawBufferPointer) throws in
            var r = ByteReader(borrowing: memory, offset: 1)
            #expect(r.remaining == 12)
            #expect(try r.peekUInt8() == 0x01)
            #expect(try r.readInteger(as: UInt16.self) == 0x0102)
            #expect(try r.readInteger(as: UInt16.self, endianness: .little) == 0x0403)
            #expect(try r.readUnsigned(byteCount: 3) == 0x050607)
            #expect(try r.readUInt8() == 0x08)
            #expect(try r.readUTF8(2) == "hi")
            #expect(try r.readLatin1(1) == "é")
            #expect(throws: TruncatedInput(needed: 2, available: 1, offset: 12)) { try r.readInteger(as: UInt16.self) }
            #expect(try r.withUnsafeRemainingBytes { Array($0) } == [0xAA])
            #expect(Array(try r.readSlice(1)) == [0xAA], "a slice of borrowed memory is a copy")
            #expect(r.isAtEnd)
        }
        let empty: [UInt8] = []
        empty.withUnsafeBytes { memory in
            var r = ByteReader(borrowing: memory)
            #expect(r.isAtEnd)
            #expect(throws: TruncatedInput.self) { try r.readUInt8() }
        }
    }
}

@Suite struct ByteWriterTests {
    @Test func writesBothByteOrdersAndRoundTrips() throws {
        var w = ByteWriter()
        w.writeUInt8(7)
        w.writeInteger(UInt16(0x0102))
        w.writeInteger(UInt32(0x0A0B0C0D), endianness: .little)
        w.writeInteger(Int32(-224))
        w.writeUnsigned(0xABCDEF, byteCount: 3)
        w.writeZeros(2)
        w.writeUTF8("ok")
        #expect(w.bytes == [7, 1, 2, 0x0D, 0x0C, 0x0B, 0x0A, 0xFF, 0xFF, 0xFF, 0x20, 0xAB, 0xCD, 0xEF, 0, 0, 0x6F, 0x6B])
        var r = ByteReader(w.bytes)
        #expect(try r.readUInt8() == 7)
        #expect(try r.readInteger(as: UInt16.self) == 0x0102)
        #expect(try r.readInteger(as: UInt32.self, endianness: .little) == 0x0A0B0C0D)
        #expect(try r.readInteger(as: Int32.self) == -224)
    }

    @Test func roundTripsEveryWidthAtTheExtremes() throws {
        var w = ByteWriter()
        w.writeInteger(Int64.min, endianness: .little)
        w.writeInteger(UInt64.max)
        w.writeInteger(Int16.min)
        var r = ByteReader(w.bytes)
        #expect(try r.readInteger(as: Int64.self, endianness: .little) == .min)
        #expect(try r.readInteger(as: UInt64.self) == .max)
        #expect(try r.readInteger(as: Int16.self) == .min)
    }
}
