import Foundation
import Jellyfin
import Testing

/// LAN discovery by broadcast: the stand-in's UDP 7359 responder (it binds 0.0.0.0, so this
/// runs only inside the test namespace) answers `who is JellyfinServer?` sent to
/// 255.255.255.255. The namespace has only `lo`; the same preparation as the mDNS tests (a
/// default route through `lo`) lets the limited broadcast reach it. No real Jellyfin server can
/// run on these machines.
@Suite(.tags(.groupC), .serialized, .timeLimit(.minutes(3)))
struct JellyfinDiscoveryTests {
    @Test func discoverFindsTheServerByBroadcast() async throws {
        try AvahiResponder.prepareProcess()
        let server = try JellyfinStandInServer(extra: ["--discovery-port", "7359", "--name", "Broadcast Box"])
        let folder = try TemporaryFolder()
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = folder.path
        let result = try run(try farcastBinary(), ["jellyfin", "discover", "--json", "--duration", "1.5"], environment: env)
        #expect(result.status == 0, "\(result.stderr)")
        let found: [[String: Any]]? = try jsonItems(result.stdout)
        #expect(found?.count == 1)
        #expect(found?.first?["name"] as? String == "Broadcast Box")
        #expect(found?.first?["address"] as? String == "http://127.0.0.1:\(server.port)")
        #expect((found?.first?["id"] as? String)?.count == 32)
        #expect((found?.first?["answered_from"] as? String)?.hasPrefix("127.0.0.1:7359") == true)

        // The library's seam, and the human table.
        let servers = try await UDPBroadcastDiscovery().discover(timeout: .seconds(1))
        #expect(servers.map(\.name) == ["Broadcast Box"])
        let table = try run(try farcastBinary(), ["jellyfin", "discover", "--duration", "1"], environment: env)
        #expect(table.stdout.contains("Broadcast Box") && table.stdout.contains("http://127.0.0.1:\(server.port)"))
    }

    @Test func noAnswerIsAnEmptyListNotAnError() throws {
        try AvahiResponder.prepareProcess()
        let folder = try TemporaryFolder()
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = folder.path
        // Nobody listens on this port.
        let result = try run(try farcastBinary(), ["jellyfin", "discover", "--json", "--duration", "0.5", "--address", "127.0.0.1:17359"], environment: env)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == #"{"items":[]}"#)
    }
}
