import COpus
import Crypto
import Foundation
import FarcastSupport
import Punktfunk
import Synchronization
import Testing

/// punktfunk/1 sessions against the stand-in host (scripts/punktfunk-host): no real punktfunk host
/// can be built here (its Rust dependency graph needs crates.io), so the peer is our clean-room
/// Python host on aioquic with the bit-true oracles; `PunktfunkRemoteHostTests` runs the same
/// checks against a real host when one is reachable.
@Suite(.tags(.timing), .serialized)
struct PunktfunkSessionTests {
    static func farcast(_ args: [String], state: String, stdin: String? = nil, timeout: TimeInterval = 60) throws -> ProcessResult {
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = state
        return try run(try farcastBinary(), ["punktfunk"] + args, environment: env, stdin: stdin.map { Data($0.utf8) }, timeout: timeout)
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test func trustOnFirstUseThenPinnedThenAChangedHostKeyIsRefused() throws {
        let folder = try TemporaryFolder()
        let port = try freeUDPPort()
        let client = folder.path + "/client"
        var host: PunktfunkStandInHost? = try PunktfunkStandInHost(stateDir: folder.path + "/host-a", arguments: ["--port", "\(port)", "--mode", "1280x720x60"], folder: folder)
        let target = "127.0.0.1:\(port)"

        // An unknown, hand-typed host is not trusted without being asked to.
        let refused = try Self.farcast(["probe", target, "--json"], state: client)
        #expect(refused.status == 1)
        #expect(refused.stderr.hasPrefix("farcast: host 127.0.0.1:\(port) is not trusted"))
        #expect(refused.stdout.isEmpty)

        // 1: trust on first use.
        let first = try Self.farcast(["probe", target, "--tofu", "--json", "--mode", "1280x720x60"], state: client)
        #expect(first.status == 0, "\(first.stderr)")
        let report = try Self.json(first.stdout)
        #expect(report["trust"] as? String == "pinned_on_first_use")
        #expect(report["fingerprint"] as? String == host?.fingerprint)
        let welcome = try #require(report["welcome"] as? [String: Any])
        #expect(welcome["width"] as? Int == 1280 && welcome["fec_scheme"] as? Int == 1 && welcome["shard_payload"] as? Int == 1408)
        #expect(report["clock_samples"] as? Int == 8)
        // Loopback, one machine: the clock offset is tiny.
        #expect(abs(report["clock_offset_us"] as? Double ?? 1e9) < 2000)
        // The host saw our certificate, a Hello, a Start, 8 clock probes and the PFpunch1 datagrams.
        let connected = try #require(host?.events("connected").first)
        #expect(connected["alpn"] as? String == "pkf1")
        let identity = try ClientIdentity.loadOrCreate(in: StateDirectory(path: client + "/farcast"))
        #expect(connected["client_fp"] as? String == identity.fingerprintHex)
        #expect(try StateDirectory(path: client + "/farcast").permissions(of: ClientIdentity.keyFile) == 0o600)
        #expect(host?.control("clock_probe").count == 8)
        #expect(host?.events("start").count == 1)

        // 2: pinned reconnect, no flag needed.
        let second = try Self.farcast(["probe", target, "--json"], state: client)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try Self.json(second.stdout)["trust"] as? String == "pinned")
        // The codec by name in both forms, the wire's byte beside it in JSON.
        let secondWelcome = try Self.json(second.stdout)["welcome"] as? [String: Any]
        #expect(secondWelcome?["codec"] as? String == "HEVC" && secondWelcome?["codec_id"] as? Int == 2, "\(second.stdout)")
        let text = try Self.farcast(["probe", target, "--mode", "1280x720x60"], state: client)
        #expect(text.status == 0 && text.stdout.contains("1280x720") && text.stdout.contains(" HEVC fec "), "\(text.stdout)\(text.stderr)")

        // 3: same address, new host key: refused inside the TLS handshake, with a way out.
        host?.stop()
        host = nil
        host = try PunktfunkStandInHost(stateDir: folder.path + "/host-b", arguments: ["--port", "\(port)", "--mode", "1280x720x60"], folder: folder)
        let changed = try Self.farcast(["probe", target, "--json"], state: client)
        #expect(changed.status == 1)
        #expect(changed.stderr.contains("presented certificate \(host?.fingerprint ?? "?")"), "\(changed.stderr)")
        #expect(changed.stderr.contains("--trust"))
        #expect(changed.stderr.split(separator: "\n").count == 1)
        // --tofu does not override a pin.
        #expect(try Self.farcast(["probe", target, "--tofu"], state: client).status == 1)
        #expect(host?.events("hello").isEmpty == true)
        // The user re-trusts it.
        let retrust = try Self.farcast(["probe", target, "--trust", "--json"], state: client)
        #expect(retrust.status == 0, "\(retrust.stderr)")
        #expect(try Self.json(retrust.stdout)["trust"] as? String == "replaced_pin")
    }

    @Test func pairingWithTheRightPINOpensTheRequirePairingGate() throws {
        let folder = try TemporaryFolder()
        let client = folder.path + "/client"
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--require-pairing", "--mode", "1280x720x60"],
                                            pin: "4321", folder: folder)
        // Before pairing: the gate refuses the Hello.
        let gated = try Self.farcast(["probe", host.address, "--tofu"], state: client)
        #expect(gated.status == 1)
        #expect(gated.stderr.contains("requires pairing"), "\(gated.stderr)")
        // That refused first use pinned nothing: a pin is written only after a Welcome, so the
        // next plain probe is refused as untrusted before any Hello (it met the gate before).
        let pins = (try? String(contentsOfFile: client + "/farcast/punktfunk/pins.json", encoding: .utf8)) ?? ""
        #expect(!pins.contains(host.fingerprint), "pins.json: \(pins)")
        let untrusted = try Self.farcast(["probe", host.address], state: client)
        #expect(untrusted.status == 1 && untrusted.stderr.contains("is not trusted"), "\(untrusted.stderr)")
        // A wrong-length PIN never reaches the host.
        let short = try Self.farcast(["pair", host.address], state: client, stdin: "432\n")
        #expect(short.status == 2)
        #expect(short.stderr == "farcast: a punktfunk PIN is exactly 4 digits\n")
        #expect(host.control("pair_request").isEmpty)
        // The right PIN pairs, and the host's certificate is pinned.
        let paired = try Self.farcast(["pair", host.address, "--json", "--name", "test-device"], state: client, stdin: "4321\n")
        #expect(paired.status == 0, "\(paired.stderr)")
        let report = try Self.json(paired.stdout)
        #expect(report["paired"] as? Bool == true)
        #expect(report["fingerprint"] as? String == host.fingerprint)
        #expect(host.events("pair").first?["result"] as? String == "paired")
        #expect(host.control("pair_request").first?["name"] as? String == "test-device")
        // After pairing: the same gate lets the Hello through, with no trust flag.
        let after = try Self.farcast(["probe", host.address, "--json"], state: client)
        #expect(after.status == 0, "\(after.stderr)")
        #expect(try Self.json(after.stdout)["trust"] as? String == "pinned")

        // By a saved name: the book shows the pin and records the connection, as for VNC.
        func asUser(_ arguments: [String]) throws -> ProcessResult {
            var env = ProcessInfo.processInfo.environment
            env["XDG_STATE_HOME"] = client
            env["XDG_DATA_HOME"] = folder.path + "/data"
            return try run(try farcastBinary(), arguments, environment: env, timeout: 60)
        }
        #expect(try asUser(["hosts", "add", "gamebox", "punktfunk://\(host.address)"]).status == 0)
        let before = try Self.json(try asUser(["hosts", "show", "gamebox", "--json"]).stdout)
        #expect(before["last_connected"] == nil)
        let byName = try asUser(["punktfunk", "probe", "gamebox", "--mode", "1280x720x60"])
        #expect(byName.status == 0, "\(byName.stderr)")
        let shown = try Self.json(try asUser(["hosts", "show", "gamebox", "--json"]).stdout)
        #expect(shown["last_connected"] is String, "\(shown)")
        #expect((shown["pins"] as? [String: String])?["tls \(host.address)"] == host.fingerprint, "\(shown)")
        let text = try asUser(["hosts", "show", "gamebox"])
        #expect(text.stdout.contains("pin           tls \(host.address) \(host.fingerprint)") && !text.stdout.contains("never"), "\(text.stdout)")
    }

    @Test func aWrongPINIsOneFailedAttempt() throws {
        let folder = try TemporaryFolder()
        let client = folder.path + "/client"
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--require-pairing", "--mode", "1280x720x60"],
                                            pin: "4321", folder: folder)
        let wrong = try Self.farcast(["pair", host.address], state: client, stdin: "1234\n")
        #expect(wrong.status == 1)
        #expect(wrong.stderr.hasPrefix("farcast: wrong PIN"), "\(wrong.stderr)")
        #expect(host.control("pair_request").count == 1)
        #expect(host.events("pair").contains { $0["result"] as? String == "paired" } == false)
        // The PIN was single-use: even the right one is refused until the host arms a new one.
        let again = try Self.farcast(["pair", host.address], state: client, stdin: "4321\n")
        #expect(again.status == 1)
        #expect(again.stderr.contains("no PIN is armed"), "\(again.stderr)")
        // And nothing was pinned: the gate still holds.
        let gated = try Self.farcast(["probe", host.address, "--tofu"], state: client)
        #expect(gated.stderr.contains("requires pairing"), "\(gated.stderr)")
    }

    /// The link is shaped outside the host: the NFQUEUE impairment serialises the data plane's
    /// datagrams from the host at 30 Mbit/s with a short queue (this kernel has no netem), as a
    /// slow Wi-Fi hop would.
    @Test func speedTestGoodputIsWithinTenPercentOfTheShapedLinkRate() throws {
        let folder = try TemporaryFolder()
        let client = folder.path + "/client"
        let dataPort = try freeUDPPort()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", "1280x720x60", "--data-port", "\(dataPort)"], folder: folder)
        let link = try ImpairedLink(match: "-p udp --sport \(dataPort)", options: ["--rate-kbit", "30000", "--limit", "64"], folder: folder)
        defer { link.stop() }
        // The probe asks for three times the link's rate, which the Python host reaches even on a
        // busy machine, so the link is what limits the goodput.
        let result = try Self.farcast(["speedtest", host.address, "--tofu", "--target-mbps", "90", "--duration-ms", "3000", "--json"],
                                      state: client, timeout: 90)
        #expect(result.status == 0, "\(result.stderr)")
        let report = try Self.json(result.stdout)
        let goodput = try #require(report["goodput_kbps"] as? Double)
        #expect(abs(goodput - 30_000) <= 3_000, "goodput \(goodput) kbit/s over a 30 Mbit/s link")
        #expect(report["recommended_kbps"] as? Int == Int(goodput * 0.7))
        // What the link could not carry shows as link loss (about 2/3 here), not as host drops.
        #expect((report["link_loss"] as? Double ?? 0) > 0.5)
        #expect(report["host_send_dropped"] as? Int == 0)
        #expect(host.control("probe_request").first?["target_kbps"] as? Int == 90_000)
        #expect(host.events("hello").first?["video_caps"] as? Int == 0x10)
        #expect((link.stop()["dropped_limit"] ?? 0) > 1_000, "the shaped link dropped nothing")
    }

    @Test func inputDatagramsArriveExactlyAsSentAndFeedbackPlanesArrive() async throws {
        let folder = try TemporaryFolder()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", "1280x720x60", "--feedback-at", "0.5"], folder: folder)
        var options = PunktfunkClient.Options(host: "127.0.0.1", port: UInt16(host.port), stateDirectory: StateDirectory(path: folder.path + "/client"),
                                              trust: .trustOnFirstUse)
        options.idleTimeout = .seconds(8)
        let client = try await PunktfunkClient.connect(options)
        let received = Mutex<[[UInt8]]>([])
        client.onDatagram { d in received.withLock { $0.append(d) } }
        let welcome = try await client.handshake(Hello(mode: StreamMode(width: 1280, height: 720, refreshHz: 60)))
        let socket = try DataPlaneSocket(host: client.quic.remoteAddress, udpPort: welcome.udpPort)
        socket.start { _, _ in }
        client.start(dataPort: socket.localPort)
        _ = try await client.measureClock()
        // Keyboard, mouse, gamepad state and a rich-input motion sample, byte for byte.
        var sent: [[UInt8]] = []
        for i in 0..<40 {
            var d: [UInt8] = [0xC8, UInt8(i % 16)]
            for v in [UInt32(0x41 + i), UInt32(bitPattern: Int32(-i)), UInt32(i * 7), UInt32(i)] {
                d += [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 24)]
            }
            sent.append(d)
        }
        sent.append([0xCC, 2, 0, 10, 0, 246, 255, 0, 0, 16, 39, 0, 0, 0, 0])
        for d in sent {
            client.send(datagram: d)
            try await Task.sleep(nanoseconds: 2_000_000)
        }
        try host.waitFor("all input datagrams") { e in e.filter { ["input", "rich_input"].contains($0["event"] as? String ?? "") }.count >= sent.count }
        let logged = host.events().filter { ["input", "rich_input"].contains($0["event"] as? String ?? "") }.compactMap { $0["hex"] as? String }
        #expect(logged == sent.map { $0.map { String(format: "%02x", $0) }.joined() })

        try await Task.sleep(nanoseconds: 2_000_000_000)
        let datagrams = received.withLock { $0 }
        let audio = datagrams.filter { $0.first == 0xC9 }
        #expect(audio.count > 150, "about 200 Opus frames a second")
        // The burst: five 10-byte rumbles, one 14-byte one with the trigger motors; the light bar,
        // player LEDs and an R2 adaptive-trigger block.
        let rumble = datagrams.filter { $0.first == 0xCA }.compactMap(Rumble.init(datagram:))
        #expect(rumble.count == 6 && rumble.prefix(5).allSatisfy { $0.timeToLiveMilliseconds == 100 && $0.leftTrigger == nil })
        #expect(rumble.last.map { ($0.leftTrigger, $0.rightTrigger) } ?? (nil, nil) == (7000, 9000))
        let hid = datagrams.filter { $0.first == 0xCD }.compactMap(HIDOutput.init(datagram:))
        #expect(hid.count == 3)
        #expect(hid.first == .lightbar(pad: 0, red: 255, green: 64, blue: 0))
        if hid.count == 3 {
            #expect(hid[1] == .playerLEDs(pad: 0, bits: 0b10101))
            guard case .trigger(0, 1, .zonedFeedback(let zones), _) = hid[2] else { Issue.record("\(hid[2])"); return }
            #expect(zones == [0, 0, 0] + Array(repeating: 5.0 / 8, count: 7))
        }
        socket.stop()
        client.close()
        #expect(socket.punchesSent >= 5)
        #expect((host.events("punch").last?["count"] as? Int ?? 0) >= 5)
    }

    @Test func audioDatagramsDecodeWithoutGaps() async throws {
        let folder = try TemporaryFolder()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", "1280x720x60"], folder: folder)
        let options = PunktfunkClient.Options(host: "127.0.0.1", port: UInt16(host.port), stateDirectory: StateDirectory(path: folder.path + "/client"),
                                              trust: .trustOnFirstUse)
        let client = try await PunktfunkClient.connect(options)
        let audio = Mutex<[[UInt8]]>([])
        client.onDatagram { d in if d.first == 0xC9 { audio.withLock { $0.append(d) } } }
        let welcome = try await client.handshake(Hello(mode: StreamMode(width: 1280, height: 720, refreshHz: 60)))
        #expect(welcome.audioChannels == 2)
        let socket = try DataPlaneSocket(host: client.quic.remoteAddress, udpPort: welcome.udpPort)
        socket.start { _, _ in }
        client.start(dataPort: socket.localPort)
        _ = try await client.measureClock()
        try await Task.sleep(nanoseconds: 3_000_000_000)
        socket.stop()
        client.close()
        let frames = audio.withLock { $0 }
        #expect(frames.count > 400, "\(frames.count) frames in 3 s")
        // Every frame: seq u32 LE ‖ pts u64 LE ‖ one 5 ms Opus frame; sequence numbers in order.
        var error: Int32 = 0
        let decoder = try #require(opus_decoder_create(48000, 2, &error))
        defer { opus_decoder_destroy(decoder) }
        var pcm = [Int16](repeating: 0, count: 5760 * 2)
        var sequence: [UInt32] = []
        var peak: Int16 = 0
        var lastPTS: UInt64 = 0
        for f in frames {
            #expect(f.count > 13)
            let seq = UInt32(f[1]) | UInt32(f[2]) << 8 | UInt32(f[3]) << 16 | UInt32(f[4]) << 24
            let pts = (0..<8).reduce(UInt64(0)) { $0 | UInt64(f[5 + $1]) << (8 * UInt64($1)) }
            #expect(pts > lastPTS)
            lastPTS = pts
            sequence.append(seq)
            let samples = f[13...].withContiguousStorageIfAvailable { opus in
                opus_decode(decoder, opus.baseAddress, Int32(opus.count), &pcm, 5760, 0)
            } ?? Array(f[13...]).withUnsafeBufferPointer { opus_decode(decoder, $0.baseAddress, Int32($0.count), &pcm, 5760, 0) }
            #expect(samples == 240, "a 5 ms frame at 48 kHz")
            peak = max(peak, pcm.prefix(480).map { $0 == Int16.min ? Int16.max : abs($0) }.max() ?? 0)
        }
        // QUIC DATAGRAM frames are unreliable by design (RFC 9221): on a loaded machine the
        // host's stack may drop one when its send path is congestion-limited, so a rare gap is
        // the transport working, not a fault. What must hold: the order is kept, nothing arrives
        // twice, and loss stays rare.
        #expect(zip(sequence, sequence.dropFirst()).allSatisfy { $0 < $1 }, "audio frames out of order or repeated: \(sequence.prefix(50))")
        let span = Int((sequence.last ?? 0) &- (sequence.first ?? 0)) + 1
        #expect(span - sequence.count <= span / 100, "\(span - sequence.count) of \(span) audio frames lost on loopback (more than 1 %)")
        #expect(peak > 4000, "the host's tone decoded (peak \(peak))")
    }

    @Test func aHostKilledMidStreamEndsTheSessionWithinTheIdleTimeout() async throws {
        let folder = try TemporaryFolder()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", "1280x720x60"], folder: folder)
        let options = PunktfunkClient.Options(host: "127.0.0.1", port: UInt16(host.port), stateDirectory: StateDirectory(path: folder.path + "/client"),
                                              trust: .trustOnFirstUse)
        let client = try await PunktfunkClient.connect(options)
        let welcome = try await client.handshake(Hello(mode: StreamMode(width: 1280, height: 720, refreshHz: 60)))
        let socket = try DataPlaneSocket(host: client.quic.remoteAddress, udpPort: welcome.udpPort)
        let datagrams = Mutex(0)
        socket.start { _, _ in datagrams.withLock { $0 += 1 } }
        client.start(dataPort: socket.localPort)
        _ = try await client.measureClock()
        try await Task.sleep(nanoseconds: 1_000_000_000)
        #expect(datagrams.withLock { $0 } > 0, "video was flowing")
        host.kill()
        let killed = Date()
        // Wait for a message a host never sends (a client's pairing request): the connection must
        // end with a reason well before this 30 s bound.
        await #expect(throws: PunktfunkSessionError.idleTimeout(seconds: 8)) {
            _ = try await client.next(.pairRequest, timeout: .seconds(30), waitingFor: "anything")
        }
        let elapsed = Date().timeIntervalSince(killed)
        #expect(elapsed < 8 + 1.5, "ended after \(elapsed) s")
        #expect(PunktfunkSessionError.idleTimeout(seconds: 8).description == "the host stopped answering (nothing received for 8 s)")
        socket.stop()
    }

    /// A host that stays connected but stops sending video (the stand-in's --frames 30): receive
    /// warns after 2 s, asks for keyframes, and ends at --stall-limit with exit 1 and one line
    /// (it waited silently until killed before), the statistics file still written.
    @Test func aHostThatStopsSendingVideoIsNoticedAndTheReceiveEnds() throws {
        let folder = try TemporaryFolder()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", "1280x720x60", "--frames", "30"], folder: folder)
        let stats = folder.path + "/stats.json"
        let start = Date()
        let result = try Self.farcast(["receive", host.address, "--tofu", "--mode", "1280x720x60", "--duration", "60", "--stall-limit", "5",
                                       "--stats-json", stats], state: folder.path + "/client", timeout: 60)
        let seconds = Date().timeIntervalSince(start)
        #expect(result.status == 1, "\(result.stderr)")
        #expect(result.stderr.contains("warning: no video from the host for 2.0 s; asking it for a keyframe"), "\(result.stderr)")
        #expect(result.stderr.contains("farcast: the host stopped sending video after 30 access units: nothing for 5 s (--stall-limit)"), "\(result.stderr)")
        #expect(seconds < 15, "ended after \(seconds) s")
        let report = try Self.json(try String(contentsOfFile: stats, encoding: .utf8))
        #expect(report["ended"] as? String == "stalled" && report["access_units"] as? Int == 30, "\(report)")
        #expect((report["keyframe_requests"] as? Int ?? 0) >= 2, "\(report)")
        #expect(host.control("request_keyframe").count >= 2, "the host saw the requests")

        // A host that sends no video at all (every video datagram dropped): not "0 access
        // units" and exit 0, but exit 1 saying nothing came.
        let silent = try PunktfunkStandInHost(stateDir: folder.path + "/silent-host", arguments: ["--mode", "1280x720x60", "--loss", "100"], folder: folder)
        let nothing = try Self.farcast(["receive", silent.address, "--tofu", "--mode", "1280x720x60", "--duration", "60", "--stall-limit", "3"],
                                       state: folder.path + "/client", timeout: 60)
        #expect(nothing.status == 1, "\(nothing.stderr)")
        #expect(nothing.stderr.contains("farcast: the host sent no video at all (mode 1280x720x60); it may not serve that mode: nothing for 3 s"), "\(nothing.stderr)")
    }
}

/// Video through `farcast punktfunk receive`: real HEVC from the stand-in host, sealed and
/// FEC-protected by the host's rules, reassembled and repaired by our data plane.
@Suite(.serialized)
struct PunktfunkStreamingTests {
    static func lines(_ path: String) -> [[String: Any]] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    /// Host AU hashes by frame index.
    static func hostHashes(_ host: PunktfunkStandInHost) -> [Int: String] {
        var map: [Int: String] = [:]
        for e in host.events("au") { if let i = e["frame_index"] as? Int, let h = e["sha256"] as? String { map[i] = h } }
        return map
    }

    @Test func tenSecondsOf1080p60UnderFivePercentLossMatchTheHostsHashes() throws {
        let folder = try TemporaryFolder()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", "1920x1080x60", "--loss", "5", "--fec", "20", "--seed", "7"],
                                            folder: folder)
        let auLog = folder.path + "/au.jsonl", stats = folder.path + "/stats.json", saved = folder.path + "/out.h265"
        let result = try PunktfunkSessionTests.farcast(["receive", host.address, "--tofu", "--duration", "10", "--mode", "1920x1080x60",
                                                        "--au-log", auLog, "--stats-json", stats, "--save", saved, "--json"],
                                                       state: folder.path + "/client", timeout: 120)
        #expect(result.status == 0, "\(result.stderr)")
        let report = try PunktfunkSessionTests.json(result.stdout)
        let fileReport = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: stats))) as? [String: Any])
        #expect(fileReport["access_units"] as? Int == report["access_units"] as? Int)
        let received = Self.lines(auLog)
        let hashes = Self.hostHashes(host)
        let units = report["access_units"] as? Int ?? 0
        let lost = report["unrecoverable_frames"] as? Int ?? 0
        // Up to 600 AUs in 10 s at 60 Hz (the Python host falls behind on a busy machine); every
        // AU the host sent up to the last one received arrived or was counted lost, and every one
        // that arrived is byte-identical to what the host sent.
        #expect(units >= 300, "\(units) access units")
        #expect(received.count == units)
        let lastIndex = received.compactMap { $0["frame_index"] as? Int }.max() ?? 0
        let sentUpToLast = hashes.keys.filter { $0 <= lastIndex }.count
        #expect(units + lost >= sentUpToLast - 2, "\(units) received + \(lost) lost of \(sentUpToLast) sent")
        let mismatched = received.filter { hashes[$0["frame_index"] as? Int ?? -1] != $0["sha256"] as? String }
        #expect(mismatched.isEmpty, "\(mismatched.count) AUs differ from the host's, first: \(mismatched.first ?? [:])")
        // The 5 % loss was real and the FEC repaired it; what it could not repair was asked for again.
        #expect((report["fec_recovered_shards"] as? Int ?? 0) > 500)
        #expect(lost <= 6, "\(lost) frames lost")
        #expect((report["keyframe_requests"] as? Int ?? 0) == host.control("request_keyframe").count)
        if lost > 0 { #expect((report["keyframe_requests"] as? Int ?? 0) >= 1) }
        #expect(host.control("loss_report").count >= 8)
        let ppm = host.control("loss_report").compactMap { $0["loss_ppm"] as? Int }
        #expect(ppm.contains { (30_000...80_000).contains($0) }, "loss reports \(ppm) should be near 5 %")
        let latency = try #require(report["latency_us"] as? [String: Any])
        #expect((latency["p50"] as? Double ?? 1e9) < 100_000)
        #expect(report["clock_offset_us"] is Double)
        // The saved stream is exactly the received AUs in order.
        let size = (try? FileManager.default.attributesOfItem(atPath: saved)[.size] as? Int) ?? -1
        #expect(size == received.compactMap { $0["bytes"] as? Int }.reduce(0, +))
    }

    /// The stand-in answers an RfiRequest with its IDR (it streams pre-encoded video; a real host
    /// re-encodes a clean P-frame), so what this checks is what the client asks and when.
    @Test func thirtyPercentLossBringsInvalidationThenKeyframeRequestsALowerBitrateAndRecovery() throws {
        let folder = try TemporaryFolder()
        // 30 % loss from second 2 to second 4 of the stream; 20 % FEC cannot cover it.
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", "1280x720x60", "--fec", "20", "--seed", "3",
                                                                                          "--loss-schedule", "2:30,4:0"], folder: folder)
        let auLog = folder.path + "/au.jsonl"
        let result = try PunktfunkSessionTests.farcast(["receive", host.address, "--tofu", "--duration", "7", "--mode", "1280x720x60",
                                                        "--au-log", auLog, "--json"], state: folder.path + "/client", timeout: 120)
        #expect(result.status == 0, "\(result.stderr)")
        let report = try PunktfunkSessionTests.json(result.stdout)
        #expect((report["unrecoverable_frames"] as? Int ?? 0) > 10)
        #expect((report["keyframe_requests"] as? Int ?? 0) >= 1)
        let requests = host.control("request_keyframe")
        #expect(!requests.isEmpty)
        // The first request for a broken run is reference frame invalidation over it, in range.
        let recovery = host.events("control").filter { ["rfi_request", "request_keyframe"].contains($0["kind"] as? String ?? "") }
        #expect(recovery.first?["kind"] as? String == "rfi_request", "first recovery request: \(recovery.first ?? [:])")
        let rfis = host.control("rfi_request")
        #expect(report["rfi_requests"] as? Int == rfis.count && !rfis.isEmpty)
        #expect(rfis.allSatisfy { (1...256).contains($0["span"] as? Int ?? 0) })
        #expect(host.events("rfi_refused").isEmpty)
        // Two seconds that lost whole frames: the bitrate goes down by a quarter, and the host's
        // BitrateChanged is what the report shows.
        let bitrate = host.control("set_bitrate")
        #expect(bitrate.first?["kbps"] as? Int == 15_000, "SetBitrate: \(bitrate)")
        #expect(report["bitrate_requests"] as? Int == bitrate.count)
        #expect(report["bitrate_kbps"] as? Int == bitrate.last?["kbps"] as? Int)
        let sent = host.events("keyframe_sent")
        #expect(!sent.isEmpty, "the host answered no keyframe request")
        // Recovery: after the loss stopped, a keyframe came through and frames flowed again, intact.
        let received = Self.lines(auLog)
        let hashes = Self.hostHashes(host)
        #expect(received.allSatisfy { hashes[$0["frame_index"] as? Int ?? -1] == $0["sha256"] as? String })
        let lossEnd = host.events("loss_changed").last { ($0["percent"] as? Double) == 0 }?["t_ns"] as? Int ?? Int.max
        let firstKeyframeAfter = host.events("au").first { ($0["idr"] as? Bool) == true && ($0["t_ns"] as? Int ?? 0) > lossEnd - 500_000_000 }
        let recoveredAt = try #require(firstKeyframeAfter?["frame_index"] as? Int, "no IDR sent after the loss")
        let keyframeIndex = received.last { ($0["keyframe"] as? Bool) == true }?["frame_index"] as? Int ?? -1
        #expect(keyframeIndex >= recoveredAt - 1)
        let afterRecovery = received.filter { ($0["frame_index"] as? Int ?? 0) > keyframeIndex }
        #expect(afterRecovery.count >= 60, "only \(afterRecovery.count) frames after the recovering keyframe")
    }

    /// Every UDP packet in both directions — QUIC control and datagrams, the video data plane, the
    /// hole punch — delayed 20 ms and 3 % lost by the NFQUEUE impairment (this kernel has no netem),
    /// not by the host's own knobs: the handshake, clock and stream must hold, and what they
    /// measure must be the link's. (`receive` once outlived its 5 s here by minutes, in CI and
    /// after NetImpairTests; it recurred in a CI run on 2026-11-27 with an empty stderr and a
    /// process gdb could not attach to, within 0.2 s of the time-out — a program that had exited
    /// while Foundation's Process still said it ran. `run` now asks the kernel as well.)
    @Test func theSessionHoldsAndMeasuresTheLinkWhenEveryPacketIsDelayedAndSomeLostBothWays() throws {
        let folder = try TemporaryFolder()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", "1280x720x60", "--fec", "20"], folder: folder)
        let link = try ImpairedLink(match: "-p udp", options: ["--delay-ms", "20", "--loss", "3", "--seed", "21"], folder: folder)
        defer { link.stop() }
        let probe = try PunktfunkSessionTests.farcast(["probe", host.address, "--tofu", "--mode", "1280x720x60", "--json"],
                                                      state: folder.path + "/client", timeout: 90)
        #expect(probe.status == 0, "\(probe.stderr)")
        let clock = try PunktfunkSessionTests.json(probe.stdout)
        // 20 ms each way: the best clock round trip is about 40 ms and the symmetric delay cancels
        // out of the offset (one host, one clock: the true offset is 0).
        let rtt = try #require(clock["rtt_us"] as? Double)
        #expect(rtt >= 39_000 && rtt < 80_000, "clock round trip \(rtt) µs over a 2 × 20 ms link")
        let offset = try #require(clock["clock_offset_us"] as? Double)
        #expect(abs(offset) < 3_000, "clock offset \(offset) µs with a symmetric delay")

        let auLog = folder.path + "/au.jsonl"
        let result = try PunktfunkSessionTests.farcast(["receive", host.address, "--duration", "5", "--mode", "1280x720x60", "--au-log", auLog, "--json"],
                                                       state: folder.path + "/client", timeout: 60)
        #expect(result.status == 0, "\(result.stderr)")
        let report = try PunktfunkSessionTests.json(result.stdout)
        let received = Self.lines(auLog)
        let hashes = Self.hostHashes(host)
        #expect(received.count > 200, "only \(received.count) access units in 5 s of 60 Hz")
        #expect(received.allSatisfy { hashes[$0["frame_index"] as? Int ?? -1] == $0["sha256"] as? String })
        #expect((report["fec_recovered_shards"] as? Int ?? 0) > 0, "3 % loss but nothing repaired")
        // Capture→receipt latency includes the 20 ms the link holds every packet.
        let p50 = try #require((report["latency_us"] as? [String: Any])?["p50"] as? Double)
        #expect(p50 >= 19_000 && p50 < 80_000, "latency p50 \(p50) µs over a 20 ms link")
        let counts = link.stop()
        #expect((counts["dropped_loss"] ?? 0) > 50 && (counts["accepted"] ?? 0) > 5_000, "impairment counts \(counts)")
    }

    @Test func aModeChangeMidStreamBringsAFreshIDRAtTheNewMode() async throws {
        let folder = try TemporaryFolder()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", "1920x1080x60", "--prepare", "1280x720x60"], folder: folder)
        let options = PunktfunkClient.Options(host: "127.0.0.1", port: UInt16(host.port), stateDirectory: StateDirectory(path: folder.path + "/client"),
                                              trust: .trustOnFirstUse)
        let client = try await PunktfunkClient.connect(options)
        let welcome = try await client.handshake(Hello(mode: StreamMode(width: 1920, height: 1080, refreshHz: 60)))
        let frames = Mutex<[(index: UInt32, keyframe: Bool, data: [UInt8])]>([])
        let socket = try DataPlaneSocket(host: client.quic.remoteAddress, udpPort: welcome.udpPort)
        let stream = try VideoStreamSession(client: client, welcome: welcome, clock: ClockOffsetEstimator()) { frame, _, keyframe in
            frames.withLock { $0.append((frame.frameIndex, keyframe, frame.data)) }
        }
        socket.start { d, t in stream.handle(d, receivedAt: t) }
        client.start(dataPort: socket.localPort)
        stream.applyClock(try await client.measureClock())
        try await Task.sleep(nanoseconds: 1_500_000_000)
        let before = frames.withLock { $0.count }
        client.send(.reconfigure(StreamMode(width: 1280, height: 720, refreshHz: 60)))
        let answer = try await client.next(.reconfigured, timeout: .seconds(10), waitingFor: "Reconfigured")
        #expect(answer == .reconfigured(accepted: true, mode: StreamMode(width: 1280, height: 720, refreshHz: 60)))
        try await Task.sleep(nanoseconds: 1_500_000_000)
        socket.stop()
        client.close()
        let all = frames.withLock { $0 }
        #expect(before > 60 && all.count > before + 60)
        // The first AU the host sent at the new mode is an IDR with parameter sets, received intact,
        // and everything after it is the new mode's stream.
        let hostAUs = host.events("au")
        let switchIndex = try #require(hostAUs.first { $0["width"] as? Int == 1280 }?["frame_index"] as? Int)
        #expect(hostAUs.first { $0["frame_index"] as? Int == switchIndex }?["idr"] as? Bool == true)
        let first = try #require(all.first { Int($0.index) == switchIndex }, "the switching IDR did not arrive")
        #expect(first.keyframe)
        let hashes = PunktfunkStreamingTests.hostHashes(host)
        #expect(all.allSatisfy { hashes[Int($0.index)] == hexString(SHA256.hash(data: $0.data)) })
        // ffmpeg decodes what we received across the switch and sees both sizes.
        let path = folder.path + "/switch.h265"
        _ = FileManager.default.createFile(atPath: path, contents: Data(all.flatMap(\.data)))
        let ffprobe = try requireExecutable("ffprobe", package: "ffmpeg")
        let probe = try run(ffprobe, ["-v", "error", "-select_streams", "v", "-show_entries", "frame=width,height", "-of", "csv=p=0", path], timeout: 120)
        #expect(probe.status == 0, "\(probe.stderr)")
        let sizes = Set(probe.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " ,")) })
        #expect(sizes == ["1920,1080", "1280,720"], "decoded sizes \(sizes)")
        #expect(probe.stderr.isEmpty, "decoder complaints: \(probe.stderr.prefix(400))")
    }
}

/// `farcast punktfunk discover` against the stand-in host's mDNS announcement (python-zeroconf,
/// as a real host announces with mdns-sd), through the shared Discovery seam and a private
/// avahi-daemon on the namespace's loopback (`AvahiResponder`).
@Suite(.tags(.groupC), .serialized, .timeLimit(.minutes(3)))
struct PunktfunkDiscoveryTests {
    @Test func discoverListsTheHostWithItsTXT() throws {
        let responder = try AvahiResponder()
        defer { responder.stop() }
        let folder = try TemporaryFolder()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", "1280x720x60", "--advertise", "farcast-pf-host"],
                                            folder: folder)
        var entry: [String: Any]?
        for _ in 0..<3 where entry == nil {
            let result = try PunktfunkSessionTests.farcast(["discover", "--duration", "3", "--json"], state: folder.path + "/client")
            #expect(result.status == 0, "\(result.stderr)")
            let list = try jsonItems(result.stdout)
            entry = list.first { $0["name"] as? String == "farcast-pf-host" }
        }
        let found = try #require(entry, "not discovered:\n\(host.process.log)\n\(responder.logs)")
        #expect(found["port"] as? Int == host.port)
        #expect(found["addresses"] as? [String] == ["127.0.0.1"])
        #expect(found["proto"] as? String == "punktfunk/1")
        #expect(found["fingerprint"] as? String == host.fingerprint)
        #expect(found["pairing"] as? String == "optional")
    }
}
