import Foundation
import Testing

/// `farcast sendspin daemon`: the real binary, configured by a file, against aiosendspin's
/// server, stopped with SIGTERM as systemd stops it.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SendspinDaemonTests {
    /// Starts the daemon with `config` (its state in `folder`); the returned process logs to its log.
    static func daemon(config: String, folder: TemporaryFolder) throws -> BackgroundProcess {
        let path = folder.path + "/speaker.conf"
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_STATE_HOME"] = folder.path + "/state"
        return try BackgroundProcess(try farcastBinary(), ["sendspin", "daemon", "--config", path], environment: environment, logName: "farcast-daemon")
    }

    static func waitFor(_ what: String, in process: BackgroundProcess, seconds: Double = 30) throws {
        let deadline = Date().addingTimeInterval(seconds)
        while !process.log.contains(what) {
            guard Date() < deadline, process.isRunning else {
                throw PeerFailed(name: "farcast sendspin daemon", log: "no \"\(what)\" in its log:\n\(process.log)")
            }
            usleep(100_000)
        }
    }

    /// SIGTERM, then the exit status (nil if it did not exit within 10 s).
    static func terminate(_ process: BackgroundProcess) -> Int32? {
        process.terminate()
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning && Date() < deadline { usleep(50_000) }
        return process.isRunning ? nil : process.terminationStatus
    }

    @Test func listeningDaemonPlaysAppliesItsConfigurationAndSaysGoodbyeOnSIGTERM() throws {
        let folder = try TemporaryFolder()
        let port = SendspinServer.reservePort()
        let daemon = try Self.daemon(config: """
            # a speaker for the test
            name = "Daemon Test"   # quoted, with a comment
            output = wav:\(folder.path)/daemon.wav
            output_delay_ms = 25
            host = 127.0.0.1
            port = \(port)
            path = /speaker
            codec = flac
            """, folder: folder)
        try Self.waitFor("listening for Sendspin servers on ws://127.0.0.1:\(port)/speaker", in: daemon)
        #expect(daemon.log.contains("Sendspin speaker 'Daemon Test'"))
        let server = try SendspinServer(name: "daemon-server", dialing: ["ws://127.0.0.1:\(port)/speaker"])
        try Self.waitFor("stream: flac 48000 Hz", in: daemon)
        Thread.sleep(forTimeInterval: 3)
        let status = Self.terminate(daemon)
        #expect(status == 0, "exit status \(String(describing: status)); log:\n\(daemon.log.suffix(1500))")
        #expect(daemon.log.contains("saying goodbye to daemon-server (shutdown)"), "\(daemon.log.suffix(1500))")
        let saved = try String(contentsOfFile: folder.path + "/state/farcast/sendspin/player.json", encoding: .utf8)
        #expect(saved.contains("\"output_delay_ms\" : 25") || saved.contains("\"output_delay_ms\":25"), "player.json: \(saved)")
        try SendspinServerTests.expectUnbrokenTone(folder.path + "/daemon.wav")
        #expect(server.complianceComplaints.isEmpty, "\(server.complianceComplaints)")
    }

    @Test func dialingDaemonWaitsForItsServerAndConnectsWhenItAppears() throws {
        let folder = try TemporaryFolder()
        let port = SendspinServer.reservePort()
        let daemon = try Self.daemon(config: "server = ws://127.0.0.1:\(port)/sendspin\noutput = null\nname = Dialer\n", folder: folder)
        // No server yet: the daemon reports the failure and tries again.
        try Self.waitFor("connecting again in", in: daemon)
        let server = try SendspinServer(name: "late-server", port: port)
        try Self.waitFor("stream: pcm 48000 Hz", in: daemon, seconds: 40)
        let status = Self.terminate(daemon)
        #expect(status == 0, "exit status \(String(describing: status)); log:\n\(daemon.log.suffix(1500))")
        #expect(daemon.log.contains("saying goodbye to late-server (shutdown)"), "\(daemon.log.suffix(1500))")
        _ = server
    }

    @Test func aBadConfigurationNamesTheLineAndExits2() throws {
        let folder = try TemporaryFolder()
        let path = folder.path + "/bad.conf"
        try "name = ok\nport = 99999\n".write(toFile: path, atomically: true, encoding: .utf8)
        let result = try run(try farcastBinary(), ["sendspin", "daemon", "--config", path])
        #expect(result.status == 2)
        #expect(result.stderr.contains("bad.conf, line 2: port must be a whole number in 0…65535"), "stderr: \(result.stderr)")
    }
}
