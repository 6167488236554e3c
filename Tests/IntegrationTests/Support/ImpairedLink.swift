import Foundation

/// A network impairment on this namespace's loopback for one test: `scripts/impair` (netimpair
/// through NFQUEUE; this kernel has no sch_netem) delaying, jittering, dropping or rate-limiting
/// the packets `match` selects. Stopped (every held packet released, the rule removed) when the
/// value goes away. Needs root in the test namespace, as scripts/test runs the integration tests.
final class ImpairedLink: @unchecked Sendable {
    // @unchecked: immutable after init; `process` is only stopped from stop()/deinit.
    let process: BackgroundProcess
    let statsPath: String
    private static let nextQueue = DataBox()

    /// - Parameters:
    ///   - match: iptables match options, e.g. `-p udp --dport 9999`.
    ///   - options: netimpair options, e.g. `["--delay-ms", "20", "--jitter-ms", "5"]`.
    ///   - namespace: where to impair (default: this test's own namespace), on `device`.
    init(match: String, chain: String = "INPUT", options: [String], folder: TemporaryFolder,
         in namespace: NetworkNamespace? = nil, device: String = "lo") throws {
        guard getuid() == 0 else { throw MissingPeer(what: "root for the NFQUEUE impairment (scripts/test runs the integration tests as root)") }
        let queue = Self.allocateQueue()
        statsPath = folder.path + "/impair-\(queue).json"
        let script = packageRoot.appendingPathComponent("scripts/impair").path
        let arguments = ["--dev", device, "--chain", chain, "--match", match, "--queue", "\(queue)", "--", "--stats", statsPath] + options
        if let namespace {
            process = try namespace.start([script] + arguments, logName: "impair")
        } else {
            process = try BackgroundProcess(script, arguments, logName: "impair")
        }
        // netimpair prints its settings once it holds the queue.
        let deadline = Date().addingTimeInterval(10)
        while !process.log.contains("netimpair: queue") {
            guard process.isRunning, Date() < deadline else { throw PeerFailed(name: "scripts/impair", log: process.log) }
            usleep(20_000)
        }
    }

    private static func allocateQueue() -> Int {
        nextQueue.value.withLock { data in
            let n = data.count
            data.append(0)
            return 100 + n
        }
    }

    /// Stops the impairment and returns netimpair's counts.
    @discardableResult
    func stop() -> [String: Int] {
        process.stop()
        guard let data = FileManager.default.contents(atPath: statsPath),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Int] else { return [:] }
        return object
    }

    deinit { process.stop() }
}
