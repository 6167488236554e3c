import Crypto
import FarcastNIO
import FarcastSupport
import Foundation
import Logging
import NIOCore
import Synchronization

/// The player's live session state: the protocol core, the decoder, pending time exchanges
/// and the outgoing frame queue, all behind one lock. A frame the core seals is queued in the
/// same locked step (`withSession`), so encryption order is send order from any thread; the
/// connection's one writer task drains the queue.
final class Runtime: Sendable {
    /// A frame on its way to the writer. A client/time frame carries its exchange's key (the t1
    /// sealed inside it): the writer notes the moment it hands the frame to the connection, and
    /// that moment, not the earlier one sealed in the message, is the exchange's t1 (the wait
    /// for the writer's turn on the loop is not network delay and would bias the filter's offset).
    struct Outgoing: Sendable {
        var message: WebSocketConnection.Message
        var timeExchange: Int64?
    }

    /// One answered client/time exchange, as this side saw it (µs, this host's clock).
    struct TimeAnswer: Sendable {
        var server: ServerTime
        /// When the request left: handed to the connection (t1).
        var sent: Int64
        /// When the answer was read (t4).
        var received: Int64
    }

    /// How the connection ended.
    enum Ending: Sendable {
        /// Stopped by us, or closed by the server without an error.
        case cleanly
        case failed(SendspinError)
    }

    struct State {
        var session: SendspinSession
        var frames: OrderedWriter<Outgoing>?
        var decoder: (any AudioDecoder)?
        var streamFormat: StreamFormat?
        var outputFormat: OutputFormat?
        /// client/time exchanges waiting for their answer, by t1, each with its 1 s deadline.
        var pendingTimes: [Int64: PendingTime] = [:]
        /// The connection's event loop: the exchanges' deadlines run on its timers.
        var executor: EventLoopExecutor?
        /// nil while the connection lives.
        var ending: Ending?
        var exchanges = 0
        var availability = Availability()
        var groupName: String?
        var groupState: GroupPlaybackState?
        var serverName: String?
        var volume = 100
        var muted = false
        var outputDelayMs = 0
        var loggedDecodeErrors = 0
        /// Allowed to play into the shared core (always, for a connection the player dialled).
        var admitted: Bool
        var serverID: String?
        /// artwork@v1: pictures waiting for their time, per channel, and the channels showing one.
        var pendingArtwork: [Int: Task<Void, Never>] = [:]
        var shownArtwork: Set<Int> = []

        /// Queues a frame behind every frame sealed before it (after the end nothing is sent).
        func queue(_ message: WebSocketConnection.Message, bytes: Int, timeExchange: Int64? = nil) {
            try? frames?.enqueue(Outgoing(message: message, timeExchange: timeExchange), bytes: bytes)
        }
    }

    struct PendingTime {
        var continuation: CheckedContinuation<TimeAnswer?, Never>
        var deadline: Scheduled<Void>?
        /// When the writer handed the request to the connection (nil until then).
        var sent: Int64?
    }

    /// Decides whether an activated connection may play (listening mode); nil admits it.
    typealias Admission = @Sendable (Runtime, [Activity]) -> Bool
    private let admission: Admission?

    // @unchecked-free: the decoder class is only touched inside the lock.
    private let state: Mutex<State>
    let core: PlayerCore
    private let hardwareFailureNoted = Atomic<Bool>(false)
    let logger: Logger
    /// Where pairings made on this connection are kept.
    let store: PlayerStore?
    let observer: SendspinPlayer.SessionObserver?
    /// visualizer@v1 frames and color@v1 palettes on their way to the observer, each when its
    /// sound plays (nil when the observer takes none).
    private let visualizerDelivery: TimedDelivery<VisualizerFrame>?
    private let colorDelivery: TimedDelivery<ColorPalette>?
    private let visualization: VisualizationLedger
    private let loggedMalformed = Atomic<Int>(0)
    /// source@v1: the input, whether the server asked it to stream, and chunks sent.
    private let source: (any SourceInput)?
    private let sourceCodec: SourceCodec
    /// The encoder of the stream the server asked for, and the capture times of the blocks it
    /// still holds (a codec may give a block's chunk a call later).
    private struct SourceEncoding {
        var encoder: any SourceEncoder
        var heldTimes: [Int64] = []
    }
    private let sourceEncoding = Mutex<SourceEncoding?>(nil)
    private let sourceStreaming = Atomic<Bool>(false)
    private let sourceChunks = Atomic<Int>(0)
    var sourceChunksSent: Int { sourceChunks.load(ordering: .relaxed) }

    init(session: SendspinSession, core: PlayerCore, logger: Logger, store: PlayerStore? = nil,
         observer: SendspinPlayer.SessionObserver? = nil, visualization: VisualizationLedger, source: (any SourceInput)? = nil,
         sourceCodec: SourceCodec = .flac,
         admission: Admission? = nil) {
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
        self.visualization = visualization
        self.source = session.configuration.roles.contains("source@v1") ? source : nil
        self.sourceCodec = sourceCodec
        let roles = session.configuration.roles
        let playTime: @Sendable (Int64) -> Int64? = { [core] in core.playTime(forServerTime: $0) }
        if roles.contains("visualizer@v1"), let show = observer?.visualizer {
            visualizerDelivery = TimedDelivery(name: "farcast-visualizer", capacity: session.configuration.visualizerBufferCapacity, dropLate: true,
                                               playTime: playTime) { frames, timing in
                visualization.delivered(frames.count, timing, palette: false)
                show(frames, timing)
            }
        } else {
            visualizerDelivery = nil
        }
        if roles.contains("color@v1"), let apply = observer?.color {
            colorDelivery = TimedDelivery(name: "farcast-color", capacity: .max, dropLate: false, playTime: playTime) { palettes, timing in
                visualization.delivered(palettes.count, timing, palette: true)
                for palette in palettes { apply(palette, timing) }
            }
        } else {
            colorDelivery = nil
        }
    }

    var isAdmitted: Bool { state.withLock { $0.admitted } }
    var serverID: String? { state.withLock { $0.serverID } }
    func setAdmitted(_ admitted: Bool) { state.withLock { $0.admitted = admitted } }

    /// The connection is open: its frame queue and the executor its tasks run on.
    func attach(_ frames: OrderedWriter<Outgoing>, executor: EventLoopExecutor) {
        state.withLock { s in
            s.frames = frames
            s.executor = executor
        }
    }

    /// Runs `body` on the session and queues the frames it produced before the lock is let go
    /// (Noise nonces count up per frame: a frame queued behind a later-sealed one would fail
    /// authentication at the server). Returns the remaining actions for `perform`.
    func withSession(_ body: (inout SendspinSession) -> [SendspinSession.Action]) -> [SendspinSession.Action] {
        state.withLock { s in Self.queueFrames(body(&s.session), in: &s) }
    }

    /// `timeExchange` tags the frames as a client/time request (see `Outgoing`).
    private static func queueFrames(_ actions: [SendspinSession.Action], in s: inout State,
                                    timeExchange: Int64? = nil) -> [SendspinSession.Action] {
        var rest: [SendspinSession.Action] = []
        for action in actions {
            switch action {
            case .sendText(let text): s.queue(.text(text), bytes: text.utf8.count, timeExchange: timeExchange)
            case .sendBinary(let bytes): s.queue(.binary(ByteBuffer(bytes: bytes)), bytes: bytes.count, timeExchange: timeExchange)
            default: rest.append(action)
            }
        }
        return rest
    }

    func withSessionValue<T>(_ body: (SendspinSession) -> T) -> T {
        state.withLock { body($0.session) }
    }

    var isFinished: Bool { state.withLock { $0.ending != nil } }
    var isActive: Bool { state.withLock { $0.session.isActive } }
    /// What ended the connection, if it failed.
    var failure: SendspinError? { state.withLock { if case .failed(let error) = $0.ending { error } else { nil } } }
    var streamFormat: StreamFormat? { state.withLock { $0.streamFormat } }
    var exchanges: Int { state.withLock { $0.exchanges } }
    var serverName: String? { state.withLock { $0.serverName } }
    func timeExchanged() { state.withLock { $0.exchanges += 1 } }

    func end(_ error: SendspinError?) {
        let (waiters, shown) = state.withLock { s -> ([PendingTime], Set<Int>) in
            if s.ending == nil { s.ending = error.map(Ending.failed) ?? .cleanly }
            s.frames?.finish()
            for task in s.pendingArtwork.values { task.cancel() }
            s.pendingArtwork = [:]
            defer { s.pendingTimes = [:] }
            return (Array(s.pendingTimes.values), s.shownArtwork)
        }
        for waiter in waiters {
            waiter.deadline?.cancel()
            waiter.continuation.resume(returning: nil)
        }
        visualizerDelivery?.stop()
        colorDelivery?.stop()
        if sourceStreaming.exchange(false, ordering: .relaxed) { source?.stop() }
        // Without a server there is no current picture: what was shown is cleared.
        for channel in shown.sorted() { showArtwork(ArtworkImage(channel: channel, timestamp: 0, data: [])) }
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

    /// Sends client/time stamped `t1` and waits (≤ 1 s) for its answer. The deadline is a timer
    /// on the connection's loop, cancelled by the answer: no task per exchange.
    func exchangeTime(t1: Int64, now: Int64) async -> TimeAnswer? {
        await withCheckedContinuation { continuation in
            let actions = state.withLock { s -> [SendspinSession.Action]? in
                guard s.ending == nil else { return nil }
                let deadline = s.executor?.schedule(after: .seconds(1)) { [weak self] in
                    let late = self?.state.withLock { $0.pendingTimes.removeValue(forKey: t1) }
                    late?.continuation.resume(returning: nil)
                }
                s.pendingTimes[t1] = PendingTime(continuation: continuation, deadline: deadline)
                return Self.queueFrames(s.session.sendTime(at: t1), in: &s, timeExchange: t1)
            }
            guard let actions else { continuation.resume(returning: nil); return }
            perform(actions, now: now)
        }
    }

    /// The writer handed the client/time request `key` to the connection at `time`.
    func timeRequestSent(_ key: Int64, at time: Int64) {
        state.withLock { s in s.pendingTimes[key]?.sent = time }
    }

    /// Executes session actions: events into the player (frames were queued by `withSession`;
    /// any still here are queued now).
    func perform(_ actions: [SendspinSession.Action], now: Int64) {
        for action in actions {
            switch action {
            case .sendText(let text):
                state.withLock { $0.queue(.text(text), bytes: text.utf8.count) }
            case .sendBinary(let bytes):
                state.withLock { $0.queue(.binary(ByteBuffer(bytes: bytes)), bytes: bytes.count) }
            case .event(let event):
                handle(event, now: now)
            case .close(let error):
                if let error { logger.debug("session closing", metadata: ["reason": "\(error)"]) }
                end(error)
            }
        }
    }

    /// artwork@v1: a picture is shown once whole and its time (server clock, through the clock
    /// filter) has come; a newer one for the channel replaces one still waiting. Never dropped
    /// for being late.
    private func scheduleArtwork(_ image: ArtworkImage) {
        let filter = core.filter
        let now = SystemClock(.monotonicRaw).now().microseconds
        let due = filter.isSynchronized ? filter.clientTime(forServerTime: image.timestamp) : now
        let wait = due - now
        state.withLock { s in
            s.pendingArtwork.removeValue(forKey: image.channel)?.cancel()
            guard wait > 1_000, s.ending == nil else { return }
            s.pendingArtwork[image.channel] = Task { [self] in
                try? await Task.sleep(for: .microseconds(wait))
                let current = state.withLock { s -> Bool in
                    guard !Task.isCancelled else { return false }
                    s.pendingArtwork[image.channel] = nil
                    return true
                }
                if current { showArtwork(image) }
            }
        }
        if wait <= 1_000 { showArtwork(image) }
    }

    private func showArtwork(_ image: ArtworkImage) {
        let wasShown = state.withLock { s in
            image.isClear ? s.shownArtwork.remove(image.channel) != nil : !s.shownArtwork.insert(image.channel).inserted
        }
        if image.isClear {
            if wasShown { logger.info("artwork channel \(image.channel) cleared") }
        } else {
            let size = image.width.flatMap { w in image.height.map { "\(w)×\($0) " } } ?? ""
            logger.info("artwork channel \(image.channel): \(size)\(image.format?.rawValue ?? "unknown format"), \(image.data.count) bytes")
        }
        observer?.artwork?(image)
    }

    /// Sends client/state with the full player object.
    func reportState() {
        let actions = state.withLock { s -> [SendspinSession.Action] in
            let player = PlayerStateReport(volume: s.volume, muted: s.muted, outputDelayMs: s.outputDelayMs,
                                           requiredLeadTimeMs: PlayerControls.requiredLeadTimeMs, minBufferMs: PlayerControls.minimumBufferMs,
                                           supportedCommands: PlayerControls.supportedCommands, format: s.session.configuration.formats.first)
            return Self.queueFrames(s.session.sendState(available: s.availability.available, player: player), in: &s)
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
    var group: (name: String?, state: GroupPlaybackState?) { state.withLock { ($0.groupName, $0.groupState) } }

    private func handle(_ event: SendspinEvent, now: Int64) {
        switch event {
        case .handshakeComplete(let serverID, let category):
            state.withLock { $0.serverID = serverID }
            let kind = switch category {
            case .longTerm: "paired"
            case .pairing: "keyed by the pairing PSK"
            case .sentinel: "unpaired"
            case .other(let name): name
            }
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
            waiter?.deadline?.cancel()
            // Sent is always known by now (the writer notes it before writing); were it not,
            // the time sealed in the request is the best there is.
            waiter?.continuation.resume(returning: TimeAnswer(server: time, sent: waiter?.sent ?? time.clientTransmitted, received: receivedAt))
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
            let previous = state.withLock { s -> (String?, GroupPlaybackState?) in
                defer {
                    s.groupName = update.groupName ?? s.groupName
                    s.groupState = update.playbackState ?? s.groupState
                }
                return (s.groupName, s.groupState)
            }
            if previous.0 != nil || previous.1 != nil, previous.0 != (update.groupName ?? previous.0) || previous.1 != (update.playbackState ?? previous.1) {
                logger.notice("group: \(update.groupName ?? previous.0 ?? "?") (\((update.playbackState ?? previous.1)?.description ?? "?"))")
            }
            logger.debug("group", metadata: ["state": "\(update.playbackState?.description ?? "?")", "name": "\(update.groupName ?? "?")"])
        case .artworkStream(let channels):
            logger.info("artwork: \(channels.enumerated().map { "channel \($0.offset) \($0.element)" }.joined(separator: ", "))")
        case .artwork(let image):
            scheduleArtwork(image)
        case .artworkCancelled(let channel):
            state.withLock { $0.pendingArtwork.removeValue(forKey: channel)?.cancel() }
        case .artworkEnded:
            let shown = state.withLock { s -> Set<Int> in
                for task in s.pendingArtwork.values { task.cancel() }
                s.pendingArtwork = [:]
                defer { s.shownArtwork = [] }
                return s.shownArtwork
            }
            for channel in shown.sorted() { showArtwork(ArtworkImage(channel: channel, timestamp: 0, data: [])) }
        case .visualizerStream(let stream):
            logger.info("visualizer: \(stream)")
            observer?.visualizerStream?(stream)
        case .visualizer(let frame):
            guard isAdmitted, let delivery = visualizerDelivery else { return }
            switch delivery.enqueue(frame, serverTime: frame.timestamp, bytes: frame.wireSize) {
            case .queued, .stopped: break
            case .late: visualization.record { $0.framesLate += 1 }
            case .overflow: visualization.record { $0.framesOverflowed += 1 }
            }
        case .visualizerCleared:
            visualizerDelivery?.clear()
        case .visualizerEnded:
            visualizerDelivery?.clear()
            logger.info("visualizer stream ended")
            observer?.visualizerStream?(nil)
        case .malformedVisualization(let reason):
            visualization.record { $0.malformed += 1 }
            if loggedMalformed.add(1, ordering: .relaxed).newValue <= 3 { logger.warning("dropped: \(reason)") }
        case .sourceCommand(let command):
            handleSource(command, now: now)
        case .color(let palette):
            logger.debug("color palette", metadata: ["timestamp": "\(palette.timestamp)", "cleared": "\(palette.isClear)"])
            guard isAdmitted else { return }
            colorDelivery?.enqueue(palette, serverTime: palette.timestamp, bytes: 0, replacingPending: true)
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

    /// source@v1: the server asks the input to start or stop streaming. Start announces the
    /// format and opens the input; each block goes out stamped with the server time of its first
    /// sample's capture (through the clock filter). Stop closes the input and ends the stream.
    private func handleSource(_ command: SourceCommand, now: Int64) {
        guard let source else {
            logger.debug("ignoring source command \(command.rawValue): no source input")
            return
        }
        switch command {
        case .start:
            guard !sourceStreaming.exchange(true, ordering: .relaxed) else { return }
            let codec = SourceCodec.choose(sourceCodec, serverTakes: withSessionValue { $0.serverHello?.sourceSupport?.supportedCodecs })
            // The encoder is made where it lives: inside the lock.
            let made = sourceEncoding.withLock { encoding -> Result<SourceFormat, SendspinError> in
                do throws(SendspinError) {
                    let encoder = try codec.makeEncoder(sampleRate: source.sampleRate, channels: source.channels, blockFrames: source.blockFrames)
                    encoding = SourceEncoding(encoder: encoder)
                    return .success(encoder.format)
                } catch {
                    encoding = nil
                    return .failure(error)
                }
            }
            let format: SourceFormat
            switch made {
            case .success(let announced): format = announced
            case .failure(let error):
                sourceStreaming.store(false, ordering: .relaxed)
                logger.error("source: cannot encode \(codec.rawValue): \(error)")
                return
            }
            perform(withSession { $0.sendSourceStart(format) }, now: now)
            do {
                try source.start { [weak self] samples, capturedAt in self?.sendSourceBlock(samples, capturedAt: capturedAt) }
                logger.notice("source: streaming \(format) to the server, as it asked")
            } catch {
                sourceStreaming.store(false, ordering: .relaxed)
                perform(withSession { $0.sendSourceEnd() }, now: now)
                logger.error("source: cannot capture: \(error)")
            }
        case .stop:
            guard sourceStreaming.exchange(false, ordering: .relaxed) else { return }
            source.stop()
            perform(withSession { $0.sendSourceEnd() }, now: now)
            logger.notice("source: stopped, as the server asked")
        }
    }

    private func sendSourceBlock(_ samples: [Int16], capturedAt: Int64) {
        guard sourceStreaming.load(ordering: .relaxed) else { return }
        let filter = core.filter
        // Without a clock the capture time cannot be said on the server's: the block waits for none.
        guard filter.isSynchronized else { return }
        let encoded = sourceEncoding.withLock { encoding -> Result<(Int64, [UInt8])?, SendspinError>? in
            guard encoding != nil else { return nil }
            encoding!.heldTimes.append(capturedAt)
            do throws(SendspinError) {
                let chunk = try encoding!.encoder.encode(samples)
                guard !chunk.isEmpty else { return .success(nil) }
                return .success((encoding!.heldTimes.removeFirst() - encoding!.encoder.delayMicroseconds, chunk))
            } catch {
                return .failure(error)
            }
        }
        guard case .success(let ready)? = encoded else {
            if case .failure(let error)? = encoded { logger.warning("source: a block was not sent: \(error)") }
            return
        }
        guard let (at, chunk) = ready else { return }
        let actions = withSession { $0.sendSourceAudio(timestamp: filter.serverTime(forClientTime: at), payload: chunk) }
        sourceChunks.add(1, ordering: .relaxed)
        perform(actions, now: 0)
    }

    /// Says once that the hardware volume failed and the samples are scaled instead.
    private func noteHardwareVolumeFailure() {
        guard let failure = core.hardwareVolumeFailure, !hardwareFailureNoted.exchange(true, ordering: .relaxed) else { return }
        logger.warning("volume: \(failure); scaling the samples instead")
    }

    private func apply(_ command: PlayerCommand) {
        switch PlayerControls.effect(of: command) {
        case .volume(let volume)?:
            let (v, _) = core.setVolume(volume, muted: nil)
            state.withLock { $0.volume = v }
            noteHardwareVolumeFailure()
        case .muted(let mute)?:
            let (_, m) = core.setVolume(nil, muted: mute)
            state.withLock { $0.muted = m }
            noteHardwareVolumeFailure()
        case .outputDelayMs(let delay)?:
            state.withLock { $0.outputDelayMs = delay }
            core.withEngine { $0.outputDelayUs = Int64(delay) * 1000 }
        case nil:
            logger.debug("ignoring player command \(command.command)")
            return
        }
        logger.info("server set \(command.command)", metadata: ["volume": "\(command.volume ?? -1)", "mute": "\(command.mute ?? false)", "delay_ms": "\(command.outputDelayMs ?? -1)"])
        reportState()
    }
}
