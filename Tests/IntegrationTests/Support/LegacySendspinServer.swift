import Foundation

/// A legacy-wire (pre-encryption) Sendspin server: aiosendspin 5.3.0 driven by
/// scripts/lib/legacy_sendspin_server.py from the setup's .venv-legacy, streaming a 440 Hz sine
/// to each player that connects. It binds 0.0.0.0, so it runs only inside the test namespace.
final class LegacySendspinServer: @unchecked Sendable {
    // @unchecked: immutable after init; the process is only stopped by deinit.
    let port: Int
    let process: BackgroundProcess
    var url: String { "ws://127.0.0.1:\(port)/sendspin" }

    /// `dial`: a listening player's URL the server dials once ready (server-initiated mode).
    init(name: String = "legacy-test", codec: String = "auto", dial: String? = nil) throws {
        guard ProcessInfo.processInfo.environment["FARCAST_REQUIRE_NETNS"] == "1" || SendspinServer.onlyLoopback() else {
            throw PeerFailed(name: "legacy Sendspin server", log: "refusing to start a server that binds 0.0.0.0 outside a private network namespace; run the integration tests with scripts/test")
        }
        let python = packageRoot.appendingPathComponent(".venv-legacy/bin/python").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw MissingPeer(what: "aiosendspin 5.3.0 in .venv-legacy")
        }
        port = SendspinServer.reservePort()
        let script = packageRoot.appendingPathComponent("scripts/lib/legacy_sendspin_server.py").path
        // A 600 ms head start: without it the first chunks of a new stream are stamped before
        // they can arrive (aiosendspin 5.3.0 sends them anyway, within its 2 s grace).
        process = try BackgroundProcess(python, [script, "--port", "\(port)", "--name", name, "--codec", codec, "--start-delay-ms", "600"]
                                            + (dial.map { ["--client", $0] } ?? []),
                                        logName: "legacy-sendspin")
        try waitForTCPPort(port, timeout: 30, process: process)
    }
}
