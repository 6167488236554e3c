/// The 40-byte header every video datagram carries inside its AEAD seal (punktfunk/1 §5).
///
/// Little-endian on the wire (the host writes a `repr(C)` struct). Parsing only checks length and
/// magic; whether the geometry is acceptable is the receiver's decision (`ShardGeometry`), so a
/// header can be read, logged and rejected with a precise reason.
public struct VideoHeader: Sendable, Equatable, Hashable {
    /// Bytes on the wire.
    public static let size = 40
    /// Byte 36 of every video header.
    public static let magic: UInt8 = 0xC9

    /// Capture time on the host's CLOCK_REALTIME, in nanoseconds.
    public var ptsNanoseconds: UInt64
    /// The access unit this shard belongs to (probe frames count in their own index space).
    public var frameIndex: UInt32
    /// Per-packet counter of the video stream.
    public var streamSequence: UInt32
    /// True length of the access unit; the last data shard is trimmed to it.
    public var frameBytes: UInt32
    /// Encoder hints (`UserFlags`).
    public var userFlags: UserFlags
    /// FEC block of this shard within the frame.
    public var blockIndex: UInt16
    /// Blocks in the frame.
    public var blockCount: UInt16
    /// k: data shards in this block.
    public var dataShards: UInt16
    /// m: recovery (parity) shards in this block.
    public var recoveryShards: UInt16
    /// 0..<k for data shards, k..<k+m for recovery shards.
    public var shardIndex: UInt16
    /// Payload bytes of every shard in this block (even; the last data shard is zero-padded to it).
    public var shardBytes: UInt16
    /// 1 on the punktfunk/1 wire, 2 when a host translated from punktfunk/2.
    public var version: UInt8
    /// FEC scheme byte (1: Leopard-RS over GF(2^16); 0 is the GameStream GF(2^8) code).
    public var fecScheme: UInt8
    /// Packet flags (`PacketFlags`).
    public var flags: PacketFlags

    public init(
        ptsNanoseconds: UInt64 = 0, frameIndex: UInt32 = 0, streamSequence: UInt32 = 0, frameBytes: UInt32 = 0,
        userFlags: UserFlags = [], blockIndex: UInt16 = 0, blockCount: UInt16 = 1, dataShards: UInt16 = 1,
        recoveryShards: UInt16 = 0, shardIndex: UInt16 = 0, shardBytes: UInt16 = 0, version: UInt8 = 1,
        fecScheme: UInt8 = 0, flags: PacketFlags = []
    ) {
        self.ptsNanoseconds = ptsNanoseconds
        self.frameIndex = frameIndex
        self.streamSequence = streamSequence
        self.frameBytes = frameBytes
        self.userFlags = userFlags
        self.blockIndex = blockIndex
        self.blockCount = blockCount
        self.dataShards = dataShards
        self.recoveryShards = recoveryShards
        self.shardIndex = shardIndex
        self.shardBytes = shardBytes
        self.version = version
        self.fecScheme = fecScheme
        self.flags = flags
    }

    /// Reads a header from the first 40 bytes of `raw`.
    /// Throws `DataPlaneError.truncated` when fewer than 40 bytes are given, `.badMagic` when byte 36 is not 0xC9.
    @inlinable
    public init(parsing raw: UnsafeRawBufferPointer) throws(DataPlaneError) {
        guard raw.count >= Self.size else { throw .truncated(what: "video header", needed: Self.size, available: raw.count) }
        guard raw[36] == Self.magic else { throw .badMagic(raw[36]) }
        ptsNanoseconds = UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
        frameIndex = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt32.self))
        streamSequence = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 12, as: UInt32.self))
        frameBytes = UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 16, as: UInt32.self))
        userFlags = UserFlags(rawValue: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: 20, as: UInt32.self)))
        blockIndex = UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 24, as: UInt16.self))
        blockCount = UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 26, as: UInt16.self))
        dataShards = UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 28, as: UInt16.self))
        recoveryShards = UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 30, as: UInt16.self))
        shardIndex = UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 32, as: UInt16.self))
        shardBytes = UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 34, as: UInt16.self))
        version = raw[37]
        fecScheme = raw[38]
        flags = PacketFlags(rawValue: raw[39])
    }

    /// Reads a header from the first 40 bytes of `bytes`.
    public init(parsing bytes: [UInt8]) throws(DataPlaneError) {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(DataPlaneError) in try VideoHeader(parsing: raw) } }
        self = try result.get()
    }

    /// Writes the 40 header bytes at the start of `raw` (which must hold at least 40 bytes).
    @inlinable
    public func write(to raw: UnsafeMutableRawBufferPointer) {
        precondition(raw.count >= Self.size, "a video header needs 40 bytes")
        raw.storeBytes(of: ptsNanoseconds.littleEndian, toByteOffset: 0, as: UInt64.self)
        raw.storeBytes(of: frameIndex.littleEndian, toByteOffset: 8, as: UInt32.self)
        raw.storeBytes(of: streamSequence.littleEndian, toByteOffset: 12, as: UInt32.self)
        raw.storeBytes(of: frameBytes.littleEndian, toByteOffset: 16, as: UInt32.self)
        raw.storeBytes(of: userFlags.rawValue.littleEndian, toByteOffset: 20, as: UInt32.self)
        raw.storeBytes(of: blockIndex.littleEndian, toByteOffset: 24, as: UInt16.self)
        raw.storeBytes(of: blockCount.littleEndian, toByteOffset: 26, as: UInt16.self)
        raw.storeBytes(of: dataShards.littleEndian, toByteOffset: 28, as: UInt16.self)
        raw.storeBytes(of: recoveryShards.littleEndian, toByteOffset: 30, as: UInt16.self)
        raw.storeBytes(of: shardIndex.littleEndian, toByteOffset: 32, as: UInt16.self)
        raw.storeBytes(of: shardBytes.littleEndian, toByteOffset: 34, as: UInt16.self)
        raw[36] = Self.magic
        raw[37] = version
        raw[38] = fecScheme
        raw[39] = flags.rawValue
    }

    /// The 40 header bytes.
    public var bytes: [UInt8] {
        var out = [UInt8](repeating: 0, count: Self.size)
        out.withUnsafeMutableBytes { write(to: $0) }
        return out
    }

    /// True for a data shard (index below k), false for a recovery shard.
    @inlinable public var isDataShard: Bool { shardIndex < dataShards }
}

/// Packet flags, byte 39 of the video header.
public struct PacketFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// Part of a picture.
    public static let picture = PacketFlags(rawValue: 0x01)
    /// Last packet of the frame.
    public static let endOfFrame = PacketFlags(rawValue: 0x02)
    /// First packet of the frame.
    public static let startOfFrame = PacketFlags(rawValue: 0x04)
    /// A speed-probe filler frame (its own frame-index space).
    public static let probe = PacketFlags(rawValue: 0x08)
}

/// Encoder hints, bytes 20–23 of the video header.
public struct UserFlags: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Probe filler.
    public static let probeFiller = UserFlags(rawValue: 0x08)
    /// An intra-refresh wave completed with this frame.
    public static let recoveryPoint = UserFlags(rawValue: 0x10)
    /// A clean long-term-reference / RFI P-frame.
    public static let recoveryAnchor = UserFlags(rawValue: 0x20)
    /// Chunk-aligned (PyroWave).
    public static let chunkAligned = UserFlags(rawValue: 0x40)
    /// Slice streaming.
    public static let sliceStream = UserFlags(rawValue: 0x80)
    /// A repeated frame.
    public static let repeatFrame = UserFlags(rawValue: 0x100)
    /// Closes a recovery.
    public static let recoveryClose = UserFlags(rawValue: 0x200)
}
