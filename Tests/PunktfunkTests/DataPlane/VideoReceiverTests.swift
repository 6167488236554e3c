@testable import Punktfunk
import Testing

/// The video receive path end to end over datagrams our packetizer cuts like the host: sealed and
/// unsealed, every loss class (FEC-repairable, beyond repair, whole frames, reordering, duplicates,
/// late shards), probe frames kept apart, and the frame window's memory bound.
@Suite struct VideoReceiverTests {
    static let key = try! DatagramKey(cipher: .aes128GCM, key: Array(0..<16), salt: [9, 8, 7, 6])
    static let chachaKey = try! DatagramKey(cipher: .chaCha20Poly1305, key: Array(100..<132), salt: [0x80, 1, 2, 3])

    static func frame(_ n: Int, seed: UInt64) -> [UInt8] { SplitMix64.bytes(seed: seed, count: n) }

    struct Stream {
        var packetizer: VideoPacketizer
        var receiver: VideoReceiver
        init(key: DatagramKey? = VideoReceiverTests.key, shard: Int = 1408, k: Int = 64, fec: Int = 20, limits: VideoStreamLimits? = nil) throws {
            packetizer = try VideoPacketizer(key: key, shardBytes: shard, maxDataShardsPerBlock: k, fecPercent: fec)
            receiver = try VideoReceiver(key: key, limits: limits ?? VideoStreamLimits(shardBytes: shard, maxDataShardsPerBlock: k))
        }
        func cut(_ data: [UInt8], pts: UInt64, probe: Bool = false) throws -> [[UInt8]] {
            try packetizer.packetize(data, ptsNanoseconds: pts, probe: probe)
        }
        func feed(_ datagrams: [[UInt8]], at time: UInt64 = 0) -> [VideoEvent] {
            datagrams.flatMap { receiver.receive($0, at: time) }
        }
    }

    static func frames(_ events: [VideoEvent]) -> [VideoFrame] {
        events.compactMap { if case .frame(let f) = $0 { return f } else { return nil } }
    }
    static func losses(_ events: [VideoEvent]) -> [FrameLoss] {
        events.compactMap { if case .framesLost(let l) = $0 { return l } else { return nil } }
    }

    @Test(arguments: [0, 1, 1407, 1408, 1409, 64 * 1408, 64 * 1408 + 1, 300_000])
    func framesOfEverySizeArriveWhole(size: Int) throws {
        for key in [Self.key, Self.chachaKey, nil] as [DatagramKey?] {
            let s = try Stream(key: key)
            let data = Self.frame(size, seed: UInt64(size))
            let events = s.feed(try s.cut(data, pts: 1_000))
            let got = Self.frames(events)
            #expect(got.count == 1)
            do { let same = got.first?.data == data; #expect(same, "frame data differs") }
            #expect(got.first?.recoveredShards == 0)
            #expect(got.first?.ptsNanoseconds == 1_000)
        }
    }

    @Test func headersDescribeTheHostsGeometry() throws {
        let s = try Stream(key: nil, shard: 100, k: 4, fec: 50)
        let datagrams = try s.cut(Self.frame(950, seed: 1), pts: 5)   // 10 data shards: blocks of 4, 4, 2
        let headers = try datagrams.map { try VideoHeader(parsing: $0) }
        #expect(headers.count == 10 + 2 + 2 + 1)
        #expect(headers.prefix(10).map(\.blockIndex) == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2])
        #expect(headers.prefix(10).map(\.dataShards) == [4, 4, 4, 4, 4, 4, 4, 4, 2, 2])
        #expect(headers.suffix(5).map(\.shardIndex) == [4, 5, 4, 5, 2])        // then all parity
        #expect(headers.allSatisfy { $0.blockCount == 3 && $0.frameBytes == 950 && $0.shardBytes == 100 && $0.fecScheme == 1 })
        #expect(headers.map(\.streamSequence) == Array(0..<15))
        #expect(headers.first?.flags == [.picture, .startOfFrame])
        #expect(headers.last?.flags == [.picture, .endOfFrame])
        #expect(headers.dropFirst().dropLast().allSatisfy { $0.flags == [.picture] })
    }

    @Test func lossWithinTheFECIsRepaired() throws {
        let s = try Stream(k: 32, fec: 25)    // 8 recovery shards per 32
        for n in 0..<20 {
            let data = Self.frame(90_000 + n * 777, seed: UInt64(n))
            var datagrams = try s.cut(data, pts: UInt64(n) * 16_000_000)
            // Every 8th datagram: 4 of each block's 32 data shards and 1 of its 8 recovery shards.
            datagrams = datagrams.enumerated().filter { i, _ in i % 8 != 3 }.map(\.1)
            let got = Self.frames(s.feed(datagrams, at: UInt64(n) * 16_000_000))
            #expect(got.count == 1, "frame \(n)")
            do { let same = got.first?.data == data; #expect(same, "frame data differs") }
            #expect((got.first?.recoveredShards ?? 0) > 0)
        }
        #expect(s.receiver.counters.fecRecoveredShards > 0)
        #expect(s.receiver.counters.framesLost == 0)
    }

    @Test func parityAloneRebuildsAFrame() throws {
        let s = try Stream(key: nil, shard: 64, k: 8, fec: 100)
        let data = Self.frame(8 * 64 - 10, seed: 3)
        let datagrams = try s.cut(data, pts: 0)
        let got = Self.frames(s.feed(Array(datagrams.suffix(8))))     // only the 8 recovery shards
        do { let same = got.first?.data == data; #expect(same, "frame data differs") }
        #expect(got.first?.recoveredShards == 8)
    }

    @Test func reorderedAndDuplicatedDatagramsStillMakeEachFrameOnce() throws {
        let s = try Stream(k: 16, fec: 20)
        var all: [[UInt8]] = []
        var datas: [[UInt8]] = []
        for n in 0..<6 {
            let d = Self.frame(40_000 + n, seed: UInt64(100 + n))
            datas.append(d)
            all += try s.cut(d, pts: UInt64(n) * 8_000_000)
        }
        var rng = SplitMix64(seed: 7)
        // Shuffle within a sliding span of 40 datagrams and duplicate every 7th.
        for i in stride(from: all.count - 1, to: 0, by: -1) {
            let j = max(0, i - Int(rng.next() % 40))
            all.swapAt(i, j)
        }
        var withDuplicates: [[UInt8]] = []
        for (i, d) in all.enumerated() { withDuplicates.append(d); if i % 7 == 0 { withDuplicates.append(d) } }
        let got = Self.frames(s.feed(withDuplicates))
        #expect(got.count == 6)
        for f in got { let same = f.data == datas[Int(f.frameIndex)]; #expect(same) }
        #expect(s.receiver.counters.duplicate == UInt64((all.count + 6) / 7))
        #expect(s.receiver.counters.framesLost == 0)
    }

    @Test func unsealedDuplicatesAreRedundantNotRepeated() throws {
        let s = try Stream(key: nil, k: 16, fec: 20)
        let d = Self.frame(20_000, seed: 5)
        let datagrams = try s.cut(d, pts: 0)
        let got = Self.frames(s.feed(datagrams + datagrams))
        #expect(got.count == 1)
        #expect(s.receiver.counters.redundantShards == UInt64(datagrams.count + 3))  // 3 parity after the data completed
    }

    @Test func lossBeyondTheFECIsReportedOnceTheWindowPasses() throws {
        let s = try Stream(k: 16, fec: 20)
        let first = try s.cut(Self.frame(30_000, seed: 1), pts: 0)
        // Frame 0 loses 10 of its ~26 datagrams: beyond repair.
        var events = s.feed(first.enumerated().filter { $0.offset % 2 == 0 || $0.offset > 20 }.map(\.1), at: 0)
        #expect(Self.frames(events).isEmpty && Self.losses(events).isEmpty)
        // Newer frames inside the 120 ms window: frame 0 is still waiting.
        for n in 1...5 { events += s.feed(try s.cut(Self.frame(3000, seed: UInt64(n)), pts: UInt64(n) * 16_000_000)) }
        #expect(Self.losses(events).isEmpty)
        #expect(Self.frames(events).map(\.frameIndex) == [1, 2, 3, 4, 5])
        // A frame 121 ms after frame 0: it is given up on, once.
        events = s.feed(try s.cut(Self.frame(3000, seed: 9), pts: 121_000_000))
        #expect(Self.losses(events) == [FrameLoss(firstFrame: 0, count: 1, reason: .incomplete)])
        #expect(s.receiver.counters.framesLost == 1)
        // Its straggling shards are stale, not a new frame.
        events = s.feed(first.enumerated().filter { $0.offset % 2 == 1 && $0.offset <= 20 }.map(\.1))
        #expect(events.isEmpty)
        #expect(s.receiver.counters.staleShards > 0)
        #expect(s.receiver.framesInFlight == 0)
    }

    @Test func wholeFramesThatNeverArriveAreReportedAsARun() throws {
        let s = try Stream(k: 16, fec: 20)
        var events: [VideoEvent] = []
        for n in 0..<16 {
            let datagrams = try s.cut(Self.frame(5000, seed: UInt64(n)), pts: UInt64(n) * 16_666_667)
            if (3...5).contains(n) { continue }                      // frames 3, 4, 5 vanish
            events += s.feed(datagrams)
            // Reordering could still bring them until frame 6 is a loss window old (frame 14).
            #expect(Self.losses(events).isEmpty == (n < 14), "after frame \(n)")
        }
        #expect(Self.frames(events).count == 13)
        #expect(Self.losses(events) == [FrameLoss(firstFrame: 3, count: 3, reason: .neverArrived)])
        #expect(Self.losses(events).first?.fitsReferenceInvalidation == true)
    }

    @Test func probeFillerIsKeptApartFromVideo() throws {
        let s = try Stream(k: 32, fec: 20)
        var events = s.feed(try s.cut(Self.frame(10_000, seed: 1), pts: 0))
        for n in 0..<50 { events += s.feed(try s.cut(Self.frame(60_000, seed: 2), pts: 1_000 + UInt64(n), probe: true)) }
        events += s.feed(try s.cut(Self.frame(10_000, seed: 3), pts: 16_000_000))
        let probes = events.compactMap { if case .probe(let p) = $0 { return p } else { return nil } }
        #expect(probes.count == 50)
        #expect(probes.map(\.frameIndex) == Array(0..<50))
        #expect(Self.frames(events).map(\.frameIndex) == [0, 1])
        #expect(Self.losses(events).isEmpty)
        #expect(s.receiver.counters.probeFrames == 50)
        #expect(s.receiver.counters.probePackets == UInt64(50 * (43 + 7 + 3)))
    }

    @Test func aFullWindowEvictsTheOldestFrame() throws {
        let limits = VideoStreamLimits(shardBytes: 256, maxDataShardsPerBlock: 8, framesInFlight: 4)
        let s = try Stream(key: nil, shard: 256, k: 8, fec: 25, limits: limits)
        var events: [VideoEvent] = []
        for n in 0..<6 {   // each frame only gets its first shard
            events += s.feed([try s.cut(Self.frame(2000, seed: UInt64(n)), pts: UInt64(n))[0]])
        }
        #expect(s.receiver.framesInFlight == 4)
        #expect(Self.losses(events) == [FrameLoss(firstFrame: 0, count: 1, reason: .evicted), FrameLoss(firstFrame: 1, count: 1, reason: .evicted)])
    }

    @Test func aFrameIndexJumpResynchronises() throws {
        let s = try Stream(key: nil, k: 16, fec: 20)
        var events = s.feed(try s.cut(Self.frame(5000, seed: 1), pts: 0))
        events += s.feed(try s.packetizer.packetize(Self.frame(5000, seed: 2), ptsNanoseconds: 10, frameIndex: 1_000))
        #expect(Self.frames(events).map(\.frameIndex) == [0, 1000])
        #expect(Self.losses(events) == [FrameLoss(firstFrame: 1, count: 999, reason: .indexJump)])
        #expect(Self.losses(events).first?.fitsReferenceInvalidation == false)
    }

    @Test func lossPartsPerMillionComeFromStreamSequenceGaps() throws {
        let s = try Stream(key: nil, k: 64, fec: 20)
        var datagrams: [[UInt8]] = []
        for n in 0..<10 { datagrams += try s.cut(Self.frame(50_000, seed: UInt64(n)), pts: UInt64(n)) }
        let kept = datagrams.enumerated().filter { $0.offset % 20 != 0 }.map(\.1)   // lose 5 %
        _ = s.feed(kept)
        let ppm = s.receiver.takeLossPartsPerMillion()
        #expect((45_000...55_000).contains(ppm), "\(ppm)")
        #expect(s.receiver.takeLossPartsPerMillion() == 0)
    }

    @Test func sealedDatagramsFromTheWrongKeyOrDirectionAreRefused() throws {
        let s = try Stream(k: 16, fec: 20)
        let other = try VideoPacketizer(key: Self.chachaKey, shardBytes: 1408, maxDataShardsPerBlock: 16, fecPercent: 20)
        let events = s.feed(try other.packetize(Self.frame(5000, seed: 1), ptsNanoseconds: 0))
        #expect(events.isEmpty)
        #expect(s.receiver.counters.authenticationFailed == 5)
        if case .authenticationFailed? = s.receiver.lastRefusal {} else { Issue.record("lastRefusal \(String(describing: s.receiver.lastRefusal))") }
    }
}
