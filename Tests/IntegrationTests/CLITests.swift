import Foundation
import Testing

/// The `farcast` command as a user runs it: exit codes, one-line failures, JSON output.
@Suite struct CLITests {
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

    @Test func helpOfEveryGroupExitsZero() throws {
        let bin = try farcastBinary()
        for arguments in [["vnc"], ["vnc", "--help"], ["sendspin", "--help"], ["vnc", "clipboard"], ["vnc", "screenshot", "--help"]] {
            let result = try run(bin, arguments)
            #expect(result.status == 0, "\(arguments): \(result.stderr)")
            #expect(result.stdout.contains("USAGE"), "\(arguments)")
        }
    }
}
