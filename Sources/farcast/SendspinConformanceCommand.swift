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
/// PCM hash, encoded bytes, metadata, the controller command sent, the artwork's bytes. Exit 0
/// with status "ok". `--legacy` speaks the older unencrypted wire the upstream harness's
/// aiosendspin 5.x servers speak.
struct SendspinConformanceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conformance",
        abstract: "Play one scenario of the Sendspin conformance harness as its client adapter.",
        discussion: "Run by a conformance runner, not by hand: it passes the scenario, the files to write and the peer's name. scripts/conformance/run.py is ours; the upstream harness can exec this command as its client.\n\nExample: .venv/bin/python scripts/conformance/run.py --client-cmd \"farcast sendspin conformance\""
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
    @Option(name: .customLong("artwork-format")) var artworkFormat: String = "jpeg"
    @Option(name: .customLong("artwork-width")) var artworkWidth: Int = 256
    @Option(name: .customLong("artwork-height")) var artworkHeight: Int = 256
    @Flag(help: "Speak the older unencrypted wire (aiosendspin 5.x, which the upstream harness drives).")
    var legacy = false
    /// Scenario extras this adapter does not need (metadata values are compared by the runner).
    @Argument(parsing: .allUnrecognized) var extras: [String] = []

    @OptionGroup var global: GlobalOptions

    enum Kind { case audio, metadata, controller, artwork }

    func run() async throws {
        let logger = global.makeLogger(label: "farcast.conformance")
        do {
            let outcome = try await play(logger: logger)
            try write(outcome, to: summary)
        } catch {
            try? write(ConformanceSummary(header: header, status: "error", reason: describe(error)), to: summary)
            throw ExitCode(1)
        }
    }

    private var kind: Kind? {
        switch scenarioID {
        case "client-initiated-pcm", "server-initiated-pcm", "server-initiated-flac", "server-initiated-opus": .audio
        case "client-initiated-metadata", "server-initiated-metadata": .metadata
        case "client-initiated-controller", "server-initiated-controller": .controller
        case "client-initiated-artwork", "server-initiated-artwork": .artwork
        default: nil
        }
    }

    /// Who wrote the summary and for which case: the fields every summary starts with.
    private var header: ConformanceSummary.Header {
        ConformanceSummary.Header(clientName: clientName, clientID: clientID, scenarioID: scenarioID, initiatorRole: initiatorRole,
                                  preferredCodec: preferredCodec)
    }

    private func play(logger: Logger) async throws -> ConformanceSummary {
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
        case .artwork:
            let spec = "album:\(artworkFormat):\(artworkWidth)x\(artworkHeight)"
            switch ArtworkChannel.parse(spec) {
            case .success(let channel): options.artworkChannels = [channel]
            case .failure(let problem): throw CommandFailure(message: problem.description)
            }
            options.roles = ["artwork@v1"]
        }
        if legacy { options.wire = .legacy }
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
        observer.artwork = { record.artwork($0) }
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
            let stopper = Mutex<SendspinPlayer?>(nil)
            let deadline = ContinuousClock.now + .milliseconds(Int(timeoutSeconds * 1000))
            let endedByServer = Mutex(false)
            observer.ended = {
                if ContinuousClock.now < deadline { endedByServer.withLock { $0 = true } }
                stopper.withLock { $0 }?.stop(reason: "shutdown")
            }
            options.observer = observer
            let listener = SendspinPlayer(options: options)
            stopper.withLock { $0 = listener }
            _ = try await listener.listen(host: "127.0.0.1", port: port, path: path, sink: sink, logger: logger, ready: { _ in
                try? register(url: url)
                try? writeReady(url: url)
            })
            guard endedByServer.withLock({ $0 }) else { throw CommandFailure(message: "timed out waiting for the server to connect and disconnect") }
        }
        return try record.summary(header: header, kind: kind)
    }

    /// Only the scenario's codec. For PCM and FLAC, 8 kHz mono first: the upstream harness's
    /// fixture is 8 kHz mono and its PCM hash holds only when the server sends it unconverted
    /// (servers take the first format they can send; aiosendspin's own adapter offers the same
    /// order). Our runner compares what the server actually sent, so any order passes there.
    static func formats(for codec: String) -> [AudioFormatSpec] {
        if codec == "opus" {
            return [AudioFormatSpec(codec: "opus", channels: 2, sampleRate: 48000, bitDepth: 16),
                    AudioFormatSpec(codec: "opus", channels: 1, sampleRate: 48000, bitDepth: 16)]
        }
        let name = codec == "flac" ? "flac" : "pcm"
        return [AudioFormatSpec(codec: name, channels: 1, sampleRate: 8000, bitDepth: 16),
                AudioFormatSpec(codec: name, channels: 2, sampleRate: 44100, bitDepth: 16),
                AudioFormatSpec(codec: name, channels: 2, sampleRate: 48000, bitDepth: 16)]
    }

    private func waitForServer() async throws -> String {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeoutSeconds * 1000))
        while ContinuousClock.now < deadline {
            if let url = (try? readRegistry())?[serverName]?.url { return url }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw CommandFailure(message: "timed out waiting for server '\(serverName)' in \(registry)")
    }

    /// registry.json: each peer's name and where it listens (`{"NAME": {"url": "ws://…"}}`).
    struct RegistryEntry: Codable { var url: String? }

    private func readRegistry() throws -> [String: RegistryEntry] {
        guard let data = FileManager.default.contents(atPath: registry) else { return [:] }
        return try JSONDecoder().decode([String: RegistryEntry].self, from: data)
    }

    private func register(url: String) throws {
        var entries = (try? readRegistry()) ?? [:]
        entries[clientName] = RegistryEntry(url: url)
        try write(entries, to: registry)
    }

    private struct Ready: Encodable {
        var status = "ready"
        var scenarioID: String
        var initiatorRole: String
        var url: String?
        enum CodingKeys: String, CodingKey { case status, scenarioID = "scenario_id", initiatorRole = "initiator_role", url }
    }

    private func writeReady(url: String?) throws {
        try write(Ready(scenarioID: scenarioID, initiatorRole: initiatorRole, url: url), to: self.ready)
    }

    /// Writes JSON atomically (a temporary file renamed into place).
    private func write<T: Encodable>(_ value: T, to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        let temporary = path + ".tmp-\(getpid())"
        guard FileManager.default.createFile(atPath: temporary, contents: data) else { throw CommandFailure(message: "cannot write \(path)") }
        guard rename(temporary, path) == 0 else { throw CommandFailure(message: "cannot write \(path)") }
    }
}

/// What the session delivered, kept typed behind a lock and turned into the summary's JSON at
/// the end.
private final class Recording: Sendable {
    private struct State: Sendable {
        var hello: (name: String, serverID: String?)?
        var stream: StreamFormat?
        var chunks = 0
        var encoded = SHA256()
        var pcm = SHA256()
        var samples = 0
        var metadataCount = 0
        var metadata: Metadata?
        var controller: ControllerState?
        var sentCommand: String?
        /// The last picture received (clears are not counted) and how many came.
        var artwork: ArtworkImage?
        var artworkCount = 0
    }
    private let state = Mutex(State())

    func hello(_ hello: ServerHello, serverID: String?) { state.withLock { $0.hello = (hello.name, serverID) } }
    func streamStart(_ format: StreamFormat) { state.withLock { $0.stream = format } }
    func artwork(_ image: ArtworkImage) {
        guard !image.isClear else { return }
        state.withLock {
            $0.artworkCount += 1
            $0.artwork = image
        }
    }
    func metadata(_ metadata: Metadata) {
        state.withLock {
            $0.metadataCount += 1
            $0.metadata = metadata
        }
    }

    /// Chunk count, the hash of the encoded payloads and the canonical PCM hash: each decoded
    /// sample (an integer at the stream's depth) as float32 ÷ 2^(depth−1), little-endian, in order.
    func audio(_ payload: [UInt8], _ decoded: PCMBuffer?) {
        state.withLock { s in
            s.chunks += 1
            s.encoded.update(data: payload)
            guard let decoded, s.stream?.codec != "opus" else { return }
            let scale = Float(Int64(1) << (decoded.bitDepth - 1))
            var floats = [UInt32]()
            floats.reserveCapacity(decoded.samples.count)
            for sample in decoded.samples { floats.append((Float(sample) / scale).bitPattern.littleEndian) }
            floats.withUnsafeBytes { s.pcm.update(bufferPointer: $0) }
            s.samples += decoded.samples.count
        }
    }

    /// Records the controller state; the first time `command` is among its commands, sends it.
    func controller(_ controller: ControllerState, send command: String) -> ControllerCommand? {
        state.withLock { s in
            s.controller = controller
            guard s.sentCommand == nil, controller.supportedCommands?.contains(ControllerCommand.Name(rawValue: command)) == true else { return nil }
            s.sentCommand = command
            return ControllerCommand(command: ControllerCommand.Name(rawValue: command))
        }
    }

    func summary(header: ConformanceSummary.Header, kind: SendspinConformanceCommand.Kind) throws -> ConformanceSummary {
        let s = state.withLock { $0 }
        guard let hello = s.hello else { throw CommandFailure(message: "the server never said hello") }
        var summary = ConformanceSummary(header: header, status: "ok")
        summary.peerHello = .init(payload: .init(name: hello.name, serverID: hello.serverID))
        switch kind {
        case .audio:
            summary.stream = s.stream.map {
                .init(codec: $0.codec, sampleRate: $0.sampleRate, channels: $0.channels, bitDepth: $0.bitDepth, codecHeader: $0.codecHeader)
            }
            summary.audio = .init(audioChunkCount: s.chunks, receivedEncodedSHA256: Self.hex(s.encoded.finalize()),
                                  receivedPCMSHA256: Self.hex(s.pcm.finalize()), receivedSampleCount: s.samples)
        case .metadata:
            summary.metadata = .init(updateCount: s.metadataCount, received: s.metadata.map(ConformanceSummary.Track.init))
        case .controller:
            summary.controller = .init(receivedState: s.controller.map {
                .init(supportedCommands: ($0.supportedCommands ?? []).map(\.rawValue), volume: $0.volume, muted: $0.muted)
            }, sentCommand: s.sentCommand.map { .init(command: $0) })
        case .artwork:
            summary.artwork = .init(channel: s.artwork?.channel, receivedCount: s.artworkCount,
                                    receivedSHA256: s.artwork.map { Self.hex(SHA256.hash(data: $0.data)) },
                                    format: s.artwork?.format?.rawValue, width: s.artwork?.width, height: s.artwork?.height)
        }
        return summary
    }

    private static func hex(_ digest: SHA256.Digest) -> String { digest.map { String(format: "%02x", $0) }.joined() }
}

/// The summary the harness compares (its field names): the case, the server's hello, and what
/// the scenario received — the stream and audio hashes, the track, the controller state and the
/// command sent, the picture. Absent values are left out.
struct ConformanceSummary: Encodable {
    struct Header: Encodable {
        var implementation = "farcast"
        var role = "client"
        var clientName: String
        var clientID: String?
        var scenarioID: String
        var initiatorRole: String
        var preferredCodec: String
        enum CodingKeys: String, CodingKey {
            case implementation, role, clientName = "client_name", clientID = "client_id", scenarioID = "scenario_id"
            case initiatorRole = "initiator_role", preferredCodec = "preferred_codec"
        }
    }
    struct PeerHello: Encodable {
        struct Payload: Encodable {
            var name: String
            var serverID: String?
            enum CodingKeys: String, CodingKey { case name, serverID = "server_id" }
        }
        var type = "server/hello"
        var payload: Payload
    }
    struct Stream: Encodable {
        var codec: String
        var sampleRate: Int
        var channels: Int
        var bitDepth: Int?
        var codecHeader: String?
        enum CodingKeys: String, CodingKey { case codec, sampleRate = "sample_rate", channels, bitDepth = "bit_depth", codecHeader = "codec_header" }
    }
    struct Audio: Encodable {
        var audioChunkCount: Int
        var receivedEncodedSHA256: String
        var receivedPCMSHA256: String
        var receivedSampleCount: Int
        enum CodingKeys: String, CodingKey {
            case audioChunkCount = "audio_chunk_count", receivedEncodedSHA256 = "received_encoded_sha256"
            case receivedPCMSHA256 = "received_pcm_sha256", receivedSampleCount = "received_sample_count"
        }
    }
    /// The track as the harness's snapshot names it (repeat and shuffle only from the legacy
    /// wire, whose metadata carries them).
    struct Track: Encodable {
        struct Progress: Encodable {
            var trackProgress: Int64
            var trackDuration: Int64
            var playbackSpeed: Int64
            enum CodingKeys: String, CodingKey { case trackProgress = "track_progress", trackDuration = "track_duration", playbackSpeed = "playback_speed" }
        }
        var title, artist, albumArtist, album, artworkURL: String?
        var year, track: Int?
        var `repeat`: String?
        var shuffle: Bool?
        var progress: Progress?
        enum CodingKeys: String, CodingKey {
            case title, artist, albumArtist = "album_artist", album, artworkURL = "artwork_url", year, track, `repeat`, shuffle, progress
        }
        init(_ m: Metadata) {
            (title, artist, albumArtist, album, artworkURL, year, track) = (m.title, m.artist, m.albumArtist, m.album, m.artworkURL, m.year, m.track)
            (`repeat`, shuffle) = (m.repeat, m.shuffle)
            progress = m.progress.map { Progress(trackProgress: Int64($0.trackProgress), trackDuration: Int64($0.trackDuration), playbackSpeed: Int64($0.playbackSpeed)) }
        }
    }
    struct MetadataSummary: Encodable {
        var updateCount: Int
        var received: Track?
        enum CodingKeys: String, CodingKey { case updateCount = "update_count", received }
    }
    struct Controller: Encodable {
        struct State: Encodable {
            var supportedCommands: [String]
            var volume: Int?
            var muted: Bool?
            enum CodingKeys: String, CodingKey { case supportedCommands = "supported_commands", volume, muted }
        }
        struct Command: Encodable { var command: String }
        var receivedState: State?
        var sentCommand: Command?
        enum CodingKeys: String, CodingKey { case receivedState = "received_state", sentCommand = "sent_command" }
    }
    struct Artwork: Encodable {
        var channel: Int?
        var receivedCount: Int
        var receivedSHA256: String?
        var format: String?
        var width, height: Int?
        enum CodingKeys: String, CodingKey { case channel, receivedCount = "received_count", receivedSHA256 = "received_sha256", format, width, height }
    }

    var header: Header
    var status: String
    var reason: String?
    var peerHello: PeerHello?
    var stream: Stream?
    var audio: Audio?
    var metadata: MetadataSummary?
    var controller: Controller?
    var artwork: Artwork?

    init(header: Header, status: String, reason: String? = nil) {
        self.header = header
        self.status = status
        self.reason = reason
    }

    enum CodingKeys: String, CodingKey { case status, reason, peerHello = "peer_hello", stream, audio, metadata, controller, artwork }

    /// The header's fields at the top level, beside the rest.
    func encode(to encoder: any Encoder) throws {
        try header.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(status, forKey: .status)
        try container.encodeIfPresent(reason, forKey: .reason)
        try container.encodeIfPresent(peerHello, forKey: .peerHello)
        try container.encodeIfPresent(stream, forKey: .stream)
        try container.encodeIfPresent(audio, forKey: .audio)
        try container.encodeIfPresent(metadata, forKey: .metadata)
        try container.encodeIfPresent(controller, forKey: .controller)
        try container.encodeIfPresent(artwork, forKey: .artwork)
    }
}
