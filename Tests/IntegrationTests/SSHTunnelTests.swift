import FarcastSupport
import Foundation
import Hosts
import Logging
import RFB
import Synchronization
import Testing

/// The SSH tunnel (a local forwarder, like `ssh -L`) against Debian's real OpenSSH server, started
/// by each test on 127.0.0.1 with its own host key, configuration and user: every key type plain
/// and passphrase-protected, passwords, host keys unknown / accepted / changed / revoked /
/// hashed, ProxyJump through a second sshd, forwarding disabled, an unreachable target, and a VNC
/// session through the tunnel pixel for pixel as without it.
///
/// Not covered because swift-nio-ssh 0.15.1 cannot do them (see docs/hosts.md): RSA user keys,
/// keys held by ssh-agent, keyboard-interactive.
@Suite(.tags(.groupA), .serialized, .timeLimit(.minutes(5)))
struct SSHTunnelTests {
    static let logger: Logger = {
        var logger = Logger(label: "test.ssh")
        logger.logLevel = .warning
        return logger
    }()

    /// Options that read nothing of the machine's own ~/.ssh: a test known_hosts and config.
    static func options(_ folder: TemporaryFolder, identities: [String] = [], acceptNew: Bool = false, config: String = "") throws -> SSHTunnelOptions {
        var options = SSHTunnelOptions()
        options.knownHostsPath = folder.path + "/known_hosts"
        options.configPath = folder.path + "/ssh_config"
        try config.write(toFile: options.configPath!, atomically: true, encoding: .utf8)
        options.identityFiles = identities
        options.acceptNewHostKeys = acceptNew
        options.connectTimeout = .seconds(15)
        return options
    }

    static func route(_ server: SSHServer) -> SSHRoute { SSHRoute(user: SSHServer.user, host: "127.0.0.1", port: server.port) }

    /// Connects to the forwarder's local end, reads the echo server's greeting, sends a line and
    /// reads it back.
    static func roundTrip(_ forwarder: SSHLocalForwarder, payload: String = "through the tunnel\n") throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(forwarder.localPort).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw PeerFailed(name: "tunnel", log: "cannot connect to the local end") }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = Array(payload.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        shutdown(fd, Int32(SHUT_WR))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &buffer, buffer.count)
            guard count > 0 else { break }
            received += buffer.prefix(count)
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// A 0600 file holding the test sshd's password (the command line never carries it).
    static func sshPasswordFile(in folder: TemporaryFolder) throws -> String {
        let path = folder.path + "/ssh-password"
        try (SSHServer.password + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    static func expectFailure(_ body: () async throws -> Void) async -> SSHTunnelError? {
        do {
            try await body()
            return nil
        } catch let error as SSHTunnelError {
            return error
        } catch {
            Issue.record("not an SSHTunnelError: \(error)")
            return nil
        }
    }

    @Test(arguments: [("ed25519", nil), ("ecdsa", 256), ("ecdsa", 384), ("ecdsa", 521)] as [(String, Int?)])
    func eachKeyTypeLogsInPlainAndEncrypted(type: String, bits: Int?) async throws {
        let folder = try TemporaryFolder()
        let plain = try SSHTestKey(type: type, bits: bits, in: folder)
        let encrypted = try SSHTestKey(type: type, bits: bits, passphrase: "pass phrase", in: folder)
        let server = try SSHServer(in: folder, authorizedKeys: [plain.publicLine, encrypted.publicLine])
        defer { server.stop() }
        let echo = try EchoServer()
        defer { echo.stop() }
        for key in [plain, encrypted] {
            let asked = PromptCount()
            let prompts = SSHPrompts(passphrase: { path in
                asked.increment()
                #expect(path == key.path)
                return key.passphrase
            })
            let forwarder = try await SSHLocalForwarder.open(through: Self.route(server), to: "127.0.0.1", port: echo.port,
                                                             options: try Self.options(folder, identities: [key.path], acceptNew: true),
                                                             prompts: prompts, logger: Self.logger)
            #expect(try Self.roundTrip(forwarder) == "hello\nthrough the tunnel\n")
            await forwarder.stop()
            #expect(asked.value == (key.passphrase == nil ? 0 : 1))
        }
        #expect(server.log.contains("Accepted publickey for \(SSHServer.user)"))
    }

    @Test func aWrongPassphraseIsAskedAgainThenReported() async throws {
        let folder = try TemporaryFolder()
        let key = try SSHTestKey(type: "ed25519", passphrase: "right", in: folder)
        let server = try SSHServer(in: folder, authorizedKeys: [key.publicLine], extraConfig: "PasswordAuthentication no")
        defer { server.stop() }
        let asked = PromptCount()
        let failure = await Self.expectFailure {
            _ = try await SSHConnection.connect(to: Self.route(server), options: try Self.options(folder, identities: [key.path], acceptNew: true),
                                                prompts: SSHPrompts(passphrase: { _ in asked.increment(); return "wrong" }), logger: Self.logger)
        }
        #expect(asked.value == 3)
        guard case .authenticationFailed(_, _, let offered, let tried, let notes) = failure else {
            Issue.record("expected an authentication failure, got \(String(describing: failure))")
            return
        }
        #expect(offered == ["publickey"])
        #expect(tried.isEmpty)
        #expect(notes.contains { $0.contains("wrong passphrase for \(key.path)") })
    }

    @Test func passwordsLogInAndAWrongOneSaysWhatTheServerAccepts() async throws {
        let folder = try TemporaryFolder()
        let server = try SSHServer(in: folder)
        defer { server.stop() }
        let echo = try EchoServer()
        defer { echo.stop() }
        let forwarder = try await SSHLocalForwarder.open(through: Self.route(server), to: "127.0.0.1", port: echo.port,
                                                         options: try Self.options(folder, acceptNew: true),
                                                         prompts: SSHPrompts(password: { user, _, _ in user == SSHServer.user ? SSHServer.password : nil }),
                                                         logger: Self.logger)
        #expect(try Self.roundTrip(forwarder).hasPrefix("hello\n"))
        await forwarder.stop()
        #expect(server.log.contains("Accepted password for \(SSHServer.user)"))

        let attempts = PromptCount()
        let failure = await Self.expectFailure {
            _ = try await SSHConnection.connect(to: Self.route(server), options: try Self.options(folder),
                                                prompts: SSHPrompts(password: { _, _, _ in attempts.increment(); return "not it" }), logger: Self.logger)
        }
        #expect(attempts.value == 3)
        guard case .authenticationFailed(let user, _, let offered, let tried, _) = failure else {
            Issue.record("expected an authentication failure, got \(String(describing: failure))")
            return
        }
        #expect(user == SSHServer.user)
        #expect(Set(offered) == ["publickey", "password"])
        #expect(tried == ["password"])
        #expect(failure?.description.contains("the server accepts: publickey, password") == true)
    }

    @Test func rsaKeysAreNamedAsUnusableInsteadOfFailingSilently() async throws {
        let folder = try TemporaryFolder()
        let rsa = try SSHTestKey(type: "rsa", bits: 2048, in: folder)
        let server = try SSHServer(in: folder, authorizedKeys: [rsa.publicLine], extraConfig: "PasswordAuthentication no")
        defer { server.stop() }
        let failure = await Self.expectFailure {
            _ = try await SSHConnection.connect(to: Self.route(server), options: try Self.options(folder, identities: [rsa.path], acceptNew: true),
                                                logger: Self.logger)
        }
        #expect(failure?.description.contains("RSA key, which swift-nio-ssh 0.15 cannot sign with") == true, "\(String(describing: failure))")
    }

    /// What a person meets on the command line when SSH cannot work: the route named once
    /// (it said "fcssh@fcssh@127.0.0.1:…"), the default RSA key and the agent named as found but
    /// unusable (it said "farcast had nothing to offer"), and a port where no SSH server listens
    /// named by what answered (it said "the connection closed").
    /// The built-in client's words (`--ssh-via builtin`; OpenSSH's are OpenSSHRouteTests').
    @Test func theCommandLineSaysWhatItFoundAndWhatAnswered() throws {
        let folder = try TemporaryFolder()
        let home = folder.path + "/home"
        try FileManager.default.createDirectory(atPath: home + "/.ssh", withIntermediateDirectories: true)
        let rsa = try SSHTestKey(type: "rsa", bits: 2048, in: folder)
        try FileManager.default.copyItem(atPath: rsa.path, toPath: home + "/.ssh/id_rsa")
        let server = try SSHServer(in: folder, authorizedKeys: [rsa.publicLine], extraConfig: "PasswordAuthentication no")
        defer { server.stop() }
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home
        environment["XDG_STATE_HOME"] = folder.path + "/state"
        environment["SSH_AUTH_SOCK"] = folder.path + "/agent.sock"
        environment.removeValue(forKey: "FARCAST_SSH_PASSWORD")
        let route = "\(SSHServer.user)@127.0.0.1:\(server.port)"
        let refused = try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::5999", "--ssh", route, "--ssh-via", "builtin", "--accept-new"], environment: environment, stdin: Data())
        #expect(refused.status == 1, "\(refused.stderr)")
        #expect(refused.stderr.contains("SSH authentication as \(route) failed"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("nothing to offer"), "\(refused.stderr)")
        #expect(refused.stderr.contains("\(home)/.ssh/id_rsa is an RSA key"), "\(refused.stderr)")
        #expect(refused.stderr.contains("ssh-agent (SSH_AUTH_SOCK)"), "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").filter { $0.hasPrefix("farcast: ") }.count == 1, "\(refused.stderr)")

        let vnc = try HostileServer(mode: "rfb-banner-silent")
        let wrongPort = try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::5999", "--ssh", "\(SSHServer.user)@127.0.0.1:\(vnc.port)", "--ssh-via", "builtin", "--timeout", "5"],
                                environment: environment, stdin: Data(), timeout: 30)
        #expect(wrongPort.status == 1, "\(wrongPort.stderr)")
        #expect(wrongPort.stderr.contains("127.0.0.1:\(vnc.port) is not an SSH server: it is a VNC server"), "\(wrongPort.stderr)")
    }

    @Test func hostKeysUnknownAcceptedChangedRevokedAndHashed() async throws {
        let folder = try TemporaryFolder()
        let key = try SSHTestKey(type: "ed25519", in: folder)
        let server = try SSHServer(in: folder, authorizedKeys: [key.publicLine])
        defer { server.stop() }
        let knownHosts = folder.path + "/known_hosts"

        // Unknown, nobody to ask: refused with the fingerprint ssh-keygen prints.
        let unknown = await Self.expectFailure {
            _ = try await SSHConnection.connect(to: Self.route(server), options: try Self.options(folder, identities: [key.path]), logger: Self.logger)
        }
        guard case .hostKeyUnknown(_, "ED25519", let fingerprint, _) = unknown else {
            Issue.record("expected an unknown host key, got \(String(describing: unknown))")
            return
        }
        #expect(fingerprint == server.hostKeyFingerprint)
        #expect(!FileManager.default.fileExists(atPath: knownHosts))

        // Unknown, the person says no, then yes: only yes records it.
        let no = await Self.expectFailure {
            _ = try await SSHConnection.connect(to: Self.route(server), options: try Self.options(folder, identities: [key.path]),
                                                prompts: SSHPrompts(confirmHostKey: { _, _, _ in false }), logger: Self.logger)
        }
        #expect(no != nil)
        let shown = Mutex<String?>(nil)
        let yes = try await SSHConnection.connect(to: Self.route(server), options: try Self.options(folder, identities: [key.path]),
                                                  prompts: SSHPrompts(confirmHostKey: { host, _, fingerprint in
                                                      shown.withLock { $0 = "\(host) \(fingerprint)" }
                                                      return true
                                                  }), logger: Self.logger)
        await yes.close()
        #expect(shown.withLock { $0 } == "[127.0.0.1]:\(server.port) \(server.hostKeyFingerprint)")
        let recorded = try String(contentsOfFile: knownHosts, encoding: .utf8)
        #expect(recorded.hasPrefix("|1|"), "farcast writes hashed entries")
        #expect(!recorded.contains("127.0.0.1"))
        // OpenSSH itself finds the entry farcast wrote.
        let found = try run(try requireExecutable("ssh-keygen", package: "openssh-client"), ["-F", "[127.0.0.1]:\(server.port)", "-f", knownHosts])
        #expect(found.status == 0 && found.stdout.contains(server.hostKeyLine.split(separator: " ")[1]))

        // Accepted: now known, no prompt needed.
        let again = try await SSHConnection.connect(to: Self.route(server), options: try Self.options(folder, identities: [key.path]), logger: Self.logger)
        await again.close()

        // Hashed by ssh-keygen -H: still known.
        try (server.knownHostsLine + "\n").write(toFile: knownHosts, atomically: true, encoding: .utf8)
        let hashed = try run(try requireExecutable("ssh-keygen", package: "openssh-client"), ["-H", "-f", knownHosts])
        #expect(hashed.status == 0)
        let viaHashed = try await SSHConnection.connect(to: Self.route(server), options: try Self.options(folder, identities: [key.path]), logger: Self.logger)
        await viaHashed.close()

        // Changed: another Ed25519 key listed for the host; refused even with --accept-new.
        let impostor = try SSHTestKey(type: "ed25519", in: try TemporaryFolder())
        let impostorKey = impostor.publicLine.split(separator: " ").prefix(2).joined(separator: " ")
        try "[127.0.0.1]:\(server.port) \(impostorKey)\n".write(toFile: knownHosts, atomically: true, encoding: .utf8)
        let changed = await Self.expectFailure {
            _ = try await SSHConnection.connect(to: Self.route(server), options: try Self.options(folder, identities: [key.path], acceptNew: true),
                                                logger: Self.logger)
        }
        guard case .hostKeyChanged(_, _, let presented, _, let lines) = changed else {
            Issue.record("expected a changed host key, got \(String(describing: changed))")
            return
        }
        #expect(presented == server.hostKeyFingerprint && lines == [1])
        #expect(changed?.description.contains("REMOTE HOST IDENTIFICATION HAS CHANGED") == true)
        #expect(changed?.description.contains("ssh-keygen -R") == true)

        // Revoked: refused whatever else the file says.
        try (server.knownHostsLine + "\n@revoked * \(server.hostKeyLine)\n").write(toFile: knownHosts, atomically: true, encoding: .utf8)
        let revoked = await Self.expectFailure {
            _ = try await SSHConnection.connect(to: Self.route(server), options: try Self.options(folder, identities: [key.path], acceptNew: true),
                                                logger: Self.logger)
        }
        guard case .hostKeyRevoked(_, _, _, _, let line) = revoked else {
            Issue.record("expected a revoked host key, got \(String(describing: revoked))")
            return
        }
        #expect(line == 2)
    }

    @Test func proxyJumpGoesThroughTheJumpHost() async throws {
        let folder = try TemporaryFolder()
        let key = try SSHTestKey(type: "ed25519", in: folder)
        let jump = try SSHServer(in: folder, name: "jump", authorizedKeys: [key.publicLine])
        defer { jump.stop() }
        let target = try SSHServer(in: folder, name: "bastion", authorizedKeys: [key.publicLine])
        defer { target.stop() }
        let echo = try EchoServer()
        defer { echo.stop() }
        let config = """
            Host bastion
              HostName 127.0.0.1
              Port \(target.port)
              User \(SSHServer.user)
              ProxyJump \(SSHServer.user)@127.0.0.1:\(jump.port)
            """
        let forwarder = try await SSHLocalForwarder.open(through: SSHRoute(host: "bastion"), to: "127.0.0.1", port: echo.port,
                                                         options: try Self.options(folder, identities: [key.path], acceptNew: true, config: config),
                                                         logger: Self.logger)
        #expect(try Self.roundTrip(forwarder) == "hello\nthrough the tunnel\n")
        await forwarder.stop()
        // The jump host opened a channel to the bastion's sshd; the bastion one to the echo server.
        #expect(jump.log.contains("target 127.0.0.1 port \(target.port)"), "\(jump.log)")
        #expect(target.log.contains("target 127.0.0.1 port \(echo.port)"))
        #expect(!jump.log.contains("port \(echo.port)"))
    }

    @Test func forwardingDisabledAndUnreachableTargetsSaySo() async throws {
        let folder = try TemporaryFolder()
        let key = try SSHTestKey(type: "ed25519", in: folder)
        let closed = try SSHServer(in: folder, name: "noforward", authorizedKeys: [key.publicLine], allowTcpForwarding: false)
        defer { closed.stop() }
        let echo = try EchoServer()
        defer { echo.stop() }
        let refused = await Self.expectFailure {
            _ = try await SSHLocalForwarder.open(through: Self.route(closed), to: "127.0.0.1", port: echo.port,
                                                 options: try Self.options(folder, identities: [key.path], acceptNew: true), logger: Self.logger)
        }
        guard case .forwardingRefused = refused else {
            Issue.record("expected forwarding refused, got \(String(describing: refused))")
            return
        }
        #expect(refused?.description.contains("AllowTcpForwarding") == true)

        let open = try SSHServer(in: folder, name: "open", authorizedKeys: [key.publicLine])
        defer { open.stop() }
        let unreachable = await Self.expectFailure {
            _ = try await SSHLocalForwarder.open(through: Self.route(open), to: "127.0.0.1", port: 1,
                                                 options: try Self.options(folder, identities: [key.path], acceptNew: true), logger: Self.logger)
        }
        guard case .targetUnreachable(_, let target, let reason) = unreachable else {
            Issue.record("expected an unreachable target, got \(String(describing: unreachable))")
            return
        }
        #expect(target == "127.0.0.1:1")
        #expect(reason.lowercased().contains("refused"), "\(reason)")
    }

    @Test func aVNCSessionThroughTheTunnelIsPixelExactAsWithoutIt() async throws {
        let folder = try TemporaryFolder()
        let key = try SSHTestKey(type: "ed25519", in: folder)
        let server = try SSHServer(in: folder, authorizedKeys: [key.publicLine])
        defer { server.stop() }
        let passwords = try PasswordFiles(in: folder)
        let xvnc = try XvncServer(passwords: passwords)
        let viewer = try xvnc.drawTestContent(in: folder)
        defer { viewer.stop() }
        let forwarder = try await SSHLocalForwarder.open(through: Self.route(server), to: "127.0.0.1", port: xvnc.port,
                                                         options: try Self.options(folder, identities: [key.path], acceptNew: true), logger: Self.logger)
        for encoding in ["zrle", "tight", "raw"] {
            var results: [Framebuffer] = []
            for tunnelled in [false, true] {
                let client = try await RFBServerTests.connect(xvnc, password: passwords.password, configure: { $0.encodings = [RFBEncoding(name: encoding)!] },
                                                              options: { options in
                                                                  if tunnelled {
                                                                      options.dialHost = "127.0.0.1"
                                                                      options.dialPort = forwarder.localPort
                                                                  }
                                                              })
                try await client.waitForFirstFrame(timeout: .seconds(20))
                results.append(await client.framebuffer)
                await client.close()
            }
            let screen = try XWDImage.captureRoot(of: xvnc)
            #expect(RFBServerTests.differingPixels(results[0], screen) == 0, "\(encoding) direct")
            #expect(RFBServerTests.differingPixels(results[1], screen) == 0, "\(encoding) through the tunnel")
            #expect(results[0].pixels == results[1].pixels)
        }
        await forwarder.stop()
        #expect(server.log.contains("target 127.0.0.1 port \(xvnc.port)"))
    }

    /// The command line: `farcast vnc screenshot --ssh` with --accept-new and a password file,
    /// HOME pointing at the test's folder (its ~/.ssh), and the tunnel gone when the command is.
    @Test func theCommandLineReachesAVNCServerThroughSSH() async throws {
        let folder = try TemporaryFolder()
        let home = folder.path + "/home"
        try FileManager.default.createDirectory(atPath: home + "/.ssh", withIntermediateDirectories: true)
        let server = try SSHServer(in: folder)
        defer { server.stop() }
        let passwords = try PasswordFiles(in: folder)
        let xvnc = try XvncServer(passwords: passwords)
        let sshPassword = try Self.sshPasswordFile(in: folder)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home
        environment["XDG_STATE_HOME"] = folder.path + "/state"
        environment["XDG_DATA_HOME"] = folder.path + "/data"
        let image = folder.path + "/shot.png"
        let arguments = ["vnc", "screenshot", "127.0.0.1::\(xvnc.port)", "--password-file", passwords.plain, "-o", image,
                         "--ssh", "\(SSHServer.user)@127.0.0.1:\(server.port)", "--ssh-password-file", sshPassword]
        // Without --accept-new and no terminal: refused, with the fingerprint, exit 1.
        let refused = try run(try farcastBinary(), arguments, environment: environment)
        #expect(refused.status == 1)
        #expect(refused.stderr.contains(server.hostKeyFingerprint), "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 1)
        // With it: the screenshot, and the key in ~/.ssh/known_hosts.
        let shot = try run(try farcastBinary(), arguments + ["--accept-new", "--json"], environment: environment)
        #expect(shot.status == 0, "\(shot.stderr)")
        #expect(FileManager.default.fileExists(atPath: image))
        #expect(FileManager.default.fileExists(atPath: home + "/.ssh/known_hosts"))
        // A saved host with the route: the name alone is enough.
        let add = try run(try farcastBinary(), ["hosts", "add", "desk", "vnc://127.0.0.1:\(xvnc.port)?ssh=\(SSHServer.user)@127.0.0.1:\(server.port)"],
                          environment: environment)
        #expect(add.status == 0, "\(add.stderr)")
        let byName = try run(try farcastBinary(), ["vnc", "info", "desk", "--password-file", passwords.plain, "--ssh-password-file", sshPassword, "--json"],
                             environment: environment)
        #expect(byName.status == 0, "\(byName.stderr)")
        #expect(byName.stdout.contains("\"server\":\"127.0.0.1::\(xvnc.port)\""), "\(byName.stdout)")
        let shown = try run(try farcastBinary(), ["hosts", "show", "desk", "--json"], environment: environment)
        #expect(shown.stdout.contains("\"last_connected\":\""), "\(shown.stdout)")
        // Every SSH session farcast opened has ended with its command.
        let sessions = server.log.components(separatedBy: "Accepted password").count - 1
        let ended = server.log.components(separatedBy: "Disconnected from user \(SSHServer.user)").count - 1
            + server.log.components(separatedBy: "Connection closed by").count - 1
        #expect(sessions == 2)
        #expect(ended >= sessions, "\(server.log)")
    }

    /// `farcast jellyfin` through the tunnel: the URL names a host only the bastion can resolve
    /// (to the stand-in on its loopback), as `ssh -L` does — so nothing reaches the server except
    /// through the tunnel. The route is remembered with the server, so later commands — and the
    /// live WebSocket — go through it by themselves.
    @Test func jellyfinSignsInBrowsesAndListensThroughTheTunnel() throws {
        let folder = try TemporaryFolder()
        let home = folder.path + "/home"
        try FileManager.default.createDirectory(atPath: home + "/.ssh", withIntermediateDirectories: true)
        let server = try SSHServer(in: folder, names: ["jellyfin.behind.gateway": "127.0.0.1"])
        defer { server.stop() }
        let jellyfin = try JellyfinStandInServer(keepAlive: 2)
        let sshPassword = try Self.sshPasswordFile(in: folder)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home
        environment["XDG_STATE_HOME"] = folder.path + "/state"
        environment["XDG_CACHE_HOME"] = folder.path + "/cache"
        environment.removeValue(forKey: "FARCAST_JELLYFIN_PASSWORD")
        let route = "\(SSHServer.user)@127.0.0.1:\(server.port)"
        let url = "http://jellyfin.behind.gateway:\(jellyfin.port)"
        func farcast(_ arguments: [String]) throws -> ProcessResult {
            try run(try farcastBinary(), ["jellyfin"] + arguments + ["--ssh-password-file", sshPassword], environment: environment, timeout: 60)
        }
        let login = try farcast(["login", url, "--user", "demo", "--password-file", try jellyfin.passwordFile(in: folder), "--ssh", route, "--accept-new"])
        #expect(login.status == 0, "\(login.stderr)")
        let listed = try run(try farcastBinary(), ["jellyfin", "servers", "--json"], environment: environment)
        #expect(listed.status == 0, "\(listed.stderr)")
        let servers: [[String: Any]]? = try jsonItems(listed.stdout)
        #expect(servers?.first?["url"] as? String == url)
        #expect(servers?.first?["ssh"] as? String == route)
        // The table shows the route whole, port and all, beside the URL.
        let table = try run(try farcastBinary(), ["jellyfin", "servers"], environment: environment)
        #expect(table.stdout.contains("VIA SSH") && table.stdout.contains(" \(route) ") && table.stdout.contains(url + " "), "\(table.stdout)")
        // No --ssh: the remembered route.
        let libraries = try farcast(["libraries", "--json"])
        #expect(libraries.status == 0, "\(libraries.stderr)")
        let names = try jsonItems(libraries.stdout).compactMap { $0["name"] as? String }
        #expect(names == ["Movies", "Shows", "Music"])
        // The live session's WebSocket too.
        let events = try farcast(["events", "--json", "--no-sessions", "--duration", "4"])
        #expect(events.status == 0, "\(events.stderr)")
        #expect(events.stdout.contains("\"connected\""), "\(events.stdout)")
        // The name means nothing on this side: everything above went through the bastion.
        var resolved: UnsafeMutablePointer<addrinfo>?
        #expect(getaddrinfo("jellyfin.behind.gateway", nil, nil, &resolved) != 0, "the test's host name resolves outside sshd")
        if let resolved { freeaddrinfo(resolved) }
        let forwarded = server.log.components(separatedBy: "target jellyfin.behind.gateway port \(jellyfin.port)").count - 1
        #expect(forwarded >= 3, "direct-tcpip requests to the stand-in in sshd's log: \(forwarded)\n\(server.log.suffix(3000))")
    }
}

final class PromptCount: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
