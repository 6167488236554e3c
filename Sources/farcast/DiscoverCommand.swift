import ArgumentParser
import Discovery
import Foundation

struct DiscoverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover",
        abstract: "List what answers on the local network, for every protocol.",
        discussion: """
            Browses mDNS (DNS-SD) for VNC servers (_rfb._tcp) and machines (_workstation._tcp), Sendspin servers and players (_sendspin-server._tcp, _sendspin._tcp) and punktfunk hosts (_punktfunk._udp, with their TXT), and asks Jellyfin servers on UDP 7359 at the same time. Each line ends with a URL that `farcast hosts add NAME URL` saves and every protocol command accepts.

            Examples: farcast discover
                      farcast discover --protocol vnc --protocol punktfunk --duration 5 --json
            """
    )

    @Option(name: .customLong("protocol"), help: ArgumentHelp("Only this protocol (repeatable): \(ServiceCatalog.protocolNames.joined(separator: ", ")).", valueName: "name"))
    var protocols: [String] = []

    @Option(help: ArgumentHelp("How long to listen.", valueName: "seconds"))
    var duration: Double = 3

    @Option(name: .customLong("seconds"), help: RenamedOption.help(now: "--duration"))
    var oldSeconds: Double?

    /// `--duration`, or its old spelling.
    var seconds: Double { oldSeconds ?? duration }

    @Option(name: .customLong("jellyfin-target"), help: ArgumentHelp("Where to send Jellyfin's discovery datagram (repeatable; default the broadcast address 255.255.255.255).", valueName: "ipv4"))
    var jellyfinTargets: [String] = []

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        for name in protocols where !ServiceCatalog.protocolNames.contains(name.lowercased()) {
            throw ValidationError("unknown protocol '\(name)'; choose from \(ServiceCatalog.protocolNames.joined(separator: ", "))")
        }
        guard seconds > 0 && seconds <= 60 else { throw ValidationError("--duration must be within 0…60 seconds") }
        for target in jellyfinTargets {
            let parts = target.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 4, parts.allSatisfy({ UInt8($0) != nil }) else { throw ValidationError("--jellyfin-target '\(target)' is not an IPv4 address") }
        }
    }

    /// One line of the listing.
    struct Found: Encodable {
        var `protocol`: String
        var serviceType: String
        var role: String
        var name: String
        var hostName: String?
        var address: String
        var addresses: [String]
        var port: Int
        var txt: [String: String]
        var url: String?
    }

    func run() async throws {
        try await reportingFailures {
            let wanted = protocols.isEmpty ? Set(ServiceCatalog.protocolNames) : Set(protocols.map { $0.lowercased() })
            let timeout = Duration.milliseconds(Int(seconds * 1000))
            let types = ServiceCatalog.entries.filter { wanted.contains($0.protocolName) }
            let discovery = DNSServiceDiscovery()
            let targets = jellyfinTargets.isEmpty ? ["255.255.255.255"] : jellyfinTargets
            // Every browse and the Jellyfin query run at once, so the whole listing takes `seconds`.
            var found: [Found] = []
            var failures: [(what: String, reason: String)] = []
            try await withThrowingTaskGroup(of: (String, Result<[Found], any Error>).self) { group in
                for entry in types {
                    group.addTask {
                        do {
                            let services = try await discovery.browse(type: entry.type, timeout: timeout)
                            return (entry.type, .success(services.map { service in
                                Found(protocol: entry.protocolName, serviceType: entry.type, role: entry.role, name: service.displayName,
                                      hostName: service.hostName, address: service.host, addresses: service.addresses, port: service.port,
                                      txt: service.txt, url: service.farcastURL)
                            }))
                        } catch {
                            return (entry.type, .failure(error))
                        }
                    }
                }
                if wanted.contains("jellyfin") {
                    group.addTask {
                        do {
                            let servers = try await JellyfinDiscovery.discover(targets: targets, timeout: timeout)
                            return ("jellyfin", .success(servers.map { server in
                                Found(protocol: "jellyfin", serviceType: "udp/7359", role: "Jellyfin server", name: server.name, hostName: nil,
                                      address: server.endpoint.split(separator: ":").first.map(String.init) ?? server.endpoint,
                                      addresses: [], port: URLComponents(string: server.address)?.port ?? 8096,
                                      txt: ["id": server.id, "address": server.address], url: server.farcastURL)
                            }))
                        } catch {
                            return ("jellyfin", .failure(error))
                        }
                    }
                }
                for try await (what, result) in group {
                    switch result {
                    case .success(let list): found += list
                    case .failure(let error): failures.append((what, describe(error)))
                    }
                }
            }
            found.sort { ($0.protocol, $0.name, $0.serviceType) < ($1.protocol, $1.name, $1.serviceType) }
            // mDNS unreachable for every type is a failure; one type failing is worth a warning.
            // The same cause (no Avahi daemon) fails every mDNS browse alike: one line per cause,
            // naming what it stopped.
            var causes: [(reason: String, what: [String])] = []
            for failure in failures {
                if let i = causes.firstIndex(where: { $0.reason == failure.reason }) { causes[i].what.append(failure.what) }
                else { causes.append((failure.reason, [failure.what])) }
            }
            let lines = causes.map { "\($0.what.joined(separator: ", ")): \($0.reason)" }
            if found.isEmpty, !failures.isEmpty, failures.count == types.count + (wanted.contains("jellyfin") ? 1 : 0) {
                throw CommandFailure(message: lines.joined(separator: "; "))
            }
            for line in lines where !global.quiet { FileHandleOutput.stderr("farcast: warning: \(line)\n") }
            if global.json {
                try printJSONList(found)
                return
            }
            if found.isEmpty {
                print("nothing answered within \(seconds) s")
                return
            }
            for item in found {
                let txt = item.txt.isEmpty || item.protocol == "jellyfin" ? "" : "  " + item.txt.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
                let address = item.address.contains(":") ? "[\(item.address)]" : item.address
                print("\(item.protocol.padding(toLength: 9, withPad: " ", startingAt: 0)) \(item.name)  \(address):\(item.port)  \(item.url ?? "(\(item.role))")\(txt)")
            }
        }
    }
}
