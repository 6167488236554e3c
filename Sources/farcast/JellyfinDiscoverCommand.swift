import ArgumentParser
import FarcastSupport
import Foundation
import Hosts
import Jellyfin
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

struct JellyfinDiscoverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover",
        abstract: "Find Jellyfin servers on the local network (UDP broadcast on port 7359).",
        discussion: """
            Sends "who is JellyfinServer?" to the broadcast address (or to each --address) and lists the servers that answer within --duration. Servers answer only when their Auto Discovery setting is on.

            Examples:
              farcast jellyfin discover
              farcast jellyfin discover --duration 3 --json
              farcast jellyfin discover --address 192.168.1.20
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: ArgumentHelp("Seconds to collect answers.", valueName: "seconds"))
    var duration: Double = 2

    @Option(name: .customLong("timeout"), help: RenamedOption.help(now: "--duration"))
    var oldTimeout: Double?

    /// `--duration`, or its old spelling.
    var timeout: Double { oldTimeout ?? duration }

    @Option(name: .customLong("address"), help: ArgumentHelp("Ask this IPv4 address[:port] instead of broadcasting (repeatable).", valueName: "address"))
    var addresses: [String] = []

    func validate() throws {
        guard timeout > 0, timeout <= 60 else { throw ValidationError("--duration must be between 0 and 60 seconds") }
    }

    func run() async throws {
        try await reportingFailures {
            var targets: [(host: String, port: UInt16)] = []
            for address in addresses {
                let parts = address.split(separator: ":", omittingEmptySubsequences: false)
                var probe = in_addr()
                guard parts.count <= 2, inet_pton(AF_INET, String(parts[0]), &probe) == 1 else {
                    throw CommandFailure(message: "--address \(address): expected an IPv4 address, optionally with :port", exitCode: 2)
                }
                var port = UDPBroadcastDiscovery.port
                if parts.count == 2 {
                    guard let value = UInt16(parts[1]), value > 0 else { throw CommandFailure(message: "--address \(address): bad port", exitCode: 2) }
                    port = value
                }
                targets.append((String(parts[0]), port))
            }
            let discovery = targets.isEmpty ? UDPBroadcastDiscovery() : UDPBroadcastDiscovery(targets: targets)
            let servers = try await discovery.discover(timeout: JellyfinCLI.duration(timeout))
            if global.json {
                try printJSONList(servers.map { DiscoveredRow(id: $0.id, name: $0.name, address: $0.address, answeredFrom: $0.endpointAddress) })
            } else if servers.isEmpty {
                FileHandleOutput.stderr("no Jellyfin server answered within \(timeout.formatted()) s\n")
            } else {
                printTable(["NAME", "ADDRESS", "ID"], servers.map { [$0.name, $0.address, $0.id] })
            }
        }
    }

    struct DiscoveredRow: Encodable {
        var id: String
        var name: String
        var address: String
        var answeredFrom: String?
    }
}
