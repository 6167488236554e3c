import ArgumentParser
import FarcastSupport
import Foundation
import Hosts
import Logging
import Sendspin
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

struct SendspinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sendspin",
        abstract: "Synchronized multi-room audio over Sendspin.",
        discussion: "Speaks the current, encrypted Sendspin protocol (Noise_KKpsk2) as served by Music Assistant and aiosendspin. The player's identity (its client_id) and remembered volume, mute and output delay live in the state directory.",
        subcommands: [SendspinPlayCommand.self, SendspinListenCommand.self, SendspinDaemonCommand.self, SendspinPairCommand.self, SendspinConformanceCommand.self]
    )
}

/// What `play` and `listen` share: the player's name, output, codecs, limits and records.
struct SendspinPlayerOptions: ParsableArguments {
    @Option(help: "The name this player shows in the server's UI.")
    var name: String = defaultPlayerName()

    @Option(help: ArgumentHelp("Where audio goes: alsa:DEVICE (e.g. alsa:default); null (no sound: the clock, metadata, visualizer and timing record only, rendered 50 ms at a time); or wav:PATH (what a device would have played, rendered 10 ms at a time like the ALSA output).", valueName: "output"))
    var output: String = "null"

    @Option(help: ArgumentHelp("Stop after this many seconds.", valueName: "seconds"))
    var duration: Double?

    @Option(name: .customLong("stats-json"), help: ArgumentHelp("Write a JSON summary here at exit.", valueName: "path"))
    var statsJSON: String?

    @Option(help: ArgumentHelp("Write one JSON line per audio chunk here: server timestamp, arrival, predicted and actual play time, filter offset and error.", valueName: "path"))
    var trace: String?

    @Option(help: ArgumentHelp("Preferred codec: pcm, flac or opus (all three are offered).", valueName: "codec"))
    var codec: String = "pcm"

    @Option(help: ArgumentHelp("Noise cipher suite: chachapoly or aesgcm.", valueName: "suite"))
    var suite: String = "chachapoly"

    @Flag(name: .customLong("pairing-window"), help: "Open the pairing window for 5 minutes: a server may pair with this player's static code (`farcast sendspin pair code`) meanwhile.")
    var pairingWindow = false

    @Option(name: .customLong("dac-ppm"), help: ArgumentHelp("Make the software DAC's clock run this many ppm fast (negative: slow), to exercise sync correction.", valueName: "ppm"))
    var dacPPM: Double = 0

    @Flag(help: "Show what plays on the terminal, redrawn as it goes: title, artist, album, progress, volume and mute, repeat, shuffle, group, sync. Keys: space play/pause, n next, p previous, +/- volume, m mute, r repeat, s shuffle, q quit (commands through the controller role). Needs a terminal; without --tui telemetry lines go to stderr.")
    var tui = false

    @Option(help: ArgumentHelp("Take the source role: when the server asks, stream this ALSA capture device to it (a line-in, a turntable, a microphone: alsa:DEVICE, e.g. alsa:hw:1 or alsa:default; `arecord -L` lists them) as 48 kHz 16-bit stereo PCM, each 20 ms stamped with its capture time on the server's clock, for the server to play to the group in sync.", valueName: "alsa:device"))
    var source: String?

    @Option(name: .customLong("source-codec"), help: ArgumentHelp("With --source: flac (lossless, about half PCM's bytes), opus (lossy, 128 kb/s in stereo: about a twelfth) or pcm; PCM when the server does not take the codec chosen.", valueName: "codec"))
    var sourceCodec: SourceCodec = .flac

    @Flag(name: .customLong("no-mpris"), help: "Do not offer the desktop's media controls. By default, while it plays, the player is an MPRIS player on the session bus (org.mpris.MediaPlayer2.farcast_NAME): media keys, playerctl and the desktop's now-playing panel show the track and send play/pause, next, previous, seek, volume, loop and shuffle to the server as controller commands. Without a session bus nothing is offered (-v says so).")
    var noMPRIS = false

    @Option(help: ArgumentHelp("Apply the server's volume and mute to an ALSA mixer control instead of scaling the samples (bit-perfect output): alsa:CONTROL on the default card's mixer, or alsa:CONTROL@DEVICE (e.g. alsa:PCM@hw:1; `amixer -D DEVICE scontrols` lists controls). When the control is not there the samples are scaled, with a note.", valueName: "alsa:control[@device]"))
    var mixer: String?

    /// `--mixer`'s control and mixer device.
    var mixerControl: (control: String, device: String)? {
        guard let mixer, mixer.hasPrefix("alsa:"), mixer.count > 5 else { return nil }
        let spec = mixer.dropFirst(5)
        guard let at = spec.firstIndex(of: "@") else { return (String(spec), "default") }
        let control = String(spec[..<at]), device = String(spec[spec.index(after: at)...])
        return control.isEmpty || device.isEmpty ? nil : (control, device)
    }

    @Option(help: ArgumentHelp("Take the artwork role and keep the current picture of each channel here as channel-N.jpg or .png (replaced atomically when it changes at its scheduled time, removed when cleared), for a photo frame or a status bar to watch. Made if missing.", valueName: "dir"))
    var artwork: String?

    @Option(name: .customLong("artwork-channel"), help: ArgumentHelp("With --artwork: the picture wanted on the next channel (repeat for up to 4): SOURCE[:FORMAT[:WIDTHxHEIGHT]], SOURCE album, artist or none, FORMAT jpeg or png. Default: one channel, album:jpeg:300x300.", valueName: "spec"))
    var artworkChannelSpecs: [String] = []

    @Option(name: .customLong("visualizer-json"), help: ArgumentHelp("Take the visualizer role and write each frame here as a JSON line when its sound plays (- for stdout), for LED controllers and displays: type (loudness, beat, f_peak, spectrum, peak) with its values, server_us, due_us and delivered_us (client monotonic raw clock, as --trace); a `stream` line gives the server's setup.", valueName: "path"))
    var visualizerJSON: String?

    @Option(name: .customLong("visualizer-types"), help: ArgumentHelp("With --visualizer-json: the kinds wanted, comma-separated, of loudness, beat, f_peak, spectrum and peak (beats come only from a server that knows them).", valueName: "list"))
    var visualizerTypes = "all"

    @Option(name: .customLong("visualizer-rate"), help: ArgumentHelp("With --visualizer-json: the most loudness, f_peak and spectrum frames a second (1–120; beats and peaks come as they happen).", valueName: "hz"))
    var visualizerRate = 30

    @Option(name: .customLong("visualizer-spectrum"), help: ArgumentHelp("With --visualizer-json: the spectrum's bands, BINS[:SCALE[:FMIN-FMAX]] (SCALE lin, log or mel; Hz).", valueName: "spec"))
    var visualizerSpectrum = "32:log:40-16000"

    @Option(name: .customLong("color-json"), help: ArgumentHelp("Take the color role and write each palette the server derives from what plays here as a JSON line from its time (- for stdout): background_dark, background_light, primary, accent, on_dark, on_light as [r, g, b], `cleared` when it has none.", valueName: "path"))
    var colorJSON: String?

    /// The visualizer request (nil without --visualizer-json).
    var visualizerRequest: VisualizerRequest? {
        get throws {
            guard visualizerJSON != nil else { return nil }
            let kinds: [VisualizerKind]
            switch VisualizerRequest.parseKinds(visualizerTypes) {
            case .success(let parsed): kinds = parsed
            case .failure(let error): throw ValidationError("--visualizer-types: \(error)")
            }
            let spectrum: SpectrumLayout
            switch SpectrumLayout.parse(visualizerSpectrum) {
            case .success(let parsed): spectrum = parsed
            case .failure(let error): throw ValidationError("--visualizer-spectrum: \(error)")
            }
            return VisualizerRequest(kinds: kinds, rateMax: visualizerRate, spectrum: spectrum)
        }
    }

    /// The artwork channels asked for (none without --artwork).
    var artworkChannels: [ArtworkChannel] {
        get throws {
            guard artwork != nil else { return [] }
            let specs = artworkChannelSpecs.isEmpty ? ["album:jpeg:300x300"] : artworkChannelSpecs
            return try specs.map { spec in
                switch ArtworkChannel.parse(spec) {
                case .success(let channel): return channel
                case .failure(let error): throw ValidationError("--artwork-channel: \(error)")
                }
            }
        }
    }

    func validate() throws {
        guard output == "null" || (output.hasPrefix("wav:") && output.count > 4) || (output.hasPrefix("alsa:") && output.count > 5) else {
            throw ValidationError("--output must be alsa:DEVICE, null or wav:PATH")
        }
        guard ["pcm", "flac", "opus"].contains(codec) else { throw ValidationError("--codec must be pcm, flac or opus") }
        guard ["chachapoly", "aesgcm"].contains(suite) else { throw ValidationError("--suite must be chachapoly or aesgcm") }
        if let duration, duration <= 0 { throw ValidationError("--duration must be positive") }
        guard abs(dacPPM) <= 5000 else { throw ValidationError("--dac-ppm must be within ±5000") }
        if let source, !(source.hasPrefix("alsa:") && source.count > 5) { throw ValidationError("--source is alsa:DEVICE, e.g. alsa:hw:1 or alsa:default") }
        if mixer != nil && mixerControl == nil { throw ValidationError("--mixer is alsa:CONTROL or alsa:CONTROL@DEVICE, e.g. alsa:Master or alsa:PCM@hw:1") }
        if artwork == nil && !artworkChannelSpecs.isEmpty { throw ValidationError("--artwork-channel needs --artwork DIR (where the pictures go)") }
        guard artworkChannelSpecs.count <= 4 else { throw ValidationError("--artwork-channel: at most 4 channels") }
        _ = try artworkChannels
        guard (1...VisualizerRequest.maximumRate).contains(visualizerRate) else { throw ValidationError("--visualizer-rate must be 1–\(VisualizerRequest.maximumRate)") }
        _ = try visualizerRequest
        // Files written during or after playing are checked now, not after the session.
        do {
            if output.hasPrefix("wav:") { try OutputPath.check(String(output.dropFirst(4)), what: "WAV output") }
            if let statsJSON { try OutputPath.check(statsJSON, what: "stats file") }
            if let trace { try OutputPath.check(trace, what: "trace file") }
            if let visualizerJSON, visualizerJSON != "-" { try OutputPath.check(visualizerJSON, what: "visualizer file") }
            if let colorJSON, colorJSON != "-" { try OutputPath.check(colorJSON, what: "color file") }
        } catch let failure as CommandFailure { throw ValidationError(failure.message) }
    }

    /// The sink `--output` names; an ALSA device is opened once here so that a wrong name fails
    /// before any server is involved.
    func makeSink() throws -> any AudioSink {
        if output == "null" { return NullSink() }
        if output.hasPrefix("wav:") { return WAVSink(path: String(output.dropFirst(4))) }
        #if canImport(CALSA)
        let sink = ALSASink(device: String(output.dropFirst(5)))
        do { try sink.check() } catch { throw CommandFailure(message: "\(describe(error))", exitCode: 1) }
        return sink
        #else
        throw ValidationError("ALSA output exists on Linux only")
        #endif
    }

    /// Builds the player and sink, runs `body` with them (answering Ctrl-C and SIGTERM with a
    /// goodbye), writes the stats and trace, and prints the summary.
    func run(global: GlobalOptions, describe: String, wire: SendspinPlayer.Wire = .encrypted, openTimeout: Duration = .seconds(10),
             _ body: (SendspinPlayer, any AudioSink, Logger, (@Sendable ([ChunkTrace]) -> Void)?, (@Sendable (SendspinPlayer.Telemetry) -> Void)?) async throws -> SendspinPlayer.Report) async throws {
        if tui && (global.json || global.quiet) {
            throw CommandFailure(message: "--tui draws on the terminal; it does not go with --json or --quiet", exitCode: 2)
        }
        if visualizerJSON == "-" || colorJSON == "-" {
            guard !global.json && !tui else {
                throw CommandFailure(message: "--visualizer-json - and --color-json - write to stdout; it does not go with --json or --tui (name a file instead)", exitCode: 2)
            }
        }
        if wire == .legacy {
            // The legacy wire carries player, metadata, controller and artwork only.
            let unsupported = [("--visualizer-json", visualizerJSON != nil), ("--color-json", colorJSON != nil), ("--source", source != nil)]
                .filter(\.1).map(\.0)
            if !unsupported.isEmpty {
                throw CommandFailure(message: "\(unsupported.joined(separator: ", ")) needs the encrypted protocol; the legacy wire has no such role", exitCode: 2)
            }
        }
        // The display owns the terminal: only warnings and errors are written beside it.
        let logger = global.makeLogger(label: "farcast.sendspin", defaultLevel: tui ? .warning : .notice)
        var options = SendspinPlayer.Options()
        options.name = name
        options.formats = SendspinPlayer.formats(preferring: codec)
        options.suite = suite == "aesgcm" ? .aesGCM : .chaChaPoly
        options.duration = duration.map { .milliseconds(Int($0 * 1000)) }
        options.dacPPM = dacPPM
        options.wire = wire
        options.openTimeout = openTimeout
        if let artwork {
            options.artworkChannels = try artworkChannels
            let folder = try ArtworkFolder(path: artwork)
            var observer = options.observer ?? SendspinPlayer.SessionObserver()
            observer.artwork = { image in
                do { try folder.show(image) } catch { logger.warning("artwork: \((error as? CommandFailure)?.message ?? "\(error)")") }
            }
            options.observer = observer
        }
        try addTimedOutputs(to: &options, logger: logger)
        if let source {
            #if canImport(CALSA)
            do {
                options.source = try ALSALineIn(device: String(source.dropFirst(5)))
                options.sourceCodec = sourceCodec
            } catch {
                throw CommandFailure(message: "--source: \(error)", exitCode: 1)
            }
            #else
            throw ValidationError("--source: ALSA exists on Linux only")
            #endif
        }
        let store = PlayerStore(directory: try StateDirectory.resolve())
        options.store = store
        options.staticPairingCode = store.staticPairingCode()
        if pairingWindow {
            guard options.staticPairingCode != nil else {
                throw CommandFailure(message: "--pairing-window needs a static pairing code: set one with `farcast sendspin pair code`", exitCode: 2)
            }
            options.pairingWindow = .seconds(300)
        }
        if let (control, device) = mixerControl {
            #if canImport(CALSA)
            do {
                let mixer = try ALSAMixer(control: control, device: device)
                options.hardwareVolume = mixer
                logger.notice("volume and mute on \(mixer.description), the samples unscaled")
            } catch let error as SendspinError {
                // A convenience, not a reason to stay silent: the samples are scaled instead.
                logger.notice("--mixer: \(error.description); scaling the samples instead")
            }
            #else
            throw ValidationError("--mixer: ALSA exists on Linux only")
            #endif
        }
        let sink = try makeSink()
        let terminal = tui ? try NowPlayingTerminal() : nil
        defer { terminal?.stop() }
        if let terminal {
            var observer = options.observer ?? SendspinPlayer.SessionObserver()
            observer.metadata = { metadata in terminal.update { $0.metadata = metadata } }
            observer.controller = { state in
                terminal.update { $0.controller = state }
                return nil
            }
            options.observer = observer
        }
        let desktop = noMPRIS ? nil : SendspinMPRIS()
        if let desktop {
            var observer = options.observer ?? SendspinPlayer.SessionObserver()
            let metadata = observer.metadata, controller = observer.controller, artwork = observer.artwork
            observer.metadata = { value in
                metadata?(value)
                desktop.update { $0.metadata = value }
            }
            observer.controller = { value in
                desktop.update { $0.controller = value }
                return controller?(value)
            }
            if let artwork, let folder = self.artwork.flatMap({ try? ArtworkFolder(path: $0) }) {
                observer.artwork = { image in
                    artwork(image)
                    if image.channel == 0 { desktop.artwork(file: image.isClear ? nil : folder.file(0, image.format ?? .jpeg)) }
                }
            }
            options.observer = observer
        }
        let player = SendspinPlayer(options: options)
        desktop?.join(name: name, sendspin: player, logger: logger)
        defer { desktop?.stop() }
        terminal?.start(player: player)
        let signals = SignalWatcher { signal in player.stop(reason: signal == SIGTERM ? "shutdown" : "user_request") }
        defer { signals.cancel() }
        var traceWriter: (@Sendable ([ChunkTrace]) -> Void)?
        if let trace {
            traceWriter = { records in writeTrace(records, to: trace, logger: logger) }
        }
        var telemetry: (@Sendable (SendspinPlayer.Telemetry) -> Void)?
        if let terminal {
            telemetry = { line in terminal.update { $0.apply(line) } }
        } else if !global.quiet && !global.json {
            telemetry = { line in FileHandleOutput.stderr(telemetryLine(line) + "\n") }
        }
        if let desktop {
            let shown = telemetry
            telemetry = { line in
                shown?(line)
                desktop.update { $0.apply(line) }
            }
        }
        let report: SendspinPlayer.Report
        do {
            report = try await body(player, sink, logger, traceWriter, telemetry)
        } catch let failure as SendspinPlayer.PlayerFailure {
            terminal?.stop()
            if let statsJSON { try? writeStats(failure.report, to: statsJSON) }
            // What was played before the failure is still worth a line (not in --json: one
            // object on stdout, and a failure has only its line on stderr).
            if !global.json && failure.report.chunksReceived > 0 { printSummary(failure.report, describe: describe) }
            throw CommandFailure(message: failure.description)
        }
        // The terminal back before the summary is printed on it.
        terminal?.stop()
        if let statsJSON { try writeStats(report, to: statsJSON) }
        if global.json {
            try printJSON(report)
        } else {
            printSummary(report, describe: describe)
        }
    }

    /// `--visualizer-json` and `--color-json`: the roles offered and their lines written as
    /// each frame or palette is delivered (one writer when both name the same place).
    private func addTimedOutputs(to options: inout SendspinPlayer.Options, logger: Logger) throws {
        guard visualizerJSON != nil || colorJSON != nil else { return }
        var observer = options.observer ?? SendspinPlayer.SessionObserver()
        let report: @Sendable (String) -> Void = { logger.warning("\($0)") }
        var visualizerOutput: JSONLinesOutput?
        if let visualizerJSON {
            let output = try JSONLinesOutput(path: visualizerJSON, what: "visualizer file")
            visualizerOutput = output
            options.visualizer = try visualizerRequest
            observer.visualizerStream = { stream in
                output.write(stream.map(VisualizerLine.init(stream:)) ?? VisualizerLine(type: "stream_end"), onFailure: report)
            }
            observer.visualizer = { frames, timing in output.write(frames.map { VisualizerLine($0, timing) }, onFailure: report) }
        }
        if let colorJSON {
            let output = try visualizerOutput.flatMap { colorJSON == visualizerJSON ? $0 : nil } ?? JSONLinesOutput(path: colorJSON, what: "color file")
            options.color = true
            observer.color = { palette, timing in output.write(ColorLine(palette, timing), onFailure: report) }
        }
        options.observer = observer
    }

    private func printSummary(_ report: SendspinPlayer.Report, describe: String) {
        let buffered = max(0, report.chunksReceived - report.chunksPlayed - report.chunksLate - report.chunksDropped)
        var notes = ["\(report.chunksLate) late", "\(report.chunksDropped) dropped"]
        if buffered > 0 { notes.append("\(buffered) still buffered ahead when playback stopped") }
        print("played \(report.chunksPlayed) of \(report.chunksReceived) chunks (\(notes.joined(separator: ", "))): \(String(format: "%.1f", report.secondsPlayed)) s of \(report.codec ?? "no") audio from \(report.serverName ?? describe)")
        if let sd = report.offsetStddevUs { print(String(format: "clock offset stddev %.1f µs, largest output error %.1f µs", sd, report.maxOutputErrorUs)) }
        if let v = report.visualization {
            var dropped = ["\(v.framesLate) late", "\(v.framesOverflowed) over the buffer", "\(v.malformed) unreadable"]
            if v.framesLate + v.framesOverflowed + v.malformed == 0 { dropped = ["none dropped"] }
            print("visualizer: \(v.framesDelivered) frames and \(v.palettesApplied) palettes written on time (\(dropped.joined(separator: ", ")); latest \(v.maxDeliveryLateUs) µs after its sound)")
        }
        // Out before any failure line that follows on stderr.
        fflush(nil)
    }
}

struct SendspinPlayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play",
        abstract: "Connect to a Sendspin server and play in sync with its clock.",
        discussion: """
            Prints a telemetry line on stderr once a second: filter offset and error, drift, buffered audio, chunks played/late/dropped. Ctrl-C says goodbye to the server and stops.

            Outputs: alsa:DEVICE (an ALSA playback device such as alsa:default or alsa:hw:0,0 — `aplay -L` lists them; its own delay reports are followed so each sample leaves the device at its stamped time), null (a software DAC that consumes samples in real time and records when each left; no sound device), wav:PATH (the same, writing what would have been played to PATH).

            Examples: farcast sendspin play ws://192.168.1.10:8927/sendspin --output alsa:default
                      farcast sendspin play --discover --server Kitchen --duration 60 --stats-json stats.json
            """
    )

    @Argument(help: "The server's WebSocket URL, e.g. ws://192.168.1.10:8927/sendspin, sendspin://HOST[?ssh=user@bastion] or a saved host's name (or --discover).")
    var url: String?

    @Flag(help: "Find the server on the local network (mDNS, _sendspin-server._tcp) instead of naming its URL.")
    var discover = false

    @Option(name: .customLong("server"), help: ArgumentHelp("With --discover: the server's name to pick when several answer.", valueName: "name"))
    var serverName: String?

    @Option(name: .customLong("discover-seconds"), help: ArgumentHelp("With --discover: how long to look.", valueName: "seconds"))
    var discoverSeconds: Double = 3

    @Option(help: ArgumentHelp("Seconds allowed to open the connection: TCP, the WebSocket upgrade and the encrypted handshake.", valueName: "seconds"))
    var timeout: Double = 10

    @Option(name: .customLong("connect-timeout"), help: RenamedOption.help(now: "--timeout"))
    var oldConnectTimeout: Double?

    /// `--timeout`, or its old spelling.
    var connectTimeout: Double { oldConnectTimeout ?? timeout }

    @Flag(name: .customLong("allow-legacy"), help: "If the server closes on the encrypted protocol's first message, as servers that speak only the older unencrypted wire do (aiosendspin 5.x), play over that wire instead. Never for a URL or server that spoke the encrypted protocol here before.")
    var allowLegacy = false

    @OptionGroup var player: SendspinPlayerOptions
    @OptionGroup var hosts: HostOptions
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        switch (url, discover) {
        case (nil, false): throw ValidationError("name the server's URL (ws://HOST:8927/sendspin) or look for it with --discover")
        case (.some, true): throw ValidationError("give either a URL or --discover, not both")
        case (.some(let url), false):
            // sendspin://HOST and saved names are resolved when the command runs; anything else
            // must be a WebSocket URL, checked here so a typo is a usage error.
            let lower = url.lowercased()
            if !(lower.hasPrefix("sendspin://") || (!url.contains("/") && !url.contains(":"))) {
                do { _ = try WebSocketDialer.Target(parsing: url) } catch { throw ValidationError(error.description) }
            }
        case (nil, true):
            guard discoverSeconds > 0 && discoverSeconds <= 60 else { throw ValidationError("--discover-seconds must be within 0…60") }
        }
        if serverName != nil && !discover { throw ValidationError("--server picks among discovered servers; it needs --discover") }
        guard connectTimeout > 0 && connectTimeout <= 3600 else { throw ValidationError("--timeout must be within 0…3600 seconds") }
    }

    func run() async throws {
        try await reportingFailures {
            let target: String
            var tunnel: (any SSHForwarding)?
            if let url {
                (target, tunnel) = try await hosts.sendspinURL(url, timeout: .milliseconds(Int(connectTimeout * 1000)), logger: HostOptions.logger(global))
            } else {
                target = try await discoverServer()
            }
            // The tunnel (with --ssh or a saved route) closes with the session, whichever way it ends.
            do {
                try await player.run(global: global, describe: target, wire: allowLegacy ? .encryptedOrLegacy : .encrypted,
                                     openTimeout: .milliseconds(Int(connectTimeout * 1000))) { player, sink, logger, trace, telemetry in
                    try await player.play(url: target, sink: sink, logger: logger, trace: trace, telemetry: telemetry)
                }
            } catch {
                await tunnel?.stop()
                throw error
            }
            await tunnel?.stop()
        }
    }

    /// Browses for servers and picks the one named by --server, else the only or first one.
    private func discoverServer() async throws -> String {
        #if canImport(CDNSSD)
        let found: [DiscoveredService]
        do {
            found = try await DNSServiceDiscovery().browseServers(timeout: .milliseconds(Int(discoverSeconds * 1000)))
        } catch {
            throw CommandFailure(message: "cannot look for Sendspin servers: \(describe(error))")
        }
        guard !found.isEmpty else {
            throw CommandFailure(message: "no Sendspin server answered on the local network within \(discoverSeconds) s; name its URL instead")
        }
        var chosen = found[0]
        if let serverName {
            guard let match = found.first(where: { $0.displayName == serverName || $0.name == serverName }) else {
                throw CommandFailure(message: "no server named '\(serverName)'; found: \(found.map(\.displayName).joined(separator: ", "))")
            }
            chosen = match
        } else if found.count > 1 {
            FileHandleOutput.stderr("found \(found.count) servers (\(found.map(\.displayName).joined(separator: ", "))); playing from \(chosen.displayName) (choose with --server NAME)\n")
        }
        FileHandleOutput.stderr("found \(chosen.displayName) at \(chosen.url)\n")
        return chosen.url
        #else
        throw CommandFailure(message: "--discover needs DNS-SD, which this build lacks; name the server's URL")
        #endif
    }
}

struct SendspinListenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listen",
        abstract: "Wait for Sendspin servers to connect (the protocol's recommended mode) and play what they stream.",
        discussion: """
            Servers dial ws://HOST:PORT/PATH (Music Assistant finds players through mDNS; `sendspin serve --client ws://HOST:8928/sendspin` dials one directly). One server plays at a time: a server that wants to play takes over from an idle one or from another player, an idle newcomer is turned away unless it was the last to play here, and a connection that does not activate within 30 s is dropped. Telemetry, outputs and --stats-json are as for `play`. Ctrl-C or SIGTERM says goodbye to every connected server.

            Example: farcast sendspin listen --name "Living room" --output alsa:default
            """
    )

    @Option(help: ArgumentHelp("Address to listen on (0.0.0.0: every interface; 127.0.0.1: this machine only).", valueName: "address"))
    var host: String = "0.0.0.0"

    @Option(help: ArgumentHelp("TCP port.", valueName: "port"))
    var port: Int = 8928

    @Option(help: ArgumentHelp("WebSocket path.", valueName: "path"))
    var path: String = "/sendspin"

    @Flag(name: .customLong("no-advertise"), help: "Do not announce this player on the local network (mDNS _sendspin._tcp); servers must then be told its URL.")
    var noAdvertise = false

    @Flag(help: "Speak the older unencrypted wire (aiosendspin 5.x servers, the upstream conformance harness) to every server that dials: player, metadata, controller and artwork, no pairing. A listener cannot tell such a server apart before it closes, so this is your choice; a server met here on the encrypted protocol is still refused on it.")
    var legacy = false

    @OptionGroup var player: SendspinPlayerOptions
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (0...65535).contains(port) else { throw ValidationError("--port must be 0…65535 (0 picks a free one)") }
        guard path.hasPrefix("/") else { throw ValidationError("--path must start with /") }
    }

    func run() async throws {
        try await reportingFailures {
            let name = player.name
            let advertisement = ListenerAdvertisement()
            defer { advertisement.withdraw() }
            try await player.run(global: global, describe: "ws://\(host):\(port)\(path)", wire: legacy ? .legacy : .encrypted) { player, sink, logger, trace, telemetry in
                try await player.listen(host: host, port: port, path: path, sink: sink, logger: logger, trace: trace, telemetry: telemetry,
                                        ready: { bound in if !noAdvertise { advertisement.advertise(name: name, port: bound, path: path, logger: logger) } })
            }
        }
    }
}

struct SendspinDaemonCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Run as a long-lived speaker configured by a file (for systemd).",
        discussion: """
            The file holds `key = value` lines (# comments): name, output (alsa:DEVICE, null or wav:PATH), output_delay_ms, host, port, path, codec, suite, server, pairing_window (yes: open the pairing window for 5 minutes at start, for pairing by code) and legacy (yes: the older unencrypted wire of aiosendspin 5.x servers — spoken to every server that dials, or the fallback of `play --allow-legacy` when dialling). Without `server` the daemon listens for servers (ws://host:port/path, default ws://0.0.0.0:8928/sendspin), as `listen` does; with `server = ws://…` it dials that server and dials again, backing off up to 30 s, whenever the connection ends. output_delay_ms is applied at start (a server may still change it while running). Logs go to stderr; SIGTERM says client/goodbye (shutdown) and exits 0. docs/sendspin.md has an example file and a systemd unit.
            """
    )

    @Option(help: ArgumentHelp("The configuration file.", valueName: "path"))
    var config: String

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            let text = try Secrets.readWhole(ofFile: config, what: "configuration").text
            let settings: DaemonConfiguration
            do { settings = try DaemonConfiguration(text: text) } catch let problem as DaemonConfiguration.Problem {
                throw CommandFailure(message: "\(config), \(problem)", exitCode: 2)
            }
            var arguments = ["--output", settings.output, "--codec", settings.codec, "--suite", settings.suite]
            if let name = settings.name { arguments += ["--name", name] }
            let shared = try SendspinPlayerOptions.parse(arguments)
            let logger = global.makeLogger(label: "farcast.sendspin", defaultLevel: .info)
            let store = PlayerStore(directory: try StateDirectory.resolve())
            if let delay = settings.outputDelayMs {
                var saved = store.settings()
                saved.outputDelayMs = delay
                try store.save(saved)
            }
            var options = SendspinPlayer.Options()
            options.name = shared.name
            options.formats = SendspinPlayer.formats(preferring: settings.codec)
            options.suite = settings.suite == "aesgcm" ? .aesGCM : .chaChaPoly
            options.store = store
            options.staticPairingCode = store.staticPairingCode()
            if settings.pairingWindow && options.staticPairingCode != nil { options.pairingWindow = .seconds(300) }
            // Dialling: the fallback; listening: the legacy wire to every server that dials.
            if settings.legacy { options.wire = settings.server == nil ? .legacy : .encryptedOrLegacy }
            let sink = try shared.makeSink()
            let player = SendspinPlayer(options: options)
            let stopping = Mutex<Int32?>(nil)
            let signals = SignalWatcher { signal in
                stopping.withLock { $0 = signal }
                player.stop(reason: signal == SIGTERM ? "shutdown" : "user_request")
            }
            defer { signals.cancel() }
            let mode = settings.server.map { "dialling \($0)" } ?? "listening on ws://\(settings.host):\(settings.port)\(settings.path)"
            logger.notice("farcast \(FarcastInfo.version) Sendspin speaker '\(options.name)': \(mode), output \(sink.name), configuration \(config)")
            if let server = settings.server {
                var backoff = 1.0
                while stopping.withLock({ $0 }) == nil {
                    do {
                        let report = try await player.play(url: server, sink: sink, logger: logger)
                        logger.info("session ended: played \(report.chunksPlayed) chunks from \(report.serverName ?? server)")
                        backoff = 1
                    } catch {
                        logger.error("\(describe(error))")
                    }
                    guard stopping.withLock({ $0 }) == nil else { break }
                    logger.info("connecting again in \(Int(backoff)) s")
                    let until = ContinuousClock.now + .milliseconds(Int(backoff * 1000))
                    while ContinuousClock.now < until && stopping.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(100)) }
                    backoff = min(backoff * 2, 30)
                }
            } else {
                let advertisement = ListenerAdvertisement()
                defer { advertisement.withdraw() }
                let name = options.name
                do {
                    _ = try await player.listen(host: settings.host, port: settings.port, path: settings.path, sink: sink, logger: logger,
                                                ready: { bound in advertisement.advertise(name: name, port: bound, path: settings.path, logger: logger) })
                } catch let failure as SendspinPlayer.PlayerFailure {
                    throw CommandFailure(message: failure.description)
                }
            }
            let signal = stopping.withLock { $0 } ?? SIGINT
            // Worded as every interrupted command is; exit 0, as a daemon's stop is its normal end.
            logger.notice("stopped (interrupted by \(Signals.name(signal)))")
            struct Stopped: Encodable { var stopped: String }
            if global.json { try printJSON(Stopped(stopped: Signals.name(signal).lowercased())) }
        }
    }
}

struct SendspinPairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Pair this player with servers: its pairing token, the servers it is paired with.",
        discussion: """
            Pairing makes a server and this player trust each other: sessions are then keyed by a long-term secret only the two hold, and the server may play without unpaired access. This player pairs by the Pairing-PSK method: give the server the token `farcast sendspin pair token` prints (in Music Assistant: the player's pairing dialog); while the player runs (`listen`, `play` or `daemon`) the server completes the pairing, and the player stores the server's long-term PSK in the state directory (sendspin/paired-servers.json, mode 0600). The token holds a secret: anyone with it can pair with this player; `pair token --new` replaces it.
            """,
        subcommands: [Token.self, Code.self, List.self, Forget.self]
    )

    struct Token: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "token", abstract: "Print this player's pairing token (SP:0…) and client_id.",
                                                        discussion: "Example: farcast sendspin pair token --new")
        @Flag(help: "Draw a new pairing PSK first, so that tokens given out before stop working.")
        var new = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await reportingFailures {
                let store = PlayerStore(directory: try StateDirectory.resolve())
                if new { try store.directory.remove("sendspin/pairing-psk") }
                let token = try store.pairingToken()
                let clientID = Base64URL.encode(Array(try store.identity().publicKey.rawRepresentation))
                if global.json {
                    struct Token: Encodable { var token: String; var clientId: String }
                    try printJSON(Token(token: token, clientId: clientID))
                } else {
                    print(token)
                    FileHandleOutput.stderr("client_id \(clientID); keep the token private: it lets a server pair with this player\n")
                }
            }
        }
    }

    /// `pair code --json`: whether a code is now "set" or "cleared".
    struct PairingCodeReport: Encodable { var pairingCode: String }

    struct Code: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "code",
            abstract: "Set this player's static 8-digit pairing code (read from standard input), or clear it.",
            discussion: "With a code set the player also offers pairing by code: the operator types the same 8 digits at the server while the player's pairing window is open (`listen --pairing-window`, or `pairing_window = yes` for the daemon). The code is read from standard input, never from the command line, and kept in the state directory with mode 0600.\n\nExample: echo 12345678 | farcast sendspin pair code"
        )
        @Flag(help: "Remove the code: pairing by code is no longer offered.")
        var clear = false
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await reportingFailures {
                let store = PlayerStore(directory: try StateDirectory.resolve())
                if clear {
                    try store.setStaticPairingCode(nil)
                    if global.json { try printJSON(PairingCodeReport(pairingCode: "cleared")) } else { print("pairing by code is off") }
                    return
                }
                if isatty(STDIN_FILENO) != 0 { FileHandleOutput.stderr("pairing code (8 digits): ") }
                let line = readLine(strippingNewline: true) ?? ""
                do { try store.setStaticPairingCode(line) } catch {
                    throw CommandFailure(message: "a pairing code is exactly 8 digits (spaces and hyphens are ignored)", exitCode: 2)
                }
                if global.json {
                    try printJSON(PairingCodeReport(pairingCode: "set"))
                } else {
                    print("pairing code set; open the pairing window with `farcast sendspin listen --pairing-window` when the server asks for it")
                }
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List the servers this player is paired with.",
                                                        discussion: "Example: farcast sendspin pair list --json")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await reportingFailures {
                let servers = PlayerStore(directory: try StateDirectory.resolve()).pairedServers()
                if global.json {
                    try printJSONList(servers.map { ["server_id": $0.serverID, "psk_id": $0.pskID, "created_at": ISO8601DateFormatter().string(from: $0.createdAt)] })
                } else if servers.isEmpty {
                    print("not paired with any server")
                } else {
                    for s in servers { print("\(s.serverID)  paired \(ISO8601DateFormatter().string(from: s.createdAt))  psk_id \(s.pskID)") }
                }
            }
        }
    }

    struct Forget: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "forget", abstract: "Forget the pairing with a server (it must pair again to be trusted).",
                                                        discussion: "Example: farcast sendspin pair forget YykbUdO5hV9odfc-owihNyE01A-tdLLl1QnNElI0r3M")
        @Argument(help: "The server_id, as `pair list` shows it.")
        var serverID: String
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await reportingFailures {
                guard try PlayerStore(directory: try StateDirectory.resolve()).forget(serverID: serverID) else {
                    throw CommandFailure(message: "not paired with \(serverID) (see `farcast sendspin pair list`)")
                }
                struct Forgotten: Encodable { var forgotten: String }
                if global.json { try printJSON(Forgotten(forgotten: serverID)) } else { print("forgot the pairing with \(serverID)") }
            }
        }
    }
}

/// A listening player's mDNS announcement (`_sendspin._tcp`, TXT path and name), made once the
/// port is known. Without a responder (no avahi-daemon) the player still listens, and says so.
final class ListenerAdvertisement: Sendable {
    private let current = Mutex<(any ServiceAdvertisement)?>(nil)

    func advertise(name: String, port: Int, path: String, logger: Logger) {
        #if canImport(CDNSSD)
        do {
            let advertisement = try DNSServiceDiscovery().advertisePlayer(name: name, port: port, path: path)
            current.withLock { $0 = advertisement }
            logger.info("announced on the local network as '\(name)' (_sendspin._tcp, port \(port))")
        } catch {
            logger.warning("not announced on the local network (servers can still dial this player's URL): \(describe(error))")
        }
        #endif
    }

    func withdraw() {
        current.withLock { $0 }?.cancel()
    }
}

private func defaultPlayerName() -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    gethostname(&buffer, buffer.count)
    let host = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return host.isEmpty ? "Farcast" : "Farcast on \(host)"
}

func telemetryLine(_ t: SendspinPlayer.Telemetry) -> String {
    let s = t.statistics
    let error = t.filterErrorUs.map { "±\($0) µs" } ?? "unsynced"
    let group = t.groupName.map { "  group \($0)\(t.groupState.map { " (\($0))" } ?? "")" } ?? ""
    return String(format: "%6.1fs  offset %+.1f µs %@  drift %+.2f ppm  buffer %5.0f ms  played %d  late %d  dropped %d%@",
                  t.elapsedSeconds, t.offsetUs, error, t.driftPPM, t.bufferedMs, s.chunksPlayed, s.chunksLate, s.chunksDropped, group)
}

private func writeStats(_ report: SendspinPlayer.Report, to path: String) throws {
    try OutputPath.save(Array((try jsonString(report, pretty: true) + "\n").utf8), to: path, what: "stats file")
}

private func writeTrace(_ records: [ChunkTrace], to path: String, logger: Logger) {
    var text = ""
    for r in records { text += ((try? jsonString(r)) ?? "{}") + "\n" }
    do { try OutputPath.save(Array(text.utf8), to: path, what: "trace file") } catch { logger.error("\(describe(error))") }
}

/// `--artwork DIR`: each channel's current picture as `channel-N.jpg` or `.png`, written beside
/// and renamed into place (a watcher never sees half a file), removed when the channel clears.
struct ArtworkFolder: Sendable {
    let path: String

    init(path: String) throws {
        var isDirectory: ObjCBool = false
        if !FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            do { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) } catch {
                throw CommandFailure(message: "--artwork: cannot make \(path): \(describe(error))", exitCode: 1)
            }
        } else if !isDirectory.boolValue {
            throw CommandFailure(message: "--artwork: \(path) is a file, not a directory", exitCode: 2)
        }
        guard access(path, W_OK) == 0 else { throw CommandFailure(message: "--artwork: \(path) is not writable", exitCode: 1) }
        self.path = path
    }

    func file(_ channel: Int, _ format: ArtworkChannel.Format) -> String {
        "\(path)/channel-\(channel).\(format == .png ? "png" : "jpg")"
    }

    func show(_ image: ArtworkImage) throws {
        let keep = image.isClear ? nil : file(image.channel, image.format ?? .jpeg)
        if let keep {
            let temporary = "\(path)/.channel-\(image.channel).partial"
            try Data(image.data).write(to: URL(fileURLWithPath: temporary))
            guard rename(temporary, keep) == 0 else {
                let reason = String(cString: strerror(errno))
                unlink(temporary)
                throw CommandFailure(message: "cannot rename into \(keep): \(reason)")
            }
        }
        for format in ArtworkChannel.Format.allCases where file(image.channel, format) != keep {
            unlink(file(image.channel, format))
        }
    }
}
