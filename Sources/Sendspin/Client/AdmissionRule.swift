/// Listening mode's rule for who plays when several servers connect: the activities of each
/// server's latest `server/activate` rank it (playback over pairing over anything else); a
/// higher rank takes the player, an equal non-zero rank too (the newest activation wins, as the
/// spec's "most recent server/activate" says), and between idle servers the one that last
/// played here is preferred to one that did not.
public enum AdmissionRule {
    public static func rank(_ activities: [Activity]) -> Int {
        activities.contains(.playback) ? 2 : activities.contains(.pairing) ? 1 : 0
    }

    /// Whether a newcomer of `rank` displaces the holder of `holderRank`. Server IDs decide
    /// between idle servers: the newcomer wins only if it is the last one that played here and
    /// the holder is not.
    public static func newcomerWins(rank: Int, holderRank: Int, newcomer: String?, holder: String?, lastPlayback: String?) -> Bool {
        if rank != holderRank { return rank > holderRank }
        if rank > 0 { return true }
        return newcomer != nil && newcomer == lastPlayback && holder != lastPlayback
    }
}
