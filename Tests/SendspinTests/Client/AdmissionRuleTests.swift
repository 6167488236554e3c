import Sendspin
import Testing

/// Who plays when several servers connect to a listening player.
struct AdmissionRuleTests {
    @Test func activitiesRankPlaybackOverPairingOverTheRest() {
        #expect(AdmissionRule.rank(["playback", "pairing"]) == 2)
        #expect(AdmissionRule.rank(["pairing"]) == 1)
        #expect(AdmissionRule.rank(["metadata"]) == 0)
        #expect(AdmissionRule.rank([]) == 0)
    }

    @Test func aHigherRankTakesThePlayerAndALowerOneIsRefused() {
        #expect(AdmissionRule.newcomerWins(rank: 2, holderRank: 1, newcomer: "b", holder: "a", lastPlayback: "a"))
        #expect(!AdmissionRule.newcomerWins(rank: 0, holderRank: 2, newcomer: "a", holder: "b", lastPlayback: "a"))
    }

    @Test func theNewestActivationWinsAmongEqualActiveRanks() {
        #expect(AdmissionRule.newcomerWins(rank: 2, holderRank: 2, newcomer: "b", holder: "a", lastPlayback: "a"))
        #expect(AdmissionRule.newcomerWins(rank: 1, holderRank: 1, newcomer: nil, holder: "a", lastPlayback: nil))
    }

    @Test func betweenIdleServersTheOneThatLastPlayedHereIsPreferred() {
        #expect(AdmissionRule.newcomerWins(rank: 0, holderRank: 0, newcomer: "a", holder: "b", lastPlayback: "a"))
        #expect(!AdmissionRule.newcomerWins(rank: 0, holderRank: 0, newcomer: "b", holder: "a", lastPlayback: "a"))
        #expect(!AdmissionRule.newcomerWins(rank: 0, holderRank: 0, newcomer: "b", holder: "c", lastPlayback: "a"))
        #expect(!AdmissionRule.newcomerWins(rank: 0, holderRank: 0, newcomer: nil, holder: "c", lastPlayback: nil), "an unknown server displaces no one")
    }
}
