import Foundation
import Synchronization

/// aiosendspin's reference server (`sendspin serve`, from the setup venv) playing a 440 Hz sine.
/// It binds 0.0.0.0, so it only ever runs inside the integration tests' network namespace.
final class SendspinServer: @unchecked Sendable {
    // @unchecked: immutable after init; the process is only stopped by deinit.
    let port: Int
    let process: BackgroundProcess
    var url: String { "ws://127.0.0.1:\(port)/sendspin" }

    private static let nextPort = Mutex(18_927)

    /// A port no other server of this test process uses, for a test that must know it early.
    static func reservePort() -> Int {
        nextPort.withLock { p in
            defer { p += 1 }
            return p
        }
    }

    /// `dialing`: listeners (ws:// URLs) the server connects to itself, server-initiated mode.
    /// `port`: one from `reservePort()`, else the next free one.
    init(name: String = "farcast-test", source: String = "sine=frequency=440:sample_rate=48000", logLevel: String = "INFO",
         dialing: [String] = [], port: Int? = nil) throws {
        guard ProcessInfo.processInfo.environment["FARCAST_REQUIRE_NETNS"] == "1" || Self.onlyLoopback() else {
            throw PeerFailed(name: "sendspin serve", log: "refusing to start a server that binds 0.0.0.0 outside a private network namespace; run the integration tests with scripts/test (it uses unshare -n)")
        }
        let venv = ProcessInfo.processInfo.environment["FARCAST_VENV"] ?? packageRoot.appendingPathComponent(".venv").path
        let sendspin = venv + "/bin/sendspin"
        guard FileManager.default.isExecutableFile(atPath: sendspin) else {
            throw MissingPeer(what: "sendspin (aiosendspin[server]==10.2.1 and sendspin==9.0.0 in \(venv))")
        }
        self.port = port ?? Self.reservePort()
        process = try BackgroundProcess(sendspin, ["serve", "--source-format", "lavfi", source, "--port", "\(self.port)", "--name", name, "--log-level", logLevel]
                                            + dialing.flatMap { ["--client", $0] },
                                        logName: "sendspin-serve")
        try waitForTCPPort(self.port, timeout: 30, process: process)
    }

    /// What the server said about clients it found non-compliant (it tolerates and logs them).
    var complianceComplaints: [String] {
        process.log.split(separator: "\n").filter { $0.contains("non-compliant") }.map(String.init)
    }

    /// Starts one of the small aiosendspin servers in scripts/lib (SCRIPT with `arguments`, on
    /// `port`) and waits until it listens. Refused outside a private network namespace (they are
    /// run by scripts/test under unshare -n); the venv missing is a missing peer.
    static func script(_ script: String, port: Int, _ arguments: [String], logName: String) throws -> BackgroundProcess {
        guard ProcessInfo.processInfo.environment["FARCAST_REQUIRE_NETNS"] == "1" || onlyLoopback() else {
            throw PeerFailed(name: logName, log: "run the integration tests with scripts/test (it uses unshare -n)")
        }
        let venv = ProcessInfo.processInfo.environment["FARCAST_VENV"] ?? packageRoot.appendingPathComponent(".venv").path
        guard FileManager.default.isExecutableFile(atPath: venv + "/bin/python") else { throw MissingPeer(what: "aiosendspin[server]==10.2.1 in \(venv)") }
        let server = try BackgroundProcess(venv + "/bin/python", [packageRoot.appendingPathComponent("scripts/lib/" + script).path, "--port", "\(port)"] + arguments,
                                           logName: logName)
        do { try waitForTCPPort(port, timeout: 60, process: server) } catch { server.stop(); throw error }
        return server
    }

    /// True when this process's network namespace has only the loopback interface.
    static func onlyLoopback() -> Bool {
        guard let table = try? String(contentsOfFile: "/proc/self/net/dev", encoding: .utf8) else { return false }
        let names = table.split(separator: "\n").dropFirst(2).compactMap { $0.split(separator: ":").first?.trimmingCharacters(in: .whitespaces) }
        return names == ["lo"]
    }
}

/// A WAV file's samples, for checking what a player played.
struct WAVFile {
    let sampleRate: Int
    let channels: Int
    let bitsPerSample: Int
    /// Samples of the first channel, as integers at the file's depth.
    let firstChannel: [Int32]

    init(path: String) throws {
        let d = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
        func u32(_ o: Int) -> Int { Int(d[o]) | Int(d[o + 1]) << 8 | Int(d[o + 2]) << 16 | Int(d[o + 3]) << 24 }
        func u16(_ o: Int) -> Int { Int(d[o]) | Int(d[o + 1]) << 8 }
        guard d.count >= 44, String(decoding: d[0..<4], as: UTF8.self) == "RIFF" else { throw PeerFailed(name: "WAV", log: "\(path) is not a WAV file") }
        channels = u16(22)
        sampleRate = u32(24)
        bitsPerSample = u16(34)
        let bytes = bitsPerSample / 8
        let dataLength = min(u32(40), d.count - 44)
        var samples: [Int32] = []
        var o = 44
        while o + channels * bytes <= 44 + dataLength {
            var v: Int32 = 0
            for b in 0..<bytes { v |= Int32(d[o + b]) << Int32(8 * b) }
            let shift = Int32(32 - bitsPerSample)
            samples.append((v << shift) >> shift)
            o += channels * bytes
        }
        firstChannel = samples
    }

    /// Index of the first sample louder than `threshold`.
    func firstSound(threshold: Int32 = 64) -> Int? { firstChannel.firstIndex { abs($0) > threshold } }

    /// Frequency from rising zero crossings over the audible part.
    func frequency(from start: Int) -> Double {
        let part = firstChannel[start...]
        let crossings = zip(part, part.dropFirst()).filter { $0 < 0 && $1 >= 0 }.count
        return Double(crossings) / (Double(part.count) / Double(sampleRate))
    }

    /// The longest run of near-silent samples after `start`: a gap in the audio shows up here.
    func longestQuietRun(from start: Int, threshold: Int32) -> Int {
        var longest = 0, run = 0
        for v in firstChannel[start...] {
            if abs(v) <= threshold { run += 1; longest = max(longest, run) } else { run = 0 }
        }
        return longest
    }
}
