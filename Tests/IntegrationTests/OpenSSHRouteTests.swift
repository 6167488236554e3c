import Foundation
import Testing

/// `--ssh` through the user's own OpenSSH (`--ssh-via openssh`, and `auto` where an ssh program
/// exists): Debian's ssh client against Debian's sshd on loopback, with what the built-in
/// client cannot do — an RSA key, a key only ssh-agent holds — one authentication for a whole
/// command, ssh's own words for each failure, and no ssh process left behind however farcast
/// ends.
///
/// OpenSSH reads ~/.ssh from the password database, not $HOME, so each test gives it a
/// configuration file of its own through FARCAST_SSH_COMMAND ("ssh -F FILE"), as a user with a
/// second configuration would.
@Suite(.serialized, .timeLimit(.minutes(4)))
struct OpenSSHRouteTests {
    /// A test's sshd, its client configuration and an environment that reads nothing of the machine's ~/.ssh.
    struct Setup {
        let folder: TemporaryFolder
        let server: SSHServer
        let config: String
        var environment: [String: String]
        var route: String { "\(SSHServer.user)@127.0.0.1:\(server.port)" }

        /// `clientLines`: ssh_config lines for every host (IdentityFile, PasswordAuthentication…).
        init(authorizedKeys: [String] = [], serverConfig: String = "", allowTcpForwarding: Bool = true, clientLines: [String],
             knownHost: Bool = true, keyboardInteractive: Bool = false, folder: TemporaryFolder? = nil) throws {
            let folder = try folder ?? TemporaryFolder()
            self.folder = folder
            server = try SSHServer(in: folder, authorizedKeys: authorizedKeys, allowTcpForwarding: allowTcpForwarding, extraConfig: serverConfig,
                                   keyboardInteractive: keyboardInteractive)
            if knownHost { try (server.knownHostsLine + "\n").write(toFile: folder.path + "/known_hosts", atomically: true, encoding: .utf8) }
            config = folder.path + "/ssh_config"
            try (["Host *", "  UserKnownHostsFile \(folder.path)/known_hosts", "  GlobalKnownHostsFile /dev/null", "  StrictHostKeyChecking yes"]
                 + clientLines.map { "  " + $0 }).joined(separator: "\n").appending("\n").write(toFile: config, atomically: true, encoding: .utf8)
            var environment = ProcessInfo.processInfo.environment
            for name in ["SSH_AUTH_SOCK", "SSH_ASKPASS", "SSH_ASKPASS_REQUIRE", "DISPLAY", "FARCAST_SSH_PASSWORD", "FARCAST_SSH_PASSPHRASE"] {
                environment.removeValue(forKey: name)
            }
            environment["FARCAST_SSH_COMMAND"] = "ssh -F '\(config)'"
            environment["XDG_STATE_HOME"] = folder.path + "/state"
            environment["XDG_DATA_HOME"] = folder.path + "/data"
            environment["XDG_CONFIG_HOME"] = folder.path + "/config"
            environment["XDG_CACHE_HOME"] = folder.path + "/cache"
            self.environment = environment
        }

        /// Runs farcast without a terminal (a session of its own), to its end.
        func farcast(_ arguments: [String], timeout: TimeInterval = 60) throws -> (status: Int32, log: String) {
            let process = try BackgroundProcess(try farcastBinary(), arguments, environment: environment, logName: "farcast-openssh", newSession: true)
            guard process.waitForExit(timeout: timeout) else {
                process.stop()
                throw PeerFailed(name: "farcast \(arguments.joined(separator: " "))", log: "did not finish within \(Int(timeout)) s\n" + process.log)
            }
            return (process.terminationStatus, process.log)
        }
    }

    /// ssh processes of this test whose command line contains `marker` (the test's folder is in
    /// every one of them, through -F).
    static func sshProcesses(_ marker: String) -> [String] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { pid -> String? in
            guard Int32(pid) != nil, let raw = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
            let words = raw.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            guard let program = words.first, program.hasSuffix("ssh") || program.hasSuffix("setpriv"),
                  words.contains(where: { $0.contains(marker) }) else { return nil }
            return "\(pid): \(words.joined(separator: " "))"
        }
    }

    /// An RSA key (which the built-in client cannot sign with) through OpenSSH: the screenshot is
    /// the one taken directly, byte for byte, and -v says which client carried it and why.
    @Test func anRSAKeyCarriesVNCPixelForPixel() throws {
        let folder = try TemporaryFolder()
        let rsa = try SSHTestKey(type: "rsa", bits: 2048, in: folder)
        let setup = try Setup(authorizedKeys: [rsa.publicLine], serverConfig: "PasswordAuthentication no",
                              clientLines: ["IdentitiesOnly yes", "IdentityFile \(rsa.path)", "PasswordAuthentication no"], folder: folder)
        let passwords = try PasswordFiles(in: folder)
        let xvnc = try XvncServer(passwords: passwords)
        let content = try xvnc.drawTestContent(in: folder)
        defer { content.stop() }
        let direct = try setup.farcast(["vnc", "screenshot", "127.0.0.1::\(xvnc.port)", "--password-file", passwords.plain, "-o", folder.path + "/direct.png"])
        #expect(direct.status == 0, "\(direct.log)")
        let through = try setup.farcast(["vnc", "screenshot", "127.0.0.1::\(xvnc.port)", "--password-file", passwords.plain, "-o", folder.path + "/ssh.png",
                                         "--ssh", setup.route, "-v"])
        #expect(through.status == 0, "\(through.log)\nsshd: \(setup.server.log.suffix(2000))")
        #expect(through.log.contains("SSH: OpenSSH /usr/bin/ssh (found on PATH"), "\(through.log)")
        #expect(FileManager.default.contents(atPath: folder.path + "/ssh.png") == FileManager.default.contents(atPath: folder.path + "/direct.png"),
                "the picture through ssh differs from the direct one")
        #expect(setup.server.log.contains("Accepted publickey for \(SSHServer.user)") && setup.server.log.contains("RSA SHA256:"), "\(setup.server.log.suffix(2000))")
        #expect(Self.sshProcesses(folder.path).isEmpty, "left running: \(Self.sshProcesses(folder.path))")
    }

    /// A key only ssh-agent holds (its file deleted after ssh-add) logs in.
    @Test func aKeyOnlyTheAgentHoldsLogsIn() throws {
        let folder = try TemporaryFolder()
        let key = try SSHTestKey(type: "ed25519", in: folder)
        var setup = try Setup(authorizedKeys: [key.publicLine], serverConfig: "PasswordAuthentication no",
                              clientLines: ["PasswordAuthentication no", "IdentityFile /nonexistent/none"], folder: folder)
        let socket = folder.path + "/agent.sock"
        let agent = try BackgroundProcess(try requireExecutable("ssh-agent", package: "openssh-client"), ["-D", "-a", socket], logName: "ssh-agent")
        defer { agent.stop() }
        try waitUntil("ssh-agent's socket", timeout: 10) { FileManager.default.fileExists(atPath: socket) }
        var agentEnvironment = ProcessInfo.processInfo.environment
        agentEnvironment["SSH_AUTH_SOCK"] = socket
        let added = try run(try requireExecutable("ssh-add", package: "openssh-client"), [key.path], environment: agentEnvironment)
        #expect(added.status == 0, "\(added.stderr)")
        try FileManager.default.removeItem(atPath: key.path)
        setup.environment["SSH_AUTH_SOCK"] = socket
        let passwords = try PasswordFiles(in: folder)
        let xvnc = try XvncServer(passwords: passwords)
        let info = try setup.farcast(["vnc", "info", "127.0.0.1::\(xvnc.port)", "--password-file", passwords.plain, "--ssh", setup.route, "--json"])
        #expect(info.status == 0, "\(info.log)\nsshd: \(setup.server.log.suffix(2000))")
        #expect(info.log.contains("\"protocol_version\":\"3.8\""), "\(info.log)")
        #expect(setup.server.log.contains("Accepted publickey for \(SSHServer.user)") && setup.server.log.contains("ED25519 SHA256:"), "\(setup.server.log.suffix(2000))")
    }

    /// A password-only bastion and a command that opens many connections (Jellyfin's sign-in and
    /// listing, each HTTP connection its own stream): the password is asked once per command —
    /// through SSH_ASKPASS, as without a terminal — and sshd accepts one password login each.
    @Test func aPasswordIsAskedOncePerCommandHoweverManyConnections() throws {
        let folder = try TemporaryFolder()
        var setup = try Setup(clientLines: ["PubkeyAuthentication no", "PasswordAuthentication yes", "KbdInteractiveAuthentication no"], folder: folder)
        let jellyfin = try JellyfinStandInServer()
        let asked = folder.path + "/asked"
        let askpass = folder.path + "/askpass"
        try "#!/bin/sh\necho \"$1\" >> '\(asked)'\nprintf '%s\\n' '\(SSHServer.password)'\n".write(toFile: askpass, atomically: true, encoding: .utf8)
        chmod(askpass, 0o755)
        setup.environment["SSH_ASKPASS"] = askpass
        setup.environment["SSH_ASKPASS_REQUIRE"] = "force"
        setup.environment.removeValue(forKey: "FARCAST_JELLYFIN_PASSWORD")
        let url = "http://127.0.0.1:\(jellyfin.port)"
        let login = try setup.farcast(["jellyfin", "login", url, "--user", "demo", "--password-file", try jellyfin.passwordFile(in: folder), "--ssh", setup.route])
        #expect(login.status == 0, "\(login.log)\nsshd: \(setup.server.log.suffix(2000))")
        let listed = try setup.farcast(["jellyfin", "ls", "--json", "--recursive"])
        #expect(listed.status == 0, "\(listed.log)")
        let questions = ((try? String(contentsOfFile: asked, encoding: .utf8)) ?? "").split(separator: "\n")
        let accepted = setup.server.log.components(separatedBy: "Accepted password for \(SSHServer.user)").count - 1
        #expect(questions.count == 2 && accepted == 2, "asked \(questions) for two commands; sshd accepted \(accepted) passwords")
        let streams = setup.server.log.components(separatedBy: "target 127.0.0.1 port \(jellyfin.port)").count - 1
        #expect(streams >= 2, "streams to the stand-in: \(streams)\n\(setup.server.log.suffix(3000))")
        #expect(Self.sshProcesses(folder.path).isEmpty, "left running: \(Self.sshProcesses(folder.path))")
    }

    /// Each failure in one line with ssh's own words and what to do, exit 1 (2 for usage).
    @Test func failuresAreSaidInSSHsWords() throws {
        let folder = try TemporaryFolder()
        let key = try SSHTestKey(type: "ed25519", in: folder)
        let lines = ["IdentitiesOnly yes", "IdentityFile \(key.path)", "PasswordAuthentication no"]
        let passwords = try PasswordFiles(in: folder)
        let xvnc = try XvncServer(passwords: passwords)
        func oneLine(_ log: String) -> String { log.split(separator: "\n").filter { $0.hasPrefix("farcast: ") }.joined(separator: "\n") }

        // Forwarding disabled on the bastion.
        let closed = try Setup(authorizedKeys: [key.publicLine], allowTcpForwarding: false, clientLines: lines, folder: folder)
        let prohibited = try closed.farcast(["vnc", "info", "127.0.0.1::\(xvnc.port)", "--password-file", passwords.plain, "--ssh", closed.route])
        #expect(prohibited.status == 1 && oneLine(prohibited.log).contains("refused to forward to 127.0.0.1:\(xvnc.port)")
                && prohibited.log.contains("administratively prohibited"), "\(prohibited.log)")
        closed.server.stop()

        let setup = try Setup(authorizedKeys: [key.publicLine], clientLines: lines, folder: try TemporaryFolder())
        // The target's port closed on the bastion's side.
        let port = try RefusingTCPPort()
        let refused = try setup.farcast(["vnc", "info", "127.0.0.1::\(port.port)", "--password-file", passwords.plain, "--ssh", setup.route])
        #expect(refused.status == 1 && oneLine(refused.log).contains("cannot reach 127.0.0.1:\(port.port): connection refused"), "\(refused.log)")

        // An unknown host key without a terminal: ssh cannot ask, and says so.
        var unknown = setup
        try "".write(toFile: setup.folder.path + "/known_hosts", atomically: true, encoding: .utf8)
        unknown.environment["FARCAST_SSH_COMMAND"] = "ssh -F \(setup.config)"
        let strange = try unknown.farcast(["vnc", "info", "127.0.0.1::\(xvnc.port)", "--password-file", passwords.plain, "--ssh", setup.route])
        #expect(strange.status == 1 && oneLine(strange.log).contains("Host key verification failed") && strange.log.contains("--accept-new"), "\(strange.log)")
        // --accept-new takes it, as StrictHostKeyChecking accept-new does.
        let accepted = try unknown.farcast(["vnc", "info", "127.0.0.1::\(xvnc.port)", "--password-file", passwords.plain, "--ssh", setup.route, "--accept-new"])
        #expect(accepted.status == 0, "\(accepted.log)")

        // A destination that ssh would read as an option: refused before anything runs.
        for route in ["-oProxyCommand=sh", "-oProxyCommand=x@host", "me@-oProxyCommand=x"] {
            // `--ssh=VALUE`: as a separate word, the parser already refuses it as a missing value.
            let injected = try setup.farcast(["vnc", "info", "127.0.0.1::\(xvnc.port)", "--ssh=\(route)", "--ssh-via", "openssh"])
            #expect(injected.status == 2 && injected.log.contains("cannot begin with '-'"), "\(route): \(injected.log)")
        }

        // No ssh program: auto takes the built-in client and says why; openssh is a usage error.
        var bare = setup
        bare.environment.removeValue(forKey: "FARCAST_SSH_COMMAND")
        bare.environment["PATH"] = setup.folder.path + "/empty-bin"
        let auto = try bare.farcast(["vnc", "info", "127.0.0.1::\(xvnc.port)", "--password-file", passwords.plain, "--ssh", setup.route, "-v",
                                     "--ssh-identity", key.path, "--accept-new"])
        #expect(auto.log.contains("SSH: the built-in client, because no ssh program is on PATH"), "\(auto.log)")
        #expect(auto.status == 0, "\(auto.log)")
        let forced = try bare.farcast(["vnc", "info", "127.0.0.1::\(xvnc.port)", "--ssh", setup.route, "--ssh-via", "openssh"])
        #expect(forced.status == 2 && forced.log.contains("no ssh program on PATH"), "\(forced.log)")
        #expect(Self.sshProcesses(setup.folder.path).isEmpty, "left running: \(Self.sshProcesses(setup.folder.path))")
    }

    /// However farcast ends mid-session — Ctrl-C, SIGTERM, SIGKILL — no ssh process of its
    /// stays (the master and every stream), checked in the process table.
    @Test func noSSHOutlivesFarcast() throws {
        let folder = try TemporaryFolder()
        let key = try SSHTestKey(type: "ed25519", in: folder)
        let setup = try Setup(authorizedKeys: [key.publicLine], clientLines: ["IdentitiesOnly yes", "IdentityFile \(key.path)"], folder: folder)
        let passwords = try PasswordFiles(in: folder)
        let xvnc = try XvncServer(passwords: passwords)
        for signal in [SIGINT, SIGTERM, SIGKILL] {
            let recording = try BackgroundProcess(try farcastBinary(), ["vnc", "record", "127.0.0.1::\(xvnc.port)", "--password-file", passwords.plain,
                                                                        "--duration", "60", "-o", folder.path + "/rec-\(signal).rfb", "--ssh", setup.route],
                                                  environment: setup.environment, logName: "farcast-record", newSession: true)
            defer { recording.stop() }
            try waitUntil("a master and a stream of farcast's", timeout: 20) {
                guard recording.isRunning else { throw PeerFailed(name: "farcast vnc record", log: recording.log) }
                let running = Self.sshProcesses(folder.path)
                return running.contains { $0.contains("ControlMaster=yes") } && running.contains { $0.contains(" -W ") }
            }
            recording.signal(signal)
            #expect(recording.waitForExit(timeout: 10), "farcast did not end on signal \(signal)")
            do {
                try waitUntil("no ssh left after signal \(signal)", timeout: 5) { Self.sshProcesses(folder.path).isEmpty }
            } catch {
                Issue.record("after signal \(signal), still running: \(Self.sshProcesses(folder.path))\nfarcast: \(recording.log)")
            }
        }
    }

    /// keyboard-interactive through PAM (what one-time codes use): answered at a terminal —
    /// ssh asks there itself while farcast waits, the answer typed into tmux, not echoed — and
    /// without one through SSH_ASKPASS.
    @Test func keyboardInteractiveIsAnsweredAtTheTerminalOrThroughAskpass() throws {
        let folder = try TemporaryFolder()
        var setup = try Setup(clientLines: ["PubkeyAuthentication no", "PasswordAuthentication no", "KbdInteractiveAuthentication yes"],
                              keyboardInteractive: true, folder: folder)
        let passwords = try PasswordFiles(in: folder)
        let xvnc = try XvncServer(passwords: passwords)
        let arguments = ["vnc", "info", "127.0.0.1::\(xvnc.port)", "--password-file", passwords.plain, "--ssh", setup.route, "--json"]

        // Without a terminal: SSH_ASKPASS answers the PAM question, once.
        let asked = folder.path + "/asked"
        let askpass = folder.path + "/askpass"
        try "#!/bin/sh\necho \"$1\" >> '\(asked)'\nprintf '%s\\n' '\(SSHServer.password)'\n".write(toFile: askpass, atomically: true, encoding: .utf8)
        chmod(askpass, 0o755)
        var withAskpass = setup
        withAskpass.environment["SSH_ASKPASS"] = askpass
        withAskpass.environment["SSH_ASKPASS_REQUIRE"] = "force"
        let answered = try withAskpass.farcast(arguments)
        #expect(answered.status == 0, "\(answered.log)\nsshd: \(setup.server.log.suffix(2000))")
        let questions = ((try? String(contentsOfFile: asked, encoding: .utf8)) ?? "").split(separator: "\n")
        #expect(questions.count == 1 && questions.first?.contains("Password") == true, "askpass was asked \(questions)")
        #expect(setup.server.log.contains("Accepted keyboard-interactive/pam for \(SSHServer.user)"), "\(setup.server.log.suffix(2000))")

        // At a terminal (tmux): ssh asks there; what is typed is not shown.
        let tmux = try requireExecutable("tmux", package: "tmux")
        let socket = "farcast-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        setup.environment["TMUX"] = nil
        let script = folder.path + "/at-terminal.sh"
        let exports = setup.environment.map { "export \($0.key)='\($0.value.replacingOccurrences(of: "'", with: "'\\''"))'" }.joined(separator: "\n")
        try """
            \(exports)
            '\(try farcastBinary())' \(arguments.map { "'\($0)'" }.joined(separator: " ")) > '\(folder.path)/tty.out' 2> '\(folder.path)/tty.err'
            echo $? > '\(folder.path)/tty.status'
            sleep 30
            """.write(toFile: script, atomically: true, encoding: .utf8)
        let started = try run(tmux, ["-L", socket, "-f", "/dev/null", "new-session", "-d", "-x", "160", "-y", "40", "sh", script])
        #expect(started.status == 0, "\(started.stderr)")
        defer { _ = try? run(tmux, ["-L", socket, "kill-server"]) }
        var pane = ""
        try waitUntil("ssh's question on the terminal", timeout: 20) {
            pane = try run(tmux, ["-L", socket, "capture-pane", "-p"]).stdout
            return pane.contains("Password:")
        }
        _ = try run(tmux, ["-L", socket, "send-keys", "-l", SSHServer.password])
        _ = try run(tmux, ["-L", socket, "send-keys", "Enter"])
        try waitUntil("farcast to finish at the terminal", timeout: 30) { FileManager.default.fileExists(atPath: folder.path + "/tty.status") }
        let status = try String(contentsOfFile: folder.path + "/tty.status", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let stdout = (try? String(contentsOfFile: folder.path + "/tty.out", encoding: .utf8)) ?? ""
        let stderr = (try? String(contentsOfFile: folder.path + "/tty.err", encoding: .utf8)) ?? ""
        #expect(status == "0" && stdout.contains("\"protocol_version\":\"3.8\""), "status \(status)\n\(stdout)\n\(stderr)")
        pane = try run(tmux, ["-L", socket, "capture-pane", "-p"]).stdout
        #expect(!pane.contains(SSHServer.password), "the password was echoed: \(pane)")
        #expect(setup.server.log.components(separatedBy: "Accepted keyboard-interactive/pam").count - 1 == 2, "\(setup.server.log.suffix(2000))")
    }

    /// What only ssh_config expresses, from a configuration farcast never parses: a user
    /// certificate signed by a CA the servers trust (no authorized key anywhere), a two-hop
    /// ProxyJump chain, an `Include`d file and a `Match` block that names the key.
    @Test func certificatesProxyJumpChainsMatchAndIncludeComeFromTheUsersConfig() throws {
        let folder = try TemporaryFolder()
        let keygen = try requireExecutable("ssh-keygen", package: "openssh-client")
        let ca = try SSHTestKey(type: "ed25519", in: folder)
        let user = try SSHTestKey(type: "ecdsa", bits: 256, in: folder)
        let signed = try run(keygen, ["-q", "-s", ca.path, "-I", "farcast-test", "-n", SSHServer.user, "-V", "-5m:+1h", user.path + ".pub"])
        #expect(signed.status == 0, "\(signed.stderr)")
        let trust = "TrustedUserCAKeys \(ca.path).pub\nPasswordAuthentication no"
        let jump1 = try SSHServer(in: folder, name: "jump1", extraConfig: trust)
        let jump2 = try SSHServer(in: folder, name: "jump2", extraConfig: trust)
        let setup = try Setup(serverConfig: trust, clientLines: ["Include \(folder.path)/included.conf"], folder: folder)
        try ([jump1, jump2, setup.server].map(\.knownHostsLine).joined(separator: "\n") + "\n")
            .write(toFile: folder.path + "/known_hosts", atomically: true, encoding: .utf8)
        try """
            Host desk-bastion
              HostName 127.0.0.1
              Port \(setup.server.port)
              User \(SSHServer.user)
              ProxyJump \(SSHServer.user)@127.0.0.1:\(jump1.port),\(SSHServer.user)@127.0.0.1:\(jump2.port)
            Match host 127.0.0.1
              IdentityFile \(user.path)
              IdentitiesOnly yes
            """.write(toFile: folder.path + "/included.conf", atomically: true, encoding: .utf8)
        let passwords = try PasswordFiles(in: folder)
        let xvnc = try XvncServer(passwords: passwords)
        let info = try setup.farcast(["vnc", "info", "127.0.0.1::\(xvnc.port)", "--password-file", passwords.plain, "--ssh", "desk-bastion", "--json"])
        #expect(info.status == 0, "\(info.log)\njump1: \(jump1.log.suffix(1500))\njump2: \(jump2.log.suffix(1500))\nbastion: \(setup.server.log.suffix(1500))")
        #expect(jump1.log.contains("port \(jump2.port)"), "jump1 forwarded to jump2: \(jump1.log.suffix(2000))")
        #expect(jump2.log.contains("port \(setup.server.port)"), "jump2 forwarded to the bastion: \(jump2.log.suffix(2000))")
        #expect(setup.server.log.contains("target 127.0.0.1 port \(xvnc.port)"), "\(setup.server.log.suffix(2000))")
        for (name, server) in [("jump1", jump1), ("jump2", jump2), ("bastion", setup.server)] {
            #expect(server.log.contains("Accepted publickey for \(SSHServer.user)") && server.log.contains("ECDSA-CERT"), "\(name): \(server.log.suffix(1500))")
        }
    }

    /// `ControlMaster auto` with `ControlPersist` in the user's configuration is used as it is:
    /// the second command authenticates no more, and neither waits for the persisting master
    /// (which keeps the stderr of the ssh that started it open).
    @Test func theUsersControlMasterIsUsedAndFarcastStillEndsPromptly() throws {
        let folder = try TemporaryFolder()
        let key = try SSHTestKey(type: "ed25519", in: folder)
        let control = folder.path + "/cm-%C"
        let setup = try Setup(authorizedKeys: [key.publicLine], clientLines: ["IdentitiesOnly yes", "IdentityFile \(key.path)",
                                                                              "ControlMaster auto", "ControlPath \(control)", "ControlPersist 60"],
                              folder: folder)
        let ssh = try requireExecutable("ssh", package: "openssh-client")
        defer { _ = try? run(ssh, ["-F", setup.config, "-O", "exit", "-p", "\(setup.server.port)", "\(SSHServer.user)@127.0.0.1"]) }
        let passwords = try PasswordFiles(in: folder)
        let xvnc = try XvncServer(passwords: passwords)
        for round in 1...2 {
            let start = Date()
            let info = try setup.farcast(["vnc", "info", "127.0.0.1::\(xvnc.port)", "--password-file", passwords.plain, "--ssh", setup.route, "-v"], timeout: 30)
            let seconds = Date().timeIntervalSince(start)
            #expect(info.status == 0, "round \(round): \(info.log)")
            #expect(seconds < 5, "round \(round) took \(seconds) s")
            #expect(info.log.contains("the user's ssh configuration runs a ControlMaster"), "\(info.log)")
        }
        let logins = setup.server.log.components(separatedBy: "Accepted publickey for \(SSHServer.user)").count - 1
        #expect(logins == 1, "two commands through the user's master authenticated \(logins) times")
        let check = try run(ssh, ["-F", setup.config, "-O", "check", "-p", "\(setup.server.port)", "\(SSHServer.user)@127.0.0.1"])
        #expect(check.status == 0, "the user's master persists as configured: \(check.stderr)")
    }

    /// Sendspin's WebSocket through OpenSSH: the tone arrives unbroken.
    @Test func sendspinPlaysThroughOpenSSH() throws {
        let folder = try TemporaryFolder()
        let key = try SSHTestKey(type: "ed25519", in: folder)
        let setup = try Setup(authorizedKeys: [key.publicLine], clientLines: ["IdentitiesOnly yes", "IdentityFile \(key.path)"], folder: folder)
        let server = try SendspinServer(name: "through-ssh")
        let played = try setup.farcast(["sendspin", "play", "sendspin://127.0.0.1:\(server.port)?ssh=\(setup.route)", "--duration", "4",
                                        "--output", "wav:\(folder.path)/heard.wav"])
        #expect(played.status == 0, "\(played.log)")
        try SendspinServerTests.expectUnbrokenTone(folder.path + "/heard.wav")
        #expect(setup.server.log.contains("target 127.0.0.1 port \(server.port)"), "\(setup.server.log.suffix(2000))")
        #expect(Self.sshProcesses(folder.path).isEmpty, "left running: \(Self.sshProcesses(folder.path))")
    }

    /// A saved host remembers which SSH client carries its route; --ssh-via on a command wins.
    @Test func aSavedHostRemembersWhichClientCarriesIt() throws {
        let folder = try TemporaryFolder()
        let key = try SSHTestKey(type: "ed25519", in: folder)
        var setup = try Setup(authorizedKeys: [key.publicLine], clientLines: ["IdentitiesOnly yes", "IdentityFile \(key.path)"], folder: folder)
        // The built-in client reads ~/.ssh from HOME: the test's own.
        setup.environment["HOME"] = folder.path + "/home"
        try FileManager.default.createDirectory(atPath: folder.path + "/home/.ssh", withIntermediateDirectories: true)
        try (setup.server.knownHostsLine + "\n").write(toFile: folder.path + "/home/.ssh/known_hosts", atomically: true, encoding: .utf8)
        let passwords = try PasswordFiles(in: folder)
        let xvnc = try XvncServer(passwords: passwords)
        let added = try setup.farcast(["hosts", "add", "desk", "vnc://127.0.0.1:\(xvnc.port)?ssh=\(setup.route)", "--ssh-via", "builtin",
                                       "--password-file", passwords.plain])
        #expect(added.status == 0, "\(added.log)")
        let builtin = try setup.farcast(["vnc", "info", "desk", "-v", "--ssh-identity", key.path])
        #expect(builtin.status == 0 && builtin.log.contains("SSH: the built-in client (the saved host's ssh-via builtin)"), "\(builtin.log)")
        let overridden = try setup.farcast(["vnc", "info", "desk", "-v", "--ssh-via", "openssh"])
        #expect(overridden.status == 0 && overridden.log.contains("(--ssh-via openssh)"), "\(overridden.log)")
        let edited = try setup.farcast(["hosts", "edit", "desk", "--ssh-via", "openssh"])
        #expect(edited.status == 0, "\(edited.log)")
        let openssh = try setup.farcast(["vnc", "info", "desk", "-v"])
        #expect(openssh.status == 0 && openssh.log.contains("(the saved host's ssh-via openssh)"), "\(openssh.log)")
        let shown = try setup.farcast(["hosts", "show", "desk"])
        #expect(shown.log.contains("openssh"), "\(shown.log)")
    }

    /// A viewer started without a terminal (from a desktop menu): ssh's password question is
    /// asked in the window's own prompt (farcast is ssh's SSH_ASKPASS), the desktop appears
    /// once it is answered, and the answer is asked once.
    @Test func theViewerAsksSSHsQuestionsInItsWindow() throws {
        let folder = try TemporaryFolder()
        var setup = try Setup(clientLines: ["PubkeyAuthentication no", "PasswordAuthentication yes", "KbdInteractiveAuthentication no"], folder: folder)
        let passwords = try PasswordFiles(in: folder)
        let xvnc = try XvncServer(passwords: passwords)
        let screen = try ViewerScreen()
        setup.environment["DISPLAY"] = ":\(screen.display)"
        let viewer = try BackgroundProcess(try farcastBinary(), ["vnc", "view", "127.0.0.1::\(xvnc.port)", "--password-file", passwords.plain,
                                                                "--ssh", setup.route, "--no-clipboard", "--scale", "1:1", "--duration", "8", "--json"],
                                           environment: setup.environment, logName: "farcast-view-ssh", newSession: true)
        defer { viewer.stop() }
        let asking = try screen.window(titled: " — password$", of: viewer)
        try screen.x("xdotool", ["windowfocus", "--sync", asking], package: "xdotool")
        try screen.x("xdotool", ["type", "--delay", "30", SSHServer.password], package: "xdotool")
        try screen.x("xdotool", ["key", "Return"], package: "xdotool")
        _ = try screen.viewerWindow(viewer)
        #expect(viewer.waitForExit(timeout: 20) && viewer.terminationStatus == 0, "\(viewer.log)")
        #expect(viewer.log.contains("\"frames_presented\""), "\(viewer.log)")
        let accepted = setup.server.log.components(separatedBy: "Accepted password for \(SSHServer.user)").count - 1
        #expect(accepted == 1, "sshd accepted \(accepted) passwords\n\(setup.server.log.suffix(2000))")
        #expect(Self.sshProcesses(folder.path).isEmpty, "left running: \(Self.sshProcesses(folder.path))")
    }

    /// A server that sends its whole stream at once and closes: through ssh the client reads it
    /// all and sees its end, as directly, and the hash is the one `replay` computes. (With a
    /// socket pair, ssh exiting with the client's last requests unread made it "connection reset
    /// by peer"; with plain pipes, the client's next request failed with EPIPE and closed the
    /// channel before the rest was read: "not connected", every time on this capture.)
    @Test func aServerThatClosesEndsTheStreamCleanly() throws {
        let folder = try TemporaryFolder()
        let key = try SSHTestKey(type: "ed25519", in: folder)
        let setup = try Setup(authorizedKeys: [key.publicLine], clientLines: ["IdentitiesOnly yes", "IdentityFile \(key.path)"], folder: folder)
        let capture = packageRoot.appendingPathComponent("Tests/RFBTests/Fixtures/captures/xvnc-raw.rfb").path
        let port = try freeTCPPort()
        let server = try BackgroundProcess(try pythonInterpreter(), [packageRoot.appendingPathComponent("scripts/lib/rfb_replay_server.py").path, capture, "\(port)"],
                                           logName: "rfb-replay-server")
        defer { server.stop() }
        try waitUntil("the replay server", timeout: 10) { server.log.contains("ready") }
        var environment = setup.environment
        environment["FARCAST_VNC_PASSWORD"] = "anything"
        var through = setup
        through.environment = environment
        let watched = try through.farcast(["vnc", "watch", "127.0.0.1::\(port)", "--until-eof", "--hash", "--json", "--security", "vncauth,none",
                                           "--ssh", setup.route])
        #expect(watched.status == 0, "\(watched.log)")
        let replayed = try run(try farcastBinary(), ["vnc", "replay", capture, "--json"])
        let hash = { (text: String) in text.split(separator: "\n").last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }?["sha256"] as? String }
        #expect(hash(watched.log) != nil && hash(watched.log) == hash(replayed.stdout), "\(watched.log)")
    }
}
