import Foundation
import Synchronization
import RFB
import Testing

/// The command line against hostile and broken peers, as docs/cli.md promises: every wait
/// bounded, every signal honoured within a second, every failure one line naming the cause, exit
/// 1 for a failure and 2 for a mistake in the command — checked for each finding of the faults
/// issue. Peers: scripts/lib/hostile_server.py for the misbehaving servers, real Xvnc and
/// aiosendspin for the rest.
@Suite(.tags(.groupA), .serialized, .timeLimit(.minutes(6)))
struct FaultInjectionTests {
    struct Outcome {
        var result: ProcessResult
        var seconds: Double
    }

    static func farcast(_ arguments: [String], environment extra: [String: String] = [:], folder: TemporaryFolder,
                        timeout: TimeInterval = 30) throws -> Outcome {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_STATE_HOME"] = folder.path + "/state"
        environment["FARCAST_VNC_PASSWORD"] = "secret12"
        environment.merge(extra) { _, new in new }
        let start = Date()
        let result = try run(try farcastBinary(), arguments, environment: environment, timeout: timeout)
        return Outcome(result: result, seconds: Date().timeIntervalSince(start))
    }

    /// One line on stderr, starting "farcast: " and containing `cause`.
    static func expectOneLine(_ outcome: Outcome, _ cause: String, status: Int32 = 1, within seconds: Double,
                              sourceLocation: SourceLocation = #_sourceLocation) {
        let stderr = outcome.result.stderr
        #expect(outcome.result.status == status, "exit \(outcome.result.status), stderr: \(stderr)", sourceLocation: sourceLocation)
        #expect(stderr.hasPrefix("farcast: "), "stderr: \(stderr)", sourceLocation: sourceLocation)
        #expect(stderr.split(separator: "\n").count == 1, "more than one line: \(stderr)", sourceLocation: sourceLocation)
        #expect(stderr.contains(cause), "expected \"\(cause)\" in: \(stderr)", sourceLocation: sourceLocation)
        #expect(outcome.seconds < seconds, "took \(outcome.seconds) s", sourceLocation: sourceLocation)
    }

    // MARK: - Hostile servers

    static let vncCases: [(mode: String, cause: String)] = [
        ("silent", "sent nothing"),
        ("http", "vncs://"),
        ("rfb-banner-silent", "waiting for its list of security types"),
        ("slowloris", "of the 12 bytes of its RFB banner"),
        ("garbage", "not a VNC server"),
        ("ssh", "an SSH server"),
        ("close", "closed before the server sent its RFB banner"),
        ("rfb-close-mid", "closed during the handshake"),
        ("rfb-none-close-mid-stream", "in the middle of a framebuffer update"),
        ("rfb-reason-garbage", "failure message was malformed"),
    ]

    @Test func vncAgainstEveryHostileServer() throws {
        let folder = try TemporaryFolder()
        for (mode, cause) in Self.vncCases {
            let server = try HostileServer(mode: mode)
            let outcome = try Self.farcast(["vnc", "screenshot", "127.0.0.1::\(server.port)", "-o", folder.path + "/x.png", "--timeout", "3"],
                                           folder: folder)
            Self.expectOneLine(outcome, cause, within: 6)
        }
    }

    /// SetDesktopSize answered with status 4 ("forwarded": passed on, may complete later) is not
    /// a refusal: the client waits for the change, and only when it never comes says so. (No
    /// server here forwards resizes, so a scripted one answers; see hostile_server.py.)
    @Test func aForwardedResizeIsWaitedForNotRefused() async throws {
        let forwarded = try HostileServer(mode: "rfb-resize-forwarded")
        let client = try await VNCClient.connect(to: VNCEndpoint(host: "127.0.0.1", port: forwarded.port),
                                                 credentials: { _ in VNCCredentials(password: "") })
        try await client.waitForFirstFrame(timeout: .seconds(10))
        try await client.requestDesktopSize(width: 80, height: 60, timeout: .seconds(5))
        let size = await (client.framebuffer.width, client.framebuffer.height)
        #expect(size == (80, 60))
        await client.close()

        let never = try HostileServer(mode: "rfb-resize-forwarded-never")
        let stuck = try await VNCClient.connect(to: VNCEndpoint(host: "127.0.0.1", port: never.port),
                                                credentials: { _ in VNCCredentials(password: "") })
        try await stuck.waitForFirstFrame(timeout: .seconds(10))
        do {
            try await stuck.requestDesktopSize(width: 80, height: 60, timeout: .seconds(1.5))
            Issue.record("a forwarded resize that never came was reported as done")
        } catch let error as RFBError {
            #expect("\(error)".contains("status 4") && "\(error)".contains("may complete later") && "\(error)".contains("64×64"), "\(error)")
        }
        await stuck.close()
    }

    /// A server that accepts and says nothing may want TLS first: with time left in the
    /// handshake, the client says so after 3 s, before the wait ends.
    @Test func aSilentServerGetsTheTLSFirstHintEarly() throws {
        let folder = try TemporaryFolder()
        let server = try HostileServer(mode: "silent")
        let outcome = try Self.farcast(["vnc", "info", "127.0.0.1::\(server.port)", "--timeout", "7"], folder: folder)
        #expect(outcome.result.status == 1)
        let lines = outcome.result.stderr.split(separator: "\n")
        #expect(lines.count == 2, "stderr: \(outcome.result.stderr)")
        #expect(lines.first?.contains("sent nothing for 3 s") == true && lines.first?.contains("vncs://127.0.0.1:\(server.port)") == true,
                "stderr: \(outcome.result.stderr)")
        #expect(lines.last?.hasPrefix("farcast: ") == true && lines.last?.contains("sent nothing") == true, "stderr: \(outcome.result.stderr)")
    }

    /// A server that keeps sending while the client is still getting the password (a person at
    /// a prompt; here a provider that takes 3 s): past 1 MiB the client reads no further until
    /// the password is there — TCP's back-pressure holds the rest at the server — instead of
    /// failing (a slow prompt turned a replay server that sends ahead into an error) or holding
    /// it all in memory. The zeros then make no ServerInit farcast accepts; that failure comes
    /// after the prompt, for what the bytes say.
    @Test func vncServerFloodingWhileThePasswordIsAskedIsReadNoFurther() async throws {
        let server = try HostileServer(mode: "rfb-flood-at-prompt")
        @Sendable func sentMiB() -> Int {
            server.process.log.split(separator: "\n").compactMap { $0.hasPrefix("sent ") ? Int($0.split(separator: " ")[1]) : nil }.last ?? 0
        }
        let duringPrompt = Mutex(0)
        let started = ContinuousClock.now
        do {
            let client = try await VNCClient.connect(to: VNCEndpoint(host: "127.0.0.1", port: server.port), credentials: { _ in
                try await Task.sleep(for: .seconds(3))
                duringPrompt.withLock { $0 = sentMiB() }
                return VNCCredentials(password: "secret12")
            })
            await client.close()
        } catch {
            #expect(!"\(error)".contains("while the client was"), "\(error)")
        }
        #expect(ContinuousClock.now - started >= .seconds(3), "the prompt was waited for, not cut short")
        let held = duringPrompt.withLock { $0 }
        #expect(held >= 1 && held <= 24, "the server got \(held) MiB of 64 out while the password was asked")
    }

    /// A replay server writes a whole recorded session at once, without waiting for the answer
    /// to its VNC-authentication challenge — 2 MiB here, a capture grown with full-screen Raw
    /// updates. A password that takes 2 s to come (a person at the prompt) must cost nothing:
    /// the session decodes to exactly the picture the capture replays to (it failed with "more
    /// than 1 MiB while the client was waiting for credentials" in about 3 of 10 runs even with
    /// the password at hand).
    @Test func aReplayThatSendsAheadOfASlowPasswordDecodesWhole() async throws {
        let folder = try TemporaryFolder()
        let original = try Data(contentsOf: packageRoot.appendingPathComponent("Tests/RFBTests/Fixtures/captures/xvnc-raw.rfb"))
        let headerEnd = try #require(original.firstIndex(of: 0x0a).flatMap { first in original[(first + 1)...].firstIndex(of: 0x0a) }) + 1
        let stream = Array(original[headerEnd...])
        // The framebuffer size from ServerInit: banner 12, type list 2, challenge 16, result 4.
        let width = Int(stream[34]) << 8 | Int(stream[35]), height = Int(stream[36]) << 8 | Int(stream[37])
        var grown = Array(original)
        var frame = 0
        while grown.count - headerEnd < 2 << 20 {
            defer { frame += 1 }
            grown += [0, 0, 0, 1, 0, 0, 0, 0, UInt8(width >> 8), UInt8(width & 0xff), UInt8(height >> 8), UInt8(height & 0xff), 0, 0, 0, 0]
            grown += (0..<(width * height)).flatMap { i -> [UInt8] in [UInt8(truncatingIfNeeded: i &* 7 &+ frame), UInt8(truncatingIfNeeded: i >> 3), UInt8(truncatingIfNeeded: frame &* 80), 0] }
        }
        #expect(grown.count - headerEnd > (1 << 20) + (1 << 19), "the stream outgrows the 1 MiB a prompt may hold")
        let capturePath = folder.path + "/grown.rfb"
        try Data(grown).write(to: URL(fileURLWithPath: capturePath))
        let expected = try RFBReplay.run(try RFBCapture(bytes: grown))
        #expect(expected.error == nil && expected.updates >= 4, "\(String(describing: expected.error))")

        let port = try freeTCPPort()
        let replay = try BackgroundProcess(try pythonInterpreter(), [packageRoot.appendingPathComponent("scripts/lib/rfb_replay_server.py").path, capturePath, "\(port)"],
                                           logName: "rfb-replay-server")
        for _ in 0..<200 where !replay.log.contains("ready") { usleep(50_000) }
        let client = try await VNCClient.connect(to: VNCEndpoint(host: "127.0.0.1", port: port), credentials: { _ in
            try await Task.sleep(for: .seconds(2))
            return VNCCredentials(password: "replay")
        })
        let deadline = ContinuousClock.now + .seconds(30)
        while await client.isConnected, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let framebuffer = await client.framebuffer
        await client.close()
        #expect(framebuffer == expected.framebuffer, "the picture after a slow password differs from the capture's")
    }

    /// A server that sends empty FramebufferUpdates as fast as the socket takes them and never
    /// reads (after a 0×0 ServerInit, so no pixels are involved): each update is answered with
    /// an update request, thousands per read. Before, every message became its own queued action
    /// and write — a release build grew to 174 MB in 3 s and `--duration 3` ended after 8 s. Now a
    /// read's answers leave as one write and one event (release build: peak anon 127 → 32 MiB,
    /// CPU 9.6 → 1 s; docs/benchmarks.md). The debug build the tests run decodes ~10× slower
    /// and so meets a smaller part of the flood — there the old code also stayed under this
    /// bound (checked: 23 MiB) — so this test holds the bound and the exit time rather than
    /// telling the two versions apart.
    @Test func vncServerFloodingEmptyUpdatesCostsBoundedMemoryAndTime() throws {
        let folder = try TemporaryFolder()
        let server = try HostileServer(mode: "rfb-empty-updates")
        let outcome = try Self.farcast(["vnc", "watch", "127.0.0.1::\(server.port)", "--security", "none", "--duration", "3"], folder: folder)
        #expect(outcome.result.status == 0, "exit \(outcome.result.status), stderr: \(outcome.result.stderr)")
        #expect(outcome.result.stdout.contains("updates"), "stdout: \(outcome.result.stdout)")
        // 3 s and up to 2 s for the close (the server takes nothing more); a debug build (what
        // the tests run) needs ~1 s of CPU per 256 KiB read of this flood, so the bound is loose:
        // with four groups of suites sharing CI's two cores it once took 14.2 s. What it guards
        // is an end at all, not a figure (the figures are in docs/benchmarks.md).
        #expect(outcome.seconds < 25, "--duration 3 took \(outcome.seconds) s")
        #expect(outcome.result.peakAnonMiB > 0, "no memory figure was read from /proc")
        #expect(outcome.result.peakAnonMiB < 64, "peak RssAnon \(outcome.result.peakAnonMiB) MiB (a normal session: 15–20)")
    }

    static let sendspinCases: [(mode: String, path: String, cause: String)] = [
        ("silent", "/sendspin", "did not answer the WebSocket upgrade within 3 s"),
        ("ws-silent-upgrade", "/sendspin", "did not answer the WebSocket upgrade within 3 s"),
        ("ws-404", "/sendspin", "HTTP 404 Not Found"),
        ("ws-404", "/", "Sendspin servers answer on the path /sendspin"),
        ("ws-no-init-answer", "/sendspin", "waiting for an answer to client/init"),
        ("http", "/sendspin", "HTTP 404"),
        ("ssh", "/sendspin", "an SSH server"),
        ("rfb-banner-silent", "/sendspin", "a VNC server"),
        ("garbage", "/sendspin", "not a Sendspin"),
        ("close", "/sendspin", "closed the connection without answering the WebSocket upgrade"),
    ]

    @Test func sendspinAgainstEveryHostileServer() throws {
        let folder = try TemporaryFolder()
        for (mode, path, cause) in Self.sendspinCases {
            let server = try HostileServer(mode: mode)
            let outcome = try Self.farcast(["sendspin", "play", "ws://127.0.0.1:\(server.port)\(path)", "--timeout", "3", "--duration", "20"],
                                           folder: folder)
            Self.expectOneLine(outcome, cause, within: 6)
        }
    }

    // MARK: - Signals

    /// Starts farcast, waits `after` seconds, sends `signal` and measures how long it takes to exit.
    static func interrupt(_ arguments: [String], with signal: Int32, after: Double = 1, folder: TemporaryFolder,
                          environment extra: [String: String] = [:]) throws -> (status: Int32, seconds: Double, log: String) {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_STATE_HOME"] = folder.path + "/state"
        environment["FARCAST_VNC_PASSWORD"] = "secret12"
        environment.merge(extra) { _, new in new }
        let process = try BackgroundProcess(try farcastBinary(), arguments, environment: environment, logName: "farcast-signal")
        usleep(UInt32(after * 1_000_000))
        #expect(process.isRunning, "\(arguments) ended before the signal: \(process.log)")
        let start = Date()
        process.signal(signal)
        let exited = process.waitForExit(timeout: 10)
        let seconds = Date().timeIntervalSince(start)
        #expect(exited, "\(arguments) still running 10 s after the signal")
        return (process.terminationStatus, seconds, process.log)
    }

    @Test func signalsEndEveryWaitWithinASecond() throws {
        let folder = try TemporaryFolder()
        let silent = try HostileServer(mode: "silent")
        let wsSilent = try HostileServer(mode: "ws-silent-upgrade")
        let noInit = try HostileServer(mode: "ws-no-init-answer")
        let silentUDP = try SilentUDPPort()
        // The bound is 1 s; 2 s leaves room for a loaded CI machine's scheduling.
        for signal in [SIGINT, SIGTERM] {
            let name = signal == SIGINT ? "SIGINT" : "SIGTERM"
            // A one-shot command waiting on a silent server: interrupted, exit 1.
            let vnc = try Self.interrupt(["vnc", "info", "127.0.0.1::\(silent.port)", "--timeout", "60"], with: signal, folder: folder)
            #expect(vnc.seconds < 2, "vnc info took \(vnc.seconds) s to stop on \(name)")
            #expect(vnc.status == 1 && vnc.log.contains("interrupted by \(name)"), "\(vnc.status): \(vnc.log)")
            // The same words for a punktfunk handshake waiting on a host that never answers.
            let pf = try Self.interrupt(["punktfunk", "probe", "127.0.0.1:\(silentUDP.port)", "--tofu", "--timeout", "60"], with: signal, folder: folder)
            #expect(pf.seconds < 2, "punktfunk probe took \(pf.seconds) s to stop on \(name)")
            #expect(pf.status == 1 && pf.log.contains("farcast: interrupted by \(name)"), "\(pf.status): \(pf.log)")
            // A player that runs until stopped, in every phase of opening: exit 0.
            for (server, phase) in [(wsSilent, "the WebSocket upgrade"), (noInit, "client/init")] {
                let play = try Self.interrupt(["sendspin", "play", "ws://127.0.0.1:\(server.port)/sendspin", "--timeout", "60"], with: signal, folder: folder)
                #expect(play.seconds < 2, "sendspin play waiting for \(phase) took \(play.seconds) s to stop on \(name)")
                #expect(play.status == 0, "sendspin play waiting for \(phase) exited \(play.status) on \(name): \(play.log)")
            }
        }
        // The daemon dialling a silent server keeps trying (not one attempt and silence), and
        // SIGTERM, as systemd sends it, ends it cleanly.
        let config = folder.path + "/daemon.conf"
        try "server = ws://127.0.0.1:\(wsSilent.port)/sendspin\noutput = null\n".write(toFile: config, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_STATE_HOME"] = folder.path + "/state"
        let daemon = try BackgroundProcess(try farcastBinary(), ["sendspin", "daemon", "--config", config], environment: environment, logName: "daemon")
        try waitUntil("the daemon to try again after a silent server", timeout: 40) { daemon.log.components(separatedBy: "connecting again").count >= 3 }
        let start = Date()
        daemon.signal(SIGTERM)
        #expect(daemon.waitForExit(timeout: 10))
        #expect(Date().timeIntervalSince(start) < 2)
        #expect(daemon.terminationStatus == 0, "daemon: \(daemon.log)")
        // Worded as every interrupted command is (it said "stopped (SIGTERM)" / "(interrupted)").
        #expect(daemon.log.contains("stopped (interrupted by SIGTERM)"), "daemon: \(daemon.log)")
    }

    /// punktfunk's handshake waits as long as --timeout says (the QUIC idle timer ended it at 8 s
    /// while the message named the flag's value), and a UDP port nothing listens on fails at once.
    @Test func punktfunkHandshakeWaitsAsLongAsAskedAndNoLonger() throws {
        let folder = try TemporaryFolder()
        let closed = try Self.farcast(["punktfunk", "probe", "127.0.0.1:\(try freeUDPPort())", "--tofu", "--timeout", "20"], folder: folder)
        #expect(closed.result.status == 1 && closed.result.stderr.contains("nothing is listening on that UDP port"), "\(closed.result.stderr)")
        #expect(closed.seconds < 3, "a closed port took \(closed.seconds) s")
        let silent = try SilentUDPPort()
        let waited = try Self.farcast(["punktfunk", "probe", "127.0.0.1:\(silent.port)", "--tofu", "--timeout", "11"], folder: folder)
        #expect(waited.result.status == 1 && waited.result.stderr.contains("within 11 s"), "\(waited.result.stderr)")
        #expect(waited.seconds > 10.5 && waited.seconds < 14, "--timeout 11 gave up after \(waited.seconds) s")
    }

    // MARK: - Mistakes found before connecting

    @Test func filesAreCheckedBeforeAnyConnection() throws {
        let folder = try TemporaryFolder()
        // A silent server: a command that connected would sit there; these must fail at once.
        let server = try HostileServer(mode: "silent")
        let address = "127.0.0.1::\(server.port)"
        let cases: [([String], String)] = [
            (["vnc", "info", address, "--password-file", folder.path + "/missing.txt"], "cannot read the password file \(folder.path)/missing.txt: no such file or directory"),
            (["vnc", "screenshot", address, "-o", "/nonexistent/dir/x.png"], "the folder /nonexistent/dir does not exist"),
            (["vnc", "screenshot", address, "-o", folder.path + "/shot.bmp"], "cannot write .bmp images"),
            (["vnc", "record", address, "-o", "/nonexistent/c.rfb"], "cannot write the capture"),
            (["vnc", "do", address, "-e", "expect-screen " + folder.path + "/absent.png"], "cannot read \(folder.path)/absent.png"),
            (["vnc", "do", address, "-e", "bogus", "-e", "type fine", "-e", "move 1"], "-e step 3: usage: move X Y"),
            (["sendspin", "play", "ws://127.0.0.1:\(server.port)/sendspin", "--output", "wav:/nonexistent/x.wav"], "cannot write the WAV output"),
            (["sendspin", "play", "ws://127.0.0.1:\(server.port)/sendspin", "--stats-json", "/nonexistent/s.json"], "cannot write the stats file"),
            (["sendspin", "play", "ws://127.0.0.1:\(server.port)/sendspin", "--trace", "/nonexistent/t.jsonl"], "cannot write the trace file"),
            (["sendspin", "play", "http://127.0.0.1:8927/"], "ws://127.0.0.1:8927/sendspin"),
            (["sendspin", "daemon", "--config", folder.path + "/none.conf"], "no such file or directory"),
            (["vnc", "info", "::1"], "brackets"),
            (["vnc", "info", "http://host:8080/"], "is a jellyfin address; this command needs vnc"),
        ]
        for (arguments, cause) in cases {
            Self.expectOneLine(try Self.farcast(arguments, folder: folder), cause, status: 2, within: 3)
        }
        // The same script mistake exits 2 from a file too, with every bad line listed.
        let script = folder.path + "/bad.txt"
        try "bogus\ntype fine\nmove 1\n".write(toFile: script, atomically: true, encoding: .utf8)
        let fromFile = try Self.farcast(["vnc", "do", address, script], folder: folder)
        Self.expectOneLine(fromFile, "line 1: unknown step 'bogus'", status: 2, within: 3)
        #expect(fromFile.result.stderr.contains("; line 3: usage: move X Y"), "\(fromFile.result.stderr)")
    }

    // MARK: - Against real servers

    @Test func vncFindingsAgainstXvnc() throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(passwords: passwords)
        let address = "127.0.0.1::\(server.port)"
        // --json on every command: one object on stdout, numbers as numbers.
        for arguments in [["type", address, "hi"], ["key", address, "Escape"], ["click", address, "10", "10"], ["move", address, "5", "5"],
                          ["resize", address, "640x480"], ["do", address, "-e", "move 1 1", "-e", "sync"],
                          ["clipboard", "set", address, "x", "--hold", "0"]] {
            let outcome = try Self.farcast(["vnc"] + arguments + ["--json", "--password-file", passwords.plain], folder: folder)
            #expect(outcome.result.status == 0, "\(arguments): \(outcome.result.stderr)")
            let object = try? JSONSerialization.jsonObject(with: Data(outcome.result.stdout.utf8)) as? [String: Any]
            #expect(object?["server"] as? String == address.replacingOccurrences(of: "::", with: "::"), "\(arguments): \(outcome.result.stdout)")
            #expect(object?["steps"] is NSNumber, "\(arguments): \(outcome.result.stdout)")
        }
        let info = try Self.farcast(["vnc", "info", address, "--json", "--password-file", passwords.plain], folder: folder)
        #expect(info.result.stdout.contains("\"vencrypt_subtypes\""), "\(info.result.stdout)")
        let recorded = try Self.farcast(["vnc", "record", address, "-o", folder.path + "/c.rfb", "--duration", "0.5", "--json",
                                         "--password-file", passwords.plain], folder: folder)
        let record = try? JSONSerialization.jsonObject(with: Data(recorded.result.stdout.utf8)) as? [String: Any]
        #expect(record?["bytes"] is NSNumber, "record: \(recorded.result.stdout) \(recorded.result.stderr)")

        // A size no server accepts is a usage error before connecting (exit 2). (That a refusal
        // from the server is reported without "step at line 1" is checked against x11vnc in
        // VNCInteractionTests.)
        let resize = try Self.farcast(["vnc", "resize", address, "20000x10", "--password-file", passwords.plain], folder: folder)
        #expect(resize.result.status == 2 && !resize.result.stderr.contains("step at line"), "\(resize.result.stderr)")

        // A wrong password names where it came from.
        let wrong = folder.path + "/wrong.txt"
        try "not-it\n".write(toFile: wrong, atomically: true, encoding: .utf8)
        chmod(wrong, 0o600)
        Self.expectOneLine(try Self.farcast(["vnc", "info", address, "--password-file", wrong], folder: folder),
                           "(the password came from the file \(wrong))", within: 10)

        // Text offered to TigerVNC that nobody pastes: a failure, said plainly, not exit 0.
        Self.expectOneLine(try Self.farcast(["vnc", "clipboard", "set", address, "unpasted", "--hold", "2", "--quiet", "--password-file", passwords.plain], folder: folder),
                           "nothing was pasted on the remote desktop within 2 s", within: 15)
    }

    @Test func vncWatchNoticesTheServerDying() throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        for signal in [SIGTERM, SIGKILL] {
            let server = try XvncServer(passwords: passwords)
            var environment = ProcessInfo.processInfo.environment
            environment["XDG_STATE_HOME"] = folder.path + "/state"
            let watch = try BackgroundProcess(try farcastBinary(), ["vnc", "watch", "127.0.0.1::\(server.port)", "--duration", "30",
                                                                    "--password-file", passwords.plain], environment: environment, logName: "watch")
            usleep(2_000_000)
            server.process.signal(signal)
            #expect(watch.waitForExit(timeout: 8), "watch did not notice Xvnc dying (\(signal))")
            #expect(watch.terminationStatus == 1, "watch exited \(watch.terminationStatus): \(watch.log)")
            #expect(watch.log.contains("the session ended after"), "\(watch.log)")
            server.stop()
        }
    }

    @Test func sendspinOutputSaysWhatHappened() throws {
        let folder = try TemporaryFolder()
        var server: SendspinServer? = try SendspinServer(name: "farcast-faults")
        let url = server!.url
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_STATE_HOME"] = folder.path + "/state"
        let play = try BackgroundProcess(try farcastBinary(), ["sendspin", "play", url], environment: environment, logName: "play")
        try waitUntil("the player to play", timeout: 20) { play.log.contains("played 40") || play.log.contains("played 4") }
        // The server dies mid-stream: a summary of what was played, then one failure line.
        server = nil
        #expect(play.waitForExit(timeout: 10))
        #expect(play.terminationStatus == 1, "\(play.log)")
        #expect(play.log.contains("connected to farcast-faults"), "default verbosity says where it connected: \(play.log)")
        #expect(play.log.contains("stream: pcm"), "\(play.log)")
        #expect(play.log.contains("s of pcm audio from farcast-faults"), "a summary after the failure: \(play.log)")
        #expect(play.log.split(separator: "\n").last?.hasPrefix("farcast: ") == true, "\(play.log)")
        _ = server

        // An idle listener prints no telemetry ("unsynced" once a second).
        let listen = try BackgroundProcess(try farcastBinary(), ["sendspin", "listen", "--host", "127.0.0.1", "--port", "0", "--no-advertise"],
                                           environment: environment, logName: "listen")
        usleep(3_000_000)
        listen.signal(SIGINT)
        #expect(listen.waitForExit(timeout: 5))
        #expect(listen.terminationStatus == 0, "\(listen.log)")
        #expect(!listen.log.contains("unsynced"), "\(listen.log)")
        #expect(listen.log.contains("0.0 s of no audio"), "\(listen.log)")
    }
}
