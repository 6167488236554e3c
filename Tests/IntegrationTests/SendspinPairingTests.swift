import FarcastSupport
import Foundation
import Logging
import Sendspin
import Synchronization
import Testing

/// Pairing by the Pairing-PSK method against aiosendspin 10.2.1's server side, driven the way an
/// operator would (scripts/lib/sendspin_pair_driver.py): the server dials the listening player,
/// pairs with its token, and a second server instance with the same records dials again.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SendspinPairingTests {
    @Test func pairingByTokenStoresTheLongTermPSKAndTheNextDialIsPaired() async throws {
        let folder = try TemporaryFolder()
        let store = PlayerStore(directory: StateDirectory(path: folder.path + "/state"))
        let token = try store.pairingToken()
        var options = SendspinPlayer.Options()
        options.name = "farcast-pairing"
        options.duration = .seconds(40)
        options.store = store
        let player = SendspinPlayer(options: options)
        let recorder = SendspinListenTests.LogRecorder()
        let logger = Logger(label: "test") { _ in recorder }
        let port = SendspinListenTests.Shared<Int?>(nil)
        async let report = player.listen(host: "127.0.0.1", port: 0, path: "/sendspin", sink: NullSink(), logger: logger,
                                         ready: { port.set($0) })
        let deadline = ContinuousClock.now + .seconds(10)
        while port.value == nil && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        let bound = try #require(port.value, "the listener never came up")

        let venv = ProcessInfo.processInfo.environment["FARCAST_VENV"] ?? packageRoot.appendingPathComponent(".venv").path
        let python = venv + "/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else { throw MissingPeer(what: "aiosendspin 10.2.1 in \(venv)") }
        let driver = packageRoot.appendingPathComponent("scripts/lib/sendspin_pair_driver.py").path
        let serverPort = SendspinServer.reservePort() + 500
        // The driver blocks for a while: off the cooperative pool, on a thread of its own.
        let result = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ProcessResult, Error>) in
            Thread {
                continuation.resume(with: Result {
                    try run(python, [driver, "--client-url", "ws://127.0.0.1:\(bound)/sendspin", "--token", token, "--port", "\(serverPort)"], timeout: 90)
                })
            }.start()
        }
        player.stop()
        _ = try await report
        let events = result.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(result.status == 0, "driver: \(result.stdout)\n\(result.stderr.suffix(2000))\nplayer log: \(recorder.all.suffix(25))")
        let serverID = try #require(events.first { $0["event"] as? String == "server" }?["server_id"] as? String)
        let paired = try #require(events.first { $0["event"] as? String == "paired" }, "no pairing: \(result.stdout)")
        let records = store.pairedServers()
        #expect(records.count == 1)
        #expect(records.first?.serverID == serverID, "the record names the server that paired")
        #expect(records.first?.pskID == paired["psk_id"] as? String, "both sides hold the same long-term PSK")
        let redial = try #require(events.first { $0["event"] as? String == "redialled" })
        #expect(redial["credential_mismatch"] as? Bool == false, "the second dial found the player paired")
        let log = recorder.all
        #expect(log.contains { $0.contains("encrypted session established (keyed by the pairing PSK)") }, "\(log.suffix(30))")
        #expect(log.contains { $0.contains("paired with") && $0.contains("long-term PSK is stored") })
        #expect(log.filter { $0.contains("encrypted session established (paired)") }.count >= 1, "the redial handshake used the long-term PSK: \(log.suffix(30))")
    }
}
