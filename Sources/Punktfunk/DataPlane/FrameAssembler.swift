/// One frame-index space's reassembly (video, or speed-probe filler): frames in flight in a fixed
/// set of slots, FEC repair per block, and the loss window that gives up on incomplete frames.
///
/// Invariants: at most `limits.framesInFlight` frames are held; every byte a slot holds is counted
/// against the shared memory budget; an index at or behind `resolvedThrough` has been reported
/// (delivered or lost) and its late shards are dropped; the oldest unresolved frame is declared
/// lost once the newest frame's capture time is `lossWindowNanoseconds` past it, or it falls
/// `frameIndexWindow` indices behind.
struct FrameAssembler {
    let limits: VideoStreamLimits
    /// Probe filler reports completions as `.probe` and never reports losses.
    let isProbe: Bool
    private var slots: [FrameSlot]
    private var started = false
    private var newest: UInt32 = 0
    private var newestPts: UInt64 = 0
    private var resolvedThrough: UInt32 = 0
    // Recently resolved frames (delivered or lost), so their late shards are recognised.
    private static let ringSize = 512
    private var ringIndex: [UInt32]
    private var ringState: [UInt8]          // 0 unknown, 1 delivered, 2 lost
    private var ringPts: [UInt64]

    init(limits: VideoStreamLimits, isProbe: Bool) {
        self.limits = limits
        self.isProbe = isProbe
        slots = (0..<limits.framesInFlight).map { _ in FrameSlot() }
        ringIndex = [UInt32](repeating: 0, count: Self.ringSize)
        ringState = [UInt8](repeating: 0, count: Self.ringSize)
        ringPts = [UInt64](repeating: 0, count: Self.ringSize)
    }

    @inline(__always) static func isNewer(_ a: UInt32, than b: UInt32) -> Bool {
        a != b && (a &- b) < 0x8000_0000
    }

    /// Takes one validated shard. `dataShards`, `blockCount` and `frameBytes` in `header` already
    /// agree with the frame geometry the limits imply.
    mutating func ingest(
        _ h: VideoHeader, shard: UnsafeRawPointer, at now: UInt64, events: inout [VideoEvent],
        counters: inout VideoReceiverCounters, codec: inout LeopardCodec, budget: inout MemoryBudget
    ) {
        let f = h.frameIndex
        var sweepNeeded = false
        if !started {
            started = true
            newest = f
            newestPts = h.ptsNanoseconds
            resolvedThrough = f &- 1
        } else if Self.isNewer(f, than: newest) {
            if f &- newest > 4 * limits.frameIndexWindow { resynchronise(at: f, events: &events, counters: &counters, budget: &budget) }
            newest = f
            newestPts = h.ptsNanoseconds
            sweepNeeded = true
        }
        defer { if sweepNeeded { sweep(events: &events, counters: &counters, budget: &budget) } }

        if !Self.isNewer(f, than: resolvedThrough) || ringState[ring(f)] != 0 && ringIndex[ring(f)] == f {
            if ringIndex[ring(f)] == f && ringState[ring(f)] == 1 { counters.redundantShards += 1 } else { counters.staleShards += 1 }
            return
        }

        let slot: FrameSlot
        if let existing = find(f) {
            slot = existing
            guard slot.frameBytes == Int(h.frameBytes), slot.blockCount == Int(h.blockCount) else {
                counters.malformed += 1
                return
            }
        } else {
            if newest &- f > limits.frameIndexWindow || (newestPts > h.ptsNanoseconds && newestPts - h.ptsNanoseconds > limits.lossWindowNanoseconds) {
                counters.staleShards += 1
                return
            }
            guard let fresh = open(h, events: &events, counters: &counters, budget: &budget) else { return }
            slot = fresh
        }

        let b = Int(h.blockIndex)
        let k = Int(h.dataShards), m = Int(h.recoveryShards)
        let sb = limits.shardBytes
        if slot.blocks[b].m < 0 {
            let needed = (slot.recoveryShardsUsed + m) * sb
            if needed > slot.recovery.count {
                let grow = needed - slot.recovery.count
                guard budget.take(grow) else { counters.overBudget += 1; return }
                slot.recovery.append(contentsOf: repeatElement(0, count: grow))
            }
            if slot.recoveryShardsUsed + m > slot.recoveryPresent.count {
                slot.recoveryPresent.append(contentsOf: repeatElement(false, count: slot.recoveryShardsUsed + m - slot.recoveryPresent.count))
            }
            for j in 0..<m { slot.recoveryPresent[slot.recoveryShardsUsed + j] = false }
            slot.blocks[b] = BlockState(m: m, recoveryOffset: slot.recoveryShardsUsed)
            slot.recoveryShardsUsed += m
        } else if slot.blocks[b].m != m {
            counters.malformed += 1
            return
        }
        if slot.blocks[b].done {
            counters.redundantShards += 1
            return
        }
        let shardIndex = Int(h.shardIndex)
        if shardIndex < k {
            let global = b * limits.maxDataShardsPerBlock + shardIndex
            if slot.dataPresent[global] { counters.redundantShards += 1; return }
            slot.data.withUnsafeMutableBytes { $0.baseAddress!.advanced(by: global * sb).copyMemory(from: shard, byteCount: sb) }
            slot.dataPresent[global] = true
            slot.blocks[b].dataReceived += 1
        } else {
            let position = slot.blocks[b].recoveryOffset + shardIndex - k
            if slot.recoveryPresent[position] { counters.redundantShards += 1; return }
            slot.recovery.withUnsafeMutableBytes { $0.baseAddress!.advanced(by: position * sb).copyMemory(from: shard, byteCount: sb) }
            slot.recoveryPresent[position] = true
            slot.blocks[b].recoveryReceived += 1
        }

        let block = slot.blocks[b]
        guard block.dataReceived + block.recoveryReceived >= k else { return }
        let missing = k - block.dataReceived
        if missing > 0 {
            let first = b * limits.maxDataShardsPerBlock
            let outcome: Result<Int, DataPlaneError> = slot.data.withUnsafeMutableBytes { data in
                slot.dataPresent.withUnsafeBufferPointer { present in
                    slot.recovery.withUnsafeBytes { recovery in
                        slot.recoveryPresent.withUnsafeBufferPointer { recoveryPresent in
                            Result { () throws(DataPlaneError) in
                                try codec.reconstruct(
                                    originals: UnsafeMutableRawBufferPointer(rebasing: data[(first * sb)..<((first + k) * sb)]),
                                    originalPresent: UnsafeBufferPointer(rebasing: present[first..<(first + k)]),
                                    originalCount: k, recoveryCount: m, shardBytes: sb,
                                    recovery: { j in
                                        recoveryPresent[block.recoveryOffset + j] ? recovery.baseAddress! + (block.recoveryOffset + j) * sb : nil
                                    })
                            }
                        }
                    }
                }
            }
            switch outcome {
            case .success(let rebuilt):
                slot.recovered += rebuilt
                counters.fecRecoveredShards += UInt64(rebuilt)
            case .failure:
                counters.unrecoverableBlocks += 1
                declareLost(slot, reason: .unrecoverable, events: &events, counters: &counters, budget: &budget)
                sweepNeeded = true
                return
            }
        }
        slot.blocks[b].done = true
        slot.blocksDone += 1
        if slot.blocksDone == slot.blockCount {
            deliver(slot, at: now, events: &events, counters: &counters, budget: &budget)
            sweepNeeded = true
        }
    }

    // MARK: - Slots

    private func find(_ f: UInt32) -> FrameSlot? {
        for slot in slots where slot.inUse && slot.frameIndex == f { return slot }
        return nil
    }

    @inline(__always) private func ring(_ f: UInt32) -> Int { Int(f & UInt32(Self.ringSize - 1)) }

    private mutating func remember(_ f: UInt32, state: UInt8, pts: UInt64) {
        let r = ring(f)
        ringIndex[r] = f
        ringState[r] = state
        ringPts[r] = pts
    }

    /// A slot for a new frame: a free one, else the oldest frame's (declared lost).
    private mutating func open(
        _ h: VideoHeader, events: inout [VideoEvent], counters: inout VideoReceiverCounters, budget: inout MemoryBudget
    ) -> FrameSlot? {
        var chosen = slots.first { !$0.inUse }
        if chosen == nil {
            var oldest = slots[0]
            for slot in slots where newest &- slot.frameIndex > newest &- oldest.frameIndex { oldest = slot }
            declareLost(oldest, reason: .evicted, events: &events, counters: &counters, budget: &budget)
            chosen = oldest
        }
        guard let slot = chosen else { return nil }
        let sb = limits.shardBytes
        // Blocks hold K data shards each but the last, so data shard i of block b lands at
        // (b × K + i) × shard bytes and the buffer is exactly the frame's data shards long.
        let totalData = max(1, (Int(h.frameBytes) + sb - 1) / sb)
        let dataBytes = totalData * sb
        if slot.data.count < dataBytes {
            budget.give(slot.data.count)
            slot.data = []
            if !budget.take(dataBytes) {
                releaseIdle(budget: &budget)
                guard budget.take(dataBytes) else {
                    counters.overBudget += 1
                    return nil
                }
            }
            slot.data = [UInt8](unsafeUninitializedCapacity: dataBytes) { _, count in count = dataBytes }
        }
        return prepared(slot, h, totalData: totalData, blockCount: Int(h.blockCount))
    }

    private func prepared(_ slot: FrameSlot, _ h: VideoHeader, totalData: Int, blockCount: Int) -> FrameSlot {
        let dataSlots = totalData
        slot.inUse = true
        slot.frameIndex = h.frameIndex
        slot.pts = h.ptsNanoseconds
        slot.userFlags = h.userFlags.rawValue
        slot.frameBytes = Int(h.frameBytes)
        slot.blockCount = blockCount
        slot.blocksDone = 0
        slot.recovered = 0
        slot.recoveryShardsUsed = 0
        if slot.dataPresent.count < dataSlots {
            slot.dataPresent.append(contentsOf: repeatElement(false, count: dataSlots - slot.dataPresent.count))
        }
        for i in 0..<dataSlots { slot.dataPresent[i] = false }
        if slot.blocks.count < blockCount {
            slot.blocks.append(contentsOf: repeatElement(BlockState(), count: blockCount - slot.blocks.count))
        }
        for i in 0..<blockCount { slot.blocks[i] = BlockState() }
        return slot
    }

    /// Frees the buffers of slots not in use so a new frame fits the budget.
    private mutating func releaseIdle(budget: inout MemoryBudget) {
        for slot in slots where !slot.inUse { slot.release(&budget) }
    }

    private mutating func free(_ slot: FrameSlot, budget: inout MemoryBudget) {
        slot.inUse = false
        // Keep buffers for reuse, but never more than two frames' worth of idle slack.
        if budget.used > budget.limit / 2 { slot.release(&budget) }
    }

    private mutating func deliver(
        _ slot: FrameSlot, at now: UInt64, events: inout [VideoEvent], counters: inout VideoReceiverCounters, budget: inout MemoryBudget
    ) {
        remember(slot.frameIndex, state: 1, pts: slot.pts)
        if isProbe {
            counters.probeFrames += 1
            events.append(.probe(ProbeFrame(frameIndex: slot.frameIndex, frameBytes: slot.frameBytes, recoveredShards: slot.recovered)))
        } else {
            counters.framesCompleted += 1
            var data = slot.data
            slot.data = []
            budget.give(data.count)
            data.removeLast(data.count - slot.frameBytes)
            events.append(.frame(VideoFrame(
                data: data, frameIndex: slot.frameIndex, ptsNanoseconds: slot.pts, userFlags: UserFlags(rawValue: slot.userFlags),
                recoveredShards: slot.recovered, completedAtNanoseconds: now)))
        }
        free(slot, budget: &budget)
    }

    private mutating func declareLost(
        _ slot: FrameSlot, reason: FrameLoss.Reason, events: inout [VideoEvent], counters: inout VideoReceiverCounters,
        budget: inout MemoryBudget
    ) {
        markLost(slot.frameIndex, pts: slot.pts, reason: reason, events: &events, counters: &counters)
        free(slot, budget: &budget)
    }

    private mutating func markLost(
        _ f: UInt32, pts: UInt64, reason: FrameLoss.Reason, events: inout [VideoEvent], counters: inout VideoReceiverCounters
    ) {
        remember(f, state: 2, pts: pts)
        guard !isProbe else { return }
        counters.framesLost += 1
        if case .framesLost(var run)? = events.last, run.reason == reason, run.firstFrame &+ run.count == f {
            run.count += 1
            events[events.count - 1] = .framesLost(run)
        } else {
            events.append(.framesLost(FrameLoss(firstFrame: f, count: 1, reason: reason)))
        }
    }

    /// The index jumped far beyond the window: everything unresolved before it is lost at once.
    private mutating func resynchronise(
        at f: UInt32, events: inout [VideoEvent], counters: inout VideoReceiverCounters, budget: inout MemoryBudget
    ) {
        for slot in slots where slot.inUse { free(slot, budget: &budget) }
        let lost = f &- resolvedThrough &- 1
        if lost > 0 && !isProbe {
            counters.framesLost += UInt64(lost)
            events.append(.framesLost(FrameLoss(firstFrame: resolvedThrough &+ 1, count: lost, reason: .indexJump)))
        }
        resolvedThrough = f &- 1
    }

    /// Resolves frames in index order from the oldest unresolved one while they are delivered,
    /// lost, or old enough to give up on.
    private mutating func sweep(events: inout [VideoEvent], counters: inout VideoReceiverCounters, budget: inout MemoryBudget) {
        while resolvedThrough != newest {
            let i = resolvedThrough &+ 1
            let r = ring(i)
            if ringIndex[r] == i && ringState[r] != 0 {
                resolvedThrough = i
                continue
            }
            if let slot = find(i) {
                guard aged(index: i, pts: slot.pts) else { break }
                declareLost(slot, reason: .incomplete, events: &events, counters: &counters, budget: &budget)
                resolvedThrough = i
                continue
            }
            // Nothing of frame i arrived. Frames are sent in index order, so once a later frame is
            // as old as the loss window, i is lost too.
            var later = i &+ 1
            var laterPts = newestPts
            while later != newest {
                if ringIndex[ring(later)] == later && ringState[ring(later)] != 0 { laterPts = ringPts[ring(later)]; break }
                if let slot = find(later) { laterPts = slot.pts; break }
                later &+= 1
            }
            guard newest &- i > limits.frameIndexWindow || aged(index: later, pts: laterPts) else { break }
            markLost(i, pts: laterPts, reason: .neverArrived, events: &events, counters: &counters)
            resolvedThrough = i
        }
    }

    private func aged(index: UInt32, pts: UInt64) -> Bool {
        newest &- index > limits.frameIndexWindow || (newestPts > pts && newestPts - pts > limits.lossWindowNanoseconds)
    }

    /// Bytes all slots hold, for tests.
    var heldBytes: Int { slots.reduce(0) { $0 + $1.data.count + $1.recovery.count } }
    var framesInFlight: Int { slots.filter(\.inUse).count }
}

/// The receive state of one frame: where its data shards land, the recovery shards that arrived,
/// and each block's progress. Reused frame after frame.
final class FrameSlot {
    var inUse = false
    var frameIndex: UInt32 = 0
    var pts: UInt64 = 0
    var userFlags: UInt32 = 0
    var frameBytes = 0
    var blockCount = 0
    var blocksDone = 0
    var recovered = 0
    var recoveryShardsUsed = 0
    var data: [UInt8] = []
    var dataPresent: [Bool] = []
    var blocks: [BlockState] = []
    var recovery: [UInt8] = []
    var recoveryPresent: [Bool] = []

    func release(_ budget: inout MemoryBudget) {
        budget.give(data.count + recovery.count)
        data = []
        recovery = []
        recoveryPresent = []
    }
}

struct BlockState {
    /// Recovery shards of the block, -1 until its first shard arrives.
    var m = -1
    var recoveryOffset = 0
    var dataReceived = 0
    var recoveryReceived = 0
    var done = false
}

/// Bytes the frame buffers of both index spaces may hold together.
struct MemoryBudget {
    let limit: Int
    private(set) var used = 0

    mutating func take(_ bytes: Int) -> Bool {
        guard used + bytes <= limit else { return false }
        used += bytes
        return true
    }

    mutating func give(_ bytes: Int) { used -= bytes }
}
