import Foundation

/// aiosendspin 10.2.1 as a server that writes down every client message it decrypted, in the
/// order it received them (scripts/lib/sendspin_recording_server.py, from the setup's .venv).
/// It binds 127.0.0.1, and like every Sendspin peer here runs inside the test namespace.
final class SendspinRecordingServer: @unchecked Sendable {
    // @unchecked: immutable after init; the process is only stopped by deinit.
    let port: Int
    let process: BackgroundProcess
    let recordPath: String
    var url: String { "ws://127.0.0.1:\(port)/sendspin" }

    init(name: String = "recording-server", folder: String) throws {
        guard ProcessInfo.processInfo.environment["FARCAST_REQUIRE_NETNS"] == "1" || SendspinServer.onlyLoopback() else {
            throw PeerFailed(name: "recording Sendspin server", log: "refusing to start a Sendspin server outside the test namespace; run the integration tests with scripts/test (it uses unshare -n)")
        }
        let venv = ProcessInfo.processInfo.environment["FARCAST_VENV"] ?? packageRoot.appendingPathComponent(".venv").path
        let python = venv + "/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw MissingPeer(what: "aiosendspin[server]==10.2.1 in \(venv)")
        }
        port = SendspinServer.reservePort()
        recordPath = folder + "/received.txt"
        let script = packageRoot.appendingPathComponent("scripts/lib/sendspin_recording_server.py").path
        process = try BackgroundProcess(python, [script, "--port", "\(port)", "--name", name, "--record", recordPath],
                                        logName: "sendspin-recording")
        try waitForTCPPort(port, timeout: 60, process: process)
    }

    /// The messages recorded so far, one a line (the server flushes them every 100 ms).
    var received: [Substring] {
        ((try? String(contentsOfFile: recordPath, encoding: .utf8)) ?? "").split(separator: "\n")
    }
}
