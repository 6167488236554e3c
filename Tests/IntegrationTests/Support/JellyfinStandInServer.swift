import Foundation
import Synchronization

/// The Jellyfin stand-in (Tests/JellyfinStandIn, built as `jellyfin-standin`) started for one
/// test. No Jellyfin server can run on these machines (no .NET runtime or Jellyfin package in
/// Debian 12, no container engine), so the integration tests talk to this spec-generated
/// stand-in instead; its faithfulness is checked by schemathesis and jellyfin-apiclient-python
/// (JellyfinStandInConformanceTests). Its media is made once per test process with ffmpeg.
final class JellyfinStandInServer: @unchecked Sendable {
    // @unchecked: `process` is replaced only by restart(), which tests call from one task.
    let port: Int
    let dataDirectory: String
    let arguments: [String]
    private(set) var process: BackgroundProcess
    var url: String { "http://127.0.0.1:\(port)" + basePath }
    let basePath: String

    /// Media shared by every stand-in of this test process (made on first use, ~10 s).
    private static let sharedData = Mutex<String?>(nil)

    static func binary() throws -> String {
        if let explicit = ProcessInfo.processInfo.environment["FARCAST_STANDIN_BIN"] { return explicit }
        let farcast = try farcastBinary()
        let path = URL(fileURLWithPath: farcast).deletingLastPathComponent().appendingPathComponent("jellyfin-standin").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw MissingPeer(what: "the Jellyfin stand-in at \(path) (build it with `swift build --product jellyfin-standin`)")
        }
        return path
    }

    /// `keepAlive`: the ForceKeepAlive period it announces. `extra`: more arguments
    /// (`--items`, `--base-path`, `--starting-seconds`, `--discovery-port`).
    init(keepAlive: Int = 60, extra: [String] = [], privateData: Bool = false, port: Int? = nil) throws {
        _ = try requireExecutable("ffmpeg", package: "ffmpeg")
        let binary = try Self.binary()
        if privateData {
            dataDirectory = NSTemporaryDirectory() + "farcast-jellyfin-\(getpid())-\(UUID().uuidString.prefix(8))"
        } else {
            dataDirectory = Self.sharedData.withLock { dir in
                if let dir { return dir }
                let made = NSTemporaryDirectory() + "farcast-jellyfin-\(getpid())"
                dir = made
                return made
            }
        }
        self.port = port ?? SendspinServer.reservePort()
        if let index = extra.firstIndex(of: "--base-path"), index + 1 < extra.count { basePath = extra[index + 1] } else { basePath = "" }
        arguments = ["--port", "\(self.port)", "--data", dataDirectory, "--keep-alive", "\(keepAlive)"] + extra
        process = try BackgroundProcess(binary, arguments, logName: "jellyfin-standin")
        // The first run makes the media with ffmpeg: allow for it on a loaded machine.
        try waitForTCPPort(self.port, timeout: 180, process: process)
    }

    /// Stops the server (the port is closed at once).
    func stop() { process.stop() }

    /// Starts it again on the same port with the same data (tokens survive, as on a real server).
    func restart() throws {
        process.stop()
        process = try BackgroundProcess(try Self.binary(), arguments, logName: "jellyfin-standin")
        try waitForTCPPort(port, timeout: 60, process: process)
    }

    /// The demo user's password, written by the stand-in to DIR/password.
    var password: String {
        get throws {
            let text = try String(contentsOfFile: dataDirectory + "/password", encoding: .utf8)
            return text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// A file holding the password (0600), for `--password-file`.
    func passwordFile(in folder: TemporaryFolder) throws -> String {
        let path = folder.path + "/password"
        try (try password + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
        return path
    }

    /// POSTs to one of the stand-in's test hooks (`/StandIn/...`) and returns the body.
    @discardableResult
    func hook(_ pathAndQuery: String, body: String? = nil) throws -> String {
        let curl = try requireExecutable("curl", package: "curl")
        var args = ["-sS", "-f", "-X", "POST", "http://127.0.0.1:\(port)\(pathAndQuery)"]
        if let body { args += ["-H", "Content-Type: application/json", "--data-binary", body] }
        let result = try run(curl, args, timeout: 20)
        guard result.status == 0 else { throw PeerFailed(name: "stand-in hook \(pathAndQuery)", log: result.stderr + result.stdout + "\n" + process.log) }
        return result.stdout
    }

    /// GET with optional headers; returns the status and body.
    func get(_ pathAndQuery: String, headers: [String: String] = [:]) throws -> (status: Int, body: String) {
        let curl = try requireExecutable("curl", package: "curl")
        var args = ["-sS", "-o", "-", "-w", "\n%{http_code}", "http://127.0.0.1:\(port)\(pathAndQuery)"]
        for (name, value) in headers { args += ["-H", "\(name): \(value)"] }
        let result = try run(curl, args, timeout: 20)
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false)
        return (Int(lines.last ?? "") ?? 0, lines.dropLast().joined(separator: "\n"))
    }

    deinit {
        process.stop()
    }
}
