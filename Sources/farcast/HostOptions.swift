import ArgumentParser
import FarcastSupport
import Foundation
import Hosts
import Logging
import RFB
import Synchronization

/// How a command that connects reaches its host: `--ssh user@bastion[:port]` (a local forwarder
/// like `ssh -L`), `--accept-new` for an SSH host key seen for the first time, and where SSH
/// secrets come from. The server argument may also be a saved host's name or a URL with
/// `?ssh=` (docs/hosts.md).
struct HostOptions: ParsableArguments {
    @Option(name: .customLong("ssh"), help: ArgumentHelp("Carry the connection through this SSH server (the target is resolved and connected on its side), with your own ssh where there is one (see --ssh-via); ~/.ssh/config applies.", valueName: "user@host[:port]"))
    var ssh: String?

    @Option(name: .customLong("ssh-via"), help: ArgumentHelp("Which SSH client carries --ssh: openssh (your own ssh: agent, RSA keys, one-time codes, certificates, ProxyJump chains, ControlMaster; FARCAST_SSH_COMMAND sets the program and its first arguments), builtin (farcast's own, for machines without ssh), or auto: openssh when an ssh program is on PATH, else builtin. Default: a saved host's choice, else auto.", valueName: "auto|openssh|builtin"))
    var sshVia: SSHVia?

    @Flag(name: .customLong("accept-new"), help: "Accept an SSH host key that ~/.ssh/known_hosts does not list yet, and add it there (a changed key is still refused).")
    var acceptNew = false

    @Option(name: .customLong("ssh-identity"), help: ArgumentHelp("An SSH private key file to offer first (repeatable; ssh's -i); then ~/.ssh/config's IdentityFile and, with OpenSSH, the agent's keys.", valueName: "path"))
    var sshIdentity: [String] = []

    @Option(name: .customLong("ssh-password-file"), help: ArgumentHelp("Read the SSH password from the first line of this file (the built-in client only; else FARCAST_SSH_PASSWORD or a prompt).", valueName: "path"))
    var sshPasswordFile: String?

    @Option(name: .customLong("ssh-passphrase-file"), help: ArgumentHelp("Read the passphrase of encrypted SSH keys from this file (the built-in client only; else FARCAST_SSH_PASSPHRASE or a prompt).", valueName: "path"))
    var sshPassphraseFile: String?

    func validate() throws {
        if let ssh {
            do { _ = try SSHRoute(parsing: ssh) } catch { throw ValidationError(describe(error)) }
        }
        for (path, what) in [(sshPasswordFile, "SSH password file"), (sshPassphraseFile, "SSH passphrase file")] {
            guard let path else { continue }
            do { _ = try Secrets.readFirstLine(ofFile: path, what: what) } catch let failure as CommandFailure { throw ValidationError(failure.message) }
        }
    }

    /// The one lookup of a server argument for every protocol (a saved name, a URL, or the
    /// protocol's own form), failing as a usage error (exit 2).
    static func lookUp(_ argument: String, kind: HostProtocol) throws -> HostArgument {
        do { return try HostArgument.lookUp(argument, as: kind) } catch { throw CommandFailure(message: error.description, exitCode: 2) }
    }

    /// A saved host named `argument`, if the argument is a name rather than an address.
    func savedHost(_ argument: String) throws -> SavedHost? {
        do { return try HostArgument.savedHost(named: argument) } catch { throw CommandFailure(message: error.description, exitCode: 2) }
    }

    /// The SSH route that applies: --ssh wins over a URL's ?ssh= and a saved host's route.
    func route(for address: HostAddress?) throws -> SSHRoute? {
        if let ssh {
            do { return try SSHRoute(parsing: ssh) } catch { throw CommandFailure(message: describe(error), exitCode: 2) }
        }
        return address?.ssh
    }

    /// The argument as a host address: a saved host, or a URL of `kind`; nil for a protocol's
    /// own address forms (`host:1`), which the caller parses.
    func hostAddress(_ argument: String, kind: HostProtocol) throws -> HostAddress? {
        try Self.lookUp(argument, kind: kind).address
    }

    /// The SSH client that carries this command: --ssh-via, or for `auto` the user's OpenSSH
    /// when an ssh program exists and no secret file or variable is given that only the built-in
    /// client can use; one line at -v says which and why.
    func transportChoice(saved: SSHVia? = nil, logger: Logger) throws -> OpenSSHCommand? {
        let command: OpenSSHCommand?
        do { command = try OpenSSHCommand.find() } catch { throw CommandFailure(message: error.description, exitCode: 2) }
        let environment = ProcessInfo.processInfo.environment
        let builtinSecrets = [(sshPasswordFile != nil, "--ssh-password-file"), (sshPassphraseFile != nil, "--ssh-passphrase-file"),
                              (environment["FARCAST_SSH_PASSWORD"] != nil, "FARCAST_SSH_PASSWORD"),
                              (environment["FARCAST_SSH_PASSPHRASE"] != nil, "FARCAST_SSH_PASSPHRASE")].filter(\.0).map(\.1)
        let source = sshVia != nil ? "--ssh-via" : "the saved host's ssh-via"
        switch sshVia ?? saved ?? .auto {
        case .builtin:
            logger.debug("SSH: the built-in client (\(source) builtin)")
            return nil
        case .openssh:
            guard let command else {
                throw CommandFailure(message: "\(source) openssh: no ssh program on PATH (apt install openssh-client) and FARCAST_SSH_COMMAND is not set", exitCode: 2)
            }
            if let secret = builtinSecrets.first {
                throw CommandFailure(message: "\(secret) is for the built-in SSH client; OpenSSH asks at the terminal or through SSH_ASKPASS (or use --ssh-via builtin)", exitCode: 2)
            }
            logger.debug("SSH: OpenSSH \(command.program) (\(source) openssh)")
            return command
        case .auto:
            guard let command else {
                logger.debug("SSH: the built-in client, because no ssh program is on PATH (FARCAST_SSH_COMMAND is not set either)")
                return nil
            }
            if let secret = builtinSecrets.first {
                logger.debug("SSH: the built-in client, because \(secret) is given, which only it reads")
                return nil
            }
            logger.debug("SSH: OpenSSH \(command.program) (found on PATH; --ssh-via builtin for farcast's own client)")
            return command
        }
    }

    /// Opens the SSH route with the client `transportChoice` picks. `ask`: where ssh's
    /// questions go when there is no terminal (a viewer window's prompt).
    func openTransport(_ route: SSHRoute, savedVia: SSHVia? = nil, timeout: Duration, logger: Logger,
                       ask: (@Sendable (String, Bool) async -> String?)? = nil) async throws -> any SSHTransport {
        guard var command = try transportChoice(saved: savedVia, logger: logger) else { return try await openSSH(route, timeout: timeout, logger: logger) }
        command.leadingArguments += sshIdentity.flatMap { ["-i", $0] }
        var options = OpenSSHTransport.Options()
        options.acceptNewHostKeys = acceptNew
        options.connectTimeout = timeout
        options.ask = ask
        options.askpassProgram = Self.ownExecutable
        return try await OpenSSHTransport.start(route: route, command: command, options: options, logger: logger)
    }

    /// This program's own path, for ssh to run as its askpass.
    static let ownExecutable: String? = {
        #if os(Linux)
        let resolved = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        #else
        let resolved = Bundle.main.executablePath
        #endif
        return resolved.flatMap { FileManager.default.isExecutableFile(atPath: $0) ? $0 : nil }
    }()

    /// Routes a command keeps open for its later connections (a viewer's reconnects), so they
    /// do not authenticate again.
    private static let openRoutes = Mutex<[String: any SSHTransport]>([:])

    /// Closes the routes kept open (`reportingFailures` does, as a command ends).
    static func closeOpenRoutes() async {
        let open = openRoutes.withLock { routes in
            defer { routes = [:] }
            return Array(routes.values)
        }
        for transport in open { await transport.close() }
    }

    /// The transport already open for `route`, else a new one (kept for the command's life).
    func sharedTransport(_ route: SSHRoute, savedVia: SSHVia?, timeout: Duration, logger: Logger,
                         ask: (@Sendable (String, Bool) async -> String?)?) async throws -> any SSHTransport {
        let key = "\(route)|\(sshVia ?? savedVia ?? .auto)"
        if let open = Self.openRoutes.withLock({ $0[key] }), open.isOpen { return open }
        let transport = try await openTransport(route, savedVia: savedVia, timeout: timeout, logger: logger, ask: ask)
        Self.openRoutes.withLock { $0[key] = transport }
        return transport
    }

    /// Opens the tunnel to `host:port` through `route`, with the secrets this command allows.
    func openTunnel(_ route: SSHRoute, savedVia: SSHVia? = nil, to host: String, port: Int, listenHost: String = "127.0.0.1", listenPort: Int = 0,
                    timeout: Duration, logger: Logger) async throws -> any SSHForwarding {
        let transport = try await openTransport(route, savedVia: savedVia, timeout: timeout, logger: logger)
        do {
            return try await transport.forward(to: host, port: port, listenHost: listenHost, listenPort: listenPort, logger: logger)
        } catch {
            await transport.close()
            throw error
        }
    }

    /// Connects to the SSH server of `route` with the secrets this command allows.
    func openSSH(_ route: SSHRoute, timeout: Duration, logger: Logger) async throws -> SSHConnection {
        var options = SSHTunnelOptions()
        options.identityFiles = sshIdentity
        options.acceptNewHostKeys = acceptNew
        options.connectTimeout = timeout
        return try await SSHConnection.connect(to: route, options: options, prompts: prompts(logger: logger), logger: logger)
    }

    /// Host key confirmation, passphrases and passwords: files and environment first, the
    /// terminal last, never argv.
    func prompts(logger: Logger) -> SSHPrompts {
        let passwordFile = sshPasswordFile, passphraseFile = sshPassphraseFile
        let environment = ProcessInfo.processInfo.environment
        return SSHPrompts(
            confirmHostKey: { host, keyType, fingerprint in
                let answer = Secrets.prompt("The authenticity of host '\(host)' can't be established.\n\(keyType) key fingerprint is \(fingerprint).\nAre you sure you want to continue connecting (yes/no)? ", echo: true)
                return answer?.trimmingCharacters(in: .whitespaces).lowercased() == "yes"
            },
            passphrase: { path in
                if let passphraseFile, let value = try? Secrets.readFirstLine(ofFile: passphraseFile, what: "SSH passphrase file") {
                    if let warning = value.warning { logger.warning("\(warning)") }
                    return value.value
                }
                if let value = environment["FARCAST_SSH_PASSPHRASE"] { return value }
                return Secrets.prompt("Enter passphrase for key '\(path)': ")
            },
            password: { user, host, attempt in
                // A file or the environment gives one answer; only the prompt may be asked again.
                if let passwordFile {
                    guard attempt == 1, let value = try? Secrets.readFirstLine(ofFile: passwordFile, what: "SSH password file") else { return nil }
                    if let warning = value.warning { logger.warning("\(warning)") }
                    return value.value
                }
                if let value = environment["FARCAST_SSH_PASSWORD"] { return attempt == 1 ? value : nil }
                return Secrets.prompt("\(host)'s password: ")
            })
    }

    /// A logger for the tunnel that writes to stderr without taking over the process's logging
    /// system (the protocol command bootstraps that itself).
    static func logger(_ global: GlobalOptions) -> Logger {
        var logger = Logger(label: "farcast.ssh") { StreamLogHandler.standardError(label: $0) }
        logger.logLevel = global.logLevel()
        return logger
    }

    /// The password saved with a host (`farcast hosts add NAME URL --password-file F`), if the
    /// argument names a saved host that has one. A secret store that cannot be read is a warning,
    /// not a failure: the password can still come from the prompt.
    func savedPassword(_ argument: String, logger: Logger) -> String? {
        guard let saved = try? savedHost(argument) else { return nil }
        do {
            return try secretStore().secret(for: saved.secretAccount)
        } catch {
            logger.warning("cannot read the password saved for \(saved.name): \(describe(error))")
            return nil
        }
    }

    /// Records a successful connection to a saved host (best effort: a read-only book is no failure).
    func markConnected(_ argument: String) {
        HostArgument.markConnected(argument)
    }
}

// MARK: - VNC

extension HostOptions {
    /// The VNC server argument as an endpoint: a saved host, a `vnc://`/`vncs://` URL (with
    /// `?ssh=`), or the VNC forms `host:display` and `host::port`.
    func vncEndpoint(_ argument: String, tlsFirst: Bool) throws -> VNCEndpoint {
        var endpoint: VNCEndpoint
        if let address = try hostAddress(argument, kind: .vnc) {
            endpoint = VNCEndpoint(host: address.host, port: address.port, username: address.user, tlsFirst: address.tls)
        } else {
            do { endpoint = try VNCEndpoint(parsing: argument) } catch { throw CommandFailure(message: describe(error), exitCode: 2) }
        }
        if tlsFirst { endpoint.tlsFirst = true }
        return endpoint
    }

    /// Connects to the SSH server when a route applies (every VNC connection is then a
    /// `direct-tcpip` channel of that SSH connection, carrying RFB directly) and applies a saved
    /// host's preferences the command line left at their defaults.
    func prepareVNC(_ argument: String, endpoint: VNCEndpoint, options: inout VNCClient.Options, timeout: Duration,
                    logger: Logger, ask: (@Sendable (String, Bool) async -> String?)? = nil) async throws -> (any SSHTransport)? {
        let saved = try savedHost(argument)
        if let preferences = saved?.preferences {
            if preferences.viewOnly == true { options.configuration.viewOnly = true }
            if options.configuration.jpegQuality == nil, let quality = preferences.quality { options.configuration.jpegQuality = quality }
            if options.configuration.encodings == RFBConnection.Configuration().encodings, let names = preferences.encodings {
                let chosen = names.compactMap(RFBEncoding.init(name:))
                if !chosen.isEmpty { options.configuration.encodings = chosen }
            }
        }
        guard let route = try route(for: try hostAddress(argument, kind: .vnc)) else { return nil }
        let transport = try await sharedTransport(route, savedVia: Self.via(of: saved), timeout: timeout, logger: logger, ask: ask)
        let (host, port) = (endpoint.host, endpoint.port)
        // An RFB server speaks first: a transport that cannot see the channel open waits for that.
        options.openChannel = { try await transport.openByteStream(host: host, port: port, peerSpeaksFirst: true, prepare: $0) }
        logger.info("VNC through SSH", metadata: ["via": "\(transport.via)", "target": "\(host):\(port)"])
        return transport
    }
}

// MARK: - Sendspin

extension HostOptions {
    /// The Sendspin server argument as the WebSocket URL to dial: a saved host, a `sendspin://`
    /// URL or a `ws://` URL, through the tunnel when a route applies.
    func sendspinURL(_ argument: String, timeout: Duration, logger: Logger) async throws -> (url: String, tunnel: (any SSHForwarding)?) {
        // A WebSocket URL without --ssh is dialled exactly as given (wss:// and its path included).
        let lower = argument.lowercased()
        if ssh == nil, lower.hasPrefix("ws://") || lower.hasPrefix("wss://") { return (argument, nil) }
        guard let address = try hostAddress(argument, kind: .sendspin) else {
            throw CommandFailure(message: "'\(argument)' is neither a saved host nor a Sendspin URL (ws://HOST:8927/sendspin or sendspin://HOST)", exitCode: 2)
        }
        guard let route = try route(for: address) else { return (address.protocolURL(), nil) }
        let forwarder = try await openTunnel(route, savedVia: Self.via(of: try savedHost(argument)), to: address.host, port: address.port,
                                             timeout: timeout, logger: logger)
        logger.info("Sendspin through SSH", metadata: ["via": "\(forwarder.via)", "local": "127.0.0.1:\(forwarder.localPort)"])
        return (address.protocolURL(host: "127.0.0.1", port: forwarder.localPort), forwarder)
    }
}

extension HostOptions {
    /// The SSH client a saved host's preferences name, if any.
    static func via(of saved: SavedHost?) -> SSHVia? {
        saved?.preferences.sshVia.flatMap(SSHVia.init(rawValue:))
    }
}

/// `--ssh-via`: which SSH client carries a route.
enum SSHVia: String, CaseIterable, ExpressibleByArgument, Sendable {
    case auto, openssh, builtin
}
