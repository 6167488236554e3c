import ArgumentParser
import Crypto
import FarcastSupport
import Foundation
import Logging
import Sendspin
import Synchronization

/// The client side of the Sendspin conformance harness's adapter contract (upstream
/// Sendspin/conformance; ../shared/protocols/sendspin.md §14): flags in, a ready file, the
/// registry for finding the peer without mDNS, and a JSON summary of what arrived — the canonical
/// PCM hash, encoded bytes, metadata, the controller command sent. Exit 0 with status "ok".
struct SendspinConformanceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conformance",
        abstract: "Play one scenario of the Sendspin conformance harness as its client adapter.",
        discussion: "Run by a conformance runner, not by hand: it passes the scenario, the files to write and the peer's name. scripts/conformance/run.py is ours; the upstream harness can exec this command as its client."
    )

    @Option var summary: String
    @Option var ready: String
    @Option var registry: String
    @Option(name: .customLong("scenario-id")) var scenarioID: String
    @Option(name: .customLong("initiator-role")) var initiatorRole: String
    @Option(name: .customLong("preferred-codec")) var preferredCodec: String = "pcm"
    @Option(name: .customLong("timeout-seconds")) var timeoutSeconds: Double = 30
    @Option(name: .customLong("client-name")) var clientName: String
    @Option(name: .customLong("client-id")) var clientID: String?
    @Option(name: .customLong("server-name")) var serverName: String = "Sendspin Conformance Server"
    @Option(name: .customLong("server-id")) var serverID: String?
    @Option var port: Int = 8928
    @Option var path: String = "/sendspin"
    @Option(name: .customLong("controller-command")) var controllerCommand: String = "next"
    /// Scenario extras this adapter does not need (metadata values are compared by the runner).
    @Argument(parsing: .allUnrecognized) var extras: [String] = []

    @OptionGroup var global: GlobalOptions

    enum Kind { case audio, metadata, controller }

    func run() async throws {
        let logger = global.makeLogger(label: "farcast.conformance")
        do {
            let outcome = try await play(logger: logger)
            try write(outcome, to: summary)
        } catch {
            try? write(["status": "error", "reason": "\(error)"], to: summary)
            throw ExitCode(1)
        }
    }

    private var kind: Kind? {
        switch scenarioID {
        case "client-initiated-pcm", "server-initiated-pcm", "server-initiated-flac", "server-initiated-opus": .audio
        case "client-initiated-metadata", "server-initiated-metadata": .metadata
        case "client-initiated-controller", "server-initiated-controller": .controller
        default: nil
        }
    }

    private func play(logger: Logger) async throws -> [String: Any] {
        guard let kind else { throw CommandFailure(message: "this adapter does not support scenario \(scenarioID)") }
        let record = Recording()
        var options = SendspinPlayer.Options()
        options.name = clientName
        options.duration = .milliseconds(Int(timeoutSeconds * 1000))
        switch kind {
        case .audio:
            options.roles = ["player@v1"]
            options.formats = Self.formats(for: preferredCodec)
        case .metadata: options.roles = ["metadata@v1"]
        case .controller: options.roles = ["controller@v1"]
        }
        // A state directory of its own: the harness's runs must not share identities or pairings.
        let state = NSTemporaryDirectory() + "farcast-conformance-\(getpid())"
        options.store = PlayerStore(directory: StateDirectory(path: state))
        defer { try? FileManager.default.removeItem(atPath: state) }
        let command = controllerCommand
        var observer = SendspinPlayer.SessionObserver()
        observer.hello = { hello, serverID in record.hello(hello, serverID: serverID) }
        observer.streamStart = { record.streamStart($0) }
        observer.audio = { payload, decoded in record.audio(payload, decoded) }
        observer.metadata = { record.metadata($0) }
        observer.controller = { state in record.controller(state, send: command) }
        let sink = NullSink()
        if initiatorRole == "client" {
            // The session ends when the server disconnects; so does `play`.
            options.observer = observer
            try writeReady(url: nil)
            let url = try await waitForServer()
            do {
                _ = try await SendspinPlayer(options: options).play(url: url, sink: sink, logger: logger)
                // Returning normally means our own time limit ended the session.
                throw CommandFailure(message: "timed out waiting for the server to disconnect")
            } catch let failure as SendspinPlayer.PlayerFailure {
                guard case .connectionClosed = failure.error else { throw failure }
            }
        } else {
            // Listening: the first connection's end is the scenario's end.
            let url = "ws://127.0.0.1:\(port)\(path)"
            let stopper = StopOnEnd()
            let deadline = ContinuousClock.now + .milliseconds(Int(timeoutSeconds * 1000))
            let endedByServer = Mutex(false)
            observer.ended = {
                if ContinuousClock.now < deadline { endedByServer.withLock { $0 = true } }
                stopper.player?.stop(reason: "shutdown")
            }
            options.observer = observer
            let listener = SendspinPlayer(options: options)
            stopper.player = listener
            _ = try await listener.listen(host: "127.0.0.1", port: port, path: path, sink: sink, logger: logger, ready: { _ in
                try? register(url: url)
                try? writeReady(url: url)
            })
            guard endedByServer.withLock({ $0 }) else { throw CommandFailure(message: "timed out waiting for the server to connect and disconnect") }
        }
        return try record.summary(base: [
            "status": "ok", "implementation": "farcast", "role": "client", "client_name": clientName,
            "client_id": clientID as Any? ?? NSNull(), "scenario_id": scenarioID, "initiator_role": initiatorRole,
            "preferred_codec": preferredCodec,
        ], kind: kind)
    }

    /// Only the scenario's codec, 48 kHz stereo first (servers take the first format they can
    /// send, and the fixtures are 48 kHz stereo), then 44.1 kHz stereo and 8 kHz mono.
    static func formats(for codec: String) -> [AudioFormatSpec] {
        if codec == "opus" {
            return [AudioFormatSpec(codec: "opus", channels: 2, sampleRate: 48000, bitDepth: 16),
                    AudioFormatSpec(codec: "opus", channels: 1, sampleRate: 48000, bitDepth: 16)]
        }
        let name = codec == "flac" ? "flac" : "pcm"
        return [AudioFormatSpec(codec: name, channels: 2, sampleRate: 48000, bitDepth: 16),
                AudioFormatSpec(codec: name, channels: 2, sampleRate: 44100, bitDepth: 16),
                AudioFormatSpec(codec: name, channels: 1, sampleRate: 8000, bitDepth: 16)]
    }

    private func waitForServer() async throws -> String {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeoutSeconds * 1000))
        while ContinuousClock.now < deadline {
            if let url = (try? readRegistry())?[serverName]?["url"] { return url }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw CommandFailure(message: "timed out waiting for server '\(serverName)' in \(registry)")
    }

    private func readRegistry() throws -> [String: [String: String]] {
        guard let data = FileManager.default.contents(atPath: registry) else { return [:] }
        return (try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]).compactMapValues { $0 as? [String: String] }
    }

    private func register(url: String) throws {
        var entries: [String: Any] = (try? readRegistry()) ?? [:]
        entries[clientName] = ["url": url]
        try write(entries, to: registry)
    }

    private func writeReady(url: String?) throws {
        var ready: [String: Any] = ["status": "ready", "scenario_id": scenarioID, "initiator_role": initiatorRole]
        if let url { ready["url"] = url }
        try write(ready, to: self.ready)
    }

    /// Writes JSON atomically (a temporary file renamed into place).
    private func write(_ object: [String: Any], to path: String) throws {
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        let temporary = path + ".tmp-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: data) else { throw CommandFailure(message: "cannot write \(path)") }
        guard rename(temporary, path) == 0 else { throw CommandFailure(message: "cannot write \(path)") }
    }
}

/// Lets the listener's end-of-connection callback reach the listener made after it.
private final class StopOnEnd: @unchecked Sendable {
    // @unchecked: set once before listening starts, read afterwards.
    var player: SendspinPlayer?
}

/// What the session delivered, as the summary reports it.
private final class Recording: Sendable {
    private struct State {
        var hello: [String: Any]?
        var stream: [String: Any]?
        var chunks = 0
        var encoded = SHA256()
        var pcm = SHA256()
        var samples = 0
        var metadataCount = 0
        var metadata: [String: Any]?
        var controllerState: [String: Any]?
        var sentCommand: String?
    }
    private let state = Mutex(UnsafeState(State()))

    /// `[String: Any]` is not Sendable; it lives only behind the lock.
    private struct UnsafeState: @unchecked Sendable { var value: State; init(_ v: State) { value = v } }

    func hello(_ hello: ServerHello, serverID: String?) {
        state.withLock { $0.value.hello = ["type": "server/hello", "payload": ["name": hello.name, "server_id": serverID as Any? ?? NSNull()]] }
    }

    func streamStart(_ format: StreamFormat) {
        state.withLock {
            $0.value.stream = ["codec": format.codec, "sample_rate": format.sampleRate, "channels": format.channels,
                               "bit_depth": format.bitDepth as Any? ?? NSNull(), "codec_header": format.codecHeader as Any? ?? NSNull()]
        }
    }

    /// The canonical PCM hash: each sample as float32 (÷ 2^(depth−1)), little-endian, in order.
    func audio(_ payload: [UInt8], _ decoded: PCMBuffer?) {
        state.withLock { s in
            s.value.chunks += 1
            s.value.encoded.update(data: payload)
            guard let decoded, (s.value.stream?["codec"] as? String) != "opus" else { return }
            // Decoded samples are integers at the stream's depth.
            let scale = Float(Int64(1) << (decoded.bitDepth - 1))
            var floats = [UInt32]()
            floats.reserveCapacity(decoded.samples.count)
            for sample in decoded.samples { floats.append((Float(sample) / scale).bitPattern.littleEndian) }
            floats.withUnsafeBytes { s.value.pcm.update(bufferPointer: $0) }
            s.value.samples += decoded.samples.count
        }
    }

    func metadata(_ metadata: Metadata) {
        state.withLock { s in
            s.value.metadataCount += 1
            var progress: Any = NSNull()
            if let p = metadata.progress {
                progress = ["track_progress": p.trackProgress as Any, "track_duration": p.trackDuration as Any, "playback_speed": p.playbackSpeed as Any]
            }
            s.value.metadata = ["title": metadata.title as Any? ?? NSNull(), "artist": metadata.artist as Any? ?? NSNull(),
                                "album_artist": metadata.albumArtist as Any? ?? NSNull(), "album": metadata.album as Any? ?? NSNull(),
                                "artwork_url": metadata.artworkURL as Any? ?? NSNull(), "year": metadata.year as Any? ?? NSNull(),
                                "track": metadata.track as Any? ?? NSNull(), "progress": progress]
        }
    }

    /// Records the controller state; the first time `send` is among its commands, sends it.
    func controller(_ controller: ControllerState, send command: String) -> ControllerCommand? {
        state.withLock { s in
            s.value.controllerState = ["supported_commands": controller.supportedCommands ?? [], "volume": controller.volume as Any? ?? NSNull(),
                                       "muted": controller.muted as Any? ?? NSNull()]
            guard s.value.sentCommand == nil, controller.supportedCommands?.contains(command) == true else { return nil }
            s.value.sentCommand = command
            return ControllerCommand(command: command)
        }
    }

    private struct Summary: @unchecked Sendable { var value: [String: Any] }

    func summary(base: [String: Any], kind: SendspinConformanceCommand.Kind) throws -> [String: Any] {
        let base = Summary(value: base)
        return try state.withLock { s -> Summary in
            var summary = base.value
            summary["peer_hello"] = s.value.hello.map { $0 as Any } ?? NSNull()
            guard s.value.hello != nil else { throw CommandFailure(message: "the server never said hello") }
            switch kind {
            case .audio:
                summary["stream"] = s.value.stream.map { $0 as Any } ?? NSNull()
                summary["audio"] = ["audio_chunk_count": s.value.chunks,
                                    "received_encoded_sha256": Self.hex(s.value.encoded.finalize()),
                                    "received_pcm_sha256": Self.hex(s.value.pcm.finalize()),
                                    "received_sample_count": s.value.samples]
            case .metadata:
                summary["metadata"] = ["update_count": s.value.metadataCount, "received": s.value.metadata.map { $0 as Any } ?? NSNull()]
            case .controller:
                summary["controller"] = ["received_state": s.value.controllerState.map { $0 as Any } ?? NSNull(),
                                         "sent_command": s.value.sentCommand.map { ["command": $0] as Any } ?? NSNull()]
            }
            return Summary(value: summary)
        }.value
    }

    private static func hex(_ digest: SHA256.Digest) -> String { digest.map { String(format: "%02x", $0) }.joined() }
}
