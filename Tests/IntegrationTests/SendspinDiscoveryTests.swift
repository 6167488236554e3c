import Foundation
import Logging
import Sendspin
import Testing

/// mDNS discovery (spec §11) against real peers in the test namespace: a private avahi-daemon
/// (see `AvahiResponder`), its own `avahi-browse`, and aiosendspin 10.2.1's `sendspin serve`,
/// which advertises `_sendspin-server._tcp` itself through python-zeroconf — on loopback, once
/// `lo` carries multicast and a default route (the responder sets both up in the namespace).
/// Serialized: each test starts its own bus and daemon at the one bus address the process uses.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct SendspinDiscoveryTests {
    @Test func advertisedPlayerIsFoundByAvahiBrowseWithPortAndTXT() async throws {
        let responder = try AvahiResponder()
        let advertisement = try DNSServiceDiscovery().advertisePlayer(name: "farcast-discovery-test", port: 8928)
        let name = try await advertisement.registered()
        #expect(name == "farcast-discovery-test")

        let found = try responder.browse(SendspinService.player) { $0.contains { $0.name == name } }
        let service = try #require(found.first { $0.name == name }, "avahi-browse did not see the player:\n\(responder.logs)")
        #expect(service.port == 8928)
        #expect(service.address == "127.0.0.1")
        #expect(Set(service.txt) == ["path=/sendspin", "name=farcast-discovery-test"])

        // Our own browse sees it too, resolved to the same address, port and TXT.
        let ours = try await DNSServiceDiscovery().browse(type: SendspinService.player, timeout: .seconds(2))
        let mine = try #require(ours.first { $0.name == name }, "browse found \(ours)")
        #expect(mine.url == "ws://127.0.0.1:8928/sendspin")
        #expect(mine.txt == ["path": "/sendspin", "name": "farcast-discovery-test"])

        // Cancelling withdraws it.
        advertisement.cancel()
        let after = try responder.browse(SendspinService.player, timeout: 5) { !$0.contains { $0.name == name } }
        #expect(!after.contains { $0.name == name }, "still advertised after cancel(): \(after)")
    }

    @Test func browseFindsAiosendspinServerAndThePlayerPlaysFromIt() async throws {
        let responder = try AvahiResponder()
        let server = try SendspinServer(name: "farcast-discovery-server")
        #expect(!server.process.log.contains("without mDNS"), "aiosendspin could not use mDNS:\n\(server.process.log)")

        // zeroconf announces while it starts up; give the browse a few seconds to see it.
        var servers: [DiscoveredService] = []
        for _ in 0..<3 where !servers.contains(where: { $0.port == server.port }) {
            servers = try await DNSServiceDiscovery().browseServers(timeout: .seconds(3))
        }
        let found = try #require(servers.first { $0.port == server.port },
                                 "browse found \(servers)\nserver:\n\(server.process.log)\n\(responder.logs)")
        #expect(found.displayName == "farcast-discovery-server")
        #expect(found.type == SendspinService.server)
        #expect(found.url == server.url)

        var options = SendspinPlayer.Options()
        options.name = "farcast-discovery-player"
        options.duration = .seconds(3)
        let report = try await SendspinPlayer(options: options).play(url: found.url, sink: NullSink(), logger: Logger(label: "test"))
        #expect(report.chunksPlayed > 0)
    }

    @Test func theCommandLineListenerAnnouncesItselfAndPlayFindsTheServer() throws {
        let responder = try AvahiResponder()
        // `listen` announces _sendspin._tcp on the port it listens on…
        let port = SendspinServer.reservePort() + 300
        let listener = try BackgroundProcess(try farcastBinary(), ["sendspin", "listen", "--host", "127.0.0.1", "--port", "\(port)",
                                                                   "--name", "farcast-cli-listener", "--duration", "8", "--verbose"],
                                             logName: "farcast-listen")
        let seen = try responder.browse(SendspinService.player) { $0.contains { $0.name == "farcast-cli-listener" } }
        let announced = try #require(seen.first { $0.name == "farcast-cli-listener" }, "not announced:\n\(listener.log)")
        #expect(announced.port == port)
        #expect(Set(announced.txt) == ["path=/sendspin", "name=farcast-cli-listener"])
        listener.stop()

        // …and `play --discover --server NAME` finds a server by its announcement and plays.
        let server = try SendspinServer(name: "farcast-discovery-cli")
        let result = try run(try farcastBinary(), ["sendspin", "play", "--discover", "--server", "farcast-discovery-cli", "--discover-seconds", "4",
                                                   "--duration", "3", "--output", "null"], timeout: 60)
        #expect(result.status == 0, "stderr: \(result.stderr)\nserver: \(server.process.log.suffix(500))")
        #expect(result.stderr.contains("found farcast-discovery-cli at \(server.url)"), "stderr: \(result.stderr)")
        #expect(result.stdout.contains("of pcm audio from farcast-discovery-cli"), "stdout: \(result.stdout)")
        let missing = try run(try farcastBinary(), ["sendspin", "play", "--discover", "--server", "nobody", "--discover-seconds", "2"], timeout: 60)
        #expect(missing.status == 1 && missing.stderr.contains("no server named 'nobody'"), "stderr: \(missing.stderr)")
    }

    @Test func unreachableResponderFailsWithAHint() async throws {
        // The bus runs but avahi-daemon does not: dns_sd cannot reach the responder.
        let responder = try AvahiResponder(daemon: false)
        defer { responder.stop() }
        #expect {
            _ = try DNSServiceDiscovery().advertisePlayer(name: "farcast-discovery-test", port: 8928)
        } throws: { error in
            guard let error = error as? DiscoveryError, case .unavailable = error else { return false }
            return error.description.contains("avahi-daemon is not running") && error.description.contains("connect with a URL")
        }
        await #expect(throws: DiscoveryError.unavailable(code: -65537)) {
            _ = try await DNSServiceDiscovery().browseServers(timeout: .seconds(1))
        }
    }
}
