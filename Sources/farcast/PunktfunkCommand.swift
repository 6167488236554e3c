import ArgumentParser
import Crypto
import FarcastSupport
import Hosts
import Foundation
import Discovery
import Punktfunk
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

struct PunktfunkCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "punktfunk",
        abstract: "Low-latency game and desktop streaming from a punktfunk host (punktfunk/1 over QUIC).",
        discussion: """
            The host's certificate is pinned by its SHA-256 fingerprint. An unknown host is trusted only after pairing (`pair`, with the PIN the host shows) or when you say so with --tofu; a host whose certificate changed is refused until you re-trust it with --trust.
            """,
        subcommands: [PunktfunkDiscoverCommand.self, PunktfunkProbeCommand.self, PunktfunkPairCommand.self,
                      PunktfunkSpeedtestCommand.self, PunktfunkReceiveCommand.self, PunktfunkConnectCommand.self]
    )
}

/// HOST[:PORT] and the trust flags every connecting command shares.
struct PunktfunkHostOptions: ParsableArguments {
    @Argument(help: ArgumentHelp("The host: NAME or ADDRESS, optionally with :PORT (default 9777); IPv6 as [ADDR]:PORT; punktfunk://HOST[:PORT]; or a saved host's name (farcast hosts).", valueName: "host"))
    var host: String

    @Option(help: ArgumentHelp("Seconds to wait for the QUIC handshake and each answer.", valueName: "seconds"))
    var timeout: Double = 10

    @Flag(help: "Trust this host's certificate on first use (only for a host you know pairs optionally); a later change is still refused.")
    var tofu = false

    @Flag(help: "Accept the certificate the host presents now, replacing the pinned one (after a host reinstall).")
    var trust = false

    @Option(help: ArgumentHelp("The device name the host shows.", valueName: "name"))
    var name: String = "farcast"

    /// Taken only to refuse it with the reason (every other protocol's commands have it).
    @Option(name: .customLong("ssh"), help: .hidden)
    var ssh: String?

    func validate() throws {
        if ssh != nil {
            throw ValidationError("--ssh cannot carry punktfunk: it runs over QUIC (UDP), and an SSH tunnel carries TCP only; reach the host directly or through a VPN")
        }
        _ = try endpoint()
        guard timeout > 0, timeout <= 600 else { throw ValidationError("--timeout must be within 0…600 seconds") }
        if tofu && trust { throw ValidationError("--tofu and --trust overlap: --trust alone accepts any certificate") }
        guard name.utf8.count <= 64 else { throw ValidationError("--name is at most 64 bytes") }
    }

    /// The host as an address: a saved host's name or a `punktfunk://` URL (the one lookup every
    /// protocol shares, `HostArgument`), else HOST[:PORT] (`HostAddress(hostPort:)`).
    func address() throws -> HostAddress {
        do {
            if let found = try HostArgument.lookUp(host, as: .punktfunk).address { return found }
            return try HostAddress(hostPort: host, kind: .punktfunk)
        } catch let error as HostLookupError {
            throw ValidationError(error.description)
        } catch let error as HostAddress.ParseError {
            throw ValidationError(error.description)
        }
    }

    func endpoint() throws -> (host: String, port: UInt16) {
        let address = try address()
        return (address.host, UInt16(address.port))   // HostAddress keeps the port within 1…65535
    }

    /// Records a successful connection when the host was named by the book.
    func markConnected() {
        HostArgument.markConnected(host)
    }

    func clientOptions(pairing: Bool = false) throws -> PunktfunkClient.Options {
        let (h, p) = try endpoint()
        var options = PunktfunkClient.Options(host: h, port: p, stateDirectory: try StateDirectory.resolve(),
                                              trust: pairing ? .pairing : trust ? .acceptChange : tofu ? .trustOnFirstUse : .pinnedOnly,
                                              name: name)
        options.connectTimeout = .seconds(timeout)
        return options
    }
}

/// SIGINT/SIGTERM for the punktfunk commands: closes the session (the host hears 0x51 "client
/// quit") so every pending wait ends at once; before a session exists it exits right away.
final class PunktfunkInterrupt: Sendable {
    private let state = Mutex<(client: PunktfunkClient?, fired: Bool)>((nil, false))
    init() {}

    /// Watches SIGINT/SIGTERM until the returned watcher is cancelled.
    func install() -> SignalWatcher {
        SignalWatcher { [self] number in self.fire(number) }
    }

    func attach(_ client: PunktfunkClient) {
        let fired = state.withLock { s -> Bool in
            s.client = client
            return s.fired
        }
        if fired { client.close() }
    }

    var fired: Bool { state.withLock { $0.fired } }

    /// Closes the attached session, if any, and waits for its connection thread to finish, so
    /// the process never exits while that thread is inside ngtcp2 or GnuTLS.
    func finish() async {
        guard let client = state.withLock({ $0.client }) else { return }
        if !(await client.closeAndWait(timeout: .seconds(2))) {
            FileHandleOutput.stderr("farcast: the QUIC connection did not finish closing within 2 s\n")
        }
    }

    private func fire(_ number: Int32) {
        let client = state.withLock { s -> PunktfunkClient? in
            s.fired = true
            return s.client
        }
        if let client {
            client.close()
        } else {
            FileHandleOutput.stderr("farcast: interrupted by \(Signals.name(number))\n")
            exit(1)
        }
    }
}

/// Runs a command body with SIGINT/SIGTERM closing the session; an interrupted run fails as
/// "interrupted by SIGINT" (or SIGTERM), as every command does, instead of with whatever the closed session made the pending wait throw.
func interruptible(_ body: (PunktfunkInterrupt) async throws -> Void) async throws {
    let interrupt = PunktfunkInterrupt()
    let watcher = interrupt.install()
    defer { watcher.cancel() }
    do {
        try await body(interrupt)
    } catch {
        await interrupt.finish()
        // Reported as every interrupted command is ("interrupted by SIGINT", exit 1).
        if interrupt.fired { throw CancellationError() }
        throw error
    }
    await interrupt.finish()
}

/// What `receive` and `connect` share about a running stream: when to give up on silent video,
/// and where the statistics go at the end.
struct StreamWatchOptions: ParsableArguments {
    @Option(name: .customLong("stats-json"), help: ArgumentHelp("Write the statistics as JSON to this file when the stream ends.", valueName: "path"))
    var statsJSON: String?
    @Option(name: .customLong("stall-limit"), help: ArgumentHelp("End with an error when no video arrives for this many seconds (after 2 s of silence farcast warns and asks for a keyframe).", valueName: "seconds"))
    var stallLimit: Double = 10

    func validate() throws {
        guard stallLimit >= 2, stallLimit <= 3600 else { throw ValidationError("--stall-limit must be within 2…3600 seconds") }
    }
}

/// A Welcome as JSON.
struct WelcomeSummary: Encodable {
    var wireVersion: UInt32
    var udpPort: UInt16
    var width: UInt32
    var height: UInt32
    var refreshHz: UInt32
    /// The codec by name ("HEVC"), as the text form prints it; `codec_id` is the wire's byte.
    var codec: String
    var codecId: UInt8
    var fecScheme: UInt8
    var fecPercent: UInt8
    var maxDataPerBlock: UInt16
    var shardPayload: UInt16
    var bitrateKbps: UInt32
    var bitDepth: UInt8
    var audioChannels: UInt8
    var hostCaps: UInt8
    var cipher: String

    init(_ w: Welcome) {
        wireVersion = w.wireVersion; udpPort = w.udpPort
        width = w.mode.width; height = w.mode.height; refreshHz = w.mode.refreshHz
        codec = w.codecName; codecId = w.codec; fecScheme = w.fecScheme; fecPercent = w.fecPercent; maxDataPerBlock = w.maxDataPerBlock
        shardPayload = w.shardPayload; bitrateKbps = w.bitrateKbps; bitDepth = w.bitDepth; audioChannels = w.audioChannels
        hostCaps = w.hostCaps; cipher = w.cipher == .chaCha20Poly1305 ? "chacha20-poly1305" : "aes-128-gcm"
    }
}

struct PunktfunkDiscoverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover",
        abstract: "List punktfunk hosts on the local network (mDNS, _punktfunk._udp).",
        discussion: """
            The fingerprint a host advertises is shown but never trusted: pins come from pairing or --tofu.

            Example:
              farcast punktfunk discover --duration 3 --json
            """
    )

    @Option(help: ArgumentHelp("How long to look.", valueName: "seconds"))
    var duration: Double = 3

    @Option(name: .customLong("seconds"), help: RenamedOption.help(now: "--duration"))
    var oldSeconds: Double?

    /// `--duration`, or its old spelling.
    var seconds: Double { oldSeconds ?? duration }

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard seconds > 0, seconds <= 60 else { throw ValidationError("--duration must be within 0…60 seconds") }
    }

    struct Entry: Encodable {
        var name: String
        var addresses: [String]
        var port: UInt16
        var proto: String?
        var id: String?
        var fingerprint: String?
        var pairing: String
        var mgmtPort: UInt16?
        var mac: [String]
        var os: String?
    }

    func run() async throws {
        try await reportingFailures {
            #if canImport(CDNSSD)
            let found: [DiscoveredService]
            do {
                found = try await DNSServiceDiscovery().browse(type: PunktfunkHostRecord.serviceType, timeout: .milliseconds(Int(seconds * 1000)))
            } catch {
                throw CommandFailure(message: "cannot look for punktfunk hosts: \(describe(error))")
            }
            let locals = localIPv4Addresses()
            let hosts = found.compactMap { PunktfunkHostRecord($0, localAddresses: locals) }
            let entries = hosts.map {
                Entry(name: $0.instanceName, addresses: $0.addresses, port: $0.port, proto: $0.protocolVersion, id: $0.hostID,
                      fingerprint: $0.fingerprint, pairing: $0.pairing.rawValue, mgmtPort: $0.managementPort, mac: $0.macAddresses, os: $0.os)
            }
            if global.json {
                try printJSONList(entries)
            } else if entries.isEmpty {
                FileHandleOutput.stderr("no punktfunk host answered within \(seconds) s\n")
            } else {
                for e in entries {
                    print("\(e.name)\t\(e.addresses.first ?? "?"):\(e.port)\tpairing \(e.pairing)\(e.fingerprint.map { "\tfp \($0) (advisory)" } ?? "")")
                }
            }
            #else
            throw CommandFailure(message: "discovery needs DNS-SD, which this build lacks")
            #endif
        }
    }
}

/// The machine's IPv4 addresses (for ranking a host's advertised addresses).
func localIPv4Addresses() -> [String] {
    var result: [String] = []
    var list: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&list) == 0 else { return [] }
    defer { freeifaddrs(list) }
    var cursor = list
    while let entry = cursor {
        if let addr = entry.pointee.ifa_addr, addr.pointee.sa_family == sa_family_t(AF_INET) {
            var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                var a = sin.pointee.sin_addr
                _ = inet_ntop(AF_INET, &a, &text, socklen_t(text.count))
            }
            result.append(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        cursor = entry.pointee.ifa_next
    }
    return result
}

struct PunktfunkProbeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "probe",
        abstract: "Connect, shake hands and measure the clock offset; print what the host offers.",
        discussion: """
            Runs QUIC (ALPN pkf1) with this device's certificate, Hello → Welcome → Start and 8 clock rounds, then closes. Prints the Welcome's resolved values, the clock offset (host − client) and the round trip.

            Examples:
              farcast punktfunk probe 192.168.1.20 --tofu
              farcast punktfunk probe gaming-pc:9777 --mode 2560x1440x120 --json
            """
    )

    @OptionGroup var hostOptions: PunktfunkHostOptions
    @Option(help: ArgumentHelp("The mode to ask for, WIDTHxHEIGHTxHZ.", valueName: "mode"))
    var mode = StreamMode(width: 1920, height: 1080, refreshHz: 60)
    @OptionGroup var global: GlobalOptions

    struct Report: Encodable {
        var host: String
        var fingerprint: String
        var trust: String
        var welcome: WelcomeSummary
        var clockOffsetUs: Double
        var rttUs: Double?
        var clockSamples: Int
        var quicRttUs: Double
    }

    func run() async throws {
        try await reportingFailures { try await interruptible { interrupt in
            let options = try hostOptions.clientOptions()
            let hello = Hello(mode: mode, name: hostOptions.name, videoCaps: [.probeSequence], codecs: [.hevc])
            let session = try await StreamStart.open(options, hello: hello, timeout: .seconds(hostOptions.timeout), connected: interrupt.attach)
            session.client.close()
            hostOptions.markConnected()
            let report = Report(host: options.peerKey, fingerprint: session.client.hostFingerprintHex, trust: session.client.trustOutcome.rawValue,
                                welcome: WelcomeSummary(session.welcome), clockOffsetUs: Double(session.clock.offsetNs) / 1000,
                                rttUs: session.clock.rttNs.map { Double($0) / 1000 }, clockSamples: session.samples.count,
                                quicRttUs: Double(session.client.quic.handshakeRTTNs) / 1000)
            if global.json {
                try printJSON(report)
            } else {
                let w = session.welcome
                print("host \(report.host) certificate \(report.fingerprint) (\(report.trust))")
                print("welcome: \(w.mode) \(w.codecName) fec \(w.fecPercent)% shard \(w.shardPayload) udp \(w.udpPort) bitrate \(w.bitrateKbps) kbps")
                print(String(format: "clock offset %.1f µs, rtt %@ (%d samples)", report.clockOffsetUs,
                             report.rttUs.map { String(format: "%.1f µs", $0) } ?? "unknown", report.clockSamples))
            }
        } }
    }
}

struct PunktfunkPairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Pair with a host using the 4-digit PIN it shows, then pin its certificate.",
        discussion: """
            The PIN is read from the terminal (echo off) or, when standard input is not a terminal, from its first line; never from the command line. A wrong PIN uses up the host's armed PIN: arm a new one on the host to try again.

            Examples:
              farcast punktfunk pair 192.168.1.20
              printf '1234\\n' | farcast punktfunk pair gaming-pc --json
            """
    )

    @OptionGroup var hostOptions: PunktfunkHostOptions
    @OptionGroup var global: GlobalOptions

    struct Report: Encodable {
        var host: String
        var fingerprint: String
        var paired: Bool
        var clientFingerprint: String
    }

    func run() async throws {
        try await reportingFailures { try await interruptible { interrupt in
            let options = try hostOptions.clientOptions(pairing: true)
            let pin: String
            if isatty(STDIN_FILENO) != 0 {
                guard let typed = Secrets.prompt("PIN shown by the host: ") else { throw CommandFailure(message: "no terminal to ask for the PIN; pipe it on standard input") }
                pin = typed
            } else {
                pin = readLine(strippingNewline: true) ?? ""
            }
            do {
                _ = try PairingExchange.validatePIN(pin.trimmingCharacters(in: .whitespaces))
            } catch {
                throw CommandFailure(message: "a punktfunk PIN is exactly 4 digits", exitCode: 2)
            }
            let client = try await PunktfunkClient.connect(options)
            interrupt.attach(client)
            do {
                try await client.pair(pin: pin.trimmingCharacters(in: .whitespaces), timeout: .seconds(hostOptions.timeout))
            } catch {
                client.close()
                throw error
            }
            client.close()
            hostOptions.markConnected()
            let report = Report(host: options.peerKey, fingerprint: client.hostFingerprintHex, paired: true,
                                clientFingerprint: client.identity.fingerprintHex)
            if global.json { try printJSON(report) } else { print("paired with \(report.host); certificate \(report.fingerprint) pinned") }
        } }
    }
}

struct PunktfunkSpeedtestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "speedtest",
        abstract: "Measure the link: the host bursts probe filler at a target rate and the client counts what arrives.",
        discussion: """
            Reports link loss, the host's own send drops, goodput and a recommended bitrate (about 70 % of the goodput).

            Examples:
              farcast punktfunk speedtest 192.168.1.20 --target-mbps 500
              farcast punktfunk speedtest gaming-pc --duration-ms 3000 --json
            """
    )

    @OptionGroup var hostOptions: PunktfunkHostOptions
    @Option(help: ArgumentHelp("Rate the host should burst at, above 0 and at most 3000 Mbit/s (the host's limit).", valueName: "mbps"))
    var targetMbps: Double = 300
    @Option(help: ArgumentHelp("Burst length, 100–5000 ms (the host's limit is 5000).", valueName: "ms"))
    var durationMs: UInt32 = 2000
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard targetMbps > 0, targetMbps <= 3000 else { throw ValidationError("--target-mbps must be above 0 and at most 3000 (the host's limit)") }
        guard (100...5000).contains(durationMs) else { throw ValidationError("--duration-ms must be within 100…5000") }
    }

    struct Report: Encodable {
        var host: String
        var targetKbps: UInt32
        var durationMs: UInt32
        var hostPacketsSent: UInt32
        var hostWirePacketsSent: UInt32
        var hostSendDropped: UInt32
        var receivedPackets: UInt64
        var receivedBytes: UInt64
        var linkLoss: Double
        var hostDrop: Double
        var goodputKbps: Double
        var recommendedKbps: UInt32
    }

    func run() async throws {
        try await reportingFailures { try await interruptible { interrupt in
            let options = try hostOptions.clientOptions()
            let hello = Hello(mode: StreamMode(width: 1280, height: 720, refreshHz: 60), name: hostOptions.name,
                              videoCaps: [.probeSequence], codecs: [.hevc])
            let session = try await StreamStart.open(options, hello: hello, timeout: .seconds(hostOptions.timeout), connected: interrupt.attach)
            hostOptions.markConnected()
            let counter = try ProbeCounter(welcome: session.welcome)
            session.dataSocket.start { datagram, _ in counter.count(datagram) }
            defer {
                session.dataSocket.stop()
                session.client.close()
            }
            let result = try await session.client.speedTest(targetKbps: UInt32(targetMbps * 1000), durationMs: durationMs) {
                counter.received
            }
            guard !result.isEmpty else {
                throw CommandFailure(message: "the host answered the probe with an empty result (it runs speed tests only for clients that ask with PROBE_SEQ, or it is busy)")
            }
            let report = Report(host: options.peerKey, targetKbps: result.targetKbps, durationMs: result.durationMs,
                                hostPacketsSent: result.hostPacketsSent, hostWirePacketsSent: result.hostWirePacketsSent,
                                hostSendDropped: result.hostSendDropped, receivedPackets: result.receivedPackets,
                                receivedBytes: result.receivedBytes, linkLoss: result.linkLoss, hostDrop: result.hostDrop,
                                goodputKbps: result.goodputKbps, recommendedKbps: result.recommendedKbps)
            if global.json {
                try printJSON(report)
            } else {
                print(String(format: "goodput %.1f Mbit/s, link loss %.2f %%, host drop %.2f %%; recommended bitrate %.1f Mbit/s",
                             report.goodputKbps / 1000, report.linkLoss * 100, report.hostDrop * 100, Double(report.recommendedKbps) / 1000))
            }
        } }
    }
}

struct PunktfunkReceiveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receive",
        abstract: "Stream video headless: reassemble and repair access units, measure latency, optionally save them.",
        discussion: """
            Connects, negotiates the mode, and receives for --duration (or until Ctrl-C, which ends it cleanly with exit 0). Frames that cannot be repaired trigger a request for reference frame invalidation (RfiRequest, for a run of up to 256 frames), then a keyframe request if no clean frame follows within 0.5 s; loss reports go to the host once a second; two seconds in a row that lose whole frames lower the bitrate by a quarter (SetBitrate), ten clean seconds raise it again by an eighth up to the opening bitrate (--fixed-bitrate turns this off); the clock is re-synced every 10 s. Statistics (access_units, fec_recovered_shards, unrecoverable_frames, rfi_requests, keyframe_requests, bitrate_requests, bitrate_kbps, latency_us p50/p95/p99 for capture→receipt, clock_offset_us, …) go to --stats-json and, with --json, to stdout.

            Examples:
              farcast punktfunk receive 192.168.1.20 --duration 10 --save out.h265
              farcast punktfunk receive gaming-pc --mode 2560x1440x120 --stats-json stats.json --json
            """
    )

    @OptionGroup var hostOptions: PunktfunkHostOptions
    @Option(help: ArgumentHelp("How long to receive (default: until interrupted).", valueName: "seconds"))
    var duration: Double?
    @Option(name: .customLong("seconds"), help: RenamedOption.help(now: "--duration"))
    var oldSeconds: Double?
    /// `--duration`, or its old spelling.
    var seconds: Double? { oldSeconds ?? duration }
    @Option(help: ArgumentHelp("The mode to ask for, WIDTHxHEIGHTxHZ.", valueName: "mode"))
    var mode = StreamMode(width: 1920, height: 1080, refreshHz: 60)
    @Option(help: ArgumentHelp("Bitrate to ask for (0 = the host's default).", valueName: "kbps"))
    var bitrateKbps: UInt32 = 0
    @Flag(help: "Keep the opening bitrate even when the link keeps losing frames (no SetBitrate).")
    var fixedBitrate = false
    @Option(help: ArgumentHelp("Write the access units (Annex-B HEVC) to this file.", valueName: "path"))
    var save: String?
    @Option(name: .customLong("au-log"), help: ArgumentHelp("Write one JSON line per access unit (frame index, bytes, SHA-256, latency).", valueName: "path"))
    var auLog: String?
    @OptionGroup var watch: StreamWatchOptions
    var statsJSON: String? { watch.statsJSON }
    var stallLimit: Double { watch.stallLimit }
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if let seconds { guard seconds > 0, seconds <= 86_400 else { throw ValidationError("--duration must be within 0…86400 seconds") } }
    }

    struct Latency: Encodable { var p50: Double?; var p95: Double?; var p99: Double?; var samples: Int; var skewed: Int }
    struct Dropped: Encodable { var late: UInt64; var duplicate: UInt64; var authenticationFailed: UInt64; var malformed: UInt64; var stale: UInt64; var overBudget: UInt64 }
    struct Stats: Encodable {
        var host: String
        var fingerprint: String
        var mode: String
        var seconds: Double
        var accessUnits: UInt64
        var keyframes: UInt64
        var fecRecoveredShards: UInt64
        var unrecoverableFrames: UInt64
        var rfiRequests: Int
        var keyframeRequests: Int
        var lossReports: Int
        var bitrateRequests: Int
        var bitrateKbps: UInt32
        var latencyUs: Latency
        var clockOffsetUs: Double
        var datagrams: UInt64
        var bytes: UInt64
        /// Kbit/s, as every bitrate farcast reports (bitrate_kbps, speedtest's goodput_kbps).
        var goodputKbps: Double
        var dropped: Dropped
        var audioFrames: UInt64
        var ended: String
    }

    func run() async throws {
        try await reportingFailures { try await interruptible { interrupt in
            let options = try hostOptions.clientOptions()
            let saveHandle = try save.map { try Self.create($0) }
            let auHandle = try auLog.map { try Self.create($0) }
            let hello = Hello(mode: mode, bitrateKbps: bitrateKbps, name: hostOptions.name, videoCaps: [.probeSequence], codecs: [.hevc])
            let audioFrames = Mutex<UInt64>(0)
            let streamBox = Mutex<VideoStreamSession?>(nil)
            let session = try await StreamStart.open(options, hello: hello, timeout: .seconds(hostOptions.timeout), connected: interrupt.attach) { client, welcome, socket in
                client.onDatagram { d in if d.first == 0xC9 { audioFrames.withLock { $0 += 1 } } }
                let policy = StreamingPolicy(bitrate: fixedBitrate ? nil : BitrateAdaptation(openedAtKbps: welcome.bitrateKbps))
                let stream = try VideoStreamSession(client: client, welcome: welcome, clock: ClockOffsetEstimator(), policy: policy,
                                                    stallLimitNs: Int64(stallLimit * 1e9)) { frame, latency, keyframe in
                    if let saveHandle { saveHandle.write(Data(frame.data)) }
                    if let auHandle {
                        let line = "{\"frame_index\":\(frame.frameIndex),\"bytes\":\(frame.data.count),\"sha256\":\"\(hexString(SHA256.hash(data: frame.data)))\",\"latency_us\":\(Double(latency) / 1000),\"keyframe\":\(keyframe),\"recovered_shards\":\(frame.recoveredShards)}\n"
                        auHandle.write(Data(line.utf8))
                    }
                }
                stream.followControlMessages(of: client)
                streamBox.withLock { $0 = stream }
                socket.start { datagram, received in stream.handle(datagram, receivedAt: received) }
            }
            hostOptions.markConnected()
            let client = session.client
            guard let stream = streamBox.withLock({ $0 }) else { throw CommandFailure(message: "internal: no video receiver") }
            stream.applyClock(session.samples)
            let started = options.clock.now().nanoseconds
            var ended = "time"
            var failure: (any Error)?
            let quiet = global.quiet
            let end = await stream.watch(notice: { notice in
                switch notice {
                case .stalled(let silentNs):
                    FileHandleOutput.stderr(String(format: "farcast: warning: no video from the host for %.1f s; asking it for a keyframe\n", Double(silentNs) / 1e9))
                case .resumed(let silentNs):
                    if !quiet { FileHandleOutput.stderr(String(format: "farcast: video resumed after %.1f s\n", Double(silentNs) / 1e9)) }
                }
            }, shouldStop: {
                if let seconds, Double(options.clock.now().nanoseconds - started) / 1e9 >= seconds { return true }
                if interrupt.fired { ended = "interrupted"; return true }
                return false
            })
            if case .connection(let error) = end { (ended, failure) = ("connection", error) }
            if case .gaveUp(let silentNs) = end {
                let received = stream.statistics.accessUnits
                let what = received == 0
                    ? "the host sent no video at all (mode \(session.welcome.mode)); it may not serve that mode"
                    : "the host stopped sending video after \(received) access units"
                ended = "stalled"
                failure = CommandFailure(message: String(format: "%@: nothing for %.0f s (--stall-limit)", what, Double(silentNs) / 1e9))
            }
            let elapsed = Double(options.clock.now().nanoseconds - started) / 1e9
            session.dataSocket.stop()
            client.close()
            for _ in 0..<20 where !session.dataSocket.isStopped { try? await Task.sleep(nanoseconds: 10_000_000) }
            try? saveHandle?.close()
            try? auHandle?.close()
            let s = stream.statistics
            let r = s.receiver
            func us(_ ns: Int64?) -> Double? { ns.map { Double($0) / 1000 } }
            let stats = Stats(host: options.peerKey, fingerprint: client.hostFingerprintHex, mode: (s.lastMode ?? session.welcome.mode).description,
                              seconds: elapsed, accessUnits: s.accessUnits, keyframes: s.keyframes, fecRecoveredShards: r.fecRecoveredShards,
                              unrecoverableFrames: r.framesLost, rfiRequests: s.rfiRequests, keyframeRequests: s.keyframeRequests,
                              lossReports: s.lossReports, bitrateRequests: s.bitrateRequests, bitrateKbps: s.bitrateKbps,
                              latencyUs: Latency(p50: us(s.latency.percentile(50)), p95: us(s.latency.percentile(95)), p99: us(s.latency.percentile(99)),
                                                 samples: s.latency.count, skewed: s.latency.skewed),
                              clockOffsetUs: Double(s.clockOffsetNs) / 1000, datagrams: r.datagrams, bytes: r.bytes,
                              goodputKbps: elapsed > 0 ? Double(r.bytes) * 8 / elapsed / 1e3 : 0,
                              dropped: Dropped(late: r.late, duplicate: r.duplicate, authenticationFailed: r.authenticationFailed,
                                               malformed: r.malformed, stale: r.staleShards, overBudget: r.overBudget),
                              audioFrames: audioFrames.withLock { $0 }, ended: ended)
            if let statsJSON {
                do { try Data(jsonString(stats, pretty: true).utf8).write(to: URL(fileURLWithPath: statsJSON)) } catch {
                    throw CommandFailure(message: "cannot write \(statsJSON): \(error.localizedDescription)")
                }
            }
            if let failure { throw failure }
            if global.json {
                try printJSON(stats)
            } else {
                print(String(format: "%llu access units in %.1f s (%llu keyframes), %llu shards repaired, %llu frames lost, %d RFI and %d keyframe requests, %u kbit/s; latency p50 %@ p95 %@ µs",
                             stats.accessUnits, elapsed, stats.keyframes, stats.fecRecoveredShards, stats.unrecoverableFrames, stats.rfiRequests, stats.keyframeRequests, stats.bitrateKbps,
                             stats.latencyUs.p50.map { String(format: "%.0f", $0) } ?? "-", stats.latencyUs.p95.map { String(format: "%.0f", $0) } ?? "-"))
            }
        } }
    }

    static func create(_ path: String) throws -> FileHandle {
        guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
            throw CommandFailure(message: "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        return handle
    }
}
