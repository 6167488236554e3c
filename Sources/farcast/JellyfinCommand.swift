import ArgumentParser
import FarcastSupport
import Foundation
import Hosts
import Jellyfin
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

struct JellyfinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jellyfin",
        abstract: "Jellyfin media servers: sign in, browse, search, images, play in mpv, live session.",
        discussion: """
            Sign in once with `farcast jellyfin login URL`; the server, user and access token are remembered in the state directory (jellyfin/servers.json, mode 0600) and every other command uses them. With several servers or users remembered, pick one with --server and --user (a name, an id, or for servers the URL).

            Passwords come from --password-file, FARCAST_JELLYFIN_PASSWORD, the password saved with a host (farcast hosts add NAME jellyfin://… --password-file F) or a prompt on the terminal; never from the command line. Quick Connect (--quick-connect) signs in without a password: approve the 6-digit code from a device already signed in.

            A server reached through SSH (`login URL --ssh user@bastion`, resolved on the bastion's side as `ssh -L` does) is remembered with its route; later commands go through the same route (or the one --ssh names) by themselves.
            """,
        subcommands: [
            JellyfinDiscoverCommand.self, JellyfinLoginCommand.self, JellyfinLogoutCommand.self, JellyfinServersCommand.self,
            JellyfinLibrariesCommand.self, JellyfinListCommand.self, JellyfinSearchCommand.self, JellyfinInfoCommand.self,
            JellyfinResumeCommand.self, JellyfinNextUpCommand.self, JellyfinMarkCommand.self, JellyfinImageCommand.self,
            JellyfinPlayCommand.self, JellyfinCastTargetCommand.self, JellyfinDownloadCommand.self, JellyfinOfflineCommand.self,
            JellyfinLyricsCommand.self, JellyfinTVCommand.self, JellyfinSyncPlayCommand.self, JellyfinEventsCommand.self,
        ]
    )
}

// MARK: - Shared pieces

/// Which remembered server and user a command uses, and how long it may wait.
struct JellyfinTarget: ParsableArguments {
    @Option(help: ArgumentHelp("The remembered server to use: its name, id or URL, or a saved host (farcast hosts) at its address (default: the last one signed in to).", valueName: "server"))
    var server: String?

    @Option(help: ArgumentHelp("The remembered user to use on that server: name or id (default: the last one).", valueName: "user"))
    var user: String?

    @Option(help: ArgumentHelp("Seconds to wait for each request.", valueName: "seconds"))
    var timeout: Double = 30

    @OptionGroup var rating: RatingOptions

    @OptionGroup var hosts: HostOptions

    func validate() throws {
        guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout must be between 0 and 3600 seconds") }
    }

    /// The remembered session (through its SSH route, or --ssh's), or a failure that says how to
    /// sign in. Playback made offline for this server and user is synced on the way (a note
    /// says what became of it) unless `syncOffline` is false.
    func session(syncOffline: Bool = true) async throws -> JellyfinSession {
        try await connect(syncOffline: syncOffline).session
    }

    /// The session and the account downloads are recorded under.
    func connect(syncOffline: Bool = true) async throws -> (session: JellyfinSession, account: OfflineAccount) {
        let store = try JellyfinCLI.store()
        let remembered = try store.load()
        guard !remembered.servers.isEmpty else {
            throw CommandFailure(message: "not signed in to any Jellyfin server: run `farcast jellyfin login URL` first")
        }
        guard let entry = try rememberedServer(in: remembered) else {
            throw CommandFailure(message: "no remembered server matches '\(server ?? "")' (see `farcast jellyfin servers`)", exitCode: 2)
        }
        guard let account = entry.user(matching: user) else {
            throw CommandFailure(message: "no remembered user '\(user ?? "")' on \(entry.name) (see `farcast jellyfin servers`)", exitCode: 2)
        }
        let address: ServerAddress
        do { address = try ServerAddress(parsing: entry.url) } catch { throw CommandFailure(message: "\(describe(error))", exitCode: 2) }
        var route: SSHRoute?
        do { route = try hosts.route(for: nil) ?? entry.ssh.map(SSHRoute.init(parsing:)) } catch {
            throw CommandFailure(message: "the SSH route remembered for \(entry.name) is unusable: \(describe(error))", exitCode: 2)
        }
        let transport = try await JellyfinCLI.transport(timeout: timeout, to: address, through: route, hosts: hosts)
        let server = JellyfinServer(address: address, identity: try JellyfinCLI.identity(), transport: transport)
        let session = server.session(userId: account.id, userName: account.name, accessToken: account.token, serverId: entry.id,
                                     ratingCeiling: try rating.ceiling)
        let offline = OfflineAccount(serverId: entry.id, serverName: entry.name, userId: account.id, userName: account.name)
        if syncOffline { await JellyfinCLI.syncOffline(session, account: offline) }
        return (session, offline)
    }

    /// The server `--server` picks: a remembered name, id or URL as it was stored, else the
    /// remembered server at the address a saved host (`farcast hosts`) or a `jellyfin://` URL names.
    private func rememberedServer(in remembered: RememberedServers) throws -> RememberedServer? {
        if let entry = remembered.server(matching: server) { return entry }
        guard let server else { return nil }
        let text = try hosts.hostAddress(server, kind: .jellyfin)?.protocolURL() ?? server
        guard let wanted = try? ServerAddress(parsing: text) else { return nil }
        return remembered.servers.first { (try? ServerAddress(parsing: $0.url)) == wanted }
    }
}

/// The parental ceiling a command applies (`--max-rating`, else `$FARCAST_JELLYFIN_MAX_RATING`).
struct RatingOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Hide and refuse items rated above this: a rating (G, PG, PG-13, R, TV-14…) or an age (12); default: $FARCAST_JELLYFIN_MAX_RATING, else none.", valueName: "rating"))
    var maxRating: String?

    func validate() throws {
        if let maxRating, RatingCeiling(maxRating) == nil {
            throw ValidationError("--max-rating takes a rating or an age (e.g. PG-13, TV-14, FSK-12 or 12), not '\(maxRating)'")
        }
    }

    var ceiling: RatingCeiling? {
        get throws {
            guard let text = maxRating ?? ProcessInfo.processInfo.environment["FARCAST_JELLYFIN_MAX_RATING"].flatMap({ $0.isEmpty ? nil : $0 }) else { return nil }
            guard let ceiling = RatingCeiling(text) else {
                throw CommandFailure(message: "FARCAST_JELLYFIN_MAX_RATING='\(text)' is not a rating or an age (e.g. PG-13, TV-14, FSK-12 or 12)", exitCode: 2)
            }
            return ceiling
        }
    }
}

enum JellyfinCLI {
    static func state() throws -> StateDirectory {
        let state = try StateDirectory.resolve()
        try state.ensureExists()
        return state
    }

    static func store() throws -> FileCredentialStore { FileCredentialStore(directory: try state()) }

    /// SSH tunnels this process opened: kept open until it exits.
    private static let tunnels = Mutex<[any SSHForwarding]>([])

    /// The transport for a server, through an SSH tunnel when `route` is given. The tunnel's
    /// local end listens on a loopback address of its own at the server's own port, and requests
    /// connect there while their URL stays the server's (Host header, TLS name and certificate
    /// check unchanged; `JellyfinTransport.connectOverride`). Linux gives every 127.0.0.0/8
    /// address to loopback; elsewhere the port on 127.0.0.1 must be free.
    static func transport(timeout: Double, to address: ServerAddress, through route: SSHRoute?, hosts: HostOptions) async throws -> JellyfinTransport {
        var transport = JellyfinTransport(timeout: duration(timeout))
        guard let route else { return transport }
        var logger = Logger(label: "farcast.ssh") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = .warning
        guard let listenHost = freeLoopbackAddress(port: address.port) else {
            throw CommandFailure(message: "no loopback address has port \(address.port) free for the SSH tunnel's local end")
        }
        let forwarder = try await hosts.openTunnel(route, to: address.host, port: address.port, listenHost: listenHost, listenPort: address.port,
                                                   timeout: duration(timeout), logger: logger)
        tunnels.withLock { $0.append(forwarder) }
        transport.connectOverride = [address.host: listenHost]
        return transport
    }

    /// A loopback address where `port` can be bound right now.
    static func freeLoopbackAddress(port: Int) -> String? {
        #if os(Linux)
        let candidates = (0..<16).map { _ in "127.\(UInt8.random(in: 1...254)).\(UInt8.random(in: 0...255)).\(UInt8.random(in: 1...254))" }
        #else
        let candidates = ["127.0.0.1"]
        #endif
        return candidates.first { candidate in
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { return false }
            defer { close(fd) }
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            var socketAddress = sockaddr_in()
            socketAddress.sin_family = sa_family_t(AF_INET)
            socketAddress.sin_port = UInt16(port).bigEndian
            socketAddress.sin_addr.s_addr = inet_addr(candidate)
            return withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
        }
    }

    /// This installation's identity: a device id made once and kept in the state directory.
    static func identity() throws -> ClientIdentity {
        let state = try state()
        let name = "jellyfin/device-id"
        var deviceId = try state.read(name).map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
        if deviceId.count != 32 || !deviceId.allSatisfy(\.isHexDigit) {
            deviceId = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
            try state.write(Array(deviceId.utf8), to: name)
        }
        var host = [CChar](repeating: 0, count: 256)
        let device = gethostname(&host, host.count) == 0 ? String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "Linux"
        return ClientIdentity(client: "Farcast", device: device.isEmpty ? "Linux" : device, deviceId: deviceId, version: FarcastInfo.version)
    }

    /// `$XDG_CACHE_HOME/farcast`, else `~/.cache/farcast`; nil when neither is set.
    static var cacheFolder: String? {
        let env = ProcessInfo.processInfo.environment
        if let xdg = env["XDG_CACHE_HOME"], xdg.hasPrefix("/") { return xdg + "/farcast" }
        if let home = env["HOME"], home.hasPrefix("/") { return home + "/.cache/farcast" }
        return nil
    }

    /// `$XDG_CACHE_HOME/farcast/jellyfin-images`, else `~/.cache/farcast/jellyfin-images`.
    static func imageCache(maxMegabytes: Int) throws -> ImageCache {
        guard let base = cacheFolder else {
            throw CommandFailure(message: "cannot find a cache folder: set XDG_CACHE_HOME or HOME, or use --no-cache")
        }
        return try ImageCache(directory: base + "/jellyfin-images", maxBytes: maxMegabytes << 20)
    }

    /// Finds an item by id (32 hex digits, or a dashed GUID) or by name: a library view first,
    /// then anything whose name matches exactly, then the first search hint.
    static func resolveItem(_ text: String, in session: JellyfinSession) async throws -> JellyfinItem {
        let compact = text.replacingOccurrences(of: "-", with: "")
        if compact.count == 32, compact.allSatisfy(\.isHexDigit) {
            return try await session.item(compact.lowercased())
        }
        let views = try await session.views()
        if let view = views.first(where: { $0.name.caseInsensitiveCompare(text) == .orderedSame }) { return view }
        let hints = try await session.searchHints(text, limit: 20)
        guard let hint = hints.first(where: { $0.name.caseInsensitiveCompare(text) == .orderedSame }) ?? hints.first else {
            throw CommandFailure(message: "nothing called '\(text)' on the server (try `farcast jellyfin search`)")
        }
        return try await session.item(hint.id)
    }

    /// The offline index, when anything was ever downloaded (nil otherwise: nothing to open).
    static func existingOfflineLibrary() throws -> OfflineLibrary? {
        let path = OfflineLibrary.defaultPath()
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do { return try OfflineLibrary(path: path) } catch { throw CommandFailure(message: describe(error)) }
    }

    /// Sends what was played offline for this server and user, when anything waits; notes on
    /// stderr say what became of it (a sync that fails is no failure of the command).
    static func syncOffline(_ session: JellyfinSession, account: OfflineAccount) async {
        guard let library = try? existingOfflineLibrary(),
              (try? library.hasPendingProgress(serverId: account.serverId, userId: account.userId)) == true else { return }
        do {
            let results = try await session.syncOfflineProgress(library, serverId: account.serverId)
            // Nothing reached the server (it is away): one line, not one per item.
            if let first = results.first, case .failed(let reason) = first.outcome {
                let count = results.count
                FileHandle.standardError.write(Data("farcast: note: \(count == 1 ? "a position" : "\(count) positions") played offline not synced yet (\(reason))\n".utf8))
                return
            }
            for line in syncLines(results) {
                FileHandle.standardError.write(Data("farcast: note: \(line)\n".utf8))
            }
        } catch {
            FileHandle.standardError.write(Data("farcast: note: offline playback not synced: \(describe(error))\n".utf8))
        }
    }

    /// A sync's results in words, one line per item.
    static func syncLines(_ results: [OfflineSyncResult]) -> [String] {
        results.map { result in
            let name = result.name ?? result.itemId
            let at = formatTicks(result.positionTicks)
            switch result.outcome {
            case .sent(let data):
                return data.played ? "\(name): played offline to \(at), now marked played on the server"
                                   : "\(name): played offline to \(at), now the server's resume point (\(formatTicks(data.playbackPositionTicks)))"
            case .serverNewer: return "\(name): the server's own later playback kept (the offline position \(at) is older)"
            case .itemGone: return "\(name): no longer on the server; its offline position is dropped"
            case .failed(let reason): return "\(name): not synced yet (\(reason.isEmpty ? "an earlier item failed" : reason))"
            }
        }
    }

    static func duration(_ seconds: Double) -> Duration { .milliseconds(Int64(seconds * 1000)) }

    /// Runs `body` until it returns, Ctrl-C, or `seconds` pass (whichever is first); returns
    /// the failure `body` reports (a description: errors are not Sendable), nil otherwise.
    static func untilStopped(after seconds: Double?, _ body: @escaping @Sendable () async -> String?) async -> String? {
        let (stop, stopSink) = AsyncStream.makeStream(of: Void.self)
        let watcher = SignalWatcher { _ in stopSink.yield() }
        defer { watcher.cancel() }
        return await withTaskGroup(of: String?.self) { group in
            group.addTask { await body() }
            group.addTask {
                for await _ in stop { return nil }
                return nil
            }
            if let seconds {
                group.addTask {
                    try? await Task.sleep(for: duration(seconds))
                    return nil
                }
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            stopSink.finish()
            return first
        }
    }
}

/// One item as the listing commands print it (JSON keys become snake_case).
struct ItemRow: Encodable {
    var id: String
    var name: String
    var type: String
    var year: Int?
    var series: String?
    /// An episode's season and number, a season's number.
    var season: Int?
    var episode: Int?
    /// A track's disc and number.
    var disc: Int?
    var track: Int?
    var runtimeSeconds: Double?
    var played: Bool?
    var favourite: Bool?
    var positionSeconds: Double?
    var childCount: Int?
    var collectionType: String?

    // Spelled as the JSON shows them (listing writes thousands of rows: no key conversion per row).
    enum CodingKeys: String, CodingKey {
        case id, name, type, year, series, season, episode, disc, track, played, favourite
        case runtimeSeconds = "runtime_seconds", positionSeconds = "position_seconds", childCount = "child_count"
        case collectionType = "collection_type"
    }

    init(_ item: JellyfinItem) {
        id = item.id
        name = item.name
        type = item.kind.rawValue
        year = item.productionYear
        series = item.seriesName
        // The two index numbers mean different things by kind; other kinds carry neither.
        switch item.kind {
        case .episode: (season, episode) = (item.parentIndexNumber, item.indexNumber)
        case .season: season = item.indexNumber
        case .audio: (disc, track) = (item.parentIndexNumber, item.indexNumber)
        default: break
        }
        runtimeSeconds = item.runTimeTicks.map { Double($0) / 10_000_000 }
        played = item.userData?.played
        favourite = item.userData?.isFavorite
        positionSeconds = item.userData.flatMap { $0.playbackPositionTicks > 0 ? Double($0.playbackPositionTicks) / 10_000_000 : nil }
        childCount = item.childCount
        collectionType = item.collectionType
    }
}

/// Prints rows as an aligned table (long cells cut with "…").
func printTable(_ header: [String], _ rows: [[String]], maxWidth: Int = 48) {
    let cut: ([String]) -> [String] = { $0.map { $0.count > maxWidth ? String($0.prefix(maxWidth - 1)) + "…" : $0 } }
    let all = [header] + rows.map(cut)
    var widths = [Int](repeating: 0, count: header.count)
    for row in all { for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) } }
    for row in all {
        let line = row.enumerated().map { i, cell in i == row.count - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
        var text = line.joined(separator: "  ")
        while text.hasSuffix(" ") { text.removeLast() }
        print(text)
    }
}

func itemTable(_ items: [JellyfinItem], total: Int? = nil) {
    printTable(["ID", "TYPE", "NAME", "YEAR", "RUNTIME", "STATE"], items.map { item in
        var name = item.name
        if item.kind == .episode, let series = item.seriesName {
            name = "\(series) S\(item.parentIndexNumber.map(String.init) ?? "?")E\(item.indexNumber.map(String.init) ?? "?") \(item.name)"
        }
        var state: [String] = []
        if item.userData?.played == true { state.append("played") }
        if item.userData?.isFavorite == true { state.append("favourite") }
        if let ticks = item.userData?.playbackPositionTicks, ticks > 0 { state.append("at \(formatTicks(ticks))") }
        if let count = item.childCount, item.isFolder { state.append("\(count) items") }
        return [item.id, item.kind.rawValue, name, item.productionYear.map(String.init) ?? "", item.runTimeTicks.map(formatTicks) ?? "", state.joined(separator: ", ")]
    })
    if let total, total > items.count { print("(\(items.count) of \(total); use --limit for more)") }
}

/// Table rows with fixed columns, for output printed page by page.
func printItemRows(_ items: [JellyfinItem], header: Bool) {
    func pad(_ text: String, _ width: Int) -> String {
        let cut = text.count > width ? String(text.prefix(width - 1)) + "…" : text
        return cut.padding(toLength: width, withPad: " ", startingAt: 0)
    }
    if header { print(pad("ID", 32) + "  " + pad("TYPE", 12) + "  " + pad("NAME", 48) + "  " + pad("YEAR", 4) + "  RUNTIME") }
    for item in items {
        var name = item.name
        if item.kind == .episode, let series = item.seriesName {
            name = "\(series) S\(item.parentIndexNumber.map(String.init) ?? "?")E\(item.indexNumber.map(String.init) ?? "?") \(item.name)"
        }
        print(pad(item.id, 32) + "  " + pad(item.kind.rawValue, 12) + "  " + pad(name, 48) + "  " + pad(item.productionYear.map(String.init) ?? "", 4)
              + "  " + (item.runTimeTicks.map(formatTicks) ?? ""))
    }
}

func formatTicks(_ ticks: Int64) -> String {
    let seconds = Int(ticks / 10_000_000)
    return seconds >= 3600 ? String(format: "%d:%02d:%02d", seconds / 3600, seconds / 60 % 60, seconds % 60) : String(format: "%d:%02d", seconds / 60, seconds % 60)
}
