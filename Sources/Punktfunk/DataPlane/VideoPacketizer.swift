/// The host side of the video plane, as the punktfunk host cuts frames: an access unit becomes
/// `max(1, ceil(frame_bytes / shard_bytes))` data shards (the last zero-padded), grouped into
/// blocks of K; each block gets `ceil(k × fec% / 100)` recovery shards from the Leopard code;
/// each shard gets the 40-byte header and, when the session is sealed, the AEAD.
///
/// For tests, the benchmark and the stand-in host. Reuses its buffers: after the first frame of
/// the largest size it allocates nothing. Not thread-safe.
public final class VideoPacketizer {
    /// In which order a frame's datagrams leave.
    public enum ShardOrder: Sendable {
        /// All blocks' data shards, then all blocks' recovery shards (punktfunk/1 §5).
        case dataFirst
        /// Each block's data then recovery shards before the next block (older hosts).
        case blockByBlock
    }

    public let shardBytes: Int
    public let maxDataShardsPerBlock: Int
    /// Recovery shards per block as a percentage of its data shards (0 = no FEC).
    public var fecPercent: Int
    /// At least this many recovery shards per block when `fecPercent` > 0 (newer hosts use 2).
    public var minimumRecoveryShards: Int
    public var order: ShardOrder
    /// Header byte 37.
    public var version: UInt8 = 1
    /// The next datagram's AEAD sequence and header `stream_seq`.
    public private(set) var nextSequence: UInt64 = 0
    public private(set) var nextStreamSequence: UInt32 = 0
    /// The next video and probe frame indices (separate spaces).
    public private(set) var nextFrameIndex: UInt32 = 0
    public private(set) var nextProbeIndex: UInt32 = 0

    private let crypto: DatagramCrypto?
    private var codec = LeopardCodec()
    private var datagram: [UInt8]
    private var lastBlock: [UInt8] = []
    private var recovery: [UInt8] = []

    public init(
        key: DatagramKey?, shardBytes: Int = 1408, maxDataShardsPerBlock: Int = 200, fecPercent: Int = 20,
        minimumRecoveryShards: Int = 0, order: ShardOrder = .dataFirst
    ) throws(DataPlaneError) {
        guard shardBytes >= 2, shardBytes % 2 == 0, shardBytes <= Int(UInt16.max) - 1 else {
            throw .badGeometry("shard payload \(shardBytes) must be even and 2...65534 bytes")
        }
        guard (1...32768).contains(maxDataShardsPerBlock) else { throw .badGeometry("K \(maxDataShardsPerBlock) outside 1...32768") }
        self.shardBytes = shardBytes
        self.maxDataShardsPerBlock = maxDataShardsPerBlock
        self.fecPercent = fecPercent
        self.minimumRecoveryShards = minimumRecoveryShards
        self.order = order
        crypto = try key.map { (k) throws(DataPlaneError) in try DatagramCrypto(key: k, direction: .hostToClient, sealing: true) }
        datagram = [UInt8](repeating: 0, count: DatagramCrypto.overhead + VideoHeader.size + shardBytes)
    }

    /// Recovery shards for a block of k data shards.
    public func recoveryCount(forDataShards k: Int) -> Int {
        guard fecPercent > 0 else { return 0 }
        return max(minimumRecoveryShards, (k * fecPercent + 99) / 100)
    }

    /// Cuts `frame` into datagrams and hands each to `emit` (the bytes are valid only during the
    /// call). `frameIndex` nil numbers frames from the packetizer's own counter; `probe` marks speed
    /// probe filler and numbers it in the probe space.
    public func packetize(
        _ frame: UnsafeRawBufferPointer, ptsNanoseconds: UInt64, userFlags: UserFlags = [], frameIndex: UInt32? = nil,
        probe: Bool = false, emit: (UnsafeRawBufferPointer) -> Void
    ) throws(DataPlaneError) {
        let sb = shardBytes, kMax = maxDataShardsPerBlock
        guard frame.count <= Int(UInt32.max) else { throw .badGeometry("a frame of \(frame.count) bytes does not fit frame_bytes") }
        let totalData = max(1, (frame.count + sb - 1) / sb)
        let blocks = (totalData + kMax - 1) / kMax
        guard blocks <= Int(UInt16.max) else { throw .badGeometry("a frame of \(frame.count) bytes needs \(blocks) blocks") }
        let index: UInt32
        if probe {
            index = frameIndex ?? nextProbeIndex
            nextProbeIndex = index &+ 1
        } else {
            index = frameIndex ?? nextFrameIndex
            nextFrameIndex = index &+ 1
        }
        var flagsUser = userFlags
        if probe { flagsUser.insert(.probeFiller) }

        // The last block, zero-padded, in its own buffer; the others are read in place.
        let lastK = totalData - (blocks - 1) * kMax
        let lastStart = (blocks - 1) * kMax * sb
        let lastBytes = lastK * sb
        if lastBlock.count < lastBytes { lastBlock = [UInt8](repeating: 0, count: lastBytes) }
        lastBlock.withUnsafeMutableBytes { raw in
            let available = frame.count - lastStart
            if available > 0 { raw.baseAddress!.copyMemory(from: frame.baseAddress! + lastStart, byteCount: available) }
            (raw.baseAddress! + max(0, available)).initializeMemory(as: UInt8.self, repeating: 0, count: lastBytes - max(0, available))
        }
        var recoveryTotal = 0
        var recoveryOffsets = [Int](repeating: 0, count: blocks)
        for b in 0..<blocks {
            recoveryOffsets[b] = recoveryTotal
            recoveryTotal += recoveryCount(forDataShards: b + 1 == blocks ? lastK : kMax)
        }
        if recovery.count < recoveryTotal * sb { recovery = [UInt8](repeating: 0, count: recoveryTotal * sb) }

        // Recovery for every block first (so `.dataFirst` can send all data before any parity).
        for b in 0..<blocks {
            let k = b + 1 == blocks ? lastK : kMax
            let m = recoveryCount(forDataShards: k)
            guard m > 0 else { continue }
            let result: Result<Void, DataPlaneError> = lastBlock.withUnsafeBytes { last in
                recovery.withUnsafeMutableBytes { rec in
                    Result { () throws(DataPlaneError) in
                        let data = b + 1 == blocks ? UnsafeRawBufferPointer(rebasing: last[0..<(k * sb)])
                            : UnsafeRawBufferPointer(rebasing: frame[(b * kMax * sb)..<((b * kMax + k) * sb)])
                        try codec.encode(originals: data, originalCount: k, recoveryCount: m, shardBytes: sb,
                                         into: UnsafeMutableRawBufferPointer(rebasing: rec[(recoveryOffsets[b] * sb)..<((recoveryOffsets[b] + m) * sb)]))
                    }
                }
            }
            try result.get()
        }

        let total = totalData + recoveryTotal
        var sent = 0
        func send(block b: Int, shard i: Int) {
            let k = b + 1 == blocks ? lastK : kMax
            let m = recoveryCount(forDataShards: k)
            var flags: PacketFlags = [.picture]
            if sent == 0 { flags.insert(.startOfFrame) }
            if sent + 1 == total { flags.insert(.endOfFrame) }
            if probe { flags.insert(.probe) }
            let header = VideoHeader(
                ptsNanoseconds: ptsNanoseconds, frameIndex: index, streamSequence: nextStreamSequence, frameBytes: UInt32(frame.count),
                userFlags: flagsUser, blockIndex: UInt16(b), blockCount: UInt16(blocks), dataShards: UInt16(k),
                recoveryShards: UInt16(m), shardIndex: UInt16(i), shardBytes: UInt16(sb), version: version,
                fecScheme: 1, flags: flags)
            let sealed = crypto != nil
            let front = sealed ? DatagramCrypto.sequenceBytes : 0
            let length = front + VideoHeader.size + sb + (sealed ? DatagramCrypto.tagBytes : 0)
            datagram.withUnsafeMutableBytes { out in
                header.write(to: UnsafeMutableRawBufferPointer(rebasing: out[front...]))
                let body = out.baseAddress! + front + VideoHeader.size
                if i < k {
                    if b + 1 == blocks {
                        lastBlock.withUnsafeBytes { body.copyMemory(from: $0.baseAddress! + i * sb, byteCount: sb) }
                    } else {
                        body.copyMemory(from: frame.baseAddress! + (b * kMax + i) * sb, byteCount: sb)
                    }
                } else {
                    recovery.withUnsafeBytes { body.copyMemory(from: $0.baseAddress! + (recoveryOffsets[b] + i - k) * sb, byteCount: sb) }
                }
                if let crypto {
                    crypto.seal(sequence: nextSequence, plaintextLength: VideoHeader.size + sb,
                                in: UnsafeMutableRawBufferPointer(rebasing: out[0..<length]))
                }
                emit(UnsafeRawBufferPointer(rebasing: out[0..<length]))
            }
            nextSequence &+= 1
            nextStreamSequence &+= 1
            sent += 1
        }
        switch order {
        case .dataFirst:
            for b in 0..<blocks { for i in 0..<(b + 1 == blocks ? lastK : kMax) { send(block: b, shard: i) } }
            for b in 0..<blocks {
                let k = b + 1 == blocks ? lastK : kMax
                for j in 0..<recoveryCount(forDataShards: k) { send(block: b, shard: k + j) }
            }
        case .blockByBlock:
            for b in 0..<blocks {
                let k = b + 1 == blocks ? lastK : kMax
                for i in 0..<(k + recoveryCount(forDataShards: k)) { send(block: b, shard: i) }
            }
        }
    }

    /// `packetize` returning the datagrams as arrays (allocates; for tests and tools).
    public func packetize(
        _ frame: [UInt8], ptsNanoseconds: UInt64, userFlags: UserFlags = [], frameIndex: UInt32? = nil, probe: Bool = false
    ) throws(DataPlaneError) -> [[UInt8]] {
        var out: [[UInt8]] = []
        let result = frame.withUnsafeBytes { raw in
            Result { () throws(DataPlaneError) in
                try packetize(raw, ptsNanoseconds: ptsNanoseconds, userFlags: userFlags, frameIndex: frameIndex, probe: probe) { out.append(Array($0)) }
            }
        }
        try result.get()
        return out
    }
}
