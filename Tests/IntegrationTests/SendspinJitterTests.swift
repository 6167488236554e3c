import Foundation
import Logging
import Sendspin
import Testing

/// The player under network jitter, as the faults issue found it: heavy jitter on every packet on
/// loopback, both ways (30 ± 15 ms, scripts/impair — this kernel has no netem), with aiosendspin's
/// reference client on the same server. The player used to withdraw its availability whenever
/// the filter error passed 5 ms, and the server then moved it to a stopped group for good; now it
/// must stay available and keep playing.
@Suite(.tags(.timing), .serialized, .timeLimit(.minutes(3)))
struct SendspinJitterTests {
    @Test func jitterNeitherWithdrawsAvailabilityNorStopsPlayback() async throws {
        let folder = try TemporaryFolder()
        let server = try SendspinServer(name: "farcast-jitter")
        let toServer = try ImpairedLink(match: "-p tcp --dport \(server.port)", options: ["--delay-ms", "30", "--jitter-ms", "15", "--seed", "11"], folder: folder)
        let fromServer = try ImpairedLink(match: "-p tcp --sport \(server.port)", options: ["--delay-ms", "30", "--jitter-ms", "15", "--seed", "12"], folder: folder)
        defer {
            toServer.stop()
            fromServer.stop()
        }
        let venv = ProcessInfo.processInfo.environment["FARCAST_VENV"] ?? packageRoot.appendingPathComponent(".venv").path
        let reference = try BackgroundProcess(venv + "/bin/python", [packageRoot.appendingPathComponent("scripts/lib/bench/sendspin_reference_client.py").path,
                                                                     server.url, "30", "1"], logName: "reference-client")
        defer { reference.stop() }

        var options = SendspinPlayer.Options()
        options.name = "farcast-jitter"
        options.duration = .seconds(25)
        let report = try await SendspinPlayer(options: options).play(url: server.url, sink: NullSink(), logger: Logger(label: "test"))
        let delayed = fromServer.stop()["accepted"] ?? 0
        #expect(delayed > 100, "the impairment held \(delayed) packets from the server")
        // How far the jitter pushed the filter error while available varies from run to run (3.6
        // to 5.3 ms in trials); the rule itself is proven by AvailabilityTests.
        #expect(report.availabilityWithdrawals == 0,
                "withdrew availability \(report.availabilityWithdrawals) time(s); peak error while available \(report.filterErrorPeakWhileAvailableUs) µs")
        // 25 s connected; the 5 s buffer fills first and the first second goes to syncing.
        #expect(report.secondsPlayed > 12, "played only \(report.secondsPlayed) s of audio")
        #expect(report.chunksLate == 0, "late chunks: \(report.chunksLate)")
        #expect(server.complianceComplaints.isEmpty, "the reference server flagged: \(server.complianceComplaints)")
    }
}
