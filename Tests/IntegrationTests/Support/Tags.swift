import Testing

/// Where the integration phase (`scripts/lib/integration.sh`) runs a suite. It lists the tests
/// with their tags and builds its test processes from these, so which suite runs where is written
/// once, on the suite.
///
/// Most integration time is spent waiting on real servers, so the phase runs the suites as test
/// processes side by side: `groupA`, `groupB` and `groupC`, plus a last group holding every
/// suite without a tag (so a new suite always runs). The three tagged groups hold the long suites,
/// balanced by their measured durations; move a suite when the groups' times in a CI log drift
/// apart. Suites tagged `timing` run after those, alone, one at a time.
extension Tag {
    /// The first concurrent group.
    @Tag static var groupA: Self
    /// The second concurrent group.
    @Tag static var groupB: Self
    /// The third concurrent group.
    @Tag static var groupC: Self
    /// A suite that judges timing (audio and playback sync, chunks on time, datagram loss, the
    /// viewer's window and typing, the impairment tool's delays). In a fresh-clone CI run with
    /// these among the concurrent groups, SendspinLegacyTests saw 6 late chunks (bound 2) while
    /// the other groups loaded both cores; so they run alone.
    @Tag static var timing: Self
}
