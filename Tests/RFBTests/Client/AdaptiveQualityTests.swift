import Testing
@testable import RFB

struct AdaptiveQualityTests {
    typealias T = VNCClient.UpdateTransfer

    @Test func fastLinksStayLosslessAndSlowOnesGetJPEGAtAFittingLevel() {
        var q = AdaptiveQuality()
        #expect(q.observe([T(bytes: 1_000_000, seconds: 0.01)]) == nil, "800 Mbit/s: lossless, no change")
        #expect(q.choice == .lossless)

        var slow = AdaptiveQuality()
        // 500 KB in 0.8 s: 5 Mbit/s.
        #expect(slow.observe([T(bytes: 500_000, seconds: 0.8)]) == .jpeg(7))
        #expect(slow.megabitsPerSecond == 5)
        // Very slow links get a lower level.
        var crawl = AdaptiveQuality()
        #expect(crawl.observe([T(bytes: 100_000, seconds: 1.6)]) == .jpeg(3))
    }

    @Test func smallOrInstantTransfersSayNothing() {
        var q = AdaptiveQuality()
        #expect(q.observe([T(bytes: 4000, seconds: 1), T(bytes: 1_000_000, seconds: 0)]) == nil)
        #expect(q.megabitsPerSecond == nil)
    }

    @Test func betweenTheThresholdsTheChoiceHolds() {
        var q = AdaptiveQuality()
        // 12 Mbit/s from lossless: stays lossless (hysteresis).
        #expect(q.observe([T(bytes: 1_500_000, seconds: 1)]) == nil)
        var j = AdaptiveQuality(initial: .jpeg(7))
        // 12 Mbit/s from JPEG: stays JPEG (the level may be refined).
        _ = j.observe([T(bytes: 1_500_000, seconds: 1)])
        #expect(j.choice.jpegQuality != nil)
        // A fast link brings lossless back.
        for _ in 0..<5 { _ = j.observe([T(bytes: 10_000_000, seconds: 0.1)]) }
        #expect(j.choice == .lossless)
    }

    @Test func physicalKeysHaveXTScancodes() {
        #expect(XTScancode.forUSBUsage(4) == 0x1E)      // A
        #expect(XTScancode.forUSBUsage(79) == 0xCD)     // Right (E0 4D)
        #expect(XTScancode.forUSBUsage(230) == 0xB8)    // Right Alt
        #expect(XTScancode.forUSBUsage(0) == nil)
    }
}
