import Crypto
import FarcastNIO
import FarcastSupport
import Foundation
import Logging
import NIOCore
import Synchronization

/// Listening mode's arbiter: one connection plays at a time, admitted by `AdmissionRule`; the
/// arbiter keeps the holder, tells a displaced one goodbye and remembers the last server that
/// played.
final class ListenArbiter: Sendable {
    private struct State {
        var holder: Runtime?
        var rank = 0
        var open: [ObjectIdentifier: Runtime] = [:]
        var lastPlayback: String?
        var lastAdmitted: Runtime?
    }

    private let state: Mutex<State>
    private let core: PlayerCore
    private let logger: Logger
    private let persist: @Sendable (String) -> Void

    init(core: PlayerCore, lastPlaybackServer: String?, logger: Logger, persist: @escaping @Sendable (String) -> Void) {
        state = Mutex(State(lastPlayback: lastPlaybackServer))
        self.core = core
        self.logger = logger
        self.persist = persist
    }

    var lastAdmitted: Runtime? { state.withLock { $0.lastAdmitted } }
    var lastPlaybackServer: String? { state.withLock { $0.lastPlayback } }
    var holder: Runtime? { state.withLock { $0.holder } }

    func opened(_ runtime: Runtime) { state.withLock { $0.open[ObjectIdentifier(runtime)] = runtime } }

    func closed(_ runtime: Runtime) {
        state.withLock { s in
            s.open[ObjectIdentifier(runtime)] = nil
            if s.holder === runtime {
                s.holder = nil
                s.rank = 0
            }
        }
    }

    /// Decides on an activation; displaces the holder when the newcomer wins.
    func admit(_ runtime: Runtime, activities: [Activity]) -> Bool {
        let rank = AdmissionRule.rank(activities)
        let serverID = runtime.serverID
        let (admitted, displaced) = state.withLock { s -> (Bool, Runtime?) in
            if s.holder === runtime {
                s.rank = rank
                return (true, nil)
            }
            guard let holder = s.holder else {
                s.holder = runtime
                s.rank = rank
                return (true, nil)
            }
            guard AdmissionRule.newcomerWins(rank: rank, holderRank: s.rank, newcomer: serverID, holder: holder.serverID,
                                             lastPlayback: s.lastPlayback) else { return (false, nil) }
            s.holder = runtime
            s.rank = rank
            return (true, holder)
        }
        if let displaced {
            logger.notice("a server with higher priority took over; telling the previous one goodbye (another_server)")
            displaced.setAdmitted(false)
            displaced.perform(displaced.withSession { $0.goodbye(reason: "another_server") }, now: 0)
            // A different server: its clock and its stream start from scratch.
            core.resetForNewServer()
        }
        guard admitted else {
            logger.notice("refused a server: another one holds the player (concurrent_attempt)")
            return false
        }
        runtime.setAdmitted(true)
        state.withLock { $0.lastAdmitted = runtime }
        if activities.contains(.playback), let serverID {
            let changed = state.withLock { s -> Bool in
                defer { s.lastPlayback = serverID }
                return s.lastPlayback != serverID
            }
            if changed { persist(serverID) }
        }
        return true
    }

    func sayGoodbyeToAll(reason: String, now: Int64) {
        let runtimes = state.withLock { Array($0.open.values) }
        for runtime in runtimes where !runtime.isFinished {
            logger.info("saying goodbye to \(runtime.serverName ?? "a server") (\(reason))")
            runtime.perform(runtime.withSession { $0.goodbye(reason: reason) }, now: now)
        }
    }
}
