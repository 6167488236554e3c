import FarcastSupport
import Foundation
import RFB
import Testing

/// `farcast vnc …` as a user runs it against a real Xvnc.
@Suite(.tags(.groupA), .serialized, .timeLimit(.minutes(3)))
struct VNCCommandTests {
    @Test func screenshotWritesAPNGIdenticalToTheXServersFramebuffer() throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(geometry: "320x240", passwords: passwords)
        let viewer = try server.drawTestContent(width: 200, height: 120, in: folder)
        defer { viewer.stop() }
        let output = folder.path + "/shot.png"
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = folder.path + "/state"
        let result = try run(try farcastBinary(), ["vnc", "screenshot", "127.0.0.1::\(server.port)", "--password-file", passwords.plain,
                                                   "-o", output], environment: env)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stdout.contains("320x240"))
        let png = try decodePNG(Array(try Data(contentsOf: URL(fileURLWithPath: output))))
        let screen = try XWDImage.captureRoot(of: server)
        #expect(png.width == screen.width && png.height == screen.height)
        #expect(png.pixels == screen.pixels, "the PNG differs from xwd -root")
    }

    @Test func infoReportsTheServerAsJSONWithThePasswordFromTheEnvironment() throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(geometry: "320x240", passwords: passwords)
        var env = ProcessInfo.processInfo.environment
        env["FARCAST_VNC_PASSWORD"] = passwords.password
        env["XDG_STATE_HOME"] = folder.path + "/state"
        let result = try run(try farcastBinary(), ["vnc", "info", "vnc://127.0.0.1:\(server.port)", "--json"], environment: env)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        #expect(object?["width"] as? Int == 320)
        #expect(object?["height"] as? Int == 240)
        #expect(object?["protocol_version"] as? String == "3.8")
        #expect(object?["security_types"] as? [String] == ["VncAuth(2)"])
        #expect((object?["pixel_format"] as? String)?.contains("32 bpp") == true)
        #expect(object?["name"] is String)
    }

    /// A password saved with a host (`hosts add --password-file`, kept in the secret store) is
    /// used when the host is named, after --password-file and FARCAST_VNC_PASSWORD; a wrong one
    /// is named as the source of the refused password.
    @Test func aSavedHostsPasswordIsUsedByName() throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(geometry: "320x240", passwords: passwords)
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = folder.path + "/state"
        env["XDG_DATA_HOME"] = folder.path + "/data"
        env["FARCAST_SECRET_STORE"] = "file"
        env.removeValue(forKey: "FARCAST_VNC_PASSWORD")
        let farcast = try farcastBinary()
        let added = try run(farcast, ["hosts", "add", "desk", "vnc://127.0.0.1:\(server.port)", "--password-file", passwords.plain], environment: env)
        #expect(added.status == 0, "\(added.stderr)")
        let byName = try run("/usr/bin/setsid", ["--wait", farcast, "vnc", "info", "desk", "--json"], environment: env, stdin: Data())
        #expect(byName.status == 0, "stderr: \(byName.stderr)")
        #expect((try? JSONSerialization.jsonObject(with: Data(byName.stdout.utf8)) as? [String: Any])?["width"] as? Int == 320, "\(byName.stdout)")

        let wrong = folder.path + "/wrong.txt"
        try "not-it\n".write(toFile: wrong, atomically: true, encoding: .utf8)
        chmod(wrong, 0o600)
        #expect(try run(farcast, ["hosts", "add", "desk2", "vnc://127.0.0.1:\(server.port)", "--password-file", wrong], environment: env).status == 0)
        let refused = try run("/usr/bin/setsid", ["--wait", farcast, "vnc", "info", "desk2"], environment: env, stdin: Data())
        #expect(refused.status == 1 && refused.stderr.contains("the password saved with the host"), "stderr: \(refused.stderr)")
        // A password file on the command line still comes first.
        let file = try run(farcast, ["vnc", "info", "desk2", "--password-file", passwords.plain], environment: env, stdin: Data())
        #expect(file.status == 0, "stderr: \(file.stderr)")
    }

    @Test func failuresAreOneLineWithAReason() throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(geometry: "64x64", passwords: passwords)
        var env = ProcessInfo.processInfo.environment
        env["FARCAST_VNC_PASSWORD"] = "wrong-password"
        env.removeValue(forKey: "DISPLAY")
        let wrong = try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::\(server.port)"], environment: env, stdin: Data())
        #expect(wrong.status == 1)
        #expect(wrong.stderr.hasPrefix("farcast: authentication failed"), "stderr: \(wrong.stderr)")
        #expect(wrong.stderr.split(separator: "\n").count == 1)

        // No password anywhere and no terminal to prompt on (setsid drops the controlling terminal).
        env.removeValue(forKey: "FARCAST_VNC_PASSWORD")
        let missing = try run("/usr/bin/setsid", ["--wait", try farcastBinary(), "vnc", "info", "127.0.0.1::\(server.port)"], environment: env, stdin: Data())
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("--password-file"), "stderr: \(missing.stderr)")

        // Nothing listening.
        let refused = try run(try farcastBinary(), ["vnc", "info", "127.0.0.1::1"], environment: env)
        #expect(refused.status == 1)
        #expect(refused.stderr.hasPrefix("farcast: cannot connect"), "stderr: \(refused.stderr)")

        let badAddress = try run(try farcastBinary(), ["vnc", "info", "vnc://"], environment: env)
        #expect(badAddress.status == 2)
        #expect(badAddress.stderr.contains("cannot read"))
    }

    /// `watch --until-eof --hash` against a replay server gives the same figures as `replay`:
    /// a stream served by any server can be checked.
    @Test func watchingAReplayedStreamMatchesReplayingTheCapture() throws {
        let directory = packageRoot.appendingPathComponent("Tests/RFBTests/Fixtures/captures")
        let python = try pythonInterpreter()
        var port = 17_100
        for name in ["xvnc-tight.rfb", "xvnc-zrle.rfb", "x11vnc-zlib.rfb", "xvnc-tight-jpeg.rfb"] {
            port += 1
            let capture = directory.appendingPathComponent(name).path
            // The server serves exactly one connection: wait for its "ready" line, not a probe.
            let server = try BackgroundProcess(python, [packageRoot.appendingPathComponent("scripts/lib/rfb_replay_server.py").path, capture, "\(port)"],
                                               logName: "rfb-replay-server")
            for _ in 0..<200 where !server.log.contains("ready") { usleep(50_000) }
            #expect(server.log.contains("ready"), "the replay server did not start: \(server.log)")
            var env = ProcessInfo.processInfo.environment
            env["FARCAST_VNC_PASSWORD"] = "anything"
            let watched = try run(try farcastBinary(), ["vnc", "watch", "127.0.0.1::\(port)", "--until-eof", "--hash", "--json", "--security", "vncauth,none"],
                                  environment: env, timeout: 60)
            #expect(watched.status == 0, "\(name): \(watched.stderr)")
            let replayed = try run(try farcastBinary(), ["vnc", "replay", capture, "--json"])
            let a = try JSONSerialization.jsonObject(with: Data(watched.stdout.utf8)) as? [String: Any]
            let b = try JSONSerialization.jsonObject(with: Data(replayed.stdout.utf8)) as? [String: Any]
            #expect(a?["sha256"] as? String == b?["sha256"] as? String, "\(name): watch and replay disagree")
            #expect(a?["pixels"] as? Int == b?["pixels"] as? Int)
            #expect(a?["updates"] as? Int == b?["updates"] as? Int)
        }
    }
}
