public import Foundation

/// What became of one position played offline when it was synced.
public enum OfflineSyncOutcome: Sendable, Equatable {
    /// It reached the server, which now has this user data (its own resume rules applied).
    case sent(UserItemData)
    /// The server's own playback of the item is later: it stays, the offline one is dropped.
    case serverNewer(UserItemData)
    /// The server no longer has the item: dropped.
    case itemGone
    /// It did not reach the server (kept for the next sync): why.
    case failed(String)
}

public struct OfflineSyncResult: Sendable, Equatable {
    public var itemId: String
    /// The item's name when it is still downloaded.
    public var name: String?
    public var positionTicks: Int64
    public var playedAt: Date
    public var outcome: OfflineSyncOutcome
}

extension JellyfinSession {
    /// Sends the playback made offline for this server and user, conflicts resolved by the
    /// latest date: for each item the server's user data is read first, and when the server's
    /// last playback is later than the offline one, the server's stays. Otherwise the position
    /// goes as a Stopped report (so the server applies its own resume and played rules, as if
    /// it had been played online), then the user data gets the offline playback's date as its
    /// LastPlayedDate. A failure stops the sync; what was not sent stays for the next one.
    public func syncOfflineProgress(_ library: OfflineLibrary, serverId: String) async throws(OfflineError) -> [OfflineSyncResult] {
        let pending = try library.pendingProgress(serverId: serverId, userId: userId)
        var results: [OfflineSyncResult] = []
        var stopped: String?
        for progress in pending {
            let entry = try library.entry(itemId: progress.itemId, serverId: serverId, userId: userId)
            var result = OfflineSyncResult(itemId: progress.itemId, name: entry?.item.name, positionTicks: progress.positionTicks,
                                           playedAt: progress.updatedAt, outcome: .failed(stopped ?? ""))
            if stopped == nil {
                result.outcome = await send(progress, runtimeTicks: entry?.item.runTimeTicks)
                switch result.outcome {
                case .sent(let data), .serverNewer(let data): try library.settle(progress, serverId: serverId, userId: userId, server: data)
                case .itemGone: try library.settle(progress, serverId: serverId, userId: userId, server: nil)
                case .failed(let reason): stopped = reason
                }
            }
            results.append(result)
        }
        return results
    }

    private func send(_ progress: OfflineProgress, runtimeTicks: Int64?) async -> OfflineSyncOutcome {
        do throws(JellyfinError) {
            let current = try await userData(progress.itemId)
            guard progress.isNewer(than: current) else { return .serverNewer(current) }
            var ticks = progress.positionTicks
            if progress.finished, let runtimeTicks { ticks = max(ticks, runtimeTicks) }
            let plan = PlaybackPlan(itemId: progress.itemId, mediaSourceId: progress.itemId, playSessionId: nil, method: .directPlay,
                                    url: URL(fileURLWithPath: "/"), container: nil, runtimeSeconds: runtimeTicks.map { Double($0) / 10_000_000 },
                                    audioStreamIndex: nil, subtitleStreamIndex: nil)
            try await report(PlaybackReport(.stopped, plan: plan, positionSeconds: Double(ticks) / 10_000_000))
            return .sent(try await updateUserData(progress.itemId, lastPlayedDate: progress.updatedAt))
        } catch {
            if case .notFound = error { return .itemGone }
            return .failed(error.description)
        }
    }
}

extension OfflineLibrary {
    /// Plays a download on `player` from `startSeconds` with no server: the position is kept in
    /// the index as playback goes (at start, on the timer, at every pause and seek, at the end)
    /// and syncs when the server is reachable again. `observe` hears `.reported` for each save.
    public func play(_ entry: OfflineEntry, startSeconds: Double, on player: any MediaPlayer, options: PlaybackOptions = .init(),
                     observe: @escaping @Sendable (PlaybackProgress) -> Void = { _ in }) async throws(PlayerError) -> PlaybackOutcome {
        let plan = PlaybackPlan(itemId: entry.item.id, mediaSourceId: entry.item.id, playSessionId: nil, method: .directPlay,
                                url: URL(fileURLWithPath: entry.filePath), container: (entry.filePath as NSString).pathExtension,
                                runtimeSeconds: entry.item.runTimeTicks.map { Double($0) / 10_000_000 }, audioStreamIndex: nil, subtitleStreamIndex: nil)
        observe(.planned(plan))
        let account = entry.account
        return try await PlaybackLoop.run(plan, startSeconds: startSeconds, on: player, options: options, observe: observe) { report in
            let ticks = Int64((report.positionSeconds * 10_000_000).rounded())
            let finished = report.kind == .stopped && (plan.runtimeSeconds.map { report.positionSeconds >= $0 } ?? false)
            do throws(OfflineError) {
                try self.saveProgress(itemId: plan.itemId, account: account, positionTicks: ticks, finished: finished)
                return nil
            } catch {
                return error.description
            }
        }
    }
}
