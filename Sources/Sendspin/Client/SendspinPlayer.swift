import Crypto
import FarcastNIO
import FarcastSupport
import Foundation
import Logging
import NIOCore
import Synchronization

/// A synchronized Sendspin player over a WebSocket it dials (client-initiated mode).
///
/// Runs the session, clock synchronisation (bursts of client/time, keeping the exchange with the
/// smallest max error), decoding, and a software DAC feeding a sink until the server ends the
/// session, `stop` is called, or the duration runs out.
public final class SendspinPlayer: Sendable {
    public struct Options: Sendable {
        public var name = "Farcast"
        /// Formats offered, most preferred first.
        public var formats: [AudioFormatSpec] = SendspinPlayer.formats(preferring: "pcm")
        public var suite: NoiseSuite = .chaChaPoly
        public var bufferCapacity = 2_000_000
        /// Stop after this long (nil: until the server ends the session or `stop`).
        public var duration: Duration?
        public var engine = PlaybackEngine.Settings()
        /// Drift of the software DAC's crystal against the monotonic clock (ppm).
        public var dacPPM = 0.0
        /// Identity and remembered settings; nil uses a throwaway identity and defaults.
        public var store: PlayerStore?
        public var deviceInfo: DeviceInfo? = DeviceInfo(productName: "Farcast", manufacturer: "Farcast", softwareVersion: "farcast \(FarcastInfo.version)")
        /// Client/time exchanges per burst; the one with the smallest max error is used.
        public var burstSize = 8
        /// Listening mode: how long a connection may stay without `server/activate` (the
        /// protocol says 30 s).
        public var provisionalTimeout: Duration = .seconds(30)
        /// Which wire to speak: the encrypted protocol (the default), with or without the
        /// fallback to the legacy one, or the legacy one only.
        public var wire = Wire.encrypted
        /// The static pairing code to offer (8 ASCII digits), and how long after start the
        /// pairing window stays open (the gesture a code attempt needs).
        public var staticPairingCode: String?
        public var pairingWindow: Duration?
        /// The roles offered in client/hello (`artwork@v1` is added when `artworkChannels` has any).
        public var roles = ["player@v1", "metadata@v1", "controller@v1"]
        /// artwork@v1: the pictures wanted, one per channel (at most 4); each reaches
        /// `SessionObserver.artwork` when it is due.
        public var artworkChannels: [ArtworkChannel] = []
        /// visualizer@v1: what to ask for (nil: the role is not offered); each frame reaches
        /// `SessionObserver.visualizer` when its sound plays.
        public var visualizer: VisualizerRequest?
        /// color@v1: offer the role; each palette reaches `SessionObserver.color` from its time.
        public var color = false
        /// source@v1: the input to stream when the server asks (nil: the role is not offered),
        /// in `sourceCodec` when the server takes it (else PCM).
        public var source: (any SourceInput)?
        public var sourceCodec = SourceCodec.flac
        /// Sees what each session receives (for recording tools such as the conformance adapter).
        public var observer: SessionObserver?
        /// `play`: how long opening the connection may take — TCP, the WebSocket upgrade, the
        /// answer to client/init, the encrypted handshake and the answer to client/hello.
        public var openTimeout: Duration = .seconds(10)
        /// Volume and mute on a mixer control instead of scaling samples (`ALSAMixer`).
        public var hardwareVolume: (any HardwareVolume)?
        public init() {}
    }

    /// The protocol's encrypted wire, or the older unencrypted one (aiosendspin 5.x servers, the
    /// upstream conformance harness; `LegacySessionCore`).
    public enum Wire: Sendable, Equatable {
        case encrypted
        /// `play`: when the server closes on client/init without answering (what a server that
        /// speaks only the legacy wire does), connect again on that wire — unless this URL or
        /// that server id spoke the encrypted protocol here before. `listen` cannot fall back (a
        /// server that dialled does not dial again at once) and speaks the encrypted protocol.
        case encryptedOrLegacy
        /// The legacy wire only, to servers dialled and to servers that dial (a listener cannot
        /// tell which wire a server speaks before it closes, so this is the user's choice).
        /// Never to a URL or server id that spoke the encrypted protocol here before.
        case legacy
    }

    /// The formats Farcast can play, with `codec` first.
    public static func formats(preferring codec: String) -> [AudioFormatSpec] {
        let pcm = [AudioFormatSpec(codec: "pcm", channels: 2, sampleRate: 48000, bitDepth: 16),
                   AudioFormatSpec(codec: "pcm", channels: 2, sampleRate: 48000, bitDepth: 24),
                   AudioFormatSpec(codec: "pcm", channels: 2, sampleRate: 44100, bitDepth: 16)]
        let flac = [AudioFormatSpec(codec: "flac", channels: 2, sampleRate: 48000, bitDepth: 16),
                    AudioFormatSpec(codec: "flac", channels: 2, sampleRate: 48000, bitDepth: 24)]
        let opus = [AudioFormatSpec(codec: "opus", channels: 2, sampleRate: 48000, bitDepth: 16)]
        switch codec {
        case "flac": return flac + pcm + opus
        case "opus": return opus + pcm + flac
        default: return pcm + flac + opus
        }
    }

    /// One telemetry line (once a second).
    public struct Telemetry: Sendable {
        public var elapsedSeconds: Double
        public var offsetUs: Double
        public var filterErrorUs: Int64?
        public var driftPPM: Double
        public var bufferedMs: Double
        public var statistics: PlaybackStatistics
        public var synchronized: Bool
        /// The group the server has this player in, and its playback state.
        public var groupName: String? = nil
        public var groupState: GroupPlaybackState? = nil
    }

    /// The summary at exit (`--stats-json`).
    public struct Report: Sendable, Codable {
        public var chunksReceived: Int
        public var chunksPlayed: Int
        public var chunksLate: Int
        public var chunksDropped: Int
        public var underruns: Int
        public var codec: String?
        public var sampleRate: Int?
        public var channels: Int?
        public var bitDepth: Int?
        /// Standard deviation of the filter offset sampled once a second after the first 10 s.
        public var offsetStddevUs: Double?
        /// Mean filter offset over the same samples (µs; the true offset is 0 on one host).
        public var offsetMeanUs: Double?
        /// Mean absolute offset over the same samples: the error when both ends share a clock.
        public var offsetAbsoluteMeanUs: Double?
        public var offsetSamples: Int
        public var maxOutputErrorUs: Double
        public var outputErrorsMeasured: Int
        public var framesDropped: Int
        public var framesInserted: Int
        public var timeExchanges: Int
        public var serverName: String?
        public var endReason: String?
        /// Seconds of audio played (not counting silence before or between streams).
        public var secondsPlayed: Double
        /// Seconds from start to stop.
        public var secondsConnected: Double
        /// Times the player told the server it was no longer available after it had been.
        public var availabilityWithdrawals: Int
        /// The largest clock-filter error (µs) while available (jitter makes it swing).
        public var filterErrorPeakWhileAvailableUs: Int64
        /// What the sound device granted, for a device output.
        public var outputDevice: String? = nil
        /// Underruns the sound device reported (and the player recovered from).
        public var outputUnderruns: Int = 0
        /// visualizer@v1 and color@v1 deliveries (nil when neither role was taken).
        public var visualization: VisualizationStatistics? = nil
        /// source@v1: chunks of the input sent to the server (nil without a source).
        public var sourceChunksSent: Int? = nil
    }

    /// What the visualizer and color roles delivered and dropped over a run.
    public struct VisualizationStatistics: Sendable, Codable, Equatable {
        public var framesDelivered = 0
        /// Frames whose sound had already played when they arrived (dropped).
        public var framesLate = 0
        /// Frames beyond the buffer announced to the server (dropped).
        public var framesOverflowed = 0
        /// Visualizer or color messages that did not read (dropped).
        public var malformed = 0
        public var palettesApplied = 0
        /// Largest time (µs) a frame or palette went out after it was due.
        public var maxDeliveryLateUs: Int64 = 0
        public init() {}
    }

    private let options: Options
    private let clock = SystemClock(.monotonicRaw)
    private let stopRequest = Mutex<String?>(nil)
    /// Callbacks for what a session receives, called on the network thread in arrival order.
    public struct SessionObserver: Sendable {
        public var hello: (@Sendable (_ hello: ServerHello, _ serverID: String?) -> Void)?
        public var streamStart: (@Sendable (StreamFormat) -> Void)?
        /// Every audio chunk: its payload as received and, when the codec was decoded, the PCM.
        public var audio: (@Sendable (_ payload: [UInt8], _ decoded: PCMBuffer?) -> Void)?
        public var streamEnd: (@Sendable () -> Void)?
        public var metadata: (@Sendable (Metadata) -> Void)?
        /// artwork@v1: a channel's picture when it is due to be shown (empty data: cleared; the
        /// artwork stream ending clears every channel that showed one).
        public var artwork: (@Sendable (ArtworkImage) -> Void)?
        /// visualizer@v1: the stream as the server set it up; nil when it ended.
        public var visualizerStream: (@Sendable (VisualizerStream?) -> Void)?
        /// visualizer@v1: the frames for one instant (one of each kind the server computed),
        /// called on the delivery thread when their sound plays.
        public var visualizer: (@Sendable ([VisualizerFrame], DeliveryTiming) -> Void)?
        /// color@v1: a palette, called on the delivery thread from its time.
        public var color: (@Sendable (ColorPalette, DeliveryTiming) -> Void)?
        /// Controller state; a command returned is sent to the server.
        public var controller: (@Sendable (ControllerState) -> ControllerCommand?)?
        /// The connection ended (either side).
        public var ended: (@Sendable () -> Void)?
        public init() {}
    }

    /// The running output, watched by the supervisors: a failed output ends the session.
    private let activeDAC = Mutex<(any AudioDAC)?>(nil)

    private func makeDAC(sink: any AudioSink, core: PlayerCore) -> any AudioDAC {
        let dac = sink.makeDAC(core: core, clock: clock) ?? SoftwareDAC(clock: clock, sink: sink, core: core, ppm: options.dacPPM, period: sink.softwarePeriod)
        activeDAC.withLock { $0 = dac }
        return dac
    }

    private var outputFailure: String? { activeDAC.withLock { $0 }?.failure }

    /// The shared core (engine and filter) for a run, starting from the remembered volume,
    /// mute and output delay.
    private func makeCore(settings: PlayerStore.Settings, tracing: Bool) -> PlayerCore {
        var engineSettings = options.engine
        engineSettings.bufferCapacity = options.bufferCapacity
        engineSettings.tracing = engineSettings.tracing || tracing
        let core = PlayerCore(settings: engineSettings, hardwareVolume: options.hardwareVolume)
        _ = core.setVolume(settings.volume, muted: settings.muted)
        core.withEngine { $0.outputDelayUs = Int64(settings.outputDelayMs) * 1000 }
        return core
    }

    /// What every session of a run offers: name, formats, suite, roles, buffer, device and the
    /// static pairing code with its window (opening now).
    private func sessionConfiguration() -> SendspinSession.Configuration {
        var configuration = SendspinSession.Configuration(name: options.name, formats: options.formats)
        configuration.suite = options.suite
        configuration.bufferCapacity = options.bufferCapacity
        configuration.deviceInfo = options.deviceInfo
        configuration.roles = options.roles
        if !options.artworkChannels.isEmpty {
            configuration.artworkChannels = Array(options.artworkChannels.prefix(4))
            if !configuration.roles.contains("artwork@v1") { configuration.roles.append("artwork@v1") }
        }
        if let visualizer = options.visualizer {
            configuration.visualizer = visualizer
            if !configuration.roles.contains("visualizer@v1") { configuration.roles.append("visualizer@v1") }
        }
        if options.color && !configuration.roles.contains("color@v1") { configuration.roles.append("color@v1") }
        if options.source != nil && !configuration.roles.contains("source@v1") { configuration.roles.append("source@v1") }
        configuration.staticPairingCode = options.staticPairingCode.map { Array($0.utf8) }
        if let window = options.pairingWindow {
            configuration.pairingWindowUntil = nowUs() + window.components.seconds * 1_000_000 + window.components.attoseconds / 1_000_000_000_000
        }
        return configuration
    }
    private let running = Mutex<Runtime?>(nil)
    private let visualization = VisualizationLedger()

    public init(options: Options = Options()) {
        self.options = options
    }

    /// Asks a running session to say goodbye (with `reason`) and end; a connection still being
    /// opened is abandoned at once.
    public func stop(reason: String = "user_request") {
        stopRequest.withLock { if $0 == nil { $0 = reason } }
        stopWake.open()
        dialAbort.abort()
    }

    /// Wakes the supervisor from its sleep when `stop` is called or the output fails (both end
    /// the run, so the latch is opened for good).
    private let stopWake = WakeLatch()

    /// Ends a dial in progress when `stop` is called (the server may be silent).
    private let dialAbort = WebSocketDialer.Abort()

    private func nowUs() -> Int64 { clock.now().microseconds }

    /// Sends a controller command (play, pause, next, volume, …) to the server of a running
    /// session; false when no session is active.
    @discardableResult
    public func send(_ command: ControllerCommand) -> Bool {
        guard let runtime = running.withLock({ $0 }), runtime.isActive else { return false }
        runtime.perform(runtime.withSession { $0.sendCommand(command) }, now: nowUs())
        return true
    }

    /// Connects to `url` (ws://host:port/path) and plays into `sink` until the session ends, on
    /// the wire `Options.wire` chooses.
    public func play(url: String, sink: any AudioSink, logger: Logger = Logger(label: "farcast.sendspin"),
                     trace: (@Sendable ([ChunkTrace]) -> Void)? = nil,
                     telemetry: (@Sendable (Telemetry) -> Void)? = nil) async throws -> Report {
        let downgrade = "\(url) spoke the encrypted protocol here before; refusing to fall back to the legacy wire (a downgrade)"
        switch options.wire {
        case .legacy:
            if options.store?.settings().isKnownEncrypted(url) == true {
                throw PlayerFailure(error: .handshakeFailed(downgrade), report: makeReport(runtime: nil, core: makeCore(settings: .init(), tracing: false), started: nowUs()))
            }
            return try await playOnce(url: url, legacy: true, sink: sink, logger: logger, trace: trace, telemetry: telemetry)
        case .encrypted:
            return try await playOnce(url: url, legacy: false, sink: sink, logger: logger, trace: trace, telemetry: telemetry)
        case .encryptedOrLegacy:
            do {
                return try await playOnce(url: url, legacy: false, sink: sink, logger: logger, trace: trace, telemetry: telemetry)
            } catch let failure as PlayerFailure where failure.closedAwaitingServerInit {
                if options.store?.settings().isKnownEncrypted(url) == true {
                    throw PlayerFailure(error: .handshakeFailed("\(url) spoke the encrypted protocol here before and now closed on client/init; refusing to fall back to the legacy wire (a downgrade)"),
                                        report: failure.report)
                }
                logger.notice("the server closed on client/init without answering: trying the legacy (unencrypted) wire, as --allow-legacy permits")
                return try await playOnce(url: url, legacy: true, sink: sink, logger: logger, trace: trace, telemetry: telemetry)
            }
        }
    }

    private func playOnce(url: String, legacy: Bool, sink: any AudioSink, logger: Logger,
                          trace: (@Sendable ([ChunkTrace]) -> Void)?, telemetry: (@Sendable (Telemetry) -> Void)?) async throws -> Report {
        let identity = try options.store?.identity() ?? Curve25519.KeyAgreement.PrivateKey()
        var settings = options.store?.settings() ?? PlayerStore.Settings()
        let core = makeCore(settings: settings, tracing: trace != nil)
        var configuration = sessionConfiguration()
        configuration.legacyWire = legacy
        configuration.encryptedServerIDs = Set(settings.encryptedServers ?? [])
        configuration.credentials = try options.store?.credentials() ?? PairingCredentials()
        let runtime = Runtime(session: SendspinSession(configuration: configuration, identity: identity), core: core, logger: logger,
                              store: options.store, observer: options.observer, visualization: visualization, source: options.source,
                              sourceCodec: options.sourceCodec)
        defer { options.observer?.ended?() }
        running.withLock { $0 = runtime }
        defer { running.withLock { $0 = nil } }
        let dac = makeDAC(sink: sink, core: core)
        let started = nowUs()
        dac.start(onFailure: { [stopWake] in stopWake.open() })
        defer { _ = dac.stop() }

        let openDeadline = nowUs() + Int64(options.openTimeout.components.seconds) * 1_000_000 + options.openTimeout.components.attoseconds / 1_000_000_000_000
        do {
            let target = try WebSocketDialer.Target(parsing: url)
            if stopRequest.withLock({ $0 }) != nil { throw SendspinError.cancelled }
            try await WebSocketDialer.connect(to: target, openTimeout: options.openTimeout, abort: dialAbort,
                                              logger: Logger(label: "farcast.websocket")) { connection in
                try await self.runConnection(connection, runtime: runtime,
                                             started: started, telemetry: telemetry, openDeadline: openDeadline)
            }
        } catch SendspinError.cancelled {
            // Stopped while the connection was opening: nothing was played, nothing failed.
            runtime.end(nil)
        } catch let error as SendspinError {
            runtime.end(error)
        } catch {
            runtime.end(.connectFailed("\(url): \(describeNetworkError(error))"))
        }
        let outputError = dac.stop()
        settings = options.store?.settings() ?? settings
        settings = runtime.persistedSettings(base: settings)
        if !legacy, let serverID = runtime.serverID { settings.rememberEncrypted([url, serverID]) }
        try? options.store?.save(settings)
        if let trace { trace(core.traces()) }
        let report = makeReport(runtime: runtime, core: core, started: started)
        if let error = runtime.failure {
            var failure = PlayerFailure(error: error, report: report)
            failure.closedAwaitingServerInit = runtime.withSessionValue { $0.closedAwaitingServerInit }
            throw failure
        }
        if let outputError { throw PlayerFailure(error: .audioDevice(outputError), report: report) }
        return report
    }

    /// Waits for servers to connect (the protocol's recommended, server-initiated mode) on
    /// `ws://host:port/path` and plays what the admitted one streams into `sink`, until `stop`
    /// or the duration. Several servers may dial; one is admitted at a time by the activities of
    /// its `server/activate` (playback > pairing > none; equal non-zero ranks go to the
    /// newcomer; between two idle ones the remembered last-playback server wins). The displaced
    /// holder gets `client/goodbye another_server`, a rejected newcomer `concurrent_attempt`, and
    /// a connection without `server/activate` within 30 s is dropped. `ready` receives the
    /// bound port once the listener accepts connections.
    public func listen(host: String, port: Int, path: String, sink: any AudioSink, logger: Logger = Logger(label: "farcast.sendspin"),
                       trace: (@Sendable ([ChunkTrace]) -> Void)? = nil, telemetry: (@Sendable (Telemetry) -> Void)? = nil,
                       ready: (@Sendable (Int) -> Void)? = nil) async throws -> Report {
        let identity = try options.store?.identity() ?? Curve25519.KeyAgreement.PrivateKey()
        var settings = options.store?.settings() ?? PlayerStore.Settings()
        let core = makeCore(settings: settings, tracing: trace != nil)
        let sessionConfiguration = { () -> SendspinSession.Configuration in
            var configuration = self.sessionConfiguration()
            configuration.legacyWire = options.wire == .legacy
            configuration.encryptedServerIDs = Set(settings.encryptedServers ?? [])
            return configuration
        }()
        let observer = options.observer
        let store = options.store
        let visualization = visualization
        let source = options.source
        let sourceCodec = options.sourceCodec
        let arbiter = ListenArbiter(core: core, lastPlaybackServer: settings.lastPlaybackServerID, logger: logger) { serverID in
            guard var saved = store?.settings() else { return }
            saved.lastPlaybackServerID = serverID
            try? store?.save(saved)
        }
        let dac = makeDAC(sink: sink, core: core)
        let started = nowUs()
        dac.start(onFailure: { [stopWake] in stopWake.open() })
        defer { _ = dac.stop() }

        let listener: WebSocketListener
        do {
            listener = try await WebSocketListener.bind(host: host, port: port, path: path)
        } catch {
            throw PlayerFailure(error: .connectFailed("cannot listen on \(host):\(port): \(describeNetworkError(error))"),
                                report: makeReport(runtime: nil, core: core, started: started))
        }
        logger.notice("listening for Sendspin servers on ws://\(host):\(listener.port)\(path)\(options.wire == .legacy ? " (legacy wire)" : "")")
        ready?(listener.port)
        let executor = listener.executor
        let stopReason = await withTaskExecutorPreference(executor) { () -> String in
            await withTaskGroup(of: String?.self) { group in
                group.addTask {
                    try? await listener.run(logger: logger) { connection, peer in
                        // Credentials are read per connection: a pairing on one is known to the next.
                        var perConnection = sessionConfiguration
                        perConnection.credentials = (try? store?.credentials()) ?? PairingCredentials()
                        defer { observer?.ended?() }
                        let runtime = Runtime(session: SendspinSession(configuration: perConnection, identity: identity), core: core,
                                              logger: logger, store: store, observer: observer, visualization: visualization, source: source, sourceCodec: sourceCodec,
                                              admission: { runtime, activities in arbiter.admit(runtime, activities: activities) })
                        arbiter.opened(runtime)
                        logger.notice("a server connected from \(peer)")
                        // Provisional until the first server/activate: dropped without one in time.
                        let timeout = self.options.provisionalTimeout
                        let provisional = Task {
                            try await Task.sleep(for: timeout)
                            if !runtime.isActive && !runtime.isFinished {
                                logger.warning("dropping \(peer): no server/activate within \(timeout)")
                                runtime.end(.protocolViolation("no server/activate within \(timeout)"))
                            }
                        }
                        defer {
                            provisional.cancel()
                            arbiter.closed(runtime)
                        }
                        try await self.runConnection(connection, runtime: runtime,
                                                     started: started, telemetry: nil, supervised: false)
                        if let reason = runtime.failure { logger.info("connection from \(peer) ended: \(reason)") }
                    }
                    return nil
                }
                group.addTask {
                    await self.superviseListening(arbiter: arbiter, core: core, started: started, telemetry: telemetry, executor: executor)
                }
                let reason = await group.next() ?? nil
                await listener.close()
                arbiter.sayGoodbyeToAll(reason: reason ?? "shutdown", now: self.nowUs())
                // Let the goodbyes go out before the connections are torn down.
                try? await Task.sleep(for: .milliseconds(300))
                group.cancelAll()
                return reason ?? "shutdown"
            }
        }
        logger.debug("stopped listening", metadata: ["reason": "\(stopReason)"])
        let outputError = dac.stop()
        if let holder = arbiter.lastAdmitted { settings = holder.persistedSettings(base: settings) }
        settings.lastPlaybackServerID = arbiter.lastPlaybackServer
        // A server met here on the encrypted wire is never taken on the legacy wire later.
        if options.wire != .legacy, let serverID = arbiter.lastAdmitted?.serverID { settings.rememberEncrypted([serverID]) }
        try? options.store?.save(settings)
        if let trace { trace(core.traces()) }
        let report = makeReport(runtime: arbiter.lastAdmitted, core: core, started: started)
        if let outputError { throw PlayerFailure(error: .audioDevice(outputError), report: report) }
        return report
    }

    /// Listening mode's supervision (`PlayerSupervisor`): stop requests, the duration and
    /// telemetry, for all connections. Returns why listening ends.
    private func superviseListening(arbiter: ListenArbiter, core: PlayerCore, started: Int64,
                                    telemetry: (@Sendable (Telemetry) -> Void)?, executor: EventLoopExecutor) async -> String? {
        var supervisor = PlayerSupervisor(started: started, duration: options.duration, countsDurationFromOpen: false)
        while !Task.isCancelled {
            let now = nowUs()
            // Telemetry while a server holds the player; an idle listener stays quiet.
            let holder = arbiter.holder
            let reporting = telemetry != nil && holder.map { !$0.isFinished } == true
            for action in supervisor.check(now: now, openingStep: nil, stopRequest: stopRequest.withLock { $0 },
                                           outputFailed: outputFailure != nil, reporting: reporting) {
                switch action {
                case .end(.stopped(let reason)): return reason
                case .end(.durationReached), .end(.timedOut): return "shutdown"
                case .sampleOffset: core.sampleOffset(at: now)
                case .reportTelemetry:
                    let filter = core.filter
                    telemetry?(Telemetry(elapsedSeconds: Double(now - started) / 1e6, offsetUs: filter.offset, filterErrorUs: filter.error,
                                         driftPPM: filter.drift * 1e6, bufferedMs: core.bufferedMilliseconds,
                                         statistics: core.statistics, synchronized: filter.isSynchronized))
                }
            }
            try? await executor.sleep(for: .microseconds(supervisor.nextCheck(after: now) - nowUs()), wake: stopWake)
        }
        return nil
    }

    /// Runs one session over an open WebSocket, whoever dialled: the single writer, the receive
    /// side, clock synchronisation and supervision, until one of them ends it. All of it runs on
    /// the connection's event loop: a message that arrives is decrypted, decoded and handed to
    /// the player inside the read that brought it (its arrival is that read's time, which feeds
    /// the clock filter as t4), and the periodic work uses the loop's timers.
    func runConnection(_ connection: WebSocketConnection, runtime: Runtime,
                       started: Int64, telemetry: (@Sendable (Telemetry) -> Void)?, supervised: Bool = true,
                       openDeadline: Int64? = nil) async throws {
        let executor = connection.executor
        let frames = OrderedWriter<Runtime.Outgoing>()
        runtime.attach(frames, executor: executor)
        // The one writer: frames leave in the order they were encrypted, then the close. It is
        // not cancelled with the others, so a goodbye still goes out before the close. On the
        // loop `write` hands the frame to the socket before it returns, so a client/time
        // request leaves (t1) a few microseconds after the moment read just before it. (The
        // moment after would be later by however long the thread waits for a core again: on
        // loopback the send wakes the server, which may take this core first.)
        let writer = Task(executorPreference: executor) {
            try await frames.run { outgoing in
                if let key = outgoing.timeExchange { runtime.timeRequestSent(key, at: self.nowUs()) }
                try await connection.write(outgoing.message).get()
            }
            await connection.close()
        }
        runtime.perform(runtime.withSession { $0.start() }, now: nowUs())
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                let ending = await connection.run { message, arrival in
                    let inbound: SendspinSession.Inbound = switch message {
                    case .text(let text): .text(text)
                    case .binary(let buffer): .binary(Array(buffer.readableBytesView))
                    }
                    runtime.perform(runtime.withSession { $0.receive(inbound, at: arrival) }, now: arrival)
                    return !runtime.isFinished
                }
                if ending == .closed { runtime.perform(runtime.withSession { $0.connectionClosed() }, now: self.nowUs()) }
            }
            group.addTask { await self.timeSyncLoop(runtime, executor: executor) }
            if supervised {
                group.addTask { await self.supervise(runtime, started: started, telemetry: telemetry, openDeadline: openDeadline, executor: executor) }
            }
            // Any of them ending ends the session (a close, our goodbye, an error). What it
            // queued (a goodbye) is written and the close sent before the receive side is
            // cancelled: cancelling it first could drop the connection under the writer (the
            // server then saw close code 1006 and no goodbye, once in a CI run).
            do {
                try await group.next()
            } catch {
                frames.finish()
                _ = try? await writer.value
                throw error
            }
            frames.finish()
            _ = try? await writer.value
            group.cancelAll()
        }
        frames.finish()
        try await writer.value
    }

    /// The session failed; the report says how far it got.
    public struct PlayerFailure: Error, CustomStringConvertible {
        public var error: SendspinError
        public var report: Report
        /// The server closed without answering client/init (a legacy-only server does).
        public var closedAwaitingServerInit = false
        public var description: String { error.description }
    }

    /// Bursts of client/time on `TimeSyncSchedule`'s rule (the best exchange of each feeds the filter).
    private func timeSyncLoop(_ runtime: Runtime, executor: EventLoopExecutor) async {
        while !runtime.isActive && !runtime.isFinished && !Task.isCancelled { try? await executor.sleep(for: .milliseconds(10)) }
        var schedule = TimeSyncSchedule(burstSize: options.burstSize)
        while !runtime.isFinished && !Task.isCancelled {
            while schedule.wantsExchange {
                let t1 = nowUs()
                guard let answer = await runtime.exchangeTime(t1: t1, now: t1) else { break }
                schedule.record(.init(t1: answer.sent, t2: answer.server.serverReceived, t3: answer.server.serverTransmitted, t4: answer.received))
            }
            let (chosen, pauseMs) = schedule.endBurst()
            if let b = chosen, runtime.isAdmitted {
                runtime.core.updateFilter(t1: b.t1, t2: b.t2, t3: b.t3, t4: b.t4)
                runtime.timeExchanged()
                runtime.filterUpdated(now: nowUs())
            }
            try? await executor.sleep(for: .milliseconds(pauseMs))
        }
    }

    /// One session's supervision (`PlayerSupervisor`): the opening deadline, stop requests, the
    /// duration (from the moment the session is open), offset sampling and telemetry.
    private func supervise(_ runtime: Runtime, started: Int64, telemetry: (@Sendable (Telemetry) -> Void)?, openDeadline: Int64?,
                           executor: EventLoopExecutor) async {
        var supervisor = PlayerSupervisor(started: started, duration: options.duration, openDeadline: openDeadline,
                                          countsDurationFromOpen: true)
        while !runtime.isFinished && !Task.isCancelled {
            let now = nowUs()
            let openingStep = runtime.withSessionValue { $0.openingStep }
            for action in supervisor.check(now: now, openingStep: openingStep, stopRequest: stopRequest.withLock { $0 },
                                           outputFailed: outputFailure != nil, reporting: telemetry != nil) {
                switch action {
                case .end(.timedOut(let waitingFor)):
                    runtime.end(.timedOut("after \(options.openTimeout.components.seconds) s waiting for \(waitingFor)"))
                    return
                case .end(.stopped(let reason)):
                    runtime.logger.info("saying goodbye to \(runtime.serverName ?? "the server") (\(reason))")
                    runtime.perform(runtime.withSession { $0.goodbye(reason: reason) }, now: now)
                    return
                case .end(.durationReached):
                    runtime.perform(runtime.withSession { $0.goodbye(reason: "user_request") }, now: now)
                    return
                case .sampleOffset:
                    runtime.core.sampleOffset(at: now)
                case .reportTelemetry:
                    let filter = runtime.core.filter
                    let group = runtime.group
                    telemetry?(Telemetry(elapsedSeconds: Double(now - started) / 1e6, offsetUs: filter.offset, filterErrorUs: filter.error,
                                         driftPPM: filter.drift * 1e6, bufferedMs: runtime.core.bufferedMilliseconds,
                                         statistics: runtime.core.statistics, synchronized: filter.isSynchronized,
                                         groupName: group.name, groupState: group.state))
                }
            }
            try? await executor.sleep(for: .microseconds(supervisor.nextCheck(after: now) - nowUs()), wake: stopWake)
        }
    }

    private func makeReport(runtime: Runtime?, core: PlayerCore, started: Int64) -> Report {
        let stats = core.statistics
        let samples = core.offsetSamples().map(\.1)
        var stddev: Double?, mean: Double?, absolute: Double?
        if samples.count >= 2 {
            let m = samples.reduce(0, +) / Double(samples.count)
            mean = m
            absolute = samples.reduce(0) { $0 + abs($1) } / Double(samples.count)
            stddev = (samples.reduce(0) { $0 + ($1 - m) * ($1 - m) } / Double(samples.count - 1)).squareRoot()
        }
        let format = runtime?.streamFormat
        return Report(chunksReceived: stats.chunksReceived, chunksPlayed: stats.chunksPlayed, chunksLate: stats.chunksLate,
                      chunksDropped: stats.chunksDropped, underruns: stats.underruns, codec: format?.codec, sampleRate: format?.sampleRate,
                      channels: format?.channels, bitDepth: format?.bitDepth, offsetStddevUs: stddev, offsetMeanUs: mean,
                      offsetAbsoluteMeanUs: absolute, offsetSamples: samples.count,
                      maxOutputErrorUs: stats.maxOutputErrorUs, outputErrorsMeasured: stats.outputErrorsMeasured,
                      framesDropped: stats.framesDropped, framesInserted: stats.framesInserted, timeExchanges: runtime?.exchanges ?? 0,
                      serverName: runtime?.serverName, endReason: runtime?.failure.map { "\($0)" },
                      secondsPlayed: stats.secondsPlayed, secondsConnected: Double(nowUs() - started) / 1e6,
                      availabilityWithdrawals: runtime?.availabilityWithdrawals ?? 0,
                      filterErrorPeakWhileAvailableUs: runtime?.peakErrorWhileAvailableUs ?? 0,
                      outputDevice: activeDAC.withLock { $0 }?.deviceDescription, outputUnderruns: activeDAC.withLock { $0 }?.deviceUnderruns ?? 0,
                      visualization: options.visualizer != nil || options.color ? visualization.snapshot : nil,
                      sourceChunksSent: options.source == nil ? nil : runtime?.sourceChunksSent ?? 0)
    }
}
