/// What the receiver accepts, from the session's Welcome plus fixed safety bounds. Every header
/// field from the wire is checked against these before it is used, so the largest allocation the
/// receiver can make is bounded by `memoryBudgetBytes` whatever a datagram claims.
public struct VideoStreamLimits: Sendable, Equatable {
    /// The session's shard payload (Welcome `shard_payload`); every shard must be exactly this long.
    public var shardBytes: Int
    /// K, the session's data shards per FEC block (Welcome `max_data_per_block`; 200 by default,
    /// the host's production setting). Must be the host's: it fixes where each shard lands.
    public var maxDataShardsPerBlock: Int
    /// The most recovery shards a block may carry.
    public var maxRecoveryShardsPerBlock: Int
    /// The largest access unit accepted.
    public var maxFrameBytes: Int
    /// Frames reassembled at once per index space (video, probe); more in flight evicts the oldest.
    public var framesInFlight: Int
    /// An incomplete frame is declared lost once the newest frame's capture time is this far past its own.
    public var lossWindowNanoseconds: UInt64
    /// …or once it is this many frame indices behind the newest, whatever the capture times say.
    public var frameIndexWindow: UInt32
    /// Upper bound on the bytes all frame buffers together may hold.
    public var memoryBudgetBytes: Int

    public init(
        shardBytes: Int = 1408, maxDataShardsPerBlock: Int = 200, maxRecoveryShardsPerBlock: Int? = nil,
        maxFrameBytes: Int = 8 << 20, framesInFlight: Int = 16, lossWindowNanoseconds: UInt64 = 120_000_000,
        frameIndexWindow: UInt32 = 64, memoryBudgetBytes: Int? = nil
    ) {
        self.shardBytes = shardBytes
        self.maxDataShardsPerBlock = maxDataShardsPerBlock
        self.maxRecoveryShardsPerBlock = maxRecoveryShardsPerBlock ?? max(2, maxDataShardsPerBlock)
        self.maxFrameBytes = maxFrameBytes
        self.framesInFlight = framesInFlight
        self.lossWindowNanoseconds = lossWindowNanoseconds
        self.frameIndexWindow = frameIndexWindow
        self.memoryBudgetBytes = memoryBudgetBytes ?? 6 * maxFrameBytes
    }

    /// Largest datagram a receiver copies (the session's receive buffer, punktfunk/1 §5).
    public static let maxDatagramBytes = 9216

    /// Data shards of the largest frame.
    var maxTotalDataShards: Int { max(1, (maxFrameBytes + shardBytes - 1) / shardBytes) }
    /// Blocks of the largest frame.
    var maxBlocks: Int { (maxTotalDataShards + maxDataShardsPerBlock - 1) / maxDataShardsPerBlock }

    /// Throws `.badGeometry` when the limits themselves are unusable (so a session fails at setup
    /// with a clear reason rather than dropping every packet).
    public func validate() throws(DataPlaneError) {
        let maxShard = Self.maxDatagramBytes - VideoHeader.size - DatagramCrypto.overhead
        guard shardBytes >= 2, shardBytes % 2 == 0, shardBytes <= maxShard else {
            throw .badGeometry("shard payload \(shardBytes) must be even and 2...\(maxShard) bytes")
        }
        guard (1...32768).contains(maxDataShardsPerBlock), (1...32768).contains(maxRecoveryShardsPerBlock) else {
            throw .badGeometry("FEC block limits \(maxDataShardsPerBlock)+\(maxRecoveryShardsPerBlock) outside 1...32768")
        }
        guard maxFrameBytes >= 1, maxFrameBytes <= 1 << 30 else {
            throw .badGeometry("largest frame \(maxFrameBytes) bytes is outside 1 byte...1 GiB")
        }
        guard maxBlocks <= Int(UInt16.max) else { throw .badGeometry("a largest frame would need \(maxBlocks) blocks, more than 65535") }
        guard (1...256).contains(framesInFlight), (1...128).contains(frameIndexWindow) else {
            throw .badGeometry("frame window \(framesInFlight) in flight / \(frameIndexWindow) indices outside 1...256 / 1...128")
        }
        guard memoryBudgetBytes >= maxFrameBytes else {
            throw .badGeometry("memory budget \(memoryBudgetBytes) bytes cannot hold one largest frame")
        }
    }
}
