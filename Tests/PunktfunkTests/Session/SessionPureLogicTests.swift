@testable import Punktfunk
import Testing

struct HolePunchScheduleTests {
    @Test func fifteenFastPunchesThenKeepAlives() {
        var s = HolePunchSchedule()
        #expect(!s.isDue(now: 0))
        s.start(now: 1000)
        var times: [Int64] = []
        var now: Int64 = 1000
        while times.count < 18 {
            if s.isDue(now: now) {
                times.append(now)
                s.didSend(now: now)
            }
            now += 1_000_000
        }
        let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
        #expect(gaps.prefix(14).allSatisfy { $0 == 200_000_000 })
        #expect(gaps.dropFirst(14).allSatisfy { $0 == 2_000_000_000 })
        #expect(HolePunchSchedule.payload == Array("PFpunch1".utf8))
    }
}

struct SpeedTestResultTests {
    @Test func lossDropGoodputAndRecommendation() {
        let result = ControlMessage.ProbeResult(bytesSent: 150_000_000, packetsSent: 100_000, durationMs: 2000,
                                                wirePacketsSent: 99_000, sendDropped: 1000)
        let r = SpeedTestResult(targetKbps: 600_000, result: result, receivedPackets: 89_100, receivedBytes: 125_000_000)
        #expect(abs(r.linkLoss - 0.1) < 1e-9)
        #expect(abs(r.hostDrop - 0.01) < 1e-9)
        #expect(r.goodputKbps == 500_000)
        #expect(r.recommendedKbps == 350_000)
        #expect(!r.isEmpty)
        let empty = SpeedTestResult(targetKbps: 1, result: .init(bytesSent: 0, packetsSent: 0, durationMs: 0), receivedPackets: 0, receivedBytes: 0)
        #expect(empty.isEmpty && empty.goodputKbps == 0 && empty.linkLoss == 0)
        // The 21-byte form: wire packets default to packets sent.
        let old = SpeedTestResult(targetKbps: 1, result: .init(bytesSent: 10, packetsSent: 10, durationMs: 10), receivedPackets: 12, receivedBytes: 10)
        #expect(old.linkLoss == 0)
    }
}

struct PunktfunkHostRecordTests {
    @Test func txtIsDecodedAndForeignProtocolsAreNotHosts() throws {
        let txt = ["proto": "punktfunk/1", "id": "abc", "fp": String(repeating: "AB", count: 32), "pair": "optional",
                   "mgmt": "9778", "mac": "aa:bb:cc:dd:ee:ff,11:22:33:44:55:66", "os": "linux/fedora/41", "addr": "192.168.1.20"]
        let r = try #require(PunktfunkHostRecord(instanceName: "pc", addresses: ["10.0.0.5"], port: 9777, txt: txt))
        #expect(r.fingerprint == String(repeating: "ab", count: 32))
        #expect(r.pairing == .optional && r.allowsTrustOnFirstUse)
        #expect(r.managementPort == 9778 && r.macAddresses.count == 2 && r.declaredAddress == "192.168.1.20")
        #expect(PunktfunkHostRecord(instanceName: "x", addresses: [], port: 9777, txt: ["proto": "punktfunk/2"]) == nil)
        let old = try #require(PunktfunkHostRecord(instanceName: "old", addresses: [], port: 9777, txt: [:]))
        #expect(old.protocolVersion == nil && old.pairing == .unknown && !old.allowsTrustOnFirstUse)
        #expect(PunktfunkHostRecord(instanceName: "x", addresses: [], port: 9777, txt: ["fp": "zz"])?.fingerprint == nil)
    }

    @Test func addressRankingOrder() {
        // Longest prefix with a local address first (172.16/12 shares one leading bit with 192.168/16).
        #expect(PunktfunkHostRecord.rank(["10.0.0.9", "192.168.1.30", "172.16.0.2"], localAddresses: ["192.168.1.4"],
                                         declared: nil, defaultRouteSource: nil) == ["192.168.1.30", "172.16.0.2", "10.0.0.9"])
        // Tie on local prefix: the declared address.
        #expect(PunktfunkHostRecord.rank(["10.0.0.9", "10.0.0.7"], localAddresses: ["172.20.0.1"], declared: "10.0.0.9",
                                         defaultRouteSource: nil) == ["10.0.0.9", "10.0.0.7"])
        // Then the default route's source, then the lowest address.
        #expect(PunktfunkHostRecord.rank(["10.1.0.9", "192.168.7.7"], localAddresses: [], declared: nil,
                                         defaultRouteSource: "192.168.0.2") == ["192.168.7.7", "10.1.0.9"])
        #expect(PunktfunkHostRecord.rank(["10.0.0.9", "10.0.0.3", "fe80::1"], localAddresses: [], declared: nil,
                                         defaultRouteSource: nil) == ["10.0.0.3", "10.0.0.9", "fe80::1"])
        #expect(IPv4Address("1.2.3") == nil && IPv4Address("1.2.3.256") == nil && IPv4Address("01.2.3.4") != nil)
    }
}

struct LatencyPercentilesTests {
    @Test func nearestRankPercentilesAndSkewIsDropped() {
        var l = LatencyPercentiles()
        #expect(l.percentile(50) == nil)
        for v in 1...100 { l.record(Int64(v) * 1000) }
        l.record(-5)
        l.record(11_000_000_000)
        #expect(l.percentile(50) == 50_000)
        #expect(l.percentile(95) == 95_000)
        #expect(l.percentile(99) == 99_000)
        #expect(l.percentile(100) == 100_000)
        #expect(l.count == 100 && l.skewed == 2)
    }

    @Test func memoryStaysBoundedAndPercentilesRepresentative() {
        var l = LatencyPercentiles(capacity: 1000)
        for v in 0..<100_000 { l.record(Int64(v % 1000)) }
        #expect(l.count == 100_000)
        let p50 = l.percentile(50) ?? -1
        #expect(abs(p50 - 500) <= 10)
    }
}

struct StreamingPolicyTests {
    static func loss(_ first: UInt32, _ count: UInt32) -> FrameLoss { FrameLoss(firstFrame: first, count: count, reason: .incomplete) }

    @Test func aShortBrokenRunAsksForReferenceInvalidationThenForAKeyframe() {
        var p = StreamingPolicy()
        do { let r = p.frameDelivered(now: 0, isKeyframe: false); #expect(r == nil) }
        do { let r = p.frameLost(Self.loss(100, 2), now: 0); #expect(r == .rfiRequest(firstFrame: 100, lastFrame: 101)) }
        // Within the retry interval nothing more goes out, however much is lost.
        do { let r = p.frameLost(Self.loss(102, 3), now: 100_000_000); #expect(r == nil) }
        #expect(p.awaitingKeyframe)
        // The invalidation brought no clean frame: the next request is a keyframe.
        do { let r = p.frameLost(Self.loss(110, 1), now: 600_000_000); #expect(r == .requestKeyframe) }
        do { let r = p.frameDelivered(now: 610_000_000, isKeyframe: true); #expect(r == nil) }
        #expect(!p.awaitingKeyframe)
        do { let r = p.frameDelivered(now: 2_000_000_000, isKeyframe: false); #expect(r == nil) }
        // A new broken run starts over with an invalidation over that run only.
        do { let r = p.frameLost(Self.loss(500, 1), now: 2_100_000_000); #expect(r == .rfiRequest(firstFrame: 500, lastFrame: 500)) }
        #expect(p.rfiRequests == 2 && p.keyframeRequests == 1)
    }

    @Test func aRecoveryAnchorOrRecoveryPointEndsTheWaitLikeAKeyframe() {
        var p = StreamingPolicy()
        _ = p.frameLost(Self.loss(7, 1), now: 0)
        do { let r = p.frameDelivered(now: 10_000_000, isKeyframe: false, flags: [.recoveryAnchor]); #expect(r == nil) }
        #expect(!p.awaitingKeyframe)
        _ = p.frameLost(Self.loss(20, 1), now: 1_000_000_000)
        do { let r = p.frameDelivered(now: 1_010_000_000, isKeyframe: false, flags: [.recoveryPoint, .repeatFrame]); #expect(r == nil) }
        #expect(!p.awaitingKeyframe)
        // Other flags do not.
        _ = p.frameLost(Self.loss(30, 1), now: 2_000_000_000)
        _ = p.frameDelivered(now: 2_010_000_000, isKeyframe: false, flags: [.repeatFrame, .sliceStream])
        #expect(p.awaitingKeyframe)
    }

    @Test func runsTooLongForInvalidationOrWithItOffGoStraightToAKeyframe() {
        var p = StreamingPolicy()
        do { let r = p.frameLost(Self.loss(1_000, 257), now: 0); #expect(r == .requestKeyframe) }
        var q = StreamingPolicy()
        do { let r = q.frameLost(Self.loss(UInt32.max - 1, 256), now: 0); #expect(r == .rfiRequest(firstFrame: UInt32.max - 1, lastFrame: 253)) }
        var off = StreamingPolicy()
        off.referenceInvalidation = false
        do { let r = off.frameLost(Self.loss(5, 1), now: 0); #expect(r == .requestKeyframe) }
        #expect(off.rfiRequests == 0 && off.keyframeRequests == 1)
    }

    @Test func aLostRecoveryFrameIsAskedForAgainWhileFramesKeepComing() {
        var p = StreamingPolicy()
        _ = p.frameLost(Self.loss(1, 1), now: 0)
        // The loss stopped, but the recovery frame was lost too: P frames arrive, the picture stays broken.
        do { let r = p.frameDelivered(now: 200_000_000, isKeyframe: false); #expect(r == nil) }
        do { let r = p.frameDelivered(now: 500_000_000, isKeyframe: false); #expect(r == .requestKeyframe) }
        do { let r = p.frameDelivered(now: 600_000_000, isKeyframe: false); #expect(r == nil) }
        do { let r = p.frameDelivered(now: 700_000_000, isKeyframe: true); #expect(r == nil) }
        do { let r = p.frameDelivered(now: 5_000_000_000, isKeyframe: false); #expect(r == nil) }
        #expect(p.rfiRequests == 1 && p.keyframeRequests == 1)
    }

    @Test func theBitrateFallsAfterTwoLossyIntervalsAndRisesAfterTenCleanOnes() throws {
        var p = StreamingPolicy(bitrate: try #require(BitrateAdaptation(openedAtKbps: 20_000, floorKbps: 5_000)))
        // One lossy interval is not enough; two in a row lower the bitrate by a quarter.
        _ = p.frameLost(Self.loss(1, 3), now: 0)
        do { let r = p.intervalEnded(lossPPM: 300_000); #expect(r == nil) }
        _ = p.frameLost(Self.loss(90, 3), now: 1_000_000_000)
        do { let r = p.intervalEnded(lossPPM: 300_000); #expect(r == .setBitrate(kbps: 15_000)) }
        // Heavy datagram loss the FEC still repaired counts too; a clean interval between resets the count.
        do { let r = p.intervalEnded(lossPPM: 150_000); #expect(r == nil) }
        do { let r = p.intervalEnded(lossPPM: 0); #expect(r == nil) }
        do { let r = p.intervalEnded(lossPPM: 150_000); #expect(r == nil) }
        do { let r = p.intervalEnded(lossPPM: 150_000); #expect(r == .setBitrate(kbps: 11_250)) }
        // A link that keeps losing: down a quarter every second interval, never below the floor.
        for _ in 0..<4 { _ = p.intervalEnded(lossPPM: 500_000) }
        #expect(p.bitrate?.currentKbps == 6_329)
        do { let r = p.intervalEnded(lossPPM: 500_000); let s = p.intervalEnded(lossPPM: 500_000); #expect(r == nil && s == .setBitrate(kbps: 5_000)) }
        for _ in 0..<6 { let r = p.intervalEnded(lossPPM: 500_000); #expect(r == nil) }
        // The host may confirm another figure; the rule continues from it. Ten clean intervals
        // (light loss the FEC covers counts as clean) add an eighth of the opening bitrate,
        // never above it.
        p.bitrateConfirmed(kbps: 16_000)
        var risen: [ControlMessage] = []
        for _ in 0..<30 { if let r = p.intervalEnded(lossPPM: 20_000) { risen.append(r) } }
        #expect(risen == [.setBitrate(kbps: 18_500), .setBitrate(kbps: 20_000)])
        #expect(BitrateAdaptation(openedAtKbps: 0) == nil)
        var fixed = StreamingPolicy()
        _ = fixed.frameLost(Self.loss(1, 1), now: 0)
        #expect(fixed.intervalEnded(lossPPM: 900_000) == nil && fixed.intervalEnded(lossPPM: 900_000) == nil)
    }

    @Test func lossReportsOncePerInterval() {
        var p = StreamingPolicy()
        let due = [0, 500_000_000, 1_000_000_000, 1_500_000_000, 2_100_000_000].map { p.lossReportDue(now: Int64($0)) }
        #expect(due == [false, false, true, false, true])
    }

    @Test func clockResyncEveryTenSeconds() {
        var p = StreamingPolicy()
        do { let r = p.clockResyncDue(now: 0); #expect(!r) }
        do { let r = p.clockResyncDue(now: 9_000_000_000); #expect(!r) }
        do { let r = p.clockResyncDue(now: 10_000_000_000); #expect(r) }
        do { let r = p.clockResyncDue(now: 11_000_000_000); #expect(!r) }
    }
}
