import Crypto
import FarcastNIO
import FarcastSupport
import Foundation
import Logging
import NIOCore
import Synchronization
import WSCore

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
        /// `play`: when a server closes the connection on client/init without answering (a
        /// server that speaks only the legacy, unencrypted wire), connect again speaking that
        /// wire — unless this URL or that server id spoke the encrypted protocol here before.
        public var allowLegacy = false
        /// The static pairing code to offer (8 ASCII digits), and how long after start the
        /// pairing window stays open (the gesture a code attempt needs).
        public var staticPairingCode: String?
        public var pairingWindow: Duration?
        /// The roles offered in client/hello.
        public var roles = ["player@v1", "metadata@v1", "controller@v1"]
        /// Sees what each session receives (for recording tools such as the conformance adapter).
        public var observer: SessionObserver?
        /// `play`: how long opening the connection may take — TCP, the WebSocket upgrade, the
        /// answer to client/init, the encrypted handshake and the answer to client/hello.
        public var openTimeout: Duration = .seconds(10)
        public init() {}
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
        public var groupState: String? = nil
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
        /// Controller state; a command returned is sent to the server.
        public var controller: (@Sendable (ControllerState) -> ControllerCommand?)?
        /// The connection ended (either side).
        public var ended: (@Sendable () -> Void)?
        public init() {}
    }

    /// The running output, watched by the supervisors: a failed output ends the session.
    private let activeDAC = Mutex<(any AudioDAC)?>(nil)

    private func makeDAC(sink: any AudioSink, core: PlayerCore) -> any AudioDAC {
        let dac = sink.makeDAC(core: core, clock: clock) ?? SoftwareDAC(clock: clock, sink: sink, core: core, ppm: options.dacPPM)
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
        let core = PlayerCore(settings: engineSettings)
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
        configuration.staticPairingCode = options.staticPairingCode.map { Array($0.utf8) }
        if let window = options.pairingWindow {
            configuration.pairingWindowUntil = nowUs() + window.components.seconds * 1_000_000 + window.components.attoseconds / 1_000_000_000_000
        }
        return configuration
    }
    private let running = Mutex<Runtime?>(nil)

    public init(options: Options = Options()) {
        self.options = options
    }

    /// Asks a running session to say goodbye (with `reason`) and end; a connection still being
    /// opened is abandoned at once.
    public func stop(reason: String = "user_request") {
        stopRequest.withLock { if $0 == nil { $0 = reason } }
        dialAbort.abort()
    }

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

    /// Connects to `url` (ws://host:port/path) and plays into `sink` until the session ends.
    /// With `allowLegacy`, a server that closes on client/init is tried again on the legacy wire.
    public func play(url: String, sink: any AudioSink, logger: Logger = Logger(label: "farcast.sendspin"),
                     trace: (@Sendable ([ChunkTrace]) -> Void)? = nil,
                     telemetry: (@Sendable (Telemetry) -> Void)? = nil) async throws -> Report {
        do {
            return try await playOnce(url: url, legacy: false, sink: sink, logger: logger, trace: trace, telemetry: telemetry)
        } catch let failure as PlayerFailure where failure.closedAwaitingServerInit && options.allowLegacy {
            if options.store?.settings().isKnownEncrypted(url) == true {
                throw PlayerFailure(error: .handshakeFailed("\(url) spoke the encrypted protocol here before and now closed on client/init; refusing to fall back to the legacy wire (a downgrade)"),
                                    report: failure.report)
            }
            logger.notice("the server closed on client/init without answering: trying the legacy (unencrypted) wire, as --allow-legacy permits")
            return try await playOnce(url: url, legacy: true, sink: sink, logger: logger, trace: trace, telemetry: telemetry)
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
                              store: options.store, observer: options.observer)
        defer { options.observer?.ended?() }
        running.withLock { $0 = runtime }
        defer { running.withLock { $0 = nil } }
        let dac = makeDAC(sink: sink, core: core)
        let started = nowUs()
        dac.start()
        defer { _ = dac.stop() }

        // The network side runs on its own thread: arrival times feed the clock filter, and a
        // busy shared pool must not delay them (nor starve the receive loop into late chunks).
        let executor = ThreadExecutor(name: "farcast-sendspin")
        defer { executor.shutdown() }
        let openDeadline = nowUs() + Int64(options.openTimeout.components.seconds) * 1_000_000 + options.openTimeout.components.attoseconds / 1_000_000_000_000
        do {
            let target = try WebSocketDialer.Target(parsing: url)
            if stopRequest.withLock({ $0 }) != nil { throw SendspinError.cancelled }
            try await withTaskExecutorPreference(executor) {
                try await WebSocketDialer.connect(to: target, openTimeout: options.openTimeout, abort: dialAbort,
                                                  logger: Logger(label: "farcast.websocket")) { inbound, outbound in
                    try await self.runConnection(inbound: inbound, outbound: outbound, runtime: runtime, started: started,
                                                 telemetry: telemetry, openDeadline: openDeadline)
                }
            }
        } catch SendspinError.cancelled {
            // Stopped while the connection was opening: nothing was played, nothing failed.
            if runtime.endReason == nil { runtime.end(nil) }
        } catch let error as SendspinError {
            if runtime.endReason == nil { runtime.end(error) }
        } catch {
            if runtime.endReason == nil { runtime.end(.connectFailed("\(url): \(describeNetworkError(error))")) }
        }
        let outputError = dac.stop()
        settings = options.store?.settings() ?? settings
        settings = runtime.persistedSettings(base: settings)
        if !legacy, let serverID = runtime.serverID { settings.rememberEncrypted([url, serverID]) }
        try? options.store?.save(settings)
        if let trace { trace(core.traces()) }
        let report = makeReport(runtime: runtime, core: core, started: started)
        if let error = runtime.endReason, !runtime.endedCleanly {
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
        let sessionConfiguration = sessionConfiguration()
        let observer = options.observer
        let store = options.store
        let arbiter = ListenArbiter(core: core, lastPlaybackServer: settings.lastPlaybackServerID, logger: logger) { serverID in
            guard var saved = store?.settings() else { return }
            saved.lastPlaybackServerID = serverID
            try? store?.save(saved)
        }
        let dac = makeDAC(sink: sink, core: core)
        let started = nowUs()
        dac.start()
        defer { _ = dac.stop() }

        let listener: WebSocketListener
        do {
            listener = try await WebSocketListener.bind(host: host, port: port, path: path)
        } catch {
            throw PlayerFailure(error: .connectFailed("cannot listen on \(host):\(port): \(describeNetworkError(error))"),
                                report: makeReport(runtime: nil, core: core, started: started))
        }
        logger.notice("listening for Sendspin servers on ws://\(host):\(listener.port)\(path)")
        ready?(listener.port)
        let executor = ThreadExecutor(name: "farcast-sendspin")
        defer { executor.shutdown() }
        let stopReason = await withTaskExecutorPreference(executor) { () -> String in
            await withTaskGroup(of: String?.self) { group in
                group.addTask {
                    try? await listener.run(logger: logger) { inbound, outbound, peer in
                        // Credentials are read per connection: a pairing on one is known to the next.
                        var perConnection = sessionConfiguration
                        perConnection.credentials = (try? store?.credentials()) ?? PairingCredentials()
                        defer { observer?.ended?() }
                        let runtime = Runtime(session: SendspinSession(configuration: perConnection, identity: identity), core: core,
                                              logger: logger, store: store, observer: observer, admission: { runtime, activities in arbiter.admit(runtime, activities: activities) })
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
                        try await self.runConnection(inbound: inbound, outbound: outbound, runtime: runtime, started: started,
                                                     telemetry: nil, supervised: false)
                        if let reason = runtime.endReason, !runtime.endedCleanly { logger.info("connection from \(peer) ended: \(reason)") }
                    }
                    return nil
                }
                group.addTask { await self.superviseListening(arbiter: arbiter, core: core, started: started, telemetry: telemetry) }
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
        try? options.store?.save(settings)
        if let trace { trace(core.traces()) }
        let report = makeReport(runtime: arbiter.lastAdmitted, core: core, started: started)
        if let outputError { throw PlayerFailure(error: .audioDevice(outputError), report: report) }
        return report
    }

    /// Listening mode's clock: stop requests, the duration and telemetry, for all connections.
    private func superviseListening(arbiter: ListenArbiter, core: PlayerCore, started: Int64,
                                    telemetry: (@Sendable (Telemetry) -> Void)?) async -> String? {
        var nextTick = started + 1_000_000
        while !Task.isCancelled {
            let now = nowUs()
            if let reason = stopRequest.withLock({ $0 }) { return reason }
            if outputFailure != nil { return "shutdown" }
            if let duration = options.duration, Double(now - started) >= Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12 {
                return "shutdown"
            }
            if now >= nextTick {
                nextTick += 1_000_000
                if now - started >= 10_000_000 { core.sampleOffset(at: now) }
                // Telemetry while a server holds the player; an idle listener stays quiet.
                if let telemetry, let holder = arbiter.holder, !holder.isFinished {
                    let filter = core.filter
                    telemetry(Telemetry(elapsedSeconds: Double(now - started) / 1e6, offsetUs: filter.offset, filterErrorUs: filter.error,
                                        driftPPM: filter.drift * 1e6, bufferedMs: core.bufferedMilliseconds,
                                        statistics: core.statistics, synchronized: filter.isSynchronized))
                }
            }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// Runs one session over an open WebSocket, whoever dialled: the single writer, the receive
    /// loop, clock synchronisation and supervision, until one of them ends it.
    func runConnection(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter, runtime: Runtime, started: Int64,
                       telemetry: (@Sendable (Telemetry) -> Void)?, supervised: Bool = true, openDeadline: Int64? = nil) async throws {
        let (frames, frameSink) = AsyncStream.makeStream(of: WebSocketOutboundWriter.OutboundFrame.self)
        runtime.attach(frameSink)
        // The one writer: frames leave in the order they were encrypted. It is not cancelled
        // with the others, so a goodbye still goes out before the close.
        async let written: Void = {
            for await frame in frames { try await outbound.write(frame) }
            try? await outbound.close(.normalClosure, reason: nil)
        }()
        runtime.perform(runtime.withSession { $0.start() }, now: nowUs())
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.receiveLoop(inbound, runtime: runtime) }
            group.addTask { await self.timeSyncLoop(runtime) }
            if supervised { group.addTask { await self.supervise(runtime, started: started, telemetry: telemetry, openDeadline: openDeadline) } }
            // Any of them ending ends the session (a close, our goodbye, an error).
            try await group.next()
            group.cancelAll()
        }
        frameSink.finish()
        try await written
    }

    /// The session failed; the report says how far it got.
    public struct PlayerFailure: Error, CustomStringConvertible {
        public var error: SendspinError
        public var report: Report
        /// The server closed without answering client/init (a legacy-only server does).
        public var closedAwaitingServerInit = false
        public var description: String { error.description }
    }

    private func receiveLoop(_ inbound: WebSocketInboundStream, runtime: Runtime) async throws {
        var iterator = inbound.messages(maxSize: 1 << 17).makeAsyncIterator()
        while true {
            let message: WebSocketMessage?
            do { message = try await iterator.next() } catch {
                runtime.perform(runtime.withSession { $0.connectionClosed() }, now: nowUs())
                return
            }
            guard let message else {
                runtime.perform(runtime.withSession { $0.connectionClosed() }, now: nowUs())
                return
            }
            // Arrival time is taken before decryption, as the reference implementation does.
            let arrival = nowUs()
            let inboundMessage: SendspinSession.Inbound
            switch message {
            case .text(let text): inboundMessage = .text(text)
            case .binary(let buffer): inboundMessage = .binary(Array(buffer.readableBytesView))
            }
            runtime.perform(runtime.withSession { $0.receive(inboundMessage, at: arrival) }, now: arrival)
            if runtime.isFinished { return }
        }
    }

    /// Bursts of client/time; only the exchange with the smallest max error feeds the filter.
    private func timeSyncLoop(_ runtime: Runtime) async {
        while !runtime.isActive && !runtime.isFinished && !Task.isCancelled { try? await Task.sleep(for: .milliseconds(10)) }
        var bursts = 0
        while !runtime.isFinished && !Task.isCancelled {
            var best: (t1: Int64, t2: Int64, t3: Int64, t4: Int64, e: Int64)?
            for _ in 0..<options.burstSize {
                let t1 = nowUs()
                guard let answer = await runtime.exchangeTime(t1: t1, now: t1) else { break }
                let e = TimeFilter.measurement(t1: t1, t2: answer.0.serverReceived, t3: answer.0.serverTransmitted, t4: answer.1).maxError
                if best == nil || e < best!.e { best = (t1, answer.0.serverReceived, answer.0.serverTransmitted, answer.1, e) }
            }
            if let b = best, runtime.isAdmitted {
                runtime.core.updateFilter(t1: b.t1, t2: b.t2, t3: b.t3, t4: b.t4)
                runtime.timeExchanged()
                runtime.filterUpdated(now: nowUs())
            }
            bursts += 1
            // Two bursts back to back synchronise the filter; then every 500 ms for 10 s, then 2 s.
            let pause: Duration = bursts < 2 ? .milliseconds(20) : bursts < 22 ? .milliseconds(500) : .seconds(2)
            try? await Task.sleep(for: pause)
        }
    }

    /// Telemetry once a second, offset sampling, duration and stop requests.
    private func supervise(_ runtime: Runtime, started: Int64, telemetry: (@Sendable (Telemetry) -> Void)?, openDeadline: Int64?) async {
        var nextTick = started + 1_000_000
        // --duration counts from the moment the session is open: a slow server's opening is not
        // taken out of the time the user asked to play.
        var openedAt: Int64?
        while !runtime.isFinished && !Task.isCancelled {
            let now = nowUs()
            if openedAt == nil, runtime.withSessionValue({ $0.openingStep == nil }) { openedAt = now }
            if let openDeadline, now >= openDeadline, let waitingFor = runtime.withSessionValue({ $0.openingStep }) {
                let seconds = (options.openTimeout.components.seconds)
                runtime.end(.timedOut("after \(seconds) s waiting for \(waitingFor)"))
                return
            }
            if let reason = stopRequest.withLock({ $0 }) ?? (outputFailure != nil ? "shutdown" : nil) {
                runtime.logger.info("saying goodbye to \(runtime.serverName ?? "the server") (\(reason))")
                runtime.perform(runtime.withSession { $0.goodbye(reason: reason) }, now: now)
                return
            }
            if let duration = options.duration, let openedAt,
               Double(now - openedAt) >= Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12 {
                runtime.perform(runtime.withSession { $0.goodbye(reason: "user_request") }, now: now)
                return
            }
            if now >= nextTick {
                nextTick += 1_000_000
                if now - started >= 10_000_000 { runtime.core.sampleOffset(at: now) }
                // Telemetry once the session is open; before that there is nothing to report.
                if let telemetry, runtime.withSessionValue({ $0.openingStep == nil }) {
                    let filter = runtime.core.filter
                    let group = runtime.group
                    telemetry(Telemetry(elapsedSeconds: Double(now - started) / 1e6, offsetUs: filter.offset, filterErrorUs: filter.error,
                                        driftPPM: filter.drift * 1e6, bufferedMs: runtime.core.bufferedMilliseconds,
                                        statistics: runtime.core.statistics, synchronized: filter.isSynchronized,
                                        groupName: group.name, groupState: group.state))
                }
            }
            try? await Task.sleep(for: .milliseconds(50))
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
                      serverName: runtime?.serverName, endReason: runtime?.endReason.map { "\($0)" },
                      secondsPlayed: stats.secondsPlayed, secondsConnected: Double(nowUs() - started) / 1e6,
                      availabilityWithdrawals: runtime?.availabilityWithdrawals ?? 0,
                      filterErrorPeakWhileAvailableUs: runtime?.peakErrorWhileAvailableUs ?? 0,
                      outputDevice: activeDAC.withLock { $0 }?.deviceDescription, outputUnderruns: activeDAC.withLock { $0 }?.deviceUnderruns ?? 0)
    }
}

/// The player's live session state: the protocol core, the decoder, pending time exchanges
/// and the outgoing frame queue, all behind one lock so encryption order is send order.
final class Runtime: Sendable {
    struct State {
        var session: SendspinSession
        var frames: AsyncStream<WebSocketOutboundWriter.OutboundFrame>.Continuation?
        var decoder: (any AudioDecoder)?
        var streamFormat: StreamFormat?
        var outputFormat: OutputFormat?
        var pendingTimes: [Int64: CheckedContinuation<(ServerTime, Int64)?, Never>] = [:]
        var finished = false
        var endReason: SendspinError?
        var endedCleanly = false
        var exchanges = 0
        var availability = Availability()
        var groupName: String?
        var groupState: String?
        var serverName: String?
        var volume = 100
        var muted = false
        var outputDelayMs = 0
        var loggedDecodeErrors = 0
        /// Allowed to play into the shared core (always, for a connection the player dialled).
        var admitted: Bool
        var serverID: String?
    }

    /// Decides whether an activated connection may play (listening mode); nil admits it.
    typealias Admission = @Sendable (Runtime, [String]) -> Bool
    private let admission: Admission?

    // @unchecked-free: the decoder class is only touched inside the lock.
    private let state: Mutex<State>
    let core: PlayerCore
    let logger: Logger
    /// Where pairings made on this connection are kept.
    let store: PlayerStore?
    let observer: SendspinPlayer.SessionObserver?

    init(session: SendspinSession, core: PlayerCore, logger: Logger, store: PlayerStore? = nil,
         observer: SendspinPlayer.SessionObserver? = nil, admission: Admission? = nil) {
        // The session reports and later persists what the core plays with (the remembered
        // volume, mute and output delay), not the defaults.
        var initial = State(session: session, admitted: admission == nil)
        (initial.volume, initial.muted, initial.outputDelayMs) = core.playerSettings
        state = Mutex(initial)
        self.store = store
        self.observer = observer
        self.core = core
        self.logger = logger
        self.admission = admission
    }

    var isAdmitted: Bool { state.withLock { $0.admitted } }
    var serverID: String? { state.withLock { $0.serverID } }
    func setAdmitted(_ admitted: Bool) { state.withLock { $0.admitted = admitted } }

    func attach(_ frames: AsyncStream<WebSocketOutboundWriter.OutboundFrame>.Continuation) {
        state.withLock { $0.frames = frames }
    }

    func withSession(_ body: (inout SendspinSession) -> [SendspinSession.Action]) -> [SendspinSession.Action] {
        state.withLock { body(&$0.session) }
    }

    func withSessionValue<T>(_ body: (SendspinSession) -> T) -> T {
        state.withLock { body($0.session) }
    }

    var isFinished: Bool { state.withLock { $0.finished } }
    var isActive: Bool { state.withLock { $0.session.isActive } }
    var endReason: SendspinError? { state.withLock { $0.endReason } }
    var endedCleanly: Bool { state.withLock { $0.endedCleanly } }
    var streamFormat: StreamFormat? { state.withLock { $0.streamFormat } }
    var exchanges: Int { state.withLock { $0.exchanges } }
    var serverName: String? { state.withLock { $0.serverName } }
    func timeExchanged() { state.withLock { $0.exchanges += 1 } }

    func end(_ error: SendspinError?) {
        let waiters = state.withLock { s -> [CheckedContinuation<(ServerTime, Int64)?, Never>] in
            if !s.finished {
                s.finished = true
                s.endReason = error
                s.endedCleanly = error == nil
            }
            s.frames?.finish()
            defer { s.pendingTimes = [:] }
            return Array(s.pendingTimes.values)
        }
        for w in waiters { w.resume(returning: nil) }
    }

    func persistedSettings(base: PlayerStore.Settings) -> PlayerStore.Settings {
        state.withLock { s in
            var settings = base
            settings.volume = s.volume
            settings.muted = s.muted
            settings.outputDelayMs = s.outputDelayMs
            return settings
        }
    }

    /// Sends client/time and waits (≤ 1 s) for its answer and arrival time.
    func exchangeTime(t1: Int64, now: Int64) async -> (ServerTime, Int64)? {
        let answer: (ServerTime, Int64)? = await withCheckedContinuation { continuation in
            let actions = state.withLock { s -> [SendspinSession.Action]? in
                guard !s.finished else { return nil }
                s.pendingTimes[t1] = continuation
                return s.session.sendTime(at: t1)
            }
            guard let actions else { continuation.resume(returning: nil); return }
            perform(actions, now: now)
            Task {
                try? await Task.sleep(for: .seconds(1))
                let late = self.state.withLock { $0.pendingTimes.removeValue(forKey: t1) }
                late?.resume(returning: nil)
            }
        }
        return answer
    }

    /// Executes session actions: frames out, events into the player.
    func perform(_ actions: [SendspinSession.Action], now: Int64) {
        for action in actions {
            switch action {
            case .sendText(let text):
                state.withLock { _ = $0.frames?.yield(.text(text)) }
            case .sendBinary(let bytes):
                state.withLock { _ = $0.frames?.yield(.binary(ByteBuffer(bytes: bytes))) }
            case .event(let event):
                handle(event, now: now)
            case .close(let error):
                if let error { logger.debug("session closing", metadata: ["reason": "\(error)"]) }
                end(error)
            }
        }
    }

    /// Sends client/state with the full player object.
    func reportState() {
        let actions = state.withLock { s -> [SendspinSession.Action] in
            let player = PlayerStateReport(volume: s.volume, muted: s.muted, outputDelayMs: s.outputDelayMs, requiredLeadTimeMs: 250,
                                           minBufferMs: 250, supportedCommands: ["volume", "mute", "set_output_delay"],
                                           format: s.session.configuration.formats.first)
            return s.session.sendState(available: s.availability.available, player: player)
        }
        perform(actions, now: 0)
    }

    /// After each filter update: report availability once the clock has converged.
    func filterUpdated(now: Int64) {
        let filter = core.filter
        let (changed, available) = state.withLock { s -> (Bool, Bool) in
            guard s.session.isActive else { return (false, s.availability.available) }
            return (s.availability.update(synchronized: filter.isSynchronized, errorUs: filter.error), s.availability.available)
        }
        if changed {
            if available {
                logger.debug("clock synchronised", metadata: ["offset_us": "\(filter.offset)", "error_us": "\(filter.error ?? -1)"])
            } else {
                logger.notice("the clock filter lost synchronisation: telling the server this player is unavailable until it converges again")
            }
            reportState()
        }
    }

    var availabilityWithdrawals: Int { state.withLock { $0.availability.withdrawals } }
    var peakErrorWhileAvailableUs: Int64 { state.withLock { $0.availability.peakErrorWhileAvailableUs } }
    var group: (name: String?, state: String?) { state.withLock { ($0.groupName, $0.groupState) } }

    private func handle(_ event: SendspinEvent, now: Int64) {
        switch event {
        case .handshakeComplete(let serverID, let category):
            state.withLock { $0.serverID = serverID }
            let kind = ["lt": "paired", "pr": "keyed by the pairing PSK", "sn": "unpaired"][category] ?? category
            logger.info("encrypted session established (\(kind))", metadata: ["server_id": "\(serverID)", "psk": "\(category)"])
        case .hello(let hello):
            state.withLock { $0.serverName = hello.name }
            observer?.hello?(hello, withSessionValue { $0.serverID })
            logger.notice("connected to \(hello.name)")
        case .activated(let activities, let roles):
            logger.debug("activated", metadata: ["activities": "\(activities)", "roles": "\(roles)"])
            if let admission, !admission(self, activities) {
                perform(withSession { $0.goodbye(reason: "concurrent_attempt") }, now: now)
                return
            }
            reportState()
        case .serverTime(let time, let receivedAt):
            let waiter = state.withLock { $0.pendingTimes.removeValue(forKey: time.clientTransmitted) }
            waiter?.resume(returning: (time, receivedAt))
        case .streamStart(let format):
            guard let format, isAdmitted else { return }
            observer?.streamStart?(format)
            // The decoder is created inside the lock: it is not Sendable and lives there.
            let outcome = state.withLock { s -> Result<Bool, AudioDecodeError> in
                do throws(AudioDecodeError) {
                    s.decoder = try makeAudioDecoder(for: format)
                } catch {
                    s.decoder = nil
                    return .failure(error)
                }
                let wasStreaming = s.streamFormat != nil
                s.streamFormat = format
                s.outputFormat = OutputFormat(sampleRate: format.sampleRate, channels: format.channels, bitDepth: format.bitDepth ?? 16)
                return .success(!wasStreaming)
            }
            switch outcome {
            case .success(let isNewStream):
                logger.notice("stream: \(format.codec) \(format.sampleRate) Hz \(format.bitDepth.map { "\($0)-bit " } ?? "")\(format.channels) ch")
                // A new stream from empty snaps; a format change mid-stream keeps the queue.
                if isNewStream { core.withEngine { $0.clear() } }
            case .failure(let error):
                logger.error("cannot play this stream: \(error)")
            }
        case .streamClear:
            if isAdmitted { core.withEngine { $0.clear() } }
        case .streamEnd:
            if isAdmitted { core.withEngine { $0.clear(endOfStream: true) } }
            observer?.streamEnd?()
            state.withLock { s in
                s.streamFormat = nil
                s.decoder = nil
            }
        case .audioChunk(let chunk):
            guard isAdmitted else { return }
            let decoded = state.withLock { s -> (Result<PCMBuffer, AudioDecodeError>, OutputFormat)? in
                guard let decoder = s.decoder, let format = s.outputFormat else { return nil }
                do throws(AudioDecodeError) { return (.success(try decoder.decode(chunk.payload)), format) } catch { return (.failure(error), format) }
            }
            guard let (result, format) = decoded else {
                observer?.audio?(chunk.payload, nil)
                core.withEngine { $0.recordUndecodable() }
                return
            }
            if let audio = observer?.audio { audio(chunk.payload, try? result.get()) }
            switch result {
            case .success(let buffer):
                var outputFormat = format
                outputFormat.bitDepth = buffer.bitDepth
                core.enqueue(timestamp: chunk.timestamp, buffer: buffer, format: outputFormat, compressedBytes: chunk.payload.count + 13,
                             arrival: chunk.arrival, now: SystemClock(.monotonicRaw).now().microseconds)
            case .failure(let error):
                core.withEngine { $0.recordUndecodable() }
                let first = state.withLock { s -> Bool in
                    s.loggedDecodeErrors += 1
                    return s.loggedDecodeErrors <= 3
                }
                if first { logger.warning("dropped a chunk: \(error)") }
            }
        case .malformedAudio(let detail):
            core.withEngine { $0.recordUndecodable() }
            logger.warning("\(detail)")
        case .groupUpdate(let update):
            let previous = state.withLock { s -> (String?, String?) in
                defer {
                    s.groupName = update.groupName ?? s.groupName
                    s.groupState = update.playbackState ?? s.groupState
                }
                return (s.groupName, s.groupState)
            }
            if previous.0 != nil || previous.1 != nil, previous.0 != (update.groupName ?? previous.0) || previous.1 != (update.playbackState ?? previous.1) {
                logger.notice("group: \(update.groupName ?? previous.0 ?? "?") (\(update.playbackState ?? previous.1 ?? "?"))")
            }
            logger.debug("group", metadata: ["state": "\(update.playbackState ?? "?")", "name": "\(update.groupName ?? "?")"])
        case .metadata(let metadata):
            observer?.metadata?(metadata)
            let title = [metadata.artist, metadata.title].compactMap { $0 }.filter { !$0.isEmpty }
            if !title.isEmpty { logger.notice("now playing: \(title.joined(separator: " – "))") }
        case .controller(let controller):
            if let command = observer?.controller?(controller) {
                perform(withSession { $0.sendCommand(command) }, now: now)
            }
            logger.debug("controller state", metadata: ["volume": "\(controller.volume ?? -1)", "muted": "\(controller.muted ?? false)"])
        case .playerCommand(let command):
            if isAdmitted { apply(command) }
        case .paired(let record):
            do {
                try store?.remember(record)
                logger.notice("paired with \(serverName ?? record.serverID): the long-term PSK is stored", metadata: ["server_id": "\(record.serverID)", "psk_id": "\(record.pskID)"])
            } catch {
                logger.error("paired with \(record.serverID), but the pairing could not be saved: \(error)")
            }
        case .pairingStarted(let method):
            logger.notice("pairing with \(serverName ?? "the server") (\(method)): sent a new long-term PSK")
        case .pairingAborted(let reason):
            logger.notice("pairing ended without a result: \(reason)")
        case .unpaired(let serverID):
            _ = try? store?.forget(serverID: serverID)
            logger.notice("the server \(serverName ?? serverID) ended the pairing; its record is forgotten")
        case .unknownMessage(let type):
            logger.debug("ignoring message type \(type) (not handled by this player)")
        }
    }

    private func apply(_ command: PlayerCommand) {
        switch command.command {
        case "volume":
            guard let volume = command.volume else { return }
            let (v, _) = core.setVolume(volume, muted: nil)
            state.withLock { $0.volume = v }
        case "mute":
            guard let mute = command.mute else { return }
            let (_, m) = core.setVolume(nil, muted: mute)
            state.withLock { $0.muted = m }
        case "set_output_delay":
            guard let delay = command.outputDelayMs else { return }
            let clamped = min(max(delay, 0), 5000)
            state.withLock { $0.outputDelayMs = clamped }
            core.withEngine { $0.outputDelayUs = Int64(clamped) * 1000 }
        default:
            logger.debug("ignoring player command \(command.command)")
            return
        }
        logger.info("server set \(command.command)", metadata: ["volume": "\(command.volume ?? -1)", "mute": "\(command.mute ?? false)", "delay_ms": "\(command.outputDelayMs ?? -1)"])
        reportState()
    }
}

/// Listening mode's admission rule: one connection plays at a time, ranked by the activities of
/// its latest `server/activate`.
final class ListenArbiter: Sendable {
    private struct State {
        var holder: Runtime?
        var rank = 0
        var open: [ObjectIdentifier: Runtime] = [:]
        var lastPlayback: String?
        var lastAdmitted: Runtime?
    }

    private let state: Mutex<State>
    private let core: PlayerCore
    private let logger: Logger
    private let persist: @Sendable (String) -> Void

    init(core: PlayerCore, lastPlaybackServer: String?, logger: Logger, persist: @escaping @Sendable (String) -> Void) {
        state = Mutex(State(lastPlayback: lastPlaybackServer))
        self.core = core
        self.logger = logger
        self.persist = persist
    }

    static func rank(_ activities: [String]) -> Int {
        activities.contains("playback") ? 2 : activities.contains("pairing") ? 1 : 0
    }

    var lastAdmitted: Runtime? { state.withLock { $0.lastAdmitted } }
    var lastPlaybackServer: String? { state.withLock { $0.lastPlayback } }
    var holder: Runtime? { state.withLock { $0.holder } }

    func opened(_ runtime: Runtime) { state.withLock { $0.open[ObjectIdentifier(runtime)] = runtime } }

    func closed(_ runtime: Runtime) {
        state.withLock { s in
            s.open[ObjectIdentifier(runtime)] = nil
            if s.holder === runtime {
                s.holder = nil
                s.rank = 0
            }
        }
    }

    /// Decides on an activation; displaces the holder when the newcomer wins.
    func admit(_ runtime: Runtime, activities: [String]) -> Bool {
        let rank = Self.rank(activities)
        let serverID = runtime.serverID
        let (admitted, displaced) = state.withLock { s -> (Bool, Runtime?) in
            if s.holder === runtime {
                s.rank = rank
                return (true, nil)
            }
            guard let holder = s.holder else {
                s.holder = runtime
                s.rank = rank
                return (true, nil)
            }
            let newcomerWins: Bool
            if rank != s.rank {
                newcomerWins = rank > s.rank
            } else if rank > 0 {
                newcomerWins = true
            } else {
                newcomerWins = serverID != nil && serverID == s.lastPlayback && holder.serverID != s.lastPlayback
            }
            guard newcomerWins else { return (false, nil) }
            s.holder = runtime
            s.rank = rank
            return (true, holder)
        }
        if let displaced {
            logger.notice("a server with higher priority took over; telling the previous one goodbye (another_server)")
            displaced.setAdmitted(false)
            displaced.perform(displaced.withSession { $0.goodbye(reason: "another_server") }, now: 0)
            // A different server: its clock and its stream start from scratch.
            core.resetForNewServer()
        }
        guard admitted else {
            logger.notice("refused a server: another one holds the player (concurrent_attempt)")
            return false
        }
        runtime.setAdmitted(true)
        state.withLock { $0.lastAdmitted = runtime }
        if activities.contains("playback"), let serverID {
            let changed = state.withLock { s -> Bool in
                defer { s.lastPlayback = serverID }
                return s.lastPlayback != serverID
            }
            if changed { persist(serverID) }
        }
        return true
    }

    func sayGoodbyeToAll(reason: String, now: Int64) {
        let runtimes = state.withLock { Array($0.open.values) }
        for runtime in runtimes where !runtime.isFinished {
            logger.info("saying goodbye to \(runtime.serverName ?? "a server") (\(reason))")
            runtime.perform(runtime.withSession { $0.goodbye(reason: reason) }, now: now)
        }
    }
}
