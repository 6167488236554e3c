import Foundation
import Testing

/// The `farcast` command as a user runs it: exit codes, one-line failures, JSON output.
@Suite(.tags(.groupA)) struct CLITests {
    @Test func versionAndHelp() throws {
        let bin = try farcastBinary()
        let version = try run(bin, ["--version"])
        #expect(version.status == 0)
        #expect(version.stdout.hasPrefix("farcast "))
        let help = try run(bin, ["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("vnc"))
        #expect(help.stdout.contains("sendspin"))
    }

    /// SDL (and the X11, Wayland, PulseAudio and D-Bus libraries under it) is opened only when
    /// a window opens: the executable itself does not name it (the window tests show it loading).
    /// SDL (the window), ngtcp2/GnuTLS (QUIC), Avahi's dns_sd (discovery) and OpenSSL (anonymous
    /// TLS, SSH packets, punktfunk datagrams) are opened on first use, so no command loads them,
    /// or what they pull in, unless it needs them.
    @Test func commandsLoadWindowQUICMDNSAndOpenSSLLibrariesOnlyWhenTheyUseThem() throws {
        let needed = try run("/usr/bin/ldd", [try farcastBinary()])
        #expect(needed.status == 0, "ldd: \(needed.stderr)")
        #expect(needed.stdout.contains("libc.so"), "ldd listed: \(needed.stdout)")
        for library in ["libSDL2", "libX11", "libwayland-client", "libpulse", "libngtcp2", "libgnutls", "libp11-kit",
                        "libdns_sd", "libavahi", "libdbus", "libssl", "libcrypto"] {
            #expect(!needed.stdout.contains(library), "farcast links \(library) for every command:\n\(needed.stdout)")
        }
    }

    @Test func doctorReportsAPrivateStateDirectoryAsJSON() throws {
        let folder = try TemporaryFolder()
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = folder.path
        let result = try run(try farcastBinary(), ["doctor", "--json"], environment: env)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        #expect(object?["state_directory"] as? String == folder.path + "/farcast")
        #expect(object?["state_files_private"] as? Bool == true)
        let attributes = try FileManager.default.attributesOfItem(atPath: folder.path + "/farcast")
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
    }

    /// doctor looks at what each protocol needs beyond the basics: SSH keys and the agent, the
    /// QUIC libraries, the remembered Jellyfin servers and a display (it checked none of them).
    @Test func doctorChecksSSHPunktfunkJellyfinAndADisplay() throws {
        let folder = try TemporaryFolder()
        let home = folder.path + "/home"
        try FileManager.default.createDirectory(atPath: home + "/.ssh", withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: home + "/.ssh/id_rsa", contents: Data("not read".utf8))
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = folder.path
        env["HOME"] = home
        env["SSH_AUTH_SOCK"] = folder.path + "/agent.sock"
        // No ssh program: the built-in client and what it can use.
        let withSSH = env["PATH"]
        env["PATH"] = folder.path + "/empty-bin"
        env.removeValue(forKey: "FARCAST_SSH_COMMAND")
        env.removeValue(forKey: "DISPLAY")
        env.removeValue(forKey: "WAYLAND_DISPLAY")
        func checks() throws -> [String: [String: Any]] {
            let result = try run(try farcastBinary(), ["doctor", "--json"], environment: env)
            #expect(result.status == 0, "stderr: \(result.stderr)")
            let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
            let list = object?["checks"] as? [[String: Any]] ?? []
            return Dictionary(list.map { ($0["name"] as? String ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        }
        var found = try checks()
        #expect(found["SSH (--ssh)"]?["status"] as? String == "warning", "\(found)")
        #expect((found["SSH (--ssh)"]?["detail"] as? String)?.contains("~/.ssh/id_rsa (not usable by the built-in SSH)") == true, "\(found)")
        #expect((found["SSH (--ssh)"]?["detail"] as? String)?.contains("ssh-agent") == true, "\(found)")
        #expect(found["punktfunk"]?["status"] as? String == "ok", "\(found)")
        #expect((found["Jellyfin"]?["detail"] as? String)?.contains("no server signed in") == true, "\(found)")
        #expect(found["display"]?["status"] as? String == "warning", "\(found)")
        #expect((found["display"]?["detail"] as? String)?.contains("neither DISPLAY nor WAYLAND_DISPLAY") == true, "\(found)")

        // An Ed25519 key, no agent, a display named: those two are fine.
        _ = FileManager.default.createFile(atPath: home + "/.ssh/id_ed25519", contents: Data("not read".utf8))
        env.removeValue(forKey: "SSH_AUTH_SOCK")
        env["DISPLAY"] = ":99"
        found = try checks()
        #expect(found["SSH (--ssh)"]?["status"] as? String == "ok", "\(found)")
        #expect(found["display"]?["status"] as? String == "ok", "\(found)")
        let text = try run(try farcastBinary(), ["doctor"], environment: env)
        #expect(text.stdout.contains("SSH (--ssh)") && text.stdout.contains("punktfunk") && text.stdout.contains("Jellyfin"), "\(text.stdout)")

        // With ssh on PATH, it carries --ssh whatever the keys.
        env["PATH"] = withSSH
        env["SSH_AUTH_SOCK"] = folder.path + "/agent.sock"
        found = try checks()
        #expect(found["SSH (--ssh)"]?["status"] as? String == "ok", "\(found)")
        #expect((found["SSH (--ssh)"]?["detail"] as? String)?.contains("OpenSSH /usr/bin/ssh carries --ssh") == true, "\(found)")
    }

    /// docs/cli-reference.md is what the parsers say: regenerated from `--experimental-dump-help`
    /// by scripts/gen/cli_reference.py and compared whole, so a command, option or help text
    /// changed without the page fails here.
    @Test func theCommandReferenceMatchesTheCommands() throws {
        let script = packageRoot.appendingPathComponent("scripts/gen/cli_reference.py").path
        let generated = try run(try requireExecutable("python3", package: "python3"), [script, try farcastBinary()], timeout: 60)
        #expect(generated.status == 0, "\(generated.stderr)")
        let committed = try String(contentsOf: packageRoot.appendingPathComponent("docs/cli-reference.md"), encoding: .utf8)
        if generated.stdout != committed {
            let ours = committed.split(separator: "\n", omittingEmptySubsequences: false)
            let theirs = generated.stdout.split(separator: "\n", omittingEmptySubsequences: false)
            let first = (0..<min(ours.count, theirs.count)).first { ours[$0] != theirs[$0] } ?? min(ours.count, theirs.count)
            Issue.record("""
                docs/cli-reference.md differs from the commands from line \(first + 1): \
                committed "\(first < ours.count ? ours[first] : "")", commands say "\(first < theirs.count ? theirs[first] : "")". \
                Run: python3 scripts/gen/cli_reference.py "$(swift build --show-bin-path)/farcast" > docs/cli-reference.md
                """)
        }
    }

    @Test func failureIsOneLineOnStderrWithNonZeroExit() throws {
        let folder = try TemporaryFolder()
        // A regular file where the state folder must go: doctor cannot create it.
        _ = FileManager.default.createFile(atPath: folder.path + "/farcast", contents: Data("x".utf8))
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = folder.path
        let result = try run(try farcastBinary(), ["doctor"], environment: env)
        #expect(result.status == 1)
        #expect(result.stderr.hasPrefix("farcast: "))
        #expect(result.stderr.contains("not a directory"))
        #expect(result.stderr.split(separator: "\n").count == 1, "stderr: \(result.stderr)")
    }

    @Test func usageErrorsAreOneLineExitTwoAndPointAtHelp() throws {
        let bin = try farcastBinary()
        for arguments in [["doctor", "--quiet", "--verbose"], ["vnc", "screenshot"], ["vnc", "info", "host", "--security", "nonsense"],
                          ["bogus"], ["sendspin", "play", "http://host:8927/"]] {
            let result = try run(bin, arguments)
            #expect(result.status == 2, "\(arguments): exit \(result.status)")
            #expect(result.stderr.hasPrefix("farcast: "), "\(arguments): \(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("--help`"), "\(arguments): \(result.stderr)")
        }
    }

    /// A refused value's message states the range that is accepted (0 Mbit/s was refused as
    /// outside "0…3000"), and the help says the same limits.
    @Test func speedtestLimitsAreStatedAsEnforced() throws {
        let bin = try farcastBinary()
        let zero = try run(bin, ["punktfunk", "speedtest", "127.0.0.1", "--target-mbps", "0"])
        #expect(zero.status == 2 && zero.stderr.contains("--target-mbps must be above 0 and at most 3000"), "\(zero.stderr)")
        let long = try run(bin, ["punktfunk", "speedtest", "127.0.0.1", "--duration-ms", "6000"])
        #expect(long.status == 2 && long.stderr.contains("--duration-ms must be within 100…5000"), "\(long.stderr)")
        let help = try run(bin, ["punktfunk", "speedtest", "--help"])
        #expect(help.stdout.contains("100–5000 ms") && !help.stdout.contains("clamps"), "\(help.stdout)")
    }

    /// One set of names (`--timeout` for connection waits, `--duration` for run length): each
    /// renamed option's old spelling still sets the same value (an out-of-range value is refused
    /// under the new name), and only `--help-hidden` shows it.
    @Test func renamedOptionsKeepTheirOldSpellingHidden() throws {
        let bin = try farcastBinary()
        let cases: [(command: [String], new: String, old: String, value: String)] = [
            (["vnc", "info", "127.0.0.1::9"], "--timeout", "--connect-timeout", "0"),
            (["vnc", "screenshot", "127.0.0.1::9", "-o", "/tmp/never.png"], "--timeout", "--connect-timeout", "0"),
            (["sendspin", "play", "ws://127.0.0.1:9/sendspin", "--output", "null"], "--timeout", "--connect-timeout", "0"),
            (["discover"], "--duration", "--seconds", "99"),
            (["punktfunk", "discover"], "--duration", "--seconds", "99"),
            (["punktfunk", "receive", "127.0.0.1"], "--duration", "--seconds", "0"),
            (["jellyfin", "discover"], "--duration", "--timeout", "99"),
        ]
        for c in cases {
            for spelling in [c.new, c.old] {
                let result = try run(bin, c.command + [spelling, c.value])
                #expect(result.status == 2 && result.stderr.contains("\(c.new) must be"), "\(c.command) \(spelling): \(result.stderr)")
            }
            let help = try run(bin, c.command.prefix(2).filter { !$0.contains(":") && !$0.contains(".") } + ["--help"])
            #expect(help.stdout.contains(c.new) && !help.stdout.contains(c.old + " "), "\(c.command): \(help.stdout)")
            let hidden = try run(bin, c.command.prefix(2).filter { !$0.contains(":") && !$0.contains(".") } + ["--help-hidden"])
            #expect(hidden.stdout.contains(c.old + " "), "\(c.command): --help-hidden should list \(c.old)")
        }
        let screenshot = try run(bin, ["vnc", "screenshot", "--help"])
        #expect(screenshot.stdout.contains("--frame-timeout"))
    }

    @Test func helpOfEveryGroupExitsZero() throws {
        let bin = try farcastBinary()
        for arguments in [["vnc"], ["vnc", "--help"], ["sendspin", "--help"], ["vnc", "clipboard"], ["vnc", "screenshot", "--help"]] {
            let result = try run(bin, arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            #expect(result.stdout.contains("USAGE"), "\(arguments)")
        }
    }
}
