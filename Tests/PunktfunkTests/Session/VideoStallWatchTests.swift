@testable import Punktfunk
import Testing

/// The stall rule on a virtual clock: 2 s of silence is a stall (one report and a keyframe
/// request), another request every 2 s while it lasts, a report when video is back, and the end
/// of the session at the limit; a stream that never sent anything counts from its start.
struct VideoStallWatchTests {
    static let ms: Int64 = 1_000_000

    @Test func aStreamThatFlowsIsNeverStalled() {
        var watch = VideoStallWatch(startedAt: 0)
        for i in 1...600 { #expect(watch.observe(accessUnits: UInt64(i), now: Int64(i) * 16 * Self.ms) == .none) }
    }

    @Test func silenceIsReportedOnceAskedAboutEveryTwoSecondsAndEndedAtTheLimit() {
        var watch = VideoStallWatch(startedAt: 0, giveUpAfterNs: 7_000 * Self.ms)
        #expect(watch.observe(accessUnits: 30, now: 500 * Self.ms) == .none)
        var actions: [(Int64, VideoStallWatch.Action)] = []
        for t in stride(from: Int64(550), through: 7_600, by: 50) {
            let action = watch.observe(accessUnits: 30, now: t * Self.ms)
            if action != .none { actions.append((t, action)) }
            if case .giveUp = action { break }
        }
        #expect(actions.map(\.0) == [2_500, 4_500, 6_500, 7_500])
        #expect(actions.map(\.1) == [.stalled(silentNs: 2_000 * Self.ms), .requestKeyframe, .requestKeyframe, .giveUp(silentNs: 7_000 * Self.ms)])
        #expect(watch.isStalled)
    }

    @Test func videoComingBackEndsTheStall() {
        var watch = VideoStallWatch(startedAt: 0)
        #expect(watch.observe(accessUnits: 1, now: 100 * Self.ms) == .none)
        #expect(watch.observe(accessUnits: 1, now: 2_100 * Self.ms) == .stalled(silentNs: 2_000 * Self.ms))
        #expect(watch.observe(accessUnits: 2, now: 3_100 * Self.ms) == .resumed(silentNs: 3_000 * Self.ms))
        #expect(!watch.isStalled)
        // A new silence is a new stall, counted from the last access unit.
        #expect(watch.observe(accessUnits: 2, now: 5_000 * Self.ms) == .none)
        #expect(watch.observe(accessUnits: 2, now: 5_100 * Self.ms) == .stalled(silentNs: 2_000 * Self.ms))
    }

    @Test func aStreamThatNeverStartsCountsFromItsStart() {
        var watch = VideoStallWatch(startedAt: 1_000 * Self.ms, giveUpAfterNs: 5_000 * Self.ms)
        #expect(watch.observe(accessUnits: 0, now: 2_900 * Self.ms) == .none)
        #expect(watch.observe(accessUnits: 0, now: 3_000 * Self.ms) == .stalled(silentNs: 2_000 * Self.ms))
        #expect(watch.observe(accessUnits: 0, now: 6_000 * Self.ms) == .giveUp(silentNs: 5_000 * Self.ms))
    }

    @Test func theLimitIsNeverShorterThanAStall() {
        let watch = VideoStallWatch(startedAt: 0, warnAfterNs: 2_000 * Self.ms, giveUpAfterNs: 500 * Self.ms)
        #expect(watch.giveUpAfterNs == 2_000 * Self.ms)
    }
}
