/// The client's video data plane: one UDP datagram in, complete access units, probe frames and
/// loss reports out. Opens the AEAD in place, checks the replay window, validates the header
/// against the session's limits, reassembles frames and repairs blocks with the FEC.
///
/// Sans-I/O: no sockets, threads or clocks; the caller passes each datagram with its arrival time
/// (any monotonic nanosecond clock). After warm-up the per-datagram path allocates nothing: one
/// scratch datagram, fixed frame slots, reused FEC scratch; only a delivered frame's bytes are a
/// new array. Not thread-safe: confine a receiver to one thread or actor (hand it over with
/// `sending`).
public final class VideoReceiver {
    public let limits: VideoStreamLimits
    /// Running totals (drops by cause, FEC repairs, frames delivered and lost).
    public private(set) var counters = VideoReceiverCounters()
    /// Why the most recent refused datagram was refused (for logs; nil when none was).
    public private(set) var lastRefusal: DataPlaneError?

    private let crypto: DatagramCrypto?
    private var replay = ReplayWindow()
    private var scratch: [UInt8]
    private var video: FrameAssembler
    private var probe: FrameAssembler
    private var codec: LeopardCodec
    private var budget: MemoryBudget
    private var lossMeter = StreamLossMeter()

    /// - Parameters:
    ///   - key: the Welcome's datagram key, or nil when the session runs unsealed (datagrams are
    ///     then header ‖ shard with no sequence or tag).
    ///   - limits: the Welcome's shard payload and FEC block size, and the safety bounds.
    /// - Throws: `.badGeometry` for unusable limits.
    public init(key: DatagramKey?, limits: VideoStreamLimits = VideoStreamLimits()) throws(DataPlaneError) {
        try limits.validate()
        self.limits = limits
        crypto = try key.map { (k) throws(DataPlaneError) in try DatagramCrypto(key: k, direction: .hostToClient, sealing: false) }
        scratch = [UInt8](repeating: 0, count: VideoStreamLimits.maxDatagramBytes)
        video = FrameAssembler(limits: limits, isProbe: false)
        probe = FrameAssembler(limits: limits, isProbe: true)
        codec = LeopardCodec(maxWorkBytes: LeopardCodec.workBytes(
            originalCount: limits.maxDataShardsPerBlock, recoveryCount: limits.maxRecoveryShardsPerBlock, shardBytes: limits.shardBytes))
        budget = MemoryBudget(limit: limits.memoryBudgetBytes)
    }

    /// Takes one datagram as it came off the socket; appends what it completed or gave up on to
    /// `events` (reuse the array to keep the path allocation-free).
    public func receive(_ datagram: UnsafeRawBufferPointer, at arrivalNanoseconds: UInt64, into events: inout [VideoEvent]) {
        counters.datagrams += 1
        counters.bytes += UInt64(datagram.count)
        if let crypto {
            guard datagram.count <= scratch.count else {
                refuse(.truncated(what: "datagram larger than the 9216-byte receive buffer", needed: scratch.count, available: datagram.count))
                return
            }
            guard let sequence = DatagramCrypto.sequence(of: datagram) else {
                refuse(.truncated(what: "sealed datagram", needed: DatagramCrypto.overhead, available: datagram.count))
                return
            }
            switch replay.classify(sequence) {
            case .late: counters.late += 1; return
            case .duplicate: counters.duplicate += 1; return
            case .farFuture: counters.farFuture += 1; return
            case .fresh: break
            }
            scratch.withUnsafeMutableBytes { scratchBytes in
                let sealed = UnsafeMutableRawBufferPointer(rebasing: scratchBytes[0..<datagram.count])
                sealed.copyMemory(from: datagram)
                let length: Int
                switch Result(catching: { () throws(DataPlaneError) in try crypto.open(sealed) }) {
                case .success(let opened): length = opened
                case .failure(let error):
                    counters.authenticationFailed += 1
                    lastRefusal = error
                    return
                }
                replay.accept(sequence)
                handle(UnsafeRawBufferPointer(rebasing: sealed[DatagramCrypto.sequenceBytes..<(DatagramCrypto.sequenceBytes + length)]),
                       wireBytes: datagram.count, at: arrivalNanoseconds, into: &events)
            }
        } else {
            handle(datagram, wireBytes: datagram.count, at: arrivalNanoseconds, into: &events)
        }
    }

    /// `receive(_:at:into:)` for an array, returning the events (allocates when there are any).
    public func receive(_ datagram: [UInt8], at arrivalNanoseconds: UInt64) -> [VideoEvent] {
        var events: [VideoEvent] = []
        datagram.withUnsafeBytes { receive($0, at: arrivalNanoseconds, into: &events) }
        return events
    }

    /// Packet loss since the previous call, in parts per million, from the gaps in the header's
    /// per-packet `stream_seq` (what the session sends in a LossReport). 0 before any packet.
    public func takeLossPartsPerMillion() -> UInt32 { lossMeter.take() }

    /// Frames being reassembled and the bytes their buffers hold (for diagnostics and tests).
    public var framesInFlight: Int { video.framesInFlight + probe.framesInFlight }
    public var bufferedBytes: Int { budget.used }

    private func refuse(_ error: DataPlaneError) {
        counters.malformed += 1
        lastRefusal = error
    }

    private func handle(_ plaintext: UnsafeRawBufferPointer, wireBytes: Int, at now: UInt64, into events: inout [VideoEvent]) {
        let header: VideoHeader
        switch Result(catching: { () throws(DataPlaneError) in try VideoHeader(parsing: plaintext) }) {
        case .success(let parsed): header = parsed
        case .failure(let error):
            refuse(error)
            return
        }
        if let problem = check(header, payload: plaintext.count - VideoHeader.size) {
            refuse(problem)
            return
        }
        lossMeter.note(header.streamSequence)
        let shard = plaintext.baseAddress! + VideoHeader.size
        if header.userFlags.contains(.probeFiller) || header.flags.contains(.probe) {
            counters.probePackets += 1
            counters.probeBytes += UInt64(wireBytes)
            probe.ingest(header, shard: shard, at: now, events: &events, counters: &counters, codec: &codec, budget: &budget)
        } else {
            video.ingest(header, shard: shard, at: now, events: &events, counters: &counters, codec: &codec, budget: &budget)
        }
    }

    /// Every rule a header must meet before any of its fields sizes or indexes anything.
    private func check(_ h: VideoHeader, payload: Int) -> DataPlaneError? {
        let sb = limits.shardBytes, kMax = limits.maxDataShardsPerBlock
        let k = Int(h.dataShards), m = Int(h.recoveryShards)
        guard Int(h.shardBytes) == sb else { return .badGeometry("shard_bytes \(h.shardBytes), the session's shards are \(sb) bytes") }
        guard payload >= sb else { return .truncated(what: "video shard", needed: sb, available: max(0, payload)) }
        guard k >= 1, k <= kMax else { return .badGeometry("data_shards \(k) outside 1...\(kMax)") }
        guard m <= limits.maxRecoveryShardsPerBlock else {
            return .badGeometry("recovery_shards \(m) above the limit \(limits.maxRecoveryShardsPerBlock)")
        }
        guard Int(h.shardIndex) < k + m else { return .badGeometry("shard_index \(h.shardIndex) outside the block's \(k + m) shards") }
        if m > 0 {
            guard h.fecScheme == 1 else { return .fecParameters("FEC scheme \(h.fecScheme) is not Leopard-RS over GF(2^16) (1)") }
            guard LeopardCodec.supports(originalCount: k, recoveryCount: m) else {
                return .fecParameters("\(k)+\(m) shards are outside the GF(2^16) code")
            }
        }
        guard Int(h.frameBytes) <= limits.maxFrameBytes else {
            return .badGeometry("frame_bytes \(h.frameBytes) above the \(limits.maxFrameBytes)-byte limit")
        }
        // The host cuts a frame into blocks of exactly K data shards but the last; every header
        // must agree, so a shard's place in the frame follows from its header alone.
        let totalData = max(1, (Int(h.frameBytes) + sb - 1) / sb)
        let blocks = (totalData + kMax - 1) / kMax
        guard Int(h.blockCount) == blocks, Int(h.blockIndex) < blocks else {
            return .badGeometry("block \(h.blockIndex) of \(h.blockCount) for a \(h.frameBytes)-byte frame of \(blocks) block(s)")
        }
        let expected = Int(h.blockIndex) + 1 == blocks ? totalData - (blocks - 1) * kMax : kMax
        guard k == expected else { return .badGeometry("block \(h.blockIndex) claims \(k) data shards, the frame geometry gives \(expected)") }
        return nil
    }
}

/// Packet loss from gaps in a 32-bit per-packet counter, widened to 64 bits as it wraps.
struct StreamLossMeter {
    private var started = false
    private var highest: Int64 = 0
    private var base: Int64 = 0
    private var received: Int64 = 0

    mutating func note(_ sequence: UInt32) {
        if !started {
            started = true
            highest = Int64(sequence)
            base = highest - 1
            received = 1
            return
        }
        let delta = Int64(Int32(bitPattern: sequence &- UInt32(truncatingIfNeeded: highest)))
        let value = highest + delta
        if value > highest { highest = value }
        if value > base { received += 1 }
    }

    mutating func take() -> UInt32 {
        let expected = highest - base
        defer { base = highest; received = 0 }
        guard started, expected > 0, received < expected else { return 0 }
        return UInt32((expected - received) * 1_000_000 / expected)
    }
}
