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

// MARK: - discover

struct JellyfinDiscoverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover",
        abstract: "Find Jellyfin servers on the local network (UDP broadcast on port 7359).",
        discussion: """
            Sends "who is JellyfinServer?" to the broadcast address (or to each --address) and lists the servers that answer within the timeout. Servers answer only when their Auto Discovery setting is on.

            Examples:
              farcast jellyfin discover
              farcast jellyfin discover --timeout 3 --json
              farcast jellyfin discover --address 192.168.1.20
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: ArgumentHelp("Seconds to collect answers.", valueName: "seconds"))
    var timeout: Double = 2

    @Option(name: .customLong("address"), help: ArgumentHelp("Ask this IPv4 address[:port] instead of broadcasting (repeatable).", valueName: "address"))
    var addresses: [String] = []

    func validate() throws {
        guard timeout > 0, timeout <= 60 else { throw ValidationError("--timeout must be between 0 and 60 seconds") }
    }

    func run() async throws {
        try await reportingFailures {
            var targets: [(host: String, port: UInt16)] = []
            for address in addresses {
                let parts = address.split(separator: ":", omittingEmptySubsequences: false)
                var probe = in_addr()
                guard parts.count <= 2, inet_pton(AF_INET, String(parts[0]), &probe) == 1 else {
                    throw CommandFailure(message: "--address \(address): expected an IPv4 address, optionally with :port", exitCode: 2)
                }
                var port = UDPBroadcastDiscovery.port
                if parts.count == 2 {
                    guard let value = UInt16(parts[1]), value > 0 else { throw CommandFailure(message: "--address \(address): bad port", exitCode: 2) }
                    port = value
                }
                targets.append((String(parts[0]), port))
            }
            let discovery = targets.isEmpty ? UDPBroadcastDiscovery() : UDPBroadcastDiscovery(targets: targets)
            let servers = try await discovery.discover(timeout: JellyfinCLI.duration(timeout))
            if global.json {
                try printJSONList(servers.map { DiscoveredRow(id: $0.id, name: $0.name, address: $0.address, answeredFrom: $0.endpointAddress) })
            } else if servers.isEmpty {
                FileHandleOutput.stderr("no Jellyfin server answered within \(timeout.formatted()) s\n")
            } else {
                printTable(["NAME", "ADDRESS", "ID"], servers.map { [$0.name, $0.address, $0.id] })
            }
        }
    }

    struct DiscoveredRow: Encodable {
        var id: String
        var name: String
        var address: String
        var answeredFrom: String?
    }
}

// MARK: - login / logout / servers

struct JellyfinLoginCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Sign in to a server and remember it (by password or Quick Connect).",
        discussion: """
            URL may be a host name (http and port 8096 are assumed), host:port, or a full URL with a base path (https://example.org/jellyfin). Redirects are followed and the final address is remembered. Without --user you are asked for the name (the server's public users are listed).

            Examples:
              farcast jellyfin login myserver --user alice
              farcast jellyfin login https://media.example.org --user alice --password-file ~/.config/jellyfin-pw
              farcast jellyfin login myserver --quick-connect
              farcast jellyfin login http://nas.home:8096 --ssh me@gateway.example.org --user alice
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var hosts: HostOptions

    @Argument(help: "The server's address: host[:port], http(s)://host[:port][/base], jellyfin://… or a saved host's name.")
    var url: String

    @Option(help: ArgumentHelp("The user name.", valueName: "name"))
    var user: String?

    @Option(name: .customLong("password-file"), help: ArgumentHelp("Read the password from the first line of this file.", valueName: "path"))
    var passwordFile: String?

    @Flag(name: .customLong("quick-connect"), help: "Sign in with a Quick Connect code approved from another signed-in device.")
    var quickConnect = false

    @Option(help: ArgumentHelp("Seconds to wait for each request, and for Quick Connect approval ten times as long.", valueName: "seconds"))
    var timeout: Double = 30

    @Option(name: .customLong("poll-interval"), help: ArgumentHelp("Seconds between Quick Connect checks.", valueName: "seconds"))
    var pollInterval: Double = 5

    func validate() throws {
        guard timeout > 0, timeout <= 3600 else { throw ValidationError("--timeout must be between 0 and 3600 seconds") }
        guard pollInterval >= 0.1, pollInterval <= 60 else { throw ValidationError("--poll-interval must be between 0.1 and 60 seconds") }
        if quickConnect && passwordFile != nil { throw ValidationError("--quick-connect needs no password; drop --password-file") }
    }

    func run() async throws {
        try await reportingFailures {
            // A saved host or a jellyfin:// URL goes through the one host-address path; anything
            // else is Jellyfin's own address form (a bare host, http(s)://…, a pasted web-UI URL).
            let saved = try hosts.hostAddress(url, kind: .jellyfin)
            let address: ServerAddress
            do { address = try ServerAddress(parsing: saved?.protocolURL() ?? url) } catch { throw CommandFailure(message: "\(describe(error))", exitCode: 2) }
            var password: String?
            if let passwordFile {
                let (value, warning) = try Secrets.readFirstLine(ofFile: passwordFile)
                if let warning { FileHandleOutput.stderr("farcast: warning: \(warning)\n") }
                password = value
            }
            let route = try hosts.route(for: saved)
            let transport = try await JellyfinCLI.transport(timeout: timeout, to: address, through: route, hosts: hosts)
            let probed = try await JellyfinServer(address: address, identity: try JellyfinCLI.identity(), transport: transport).probe()
            let server = probed.server
            if global.verbose > 0 { FileHandleOutput.stderr("\(probed.info.name) (Jellyfin \(probed.info.version)) at \(server.address)\n") }

            let session: JellyfinSession
            if quickConnect {
                let watcher = SignalWatcher { _ in Foundation.exit(130) }
                defer { watcher.cancel() }
                session = try await server.signInWithQuickConnect(timeout: JellyfinCLI.duration(timeout * 10), pollInterval: JellyfinCLI.duration(pollInterval)) { code in
                    FileHandleOutput.stderr("Quick Connect code: \(code)\nApprove it from a signed-in Jellyfin app (Settings → Quick Connect); waiting…\n")
                }
            } else {
                var name = user
                if name == nil {
                    let users = (try? await server.publicUsers()) ?? []
                    if !users.isEmpty { FileHandleOutput.stderr("users: \(users.map(\.name).joined(separator: ", "))\n") }
                    name = Secrets.prompt("User name: ", echo: true)
                }
                guard let name, !name.isEmpty else {
                    throw CommandFailure(message: "no user name: pass --user NAME (or use --quick-connect)", exitCode: 2)
                }
                if password == nil { password = ProcessInfo.processInfo.environment["FARCAST_JELLYFIN_PASSWORD"] }
                if password == nil, saved != nil { password = hosts.savedPassword(url, logger: HostOptions.logger(global)) }
                if password == nil { password = Secrets.prompt("Password for \(name) on \(probed.info.name): ") }
                guard let password else {
                    throw CommandFailure(message: "no password: there is no terminal to ask on; use --password-file or FARCAST_JELLYFIN_PASSWORD", exitCode: 2)
                }
                session = try await server.signIn(userName: name, password: password)
            }
            let store = try JellyfinCLI.store()
            var remembered = try store.load()
            remembered.remember(server: .init(id: session.serverId ?? probed.info.id, name: probed.info.name, url: server.address.description,
                                              ssh: route?.description),
                                user: RememberedUser(id: session.userId, name: session.userName, token: session.accessToken))
            try store.save(remembered)
            hosts.markConnected(url)
            let result = LoginResult(server: probed.info.name, serverId: session.serverId ?? probed.info.id, url: server.address.description,
                                     version: probed.info.version, user: session.userName, userId: session.userId)
            if global.json { try printJSON(result) } else { print("signed in to \(result.server) as \(result.user)") }
        }
    }

    struct LoginResult: Encodable {
        var server: String
        var serverId: String
        var url: String
        var version: String
        var user: String
        var userId: String
    }
}

struct JellyfinLogoutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout",
        abstract: "Sign out (the server revokes the token) and forget the user.",
        discussion: """
            The user is forgotten even when the server cannot be reached (the token then stays valid on the server until an administrator revokes it; you are told so).

            Examples:
              farcast jellyfin logout
              farcast jellyfin logout --server Living-Room --user bob
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            var warning: String?
            do {
                try await session.signOut()
            } catch JellyfinError.signedOutByServer {
                // Already gone on the server: nothing to revoke.
            } catch {
                warning = "could not tell the server (\(describe(error))); the token stays valid there until revoked"
            }
            let store = try JellyfinCLI.store()
            var remembered = try store.load()
            remembered.forget(serverId: session.serverId ?? "", userId: session.userId)
            try store.save(remembered)
            if let warning { FileHandleOutput.stderr("farcast: warning: \(warning)\n") }
            if global.json {
                try printJSON(LogoutResult(user: session.userName, server: session.server.address.description, serverNotified: warning == nil))
            } else {
                print("signed out \(session.userName) from \(session.server.address)")
            }
        }
    }

    struct LogoutResult: Encodable {
        var user: String
        var server: String
        var serverNotified: Bool
    }
}

struct JellyfinServersCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "servers",
        abstract: "List the remembered servers and users (tokens are not shown).",
        discussion: """
            The current server and user (used when --server/--user are not given) are marked with *.

            Examples:
              farcast jellyfin servers
              farcast jellyfin servers --json
            """
    )

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            let remembered = try JellyfinCLI.store().load()
            let rows = remembered.servers.map { server in
                ServerRow(id: server.id, name: server.name, url: server.url, ssh: server.ssh, current: server.id == remembered.current,
                          users: server.users.map { UserRow(id: $0.id, name: $0.name, current: $0.id == server.currentUser) })
            }
            if global.json { try printJSONList(rows); return }
            guard !rows.isEmpty else { print("no servers remembered; sign in with `farcast jellyfin login URL`"); return }
            // The SSH route has a column of its own: appended to the URL it was cut at the
            // column's width, port and all.
            let anyRoute = rows.contains { $0.ssh != nil }
            printTable(["", "SERVER", "URL"] + (anyRoute ? ["VIA SSH"] : []) + ["USERS", "ID"], rows.map { row in
                [row.current ? "*" : "", row.name, row.url] + (anyRoute ? [row.ssh ?? "-"] : [])
                    + [row.users.map { ($0.current ? "*" : "") + $0.name }.joined(separator: ", "), row.id]
            })
        }
    }

    struct ServerRow: Encodable {
        var id: String
        var name: String
        var url: String
        var ssh: String?
        var current: Bool
        var users: [UserRow]
    }

    struct UserRow: Encodable {
        var id: String
        var name: String
        var current: Bool
    }
}

// MARK: - browse

struct JellyfinLibrariesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "libraries",
        abstract: "List the user's libraries (views).",
        discussion: """
            Examples:
              farcast jellyfin libraries
              farcast jellyfin libraries --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    func run() async throws {
        try await reportingFailures {
            let views = try await target.session().views()
            if global.json { try printJSONList(views.map(ItemRow.init)); return }
            printTable(["ID", "NAME", "KIND"], views.map { [$0.id, $0.name, $0.collectionType ?? $0.kind.rawValue] })
        }
    }
}

struct JellyfinListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List a library, a folder, a series, a season or an album; or everything of a type.",
        discussion: """
            VIEW|ITEM is a library name (Movies), an item's name (a series, an album) or its id. Without it, items of every library are listed (use --type to narrow). Items are fetched page by page as they are printed.

            Examples:
              farcast jellyfin ls Movies
              farcast jellyfin ls --type episode --sort added --descending --limit 20
              farcast jellyfin ls "Signal Tests"              # its seasons
              farcast jellyfin ls Shows --type episode --recursive --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: ArgumentHelp("A library or item: name or id.", valueName: "VIEW|ITEM"))
    var parent: String?

    @Option(name: .customLong("type"), parsing: .upToNextOption,
            help: ArgumentHelp("Only items of these types: movie, series, season, episode, audio, album, artist, video, boxset, playlist, folder…", valueName: "type"))
    var types: [String] = []

    @Option(help: ArgumentHelp("Order by: name, year, added, premiere, played, rating, runtime, index, random (or a server field name). Default: a series' seasons, a season's episodes and an album's tracks by number, the rest by name.", valueName: "field"))
    var sort: String?

    @Flag(help: "Largest/newest first.")
    var descending = false

    @Flag(help: "Include items in sub-folders (implied by --type without VIEW|ITEM).")
    var recursive = false

    @Flag(help: "Only favourites.")
    var favourites = false

    @Option(help: ArgumentHelp("At most this many items (0: all).", valueName: "n"))
    var limit: Int = 100

    @Option(name: .customLong("page-size"), help: ArgumentHelp("Items fetched per request.", valueName: "n"))
    var pageSize: Int = 200

    func validate() throws {
        guard limit >= 0 else { throw ValidationError("--limit must be 0 or more") }
        guard (1...10_000).contains(pageSize) else { throw ValidationError("--page-size must be between 1 and 10000") }
        for type in types where ItemKind.parse(type) == nil {
            throw ValidationError("--type \(type): not an item type (movie, series, season, episode, audio, album, artist, video, boxset, playlist, folder)")
        }
        if let sort, ItemSortField.parse(sort) == nil {
            throw ValidationError("--sort \(sort): use name, year, added, premiere, played, rating, runtime, index or random")
        }
    }

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            var query = ItemQuery()
            query.types = types.compactMap(ItemKind.parse)
            if let sort { query.sortBy = [ItemSortField.parse(sort) ?? .sortName] }
            query.descending = descending
            query.favouritesOnly = favourites
            query.pageSize = pageSize
            query.limit = limit == 0 ? nil : limit
            if let parent {
                let item = try await JellyfinCLI.resolveItem(parent, in: session)
                guard item.isFolder else { throw CommandFailure(message: "'\(item.name)' is a \(item.kind) and holds nothing to list; try `farcast jellyfin info`") }
                query.parentId = item.id
                query.recursive = recursive
                if sort == nil { query.sortBy = ItemQuery.defaultSort(inside: item.kind) }
            } else {
                query.recursive = recursive || !query.types.isEmpty
            }
            // Streamed page by page (memory stays at a page or two whatever the library's size):
            // one JSON object written as the pages arrive, or table rows with fixed columns.
            var first = true
            var printed = 0
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            for try await page in session.itemPages(query) {
                if global.json {
                    if first { print("{\"total\":\(page.totalRecordCount.map(String.init) ?? "null"),\"items\":[", terminator: "") }
                    if !page.items.isEmpty {
                        // One encoding per page: its array's elements, without the brackets.
                        let rows = try encoder.encode(page.items.map(ItemRow.init)).dropFirst().dropLast()
                        print((printed == 0 ? "" : ",") + String(decoding: rows, as: UTF8.self), terminator: "")
                        printed += page.items.count
                    }
                } else {
                    if first && page.items.isEmpty {
                        print("(nothing)")
                        break
                    }
                    printItemRows(page.items, header: first)
                    printed += page.items.count
                    if let total = page.totalRecordCount, first, total > (query.limit ?? Int.max) {
                        FileHandleOutput.stderr("(\(min(total, query.limit ?? total)) of \(total); use --limit for more, 0 for all)\n")
                    }
                }
                first = false
            }
            if global.json { print("]}") }
        }
    }
}

struct JellyfinSearchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Search the server's libraries by name.",
        discussion: """
            Examples:
              farcast jellyfin search tone
              farcast jellyfin search "signal tests" --limit 5 --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: "What to look for.")
    var text: String

    @Option(help: ArgumentHelp("At most this many results.", valueName: "n"))
    var limit: Int = 20

    func validate() throws {
        guard !text.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("the search text is empty") }
        guard (1...1000).contains(limit) else { throw ValidationError("--limit must be between 1 and 1000") }
    }

    func run() async throws {
        try await reportingFailures {
            let hints = try await target.session().searchHints(text, limit: limit)
            if global.json {
                try printJSONList(hints.map { HintRow(id: $0.id, name: $0.name, type: $0.kind.rawValue, year: $0.productionYear, series: $0.series, album: $0.album) })
            } else if hints.isEmpty {
                print("(nothing matches '\(text)')")
            } else {
                printTable(["ID", "TYPE", "NAME", "YEAR", "IN"], hints.map { [$0.id, $0.kind.rawValue, $0.name, $0.productionYear.map(String.init) ?? "", $0.series ?? $0.album ?? ""] })
            }
        }
    }

    struct HintRow: Encodable {
        var id: String
        var name: String
        var type: String
        var year: Int?
        var series: String?
        var album: String?
    }
}

struct JellyfinInfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show one item in detail: metadata, media streams, images, the user's state.",
        discussion: """
            Examples:
              farcast jellyfin info "Test Pattern"
              farcast jellyfin info 5d9c1e0f3a2b4c6d8e7f901a2b3c4d5e --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: ArgumentHelp("The item: name or id.", valueName: "ITEM"))
    var item: String

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            let item = try await JellyfinCLI.resolveItem(item, in: session)
            let detail = InfoResult(item)
            if global.json { try printJSON(detail); return }
            print("\(item.name)  [\(item.kind)]")
            var lines: [(String, String)] = [("id", item.id)]
            if let series = item.seriesName { lines.append(("series", series + (item.parentIndexNumber.map { ", season \($0)" } ?? "") + (item.indexNumber.map { ", episode \($0)" } ?? ""))) }
            if let album = item.album { lines.append(("album", album + (item.albumArtist.map { " by \($0)" } ?? ""))) }
            if let year = item.productionYear { lines.append(("year", String(year))) }
            if let ticks = item.runTimeTicks { lines.append(("runtime", formatTicks(ticks))) }
            if !item.genres.isEmpty { lines.append(("genres", item.genres.joined(separator: ", "))) }
            if let container = item.container { lines.append(("container", container)) }
            for stream in item.mediaStreams {
                var text = (stream.index.map { "\($0): " } ?? "") + "\(stream.type) \(stream.codec ?? "?")"
                if let w = stream.width, let h = stream.height { text += " \(w)×\(h)" }
                if let range = stream.videoRangeType, stream.type == "Video" { text += " \(range)" }
                if let channels = stream.channels { text += " \(channels) ch" }
                if let rate = stream.sampleRate { text += " \(rate) Hz" }
                if let language = stream.language, language != "und", stream.type != "Video" { text += " \(language)" }
                if let title = stream.title { text += " \"\(title)\"" }
                if stream.isExternal { text += " (external)" }
                lines.append(("stream", text))
            }
            for (type, tag) in item.imageTags.sorted(by: { $0.key < $1.key }) {
                lines.append(("image", "\(type) tag \(tag)" + (item.blurHash(for: ImageType(rawValue: type)).map { " blurhash \($0)" } ?? "")))
            }
            if let data = item.userData {
                var state = [data.played ? "played" : "not played"]
                if data.isFavorite { state.append("favourite") }
                if data.playbackPositionTicks > 0 { state.append("resume at \(formatTicks(data.playbackPositionTicks))") }
                if data.playCount > 0 { state.append("played \(data.playCount)×") }
                lines.append(("state", state.joined(separator: ", ")))
            }
            if let overview = item.overview { lines.append(("overview", overview)) }
            for (key, value) in lines { print("  \(key.padding(toLength: 10, withPad: " ", startingAt: 0)) \(value)") }
        }
    }

    struct InfoResult: Encodable {
        var id: String
        var name: String
        var type: String
        var year: Int?
        var series: String?
        var season: Int?
        var episode: Int?
        var album: String?
        var albumArtist: String?
        var runtimeSeconds: Double?
        var overview: String?
        var genres: [String]
        var container: String?
        var streams: [StreamRow]
        var images: [String: String]
        var blurHashes: [String: String]
        var played: Bool?
        var favourite: Bool?
        var positionSeconds: Double?
        var playCount: Int?
        var lastPlayed: Date?
        var parentId: String?

        init(_ item: JellyfinItem) {
            id = item.id
            name = item.name
            type = item.kind.rawValue
            year = item.productionYear
            series = item.seriesName
            season = item.parentIndexNumber
            episode = item.indexNumber
            album = item.album
            albumArtist = item.albumArtist
            runtimeSeconds = item.runTimeTicks.map { Double($0) / 10_000_000 }
            overview = item.overview
            genres = item.genres
            container = item.container
            streams = item.mediaStreams.map {
                StreamRow(index: $0.index, type: $0.type, codec: $0.codec, width: $0.width, height: $0.height, channels: $0.channels,
                          sampleRate: $0.sampleRate, videoRange: $0.videoRangeType?.rawValue, language: $0.language, title: $0.title,
                          external: $0.isExternal)
            }
            images = item.imageTags
            var hashes: [String: String] = [:]
            for type in item.imageTags.keys { if let hash = item.blurHash(for: ImageType(rawValue: type)) { hashes[type] = hash } }
            blurHashes = hashes
            played = item.userData?.played
            favourite = item.userData?.isFavorite
            positionSeconds = item.userData.map { Double($0.playbackPositionTicks) / 10_000_000 }
            playCount = item.userData?.playCount
            lastPlayed = item.userData?.lastPlayedDate
            parentId = item.parentId
        }
    }

    struct StreamRow: Encodable {
        /// What `play --audio` and `--subtitle` take.
        var index: Int?
        var type: String
        var codec: String?
        var width: Int?
        var height: Int?
        var channels: Int?
        var sampleRate: Int?
        var videoRange: String?
        var language: String?
        var title: String?
        var external: Bool
    }
}

struct JellyfinResumeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume",
        abstract: "List items started but not finished (Continue Watching).",
        discussion: """
            Examples:
              farcast jellyfin resume
              farcast jellyfin resume --limit 5 --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Option(help: ArgumentHelp("At most this many items.", valueName: "n"))
    var limit: Int = 20

    func validate() throws { guard (1...1000).contains(limit) else { throw ValidationError("--limit must be between 1 and 1000") } }

    func run() async throws {
        try await reportingFailures {
            let items = try await target.session().resumeItems(limit: limit)
            if global.json { try printJSONList(items.map(ItemRow.init)) } else if items.isEmpty { print("(nothing to resume)") } else { itemTable(items) }
        }
    }
}

struct JellyfinNextUpCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "next-up",
        abstract: "List the next episode to watch in each series you have started.",
        discussion: """
            Examples:
              farcast jellyfin next-up
              farcast jellyfin next-up --series "Signal Tests" --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Option(help: ArgumentHelp("Only this series (name or id).", valueName: "series"))
    var series: String?

    @Option(help: ArgumentHelp("At most this many items.", valueName: "n"))
    var limit: Int = 20

    func validate() throws { guard (1...1000).contains(limit) else { throw ValidationError("--limit must be between 1 and 1000") } }

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            var seriesId: String?
            if let series { seriesId = try await JellyfinCLI.resolveItem(series, in: session).id }
            let items = try await session.nextUp(limit: limit, seriesId: seriesId)
            if global.json { try printJSONList(items.map(ItemRow.init)) } else if items.isEmpty { print("(nothing up next)") } else { itemTable(items) }
        }
    }
}

struct JellyfinMarkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mark",
        abstract: "Mark an item played, unplayed, favourite or not favourite.",
        discussion: """
            Examples:
              farcast jellyfin mark "Pilot Tone" played
              farcast jellyfin mark "Test Pattern" favourite
              farcast jellyfin mark 5d9c1e0f3a2b4c6d8e7f901a2b3c4d5e unfavourite --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: ArgumentHelp("The item: name or id.", valueName: "ITEM"))
    var item: String

    @Argument(help: ArgumentHelp("played, unplayed, favourite or unfavourite.", valueName: "STATE"))
    var state: String

    func validate() throws {
        guard ["played", "unplayed", "favourite", "favorite", "unfavourite", "unfavorite"].contains(state.lowercased()) else {
            throw ValidationError("STATE must be played, unplayed, favourite or unfavourite")
        }
    }

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            let resolved = try await JellyfinCLI.resolveItem(item, in: session)
            let data: UserItemData
            switch state.lowercased() {
            case "played": data = try await session.setPlayed(resolved.id, true)
            case "unplayed": data = try await session.setPlayed(resolved.id, false)
            case "favourite", "favorite": data = try await session.setFavourite(resolved.id, true)
            default: data = try await session.setFavourite(resolved.id, false)
            }
            if global.json {
                try printJSON(MarkResult(id: resolved.id, name: resolved.name, played: data.played, favourite: data.isFavorite, playCount: data.playCount))
            } else {
                print("\(resolved.name): \(data.played ? "played" : "not played")\(data.isFavorite ? ", favourite" : "")")
            }
        }
    }

    struct MarkResult: Encodable {
        var id: String
        var name: String
        var played: Bool
        var favourite: Bool
        var playCount: Int
    }
}

struct JellyfinImageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image",
        abstract: "Save an item's image (poster, backdrop, …) to a file.",
        discussion: """
            Images are kept in a cache bounded in size ($XDG_CACHE_HOME/farcast/jellyfin-images, else ~/.cache/…), keyed by the image's tag, which changes when the image does.

            Examples:
              farcast jellyfin image "Test Pattern" -o poster.jpg
              farcast jellyfin image "Signal Tests" --type Primary --max-width 300 -o show.jpg --json
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Argument(help: ArgumentHelp("The item: name or id.", valueName: "ITEM"))
    var item: String

    @Option(name: .shortAndLong, help: ArgumentHelp("Where to write the image; '-' writes it to standard output.", valueName: "file"))
    var output: String

    @Option(name: .customLong("type"), help: ArgumentHelp("Primary, Backdrop, Thumb, Logo, Banner, Art, Disc or Screenshot.", valueName: "type"))
    var imageType: String = "Primary"

    @Option(name: .customLong("max-width"), help: ArgumentHelp("Ask the server to scale the image down to this width.", valueName: "pixels"))
    var maxWidth: Int?

    @Flag(name: .customLong("no-cache"), help: "Neither read nor fill the image cache.")
    var noCache = false

    @Option(name: .customLong("cache-size"), help: ArgumentHelp("The cache's bound in MiB.", valueName: "MiB"))
    var cacheMegabytes: Int = 256

    func validate() throws {
        guard ImageType.matching(imageType) != nil else { throw ValidationError("--type must be one of \(ImageType.known.map(\.rawValue).joined(separator: ", "))") }
        if let maxWidth { guard (1...20_000).contains(maxWidth) else { throw ValidationError("--max-width must be between 1 and 20000") } }
        guard (1...100_000).contains(cacheMegabytes) else { throw ValidationError("--cache-size must be between 1 and 100000 MiB") }
        do { try OutputPath.check(output, what: "image") } catch let failure as CommandFailure { throw ValidationError(failure.message) }
    }

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            let resolved = try await JellyfinCLI.resolveItem(item, in: session)
            let type = ImageType.matching(imageType) ?? .primary
            guard let tag = resolved.imageTags[type.rawValue] else {
                throw CommandFailure(message: "'\(resolved.name)' has no \(type) image")
            }
            let cache = noCache ? nil : try JellyfinCLI.imageCache(maxMegabytes: cacheMegabytes)
            let image = try await session.image(itemId: resolved.id, type: type, tag: tag, maxWidth: maxWidth, cache: cache)
            try OutputPath.save(image.bytes, to: output, what: "image")
            if output == "-" {
                // The image is the output; the report goes to stderr unless asked for nothing.
                if !global.quiet { FileHandleOutput.stderr("wrote \(image.bytes.count) bytes to standard output\(image.fromCache ? " (from the cache)" : "")\n") }
            } else if global.json {
                try printJSON(ImageResult(id: resolved.id, name: resolved.name, type: type.rawValue, tag: tag, bytes: image.bytes.count,
                                          file: output, fromCache: image.fromCache, blurHash: resolved.blurHash(for: type)))
            } else {
                print("wrote \(output) (\(image.bytes.count) bytes\(image.fromCache ? ", from the cache" : ""))")
            }
        }
    }

    struct ImageResult: Encodable {
        var id: String
        var name: String
        var type: String
        var tag: String
        var bytes: Int
        var file: String
        var fromCache: Bool
        var blurHash: String?
    }
}

// MARK: - events

struct JellyfinEventsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "Print the live session's messages (sessions, user data, library changes, remote-control commands).",
        discussion: """
            Connects the WebSocket (/socket with ApiKey=), posts this client's capabilities so it can be remote-controlled, keeps the connection alive as the server asks and reconnects with back-off when it drops. Runs until Ctrl-C, --count messages or --duration seconds. With --json one object whose items array holds every event is printed at the end.

            Examples:
              farcast jellyfin events
              farcast jellyfin events --count 5 --json
              farcast jellyfin events --duration 60 --sessions
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: JellyfinTarget

    @Option(help: ArgumentHelp("Stop after this many messages.", valueName: "n"))
    var count: Int?

    @Option(help: ArgumentHelp("Stop after this many seconds.", valueName: "seconds"))
    var duration: Double?

    @Flag(inversion: .prefixedNo, help: "Subscribe to the periodic Sessions message (every 1.5 s: who is watching what); off unless asked.")
    var sessions = false

    @Flag(name: .customLong("keep-alives"), help: "Also print ForceKeepAlive and KeepAlive messages.")
    var keepAlives = false

    func validate() throws {
        if let count { guard count > 0 else { throw ValidationError("--count must be positive") } }
        if let duration { guard duration > 0 else { throw ValidationError("--duration must be positive") } }
    }

    func run() async throws {
        try await reportingFailures {
            let session = try await target.session()
            var options = LiveSessionCore.Options()
            options.subscribeToSessions = sessions
            let stream = session.liveEvents(options: options)
            let collected = Locked<[EventRow]>([])
            let json = global.json
            let limit = count
            let showKeepAlives = keepAlives
            let failure = await JellyfinCLI.untilStopped(after: duration) {
                var delivered = 0
                do {
                    for try await event in stream {
                        let row = EventRow(event)
                        if case .message(let message) = event {
                            if !showKeepAlives, message == .keepAlive || message.messageType == "ForceKeepAlive" { continue }
                            delivered += 1
                        }
                        if json { collected.withLock { $0.append(row) } } else { printEvent(row) }
                        if let limit, delivered >= limit { return nil }
                    }
                    return nil
                } catch {
                    return describe(error)
                }
            }
            if json { try printJSONList(collected.value) }
            if let failure { throw CommandFailure(message: failure) }
        }
    }

    struct EventRow: Encodable {
        var event: String
        var messageType: String?
        var detail: String?
        var time: String

        init(_ event: LiveEvent) {
            time = JellyfinDateTranscoder.format(Date())
            switch event {
            case .connected(let url):
                self.event = "connected"
                detail = url
            case .disconnected(let reason, let retry):
                self.event = "disconnected"
                detail = "\(reason); reconnecting in \(retry.inSeconds) s"
            case .problem(let error):
                self.event = "problem"
                detail = error.description
            case .message(let message):
                self.event = "message"
                messageType = message.messageType
                detail = describe(message)
            }
        }
    }
}

private func describe(_ message: LiveMessage) -> String? {
    switch message {
    case .forceKeepAlive(let seconds): return "keep alive within \(seconds) s"
    case .keepAlive, .serverRestarting, .serverShuttingDown, .other: return nil
    case .sessions(let sessions):
        return sessions.map { "\($0.userName ?? "?")@\($0.deviceName ?? "?") (\($0.client ?? "?"))" + ($0.nowPlaying.map { " playing \($0)" } ?? "") }.joined(separator: "; ")
    case .userDataChanged(_, let changes):
        return changes.map { change in
            var parts = [change.itemId]
            if let played = change.played { parts.append(played ? "played" : "unplayed") }
            if let favourite = change.isFavorite { parts.append(favourite ? "favourite" : "not favourite") }
            return parts.joined(separator: " ")
        }.joined(separator: "; ")
    case .libraryChanged(let change):
        return "added \(change.itemsAdded.count), updated \(change.itemsUpdated.count), removed \(change.itemsRemoved.count)"
    case .play(let request): return "\(request.playCommand) \(request.itemIds.joined(separator: ","))"
    case .playstate(let request): return request.command + (request.seekPositionTicks.map { " to \(formatTicks($0))" } ?? "")
    case .generalCommand(let command):
        return command.name + (command.arguments.isEmpty ? "" : " " + command.arguments.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))
    case .syncPlayCommand(let command):
        return "\(command.command) at \(formatTicks(command.positionTicks))"
    case .syncPlayGroupUpdate(let update):
        return update.type
    }
}

private func printEvent(_ row: JellyfinEventsCommand.EventRow) {
    var line = "\(row.time.prefix(19).replacingOccurrences(of: "T", with: " "))  \(row.messageType ?? row.event)"
    if let detail = row.detail, !detail.isEmpty { line += "  \(detail)" }
    // Unbuffered: a person (or a pipe) watching the stream sees each message as it arrives.
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
