import Foundation
import Testing

/// Our conformance harness (scripts/conformance/run.py: the upstream harness's contract, with
/// an aiosendspin 10.2.1 server) running farcast's client adapter, `farcast sendspin
/// conformance`, through every client scenario: client- and server-initiated PCM (canonical PCM
/// hash against what the server sent), metadata, controller, artwork (the picture's bytes), FLAC
/// and Opus (encoded bytes and codec header) — on the current encrypted wire, and on the older
/// unencrypted one (`--wire legacy`: aiosendspin's transition mode, the wire the upstream
/// harness's aiosendspin 5.x speaks; farcast listens and dials with `--legacy`).
@Suite(.serialized, .timeLimit(.minutes(5)))
struct SendspinConformanceTests {
    @Test(arguments: ["encrypted", "legacy"])
    func everyClientScenarioPasses(wire: String) throws {
        let folder = try TemporaryFolder()
        let venv = ProcessInfo.processInfo.environment["FARCAST_VENV"] ?? packageRoot.appendingPathComponent(".venv").path
        let python = venv + "/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else { throw MissingPeer(what: "aiosendspin 10.2.1 in \(venv)") }
        let runner = packageRoot.appendingPathComponent("scripts/conformance/run.py").path
        let result = try run(python, [runner, "--client-cmd", "\(try farcastBinary()) sendspin conformance", "--out", folder.path + "/out",
                                      "--wire", wire], timeout: 240)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(result.status == 0, "harness:\n\(result.stdout)\n\(result.stderr.suffix(2000))")
        for scenario in ["client-initiated-pcm", "server-initiated-pcm", "server-initiated-metadata", "server-initiated-controller",
                         "server-initiated-artwork", "server-initiated-flac", "server-initiated-opus"] {
            #expect(lines.contains { $0.hasPrefix("PASS \(scenario) ") }, "\(scenario):\n\(result.stdout)")
        }
    }
}
