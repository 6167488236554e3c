import Foundation
import FarcastSupport
import Punktfunk
import Testing

/// The same session checks against a REAL punktfunk host, opt-in: set PUNKTFUNK_REMOTE_HOST to
/// HOST[:PORT] of a reachable host (and PUNKTFUNK_REMOTE_TRUST=tofu to pin it on first use, or
/// pair first with `farcast punktfunk pair`). No real host can be built or run on these machines
/// (its Rust dependencies need crates.io), so without that variable this suite is SKIPPED, and
/// Swift Testing reports it as skipped with this reason; it is the only punktfunk test that may be.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["PUNKTFUNK_REMOTE_HOST"] != nil,
                "skipped: set PUNKTFUNK_REMOTE_HOST=HOST[:PORT] to run against a real punktfunk host"))
struct PunktfunkRemoteHostTests {
    static var target: (String, UInt16) {
        let text = ProcessInfo.processInfo.environment["PUNKTFUNK_REMOTE_HOST"] ?? ""
        if let colon = text.lastIndex(of: ":"), !text.hasSuffix("]"), let port = UInt16(text[text.index(after: colon)...]) {
            return (String(text[..<colon]).trimmingCharacters(in: CharacterSet(charactersIn: "[]")), port)
        }
        return (text, 9777)
    }

    @Test func handshakeClockAndVideoFromARealHost() async throws {
        let (host, port) = Self.target
        let state = try StateDirectory.resolve()
        let trust: HostTrustPolicy = ProcessInfo.processInfo.environment["PUNKTFUNK_REMOTE_TRUST"] == "tofu" ? .trustOnFirstUse : .pinnedOnly
        let client = try await PunktfunkClient.connect(PunktfunkClient.Options(host: host, port: port, stateDirectory: state, trust: trust))
        defer { client.close() }
        let welcome = try await client.handshake(Hello(mode: StreamMode(width: 1280, height: 720, refreshHz: 60), name: "farcast-remote-test",
                                                       videoCaps: [.probeSequence], codecs: [.hevc]))
        #expect(welcome.fecScheme == 1)
        #expect(welcome.key.count == 16 && welcome.salt.count == 4)
        let socket = try DataPlaneSocket(host: client.quic.remoteAddress, udpPort: welcome.udpPort)
        let datagrams = DataCounter()
        socket.start { d, _ in datagrams.add(d.count) }
        defer { socket.stop() }
        client.start(dataPort: socket.localPort)
        let samples = try await client.measureClock()
        #expect(!samples.isEmpty, "the host answered no clock probe")
        try await Task.sleep(nanoseconds: 3_000_000_000)
        #expect(datagrams.count > 0, "no video datagram arrived in 3 s")
    }
}

final class DataCounter: Sendable {
    private let state = Synchronization.Mutex((0, 0))
    func add(_ bytes: Int) { state.withLock { $0.0 += 1; $0.1 += bytes } }
    var count: Int { state.withLock { $0.0 } }
}

import Synchronization
