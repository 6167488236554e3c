import Foundation
import Testing

/// Our conformance harness (scripts/conformance/run.py: the upstream harness's contract, with
/// an aiosendspin 10.2.1 server on the current encrypted wire) running farcast's client adapter,
/// `farcast sendspin conformance`, through every client scenario: client- and server-initiated
/// PCM (canonical PCM hash against what the server sent), metadata, controller, FLAC and Opus
/// (encoded bytes and codec header).
@Suite(.serialized, .timeLimit(.minutes(5)))
struct SendspinConformanceTests {
    @Test func everyClientScenarioPasses() throws {
        let folder = try TemporaryFolder()
        let venv = ProcessInfo.processInfo.environment["FARCAST_VENV"] ?? packageRoot.appendingPathComponent(".venv").path
        let python = venv + "/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else { throw MissingPeer(what: "aiosendspin 10.2.1 in \(venv)") }
        let runner = packageRoot.appendingPathComponent("scripts/conformance/run.py").path
        let result = try run(python, [runner, "--client-cmd", "\(try farcastBinary()) sendspin conformance", "--out", folder.path + "/out"], timeout: 240)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        #expect(result.status == 0, "harness:\n\(result.stdout)\n\(result.stderr.suffix(2000))")
        for scenario in ["client-initiated-pcm", "server-initiated-pcm", "server-initiated-metadata", "server-initiated-controller",
                         "server-initiated-flac", "server-initiated-opus"] {
            #expect(lines.contains { $0.hasPrefix("PASS \(scenario) ") }, "\(scenario):\n\(result.stdout)")
        }
    }
}
