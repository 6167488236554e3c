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
    struct Outcome {
        var driver: ProcessResult
        var events: [[String: Any]]
        var log: [String]
        func event(_ name: String) -> [String: Any]? { events.first { $0["event"] as? String == name } }
    }

    /// Runs a listening player with `store` while the driver pairs by `method` ("psk" or
    /// "static", the operator entering `code`).
    static func pair(store: PlayerStore, method: String, playerCode: String? = nil, code: String? = nil) async throws -> Outcome {
        var options = SendspinPlayer.Options()
        options.name = "farcast-pairing"
        options.duration = .seconds(40)
        options.store = store
        options.staticPairingCode = playerCode
        options.pairingWindow = playerCode == nil ? nil : .seconds(300)
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
        var arguments = [driver, "--client-url", "ws://127.0.0.1:\(bound)/sendspin", "--port", "\(serverPort)", "--method", method]
        if method == "psk" { arguments += ["--token", try store.pairingToken()] }
        var environment = ProcessInfo.processInfo.environment
        if let code { environment["FARCAST_PAIRING_CODE"] = code }
        let driverArguments = arguments, driverEnvironment = environment
        // The driver blocks for a while: off the cooperative pool, on a thread of its own.
        let result = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<ProcessResult, Error>) in
            Thread {
                continuation.resume(with: Result { try run(python, driverArguments, environment: driverEnvironment, timeout: 90) })
            }.start()
        }
        player.stop()
        _ = try await report
        let events = result.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        return Outcome(driver: result, events: events, log: recorder.all)
    }

    static func expectPairedAndRedialled(_ outcome: Outcome, store: PlayerStore, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(outcome.driver.status == 0, "driver: \(outcome.driver.stdout)\n\(outcome.driver.stderr.suffix(1500))\nplayer log: \(outcome.log.suffix(25))",
                sourceLocation: sourceLocation)
        let serverID = try #require(outcome.event("server")?["server_id"] as? String, sourceLocation: sourceLocation)
        let paired = try #require(outcome.event("paired"), "no pairing: \(outcome.driver.stdout)", sourceLocation: sourceLocation)
        let records = store.pairedServers()
        #expect(records.count == 1, sourceLocation: sourceLocation)
        #expect(records.first?.serverID == serverID, "the record names the server that paired", sourceLocation: sourceLocation)
        #expect(records.first?.pskID == paired["psk_id"] as? String, "both sides hold the same long-term PSK", sourceLocation: sourceLocation)
        let redial = try #require(outcome.event("redialled"), sourceLocation: sourceLocation)
        #expect(redial["credential_mismatch"] as? Bool == false, "the second dial found the player paired", sourceLocation: sourceLocation)
        #expect(outcome.log.contains { $0.contains("paired with") && $0.contains("long-term PSK is stored") }, sourceLocation: sourceLocation)
        #expect(outcome.log.contains { $0.contains("encrypted session established (paired)") },
                "the redial handshake used the long-term PSK: \(outcome.log.suffix(30))", sourceLocation: sourceLocation)
    }

    @Test func pairingByTokenStoresTheLongTermPSKAndTheNextDialIsPaired() async throws {
        let folder = try TemporaryFolder()
        let store = PlayerStore(directory: StateDirectory(path: folder.path + "/state"))
        let outcome = try await Self.pair(store: store, method: "psk")
        try Self.expectPairedAndRedialled(outcome, store: store)
        #expect(outcome.log.contains { $0.contains("encrypted session established (keyed by the pairing PSK)") }, "\(outcome.log.suffix(30))")
    }

    @Test func pairingByTheStaticCodeWrapsTheLongTermPSK() async throws {
        let folder = try TemporaryFolder()
        let store = PlayerStore(directory: StateDirectory(path: folder.path + "/state"))
        let outcome = try await Self.pair(store: store, method: "static", playerCode: "48213907", code: "4821-3907")
        try Self.expectPairedAndRedialled(outcome, store: store)
        #expect(outcome.log.contains { $0.contains("static_pairing_code") })
    }

    @Test func aWrongCodeIsRefusedAndNothingIsStored() async throws {
        let folder = try TemporaryFolder()
        let store = PlayerStore(directory: StateDirectory(path: folder.path + "/state"))
        let outcome = try await Self.pair(store: store, method: "static", playerCode: "48213907", code: "11112222")
        #expect(outcome.event("paired") == nil, "driver: \(outcome.driver.stdout)")
        #expect(outcome.driver.stdout.contains("error"), "the server's pairing failed: \(outcome.driver.stdout)")
        #expect(store.pairedServers().isEmpty)
        #expect(outcome.log.contains { $0.contains("pairing_code_mismatch") }, "\(outcome.log.suffix(20))")
    }
}
