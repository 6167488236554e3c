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
