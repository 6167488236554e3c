import Foundation

/// The stand-in punktfunk/1 host (scripts/punktfunk-host, Python on aioquic). It is NOT the real
/// host: no real host can be built on these machines (its Rust dependencies are unreachable), so
/// this clean-room peer speaks the protocol as our notes describe it, with bit-true libraries for
/// FEC (reed-solomon-leopard), sealing (cryptography) and pairing (spake2), and real HEVC from
/// Debian's ffmpeg/libx265. It binds 127.0.0.1 only. Every control message and input datagram it
/// receives, and every access unit it sends (with its SHA-256), lands in `events`.
final class PunktfunkStandInHost: @unchecked Sendable {
    // @unchecked: immutable after init; the process is only stopped by stop()/deinit.
    let process: BackgroundProcess
    let port: Int
    let fingerprint: String
    let eventLog: String
    let stateDir: String

    /// `stateDir`: the host's certificate and paired clients (reuse it to keep the host's identity).
    init(stateDir: String, arguments: [String] = [], pin: String? = nil, folder: TemporaryFolder) throws {
        let venv = ProcessInfo.processInfo.environment["PUNKTFUNK_VENV"] ?? packageRoot.appendingPathComponent(".venv-punktfunk").path
        guard FileManager.default.isExecutableFile(atPath: venv + "/bin/python") else {
            throw MissingPeer(what: "the punktfunk stand-in host's Python venv (\(venv): aioquic, cryptography, reed-solomon-leopard, spake2, opuslib)")
        }
        _ = try requireExecutable("ffmpeg", package: "ffmpeg")
        self.stateDir = stateDir
        eventLog = folder.path + "/host-events-\(UUID().uuidString.prefix(6)).jsonl"
        var args = ["--port", "0", "--state-dir", stateDir, "--log", eventLog] + arguments
        if let pin {
            let pinFile = folder.path + "/pin-\(UUID().uuidString.prefix(6))"
            _ = FileManager.default.createFile(atPath: pinFile, contents: Data(pin.utf8), attributes: [.posixPermissions: 0o600])
            args += ["--pin-file", pinFile]
        }
        process = try BackgroundProcess(packageRoot.appendingPathComponent("scripts/punktfunk-host/run").path, args,
                                        environment: ProcessInfo.processInfo.environment.merging(["PUNKTFUNK_VENV": venv]) { $1 },
                                        logName: "punktfunk-host")
        // Encoding a test pattern the first time can take minutes on a busy machine (setup pre-encodes them).
        let deadline = Date().addingTimeInterval(600)
        var found: (Int, String)?
        while Date() < deadline, found == nil {
            guard process.isRunning else { throw PeerFailed(name: "punktfunk stand-in host", log: process.log) }
            let log = process.log
            if let listen = log.split(separator: "\n").first(where: { $0.hasPrefix("listening ") }),
               let fp = log.split(separator: "\n").first(where: { $0.hasPrefix("fingerprint ") }),
               let port = Int(listen.split(separator: ":").last ?? "") {
                found = (port, String(fp.dropFirst("fingerprint ".count)))
            } else {
                usleep(50_000)
            }
        }
        guard let found else { throw PeerFailed(name: "punktfunk stand-in host", log: "not listening within 600 s\n" + process.log) }
        (port, fingerprint) = found
    }

    var address: String { "127.0.0.1:\(port)" }

    /// Every event the host logged so far.
    func events() -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: eventLog, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    func events(_ name: String) -> [[String: Any]] { events().filter { $0["event"] as? String == name } }

    func control(_ kind: String) -> [[String: Any]] { events("control").filter { $0["kind"] as? String == kind } }

    /// Waits until `condition` holds over the event log.
    @discardableResult
    func waitFor(_ what: String, timeout: TimeInterval = 20, _ condition: ([[String: Any]]) -> Bool) throws -> [[String: Any]] {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let e = events()
            if condition(e) { return e }
            usleep(50_000)
        }
        throw PeerFailed(name: "punktfunk stand-in host", log: "\(what) did not happen within \(Int(timeout)) s\n" + process.log)
    }

    func stop() { process.stop() }

    /// SIGKILL: the host vanishes without closing anything (the "host killed mid-stream" case).
    func kill() {
        process.signal(SIGKILL)
        _ = process.waitForExit(timeout: 10)
    }
}
