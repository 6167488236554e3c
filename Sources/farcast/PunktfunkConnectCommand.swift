import ArgumentParser
import FarcastSupport
import Foundation
import Punktfunk
import Synchronization
import Viewer

/// `farcast punktfunk connect`: the stream in a window. The session and data plane as `receive`
/// runs them; each access unit goes to a `VideoDecodeQueue` (its own thread, libavcodec), each
/// picture to the `ViewerWindow` (a YUV texture, the newest picture wins), and what the person
/// does in the window goes back to the host as input datagrams.
struct PunktfunkConnectCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Watch and play a host's stream in a window: decoded video, keyboard and mouse sent back.",
        discussion: """
            Connects (pairing and trust as for every punktfunk command), asks for --mode, and shows the stream in a window, scaled to fit with black bars. Video is decoded by FFmpeg's libavcodec (loaded when the stream starts; on Debian: apt install libavcodec59), through VA-API when the machine has it (--decode). When frames are lost for good, the window keeps the last good picture and asks the host for a keyframe instead of showing a broken one.

            Sound plays on --audio-device (ALSA's default device unless named; none for silence): the host's Opus through a jitter ring that conceals what is late or lost, 5.1 and 7.1 folded to stereo. When the default device does not open, the stream plays without sound and says so.

            Keyboard and mouse go to the host while the window has focus: keys as Windows virtual keys (by their position on a US keyboard), the pointer at its place in the picture, the wheel in WHEEL_DELTA steps. A click into the picture captures the mouse for games (relative motion, the keyboard grabbed, the click itself not sent); Ctrl+Alt+Shift+Z or leaving the window frees it, releasing on the host whatever was held. F8 opens the menu (another mode, the bitrate a quarter down or up, a speed test that offers the bitrate the link carries, the statistics overlay and its corner, full screen, disconnect). --mic sends a microphone (20 ms Opus frames). The first game controller connected is forwarded (buttons and sticks, as whole states when the host takes them; its touchpad and motion sensors; arrival and removal), and the host's rumble, trigger motors, light-bar colour, player LEDs and DualSense adaptive triggers come back to it.

            --stats-json writes, when the window closes: frames_sent_by_host (by the stream's frame numbers), frames_received, frames_decoded, frames_presented, capture_to_present_ms_p50/p95 (corrected for the clock offset), capture_to_receipt_ms_p50/p95, the repair and loss counts, and the last speed test's result.

            Examples:
              farcast punktfunk connect gaming-pc
              farcast punktfunk connect 192.168.1.20 --mode 2560x1440x120 --bitrate 80 --fullscreen
              farcast punktfunk connect gaming-pc --duration 20 --stats-json stats.json
            """
    )

    enum Decode: String, ExpressibleByArgument, CaseIterable {
        case auto, software, vaapi
    }

    enum Gamepad: String, ExpressibleByArgument, CaseIterable {
        case auto, xbox360, dualsense, off
    }

    enum BitDepth: String, ExpressibleByArgument, CaseIterable {
        case eight = "8", ten = "10"
    }

    enum Chroma: String, ExpressibleByArgument, CaseIterable {
        case yuv420 = "420", yuv444 = "444"
    }

    @OptionGroup var hostOptions: PunktfunkHostOptions
    @Option(help: ArgumentHelp("The mode to ask for, WIDTHxHEIGHTxHZ.", valueName: "mode"))
    var mode = StreamMode(width: 1920, height: 1080, refreshHz: 60)
    @Option(help: ArgumentHelp("Bitrate in Mbit/s, or auto (the host's choice).", valueName: "auto|mbps"))
    var bitrate: String = "auto"
    @Option(help: ArgumentHelp("The codec to ask for: hevc, h264 or av1 (the host may answer with another it supports).", valueName: "codec"))
    var codec: VideoCodec = .hevc
    @Option(help: ArgumentHelp("Where video is decoded: auto (VA-API when it opens, else software), software, or vaapi (VA-API's default device; software with a warning when it does not open).", valueName: "auto|software|vaapi"))
    var decode: Decode = .auto
    @Option(name: .customLong("bit-depth"), help: ArgumentHelp("Offer the host 10-bit video (less banding at the same bitrate). The window shows 8 bits (SDL 2 has no deeper textures).", valueName: "8|10"))
    var bitDepth: BitDepth = .eight
    @Option(help: ArgumentHelp("Offer the host 4:4:4 video (full-resolution colour, for text). The window shows it at 4:2:0 (SDL 2 has no 4:4:4 textures), so it costs bitrate for nothing yet.", valueName: "420|444"))
    var chroma: Chroma = .yuv420
    @Option(name: .customLong("audio-device"), help: ArgumentHelp("The ALSA device for the stream's sound (see `aplay -L`), or none.", valueName: "device"))
    var audioDevice: String = "default"
    @Option(help: ArgumentHelp("Send this microphone to the host: alsa (the default capture device) or alsa:DEVICE (see `arecord -L`). Off unless given; F8 → Microphone on/off toggles it.", valueName: "alsa[:device]"))
    var mic: String?
    @Option(help: ArgumentHelp("The controller the host should emulate: auto (as the pad in hand is), xbox360, dualsense; off forwards none.", valueName: "auto|xbox360|dualsense|off"))
    var gamepad: Gamepad = .auto
    @Option(name: .customLong("max-fps"), help: ArgumentHelp("Show at most this many pictures a second (the others are dropped, not queued). Default: as many as the display refreshes.", valueName: "fps"))
    var maxFPS: Double?
    @Flag(help: "Start full screen (F8 → Full screen leaves it).")
    var fullscreen = false
    @Flag(help: "Show the statistics overlay from the start (F8 → Statistics toggles it).")
    var hud = false
    @Option(name: .customLong("hud-corner"), help: ArgumentHelp("Where the statistics overlay sits: top-left, top-right, bottom-right or bottom-left (F8 → Statistics overlay moves it on).", valueName: "corner"))
    var hudCorner: ViewerCorner = .topLeft
    @Option(help: ArgumentHelp("Disconnect after this many seconds (default: when the window closes).", valueName: "seconds"))
    var duration: Double?
    @OptionGroup var watch: StreamWatchOptions
    var statsJSON: String? { watch.statsJSON }
    var stallLimit: Double { watch.stallLimit }
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard (try? bitrateKbps()) != nil else { throw ValidationError("--bitrate is auto or Mbit/s above 0 and at most 3000") }
        if let maxFPS { guard maxFPS >= 1, maxFPS <= 1000 else { throw ValidationError("--max-fps must be within 1…1000") } }
        if let duration { guard duration > 0, duration <= 86_400 else { throw ValidationError("--duration must be within 0…86400 seconds") } }
        if let mic { guard micDevice(mic) != nil else { throw ValidationError("--mic is alsa or alsa:DEVICE (see `arecord -L`), not '\(mic)'") } }
    }

    func videoCaps() -> Hello.VideoCaps {
        var caps: Hello.VideoCaps = [.probeSequence]
        if bitDepth == .ten { caps.insert(.tenBit) }
        if chroma == .yuv444 { caps.insert(.yuv444) }
        return caps
    }

    func micDevice(_ text: String) -> String? {
        if text == "alsa" { return "default" }
        guard text.hasPrefix("alsa:"), text.count > 5 else { return nil }
        return String(text.dropFirst(5))
    }

    func bitrateKbps() throws -> UInt32 {
        if bitrate.lowercased() == "auto" { return 0 }
        guard let mbps = Double(bitrate), mbps > 0, mbps <= 3000 else { throw ValidationError("--bitrate") }
        return UInt32(mbps * 1000)
    }

    struct Stats: Encodable {
        var host: String
        var mode: String
        var codec: String
        var decoder: String
        /// The decoded pictures' format, and how the window shows it ("10-bit 4:2:0, shown at 8 bits").
        var pictureFormat: String?
        var renderer: String
        var seconds: Double
        var framesSentByHost: UInt64
        var framesReceived: UInt64
        var framesDecoded: Int
        var framesPresented: Int
        /// The most pictures the window showed per second: the display's refresh rate, or --max-fps.
        var presentCadenceHz: Double?
        /// Decoded pictures a newer one replaced before the window showed them.
        var framesReplaced: Int
        /// Access units held back after a loss until the next keyframe, refused by the decoder, or dropped behind it.
        var framesSkipped: Int
        var decodeErrors: Int
        /// Access units dropped because the decoder fell behind.
        var decoderOverflow: Int
        /// Access units still waiting for the decoder when a keyframe made them unnecessary.
        var decoderSuperseded: Int
        var captureToPresentMsP50: Double?
        var captureToPresentMsP95: Double?
        var captureToReceiptMsP50: Double?
        var captureToReceiptMsP95: Double?
        var clockOffsetUs: Double
        var fecRecoveredShards: UInt64
        var unrecoverableFrames: UInt64
        var keyframeRequests: Int
        var lastPresentedFrame: UInt32?
        var audio: PunktfunkAudioOutput.Statistics?
        var microphone: PunktfunkMicrophone.Statistics?
        /// The last speed test run from the menu, if any.
        var speedTest: SpeedTest?
        var ended: String

        struct SpeedTest: Encodable {
            var targetKbps: UInt32
            var goodputKbps: Double
            var linkLoss: Double
            var recommendedKbps: UInt32
            /// The bitrate asked for after it (nil: the person kept the one there was).
            var appliedKbps: UInt32?
        }
    }

    func run() async throws {
        try await reportingFailures { try await interruptible { interrupt in
            let options = try hostOptions.clientOptions()
            let (streamMode, wanted) = (mode, codec)
            var configuration = ViewerConfiguration()
            configuration.title = "\(hostOptions.host) — farcast punktfunk"
            configuration.fullscreen = fullscreen
            configuration.showHUD = hud
            configuration.hudCorner = hudCorner
            configuration.maximumPictureRate = maxFPS
            configuration.clipboardSync = false
            configuration.scale = .fit
            configuration.menuActions = StreamMenu.actions(current: streamMode) + (mic != nil ? [StreamMenu.microphone] : [])
            configuration.hiddenMenuItems = [.monitor, .clipboard, .reconnect]
            configuration.captureOnClick = true
            configuration.gamepads = gamepad != .off
            let window = ViewerWindow(configuration: configuration)
            do { try await window.open() } catch let error as ViewerError { throw CommandFailure(message: error.description) }
            window.setStatus(.connecting(hostOptions.host))
            var hello = Hello(mode: streamMode, bitrateKbps: try bitrateKbps(), name: hostOptions.name, videoCaps: videoCaps(), codecs: Self.codecBits(wanted))
            hello.gamepad = gamepad == .xbox360 ? 1 : gamepad == .dualsense ? 2 : 0
            // The SDL pad forwarded as the host's pad 0 (rumble goes back to it).
            let forwardedPad = Atomic<Int32>(-1)
            let pipeline = Mutex<(stream: VideoStreamSession, queue: VideoDecodeQueue, decoder: String)?>(nil)
            let clockOffsetNs = Atomic<Int64>(0)
            let pictureFormat = Mutex<PictureLayout?>(nil)
            let frames = Mutex(FrameNumbers())
            let hardware: FFmpegVideoDecoder.Hardware = decode == .software ? .software : decode == .vaapi ? .vaapi(device: nil) : .automatic
            let decodeChoice = decode
            // The picture's size in stream pixels, for absolute pointer positions (Reconfigured changes it).
            let streamSize = Mutex((width: Int(streamMode.width), height: Int(streamMode.height)))
            let audioBox = Mutex<PunktfunkAudioOutput?>(nil)
            let (audioDevice, quiet) = (audioDevice, global.quiet)
            let session: StreamStart
            do {
                session = try await StreamStart.open(options, hello: hello, timeout: .seconds(hostOptions.timeout), connected: interrupt.attach) { client, welcome, socket in
                    guard let codec = VideoCodec(welcomeCodec: welcome.codec) else {
                        throw CommandFailure(message: "the host chose a codec farcast cannot decode (\(welcome.codecName))")
                    }
                    let decoder: FFmpegVideoDecoder
                    do {
                        decoder = try FFmpegVideoDecoder(codec: codec, hardware: hardware, colour: PictureColour(cicp: welcome.colour))
                    } catch let error as VideoDecodeError {
                        throw CommandFailure(message: error.description)
                    }
                    if let reason = decoder.hardwareFallbackReason, decodeChoice == .vaapi {
                        FileHandleOutput.stderr("farcast: warning: \(reason)\n")
                    }
                    if audioDevice != "none" {
                        do {
                            let audio = try PunktfunkAudioOutput(device: audioDevice, channels: Int(welcome.audioChannels))
                            audioBox.withLock { $0 = audio }
                        } catch {
                            // The default device is a convenience; a device asked for by name must open.
                            guard audioDevice == "default" else {
                                throw CommandFailure(message: "cannot play sound on ALSA device \(audioDevice): \(describe(error))")
                            }
                            if !quiet { FileHandleOutput.stderr("farcast: warning: no sound: ALSA's default device does not open (\(describe(error))); --audio-device none silences this\n") }
                        }
                    }
                    // The host's side planes: sound to the audio output, force feedback to the forwarded pad.
                    client.onDatagram { datagram in
                        switch datagram.first {
                        case AudioPacket.tag: audioBox.withLock { $0 }?.receive(datagram)
                        case Rumble.tag:
                            let pad = forwardedPad.load(ordering: .relaxed)
                            if pad >= 0, let r = Rumble(datagram: datagram), r.pad == 0 {
                                let ms = UInt32(r.timeToLiveMilliseconds ?? 1000)
                                window.send(.rumble(low: r.low, high: r.high, milliseconds: ms), toPad: pad)
                                if let left = r.leftTrigger, let right = r.rightTrigger {
                                    window.send(.triggerRumble(left: left, right: right, milliseconds: ms), toPad: pad)
                                }
                            }
                        case HIDOutput.tag:
                            let pad = forwardedPad.load(ordering: .relaxed)
                            guard pad >= 0 else { break }
                            switch HIDOutput(datagram: datagram) {
                            case .lightbar(0, let red, let green, let blue)?: window.send(.light(red: red, green: green, blue: blue), toPad: pad)
                            case .playerLEDs(0, let bits)?: window.send(.playerLights(bits), toPad: pad)
                            case .trigger(0, let which, _, let raw)? where which <= 1: window.send(.triggerEffect(right: which == 1, block: raw), toPad: pad)
                            default: break
                            }
                        default: break
                        }
                    }
                    let description = decoder.description
                    let queue = VideoDecodeQueue(decoder: decoder, onPicture: { decoded in
                        // What the window cannot take as it is (10-bit, 4:4:4) is brought to 8-bit 4:2:0 here, on the decode thread.
                        let picture: DecodedPicture = decoded.layout.isEightBit420 ? decoded : EightBitPicture(decoded)
                        pictureFormat.withLock { $0 = decoded.layout }
                        window.show(StreamPicture(picture), frameNumber: picture.frameIndex,
                                    capturedAtRealtimeNs: Int64(bitPattern: picture.ptsNanoseconds) - clockOffsetNs.load(ordering: .relaxed))
                    }, requestKeyframe: { client.send(.requestKeyframe) })
                    let stream = try VideoStreamSession(client: client, welcome: welcome, clock: ClockOffsetEstimator(),
                                                        stallLimitNs: Int64(stallLimit * 1e9)) { frame, _, keyframe in
                        frames.withLock { $0.saw(frame.frameIndex) }
                        queue.enqueue(frame, isRandomAccessPoint: keyframe)
                    }
                    stream.followControlMessages(of: client) { m in streamSize.withLock { $0 = (Int(m.width), Int(m.height)) } }
                    pipeline.withLock { $0 = (stream, queue, description) }
                    socket.start { datagram, received in stream.handle(datagram, receivedAt: received) }
                }
            } catch {
                window.close()
                await window.waitUntilClosed()
                throw error
            }
            hostOptions.markConnected()
            let client = session.client
            guard let (stream, queue, decoderName) = pipeline.withLock({ $0 }) else { throw CommandFailure(message: "internal: no video pipeline") }
            stream.applyClock(session.samples)
            clockOffsetNs.store(session.clock.offsetNs, ordering: .relaxed)
            streamSize.withLock { $0 = (Int(session.welcome.mode.width), Int(session.welcome.mode.height)) }
            let microphone: PunktfunkMicrophone?
            if let mic, let device = micDevice(mic) {
                do {
                    microphone = try PunktfunkMicrophone(device: device, send: { client.send(datagram: $0) },
                                                         hostOffsetNs: { clockOffsetNs.load(ordering: .relaxed) })
                } catch {
                    session.dataSocket.stop()
                    queue.stop()
                    client.close()
                    window.close()
                    await window.waitUntilClosed()
                    throw CommandFailure(message: "cannot record from ALSA device \(device): \(describe(error))")
                }
            } else {
                microphone = nil
            }
            window.setStatus(.connected(desktopName: "\(hostOptions.host) \(session.welcome.mode) \(session.welcome.codecName)"))

            // What the person does in the window, to the host.
            let closed = Atomic<Bool>(false)
            let speedTest = SpeedTestSlot()
            let inputTask = Task {
                var mapper = PunktfunkInputMapper(gamepadType: gamepad,
                                                  wholePadState: session.welcome.hostCaps & PadForwarder.wholeStateCapability != 0)
                for await event in window.input {
                    switch event {
                    case .closed, .command(.disconnect):
                        closed.store(true, ordering: .relaxed)
                    case .command(.action(StreamMenu.microphone)):
                        if let microphone { microphone.isEnabled.toggle() }
                    case .command(.action(StreamMenu.speedTest)):
                        guard speedTest.begin() else { break }
                        Task {
                            speedTest.end(with: await Self.runSpeedTest(client: client, stream: stream, window: window))
                        }
                    case .command(.action(let label)):
                        switch StreamMenu.request(label, bitrateKbps: stream.statistics.bitrateKbps) {
                        case .reconfigure(let mode)?: client.send(.reconfigure(mode))
                        case .setBitrate(let kbps)?: client.send(.setBitrate(kbps: kbps))
                        default: break
                        }
                    default:
                        let size = streamSize.withLock { $0 }
                        for datagram in mapper.map(event, streamWidth: size.width, streamHeight: size.height) {
                            client.send(datagram: datagram)
                        }
                        forwardedPad.store(mapper.forwardedPad ?? -1, ordering: .relaxed)
                    }
                }
                closed.store(true, ordering: .relaxed)
            }

            let started = options.clock.now().nanoseconds
            var ended = "time"
            var failure: (any Error)?
            var nextHUD = 0.0
            var hudBase = (time: 0.0, presented: 0, bytes: UInt64(0))
            let end = await stream.watch(notice: { notice in
                if case .stalled(let silentNs) = notice {
                    FileHandleOutput.stderr(String(format: "farcast: warning: no video from the host for %.1f s; asking it for a keyframe\n", Double(silentNs) / 1e9))
                }
            }, shouldStop: {
                let elapsed = Double(options.clock.now().nanoseconds - started) / 1e9
                if let duration, elapsed >= duration { return true }
                if closed.load(ordering: .relaxed) { ended = "window closed"; return true }
                if interrupt.fired { ended = "interrupted"; return true }
                // The picture's timestamps follow the latest clock batch.
                clockOffsetNs.store(stream.statistics.clockOffsetNs, ordering: .relaxed)
                if elapsed >= nextHUD {
                    nextHUD = elapsed + 1
                    let (s, p) = (stream.statistics, window.pictureStatistics)
                    let span = max(0.001, elapsed - hudBase.time)
                    let rate = (fps: Double(p.presented - hudBase.presented) / span, mbps: Double(s.receiver.bytes - hudBase.bytes) * 8 / span / 1e6)
                    hudBase = (elapsed, p.presented, s.receiver.bytes)
                    let format = pictureFormat.withLock { $0 }.map(Self.formatDescription)
                    window.setHUDExtra(Self.hudLines(s, queue.statistics, p, decoder: decoderName + (format.map { ", " + $0 } ?? ""), rate: rate))
                }
                return false
            })
            if case .connection(let error) = end { (ended, failure) = ("connection", error) }
            if case .gaveUp(let silentNs) = end {
                ended = "stalled"
                failure = CommandFailure(message: String(format: "the host sent no video for %.0f s (--stall-limit)", Double(silentNs) / 1e9))
            }
            let elapsed = Double(options.clock.now().nanoseconds - started) / 1e9
            session.dataSocket.stop()
            queue.stop()
            microphone?.stop()
            let audio = audioBox.withLock { $0 }
            client.onDatagram(nil)
            audio?.stop()
            client.close()
            window.close()
            await window.waitUntilClosed()
            inputTask.cancel()
            let s = stream.statistics, q = queue.statistics, p = window.pictureStatistics
            func ms(_ ns: Int64?) -> Double? { ns.map { Double($0) / 1e6 } }
            let stats = Stats(host: options.peerKey, mode: (s.lastMode ?? session.welcome.mode).description, codec: stream.codec.rawValue,
                              decoder: decoderName, pictureFormat: pictureFormat.withLock { $0 }.map(Self.formatDescription),
                              renderer: window.statistics.renderer, seconds: elapsed,
                              framesSentByHost: frames.withLock { $0.span }, framesReceived: s.accessUnits, framesDecoded: q.pictures,
                              framesPresented: p.presented, presentCadenceHz: p.cadence, framesReplaced: p.replaced, framesSkipped: q.skipped, decodeErrors: q.errors,
                              decoderOverflow: q.overflowed, decoderSuperseded: q.superseded,
                              captureToPresentMsP50: p.latencyP50Milliseconds, captureToPresentMsP95: p.latencyP95Milliseconds,
                              captureToReceiptMsP50: ms(s.latency.percentile(50)), captureToReceiptMsP95: ms(s.latency.percentile(95)),
                              clockOffsetUs: Double(s.clockOffsetNs) / 1000, fecRecoveredShards: s.receiver.fecRecoveredShards,
                              unrecoverableFrames: s.receiver.framesLost, keyframeRequests: s.keyframeRequests + q.keyframeRequests,
                              lastPresentedFrame: p.lastPresentedFrame, audio: audio?.statistics,
                              microphone: microphone?.statistics, speedTest: speedTest.last, ended: ended)
            if let statsJSON {
                do { try Data(jsonString(stats, pretty: true).utf8).write(to: URL(fileURLWithPath: statsJSON)) } catch {
                    throw CommandFailure(message: "cannot write \(statsJSON): \(error.localizedDescription)")
                }
            }
            if let failure { throw failure }
            if let first = q.firstError, !global.quiet { FileHandleOutput.stderr("farcast: note: the decoder refused \(q.errors) access units (first: \(first))\n") }
            if global.json {
                try printJSON(stats)
            } else if !global.quiet {
                print(String(format: "%d frames presented of %llu sent by the host in %.1f s; capture→present p50 %@ p95 %@ ms",
                             stats.framesPresented, stats.framesSentByHost, elapsed,
                             stats.captureToPresentMsP50.map { String(format: "%.1f", $0) } ?? "-",
                             stats.captureToPresentMsP95.map { String(format: "%.1f", $0) } ?? "-"))
            }
        } }
    }

    /// F8 → Speed test: the host pauses the picture and bursts probe filler for two seconds at
    /// four times the stream's bitrate (at least 200 Mbit/s); the window shows what arrived and
    /// asks which bitrate to use, offering 70 % of the goodput. Nil when the host ran none.
    static func runSpeedTest(client: PunktfunkClient, stream: VideoStreamSession, window: ViewerWindow) async -> Stats.SpeedTest? {
        let current = stream.statistics.bitrateKbps
        let target = StreamMenu.speedTestTargetKbps(current: current)
        let result: SpeedTestResult
        do {
            result = try await client.speedTest(targetKbps: target, durationMs: 2000) {
                let r = stream.statistics.receiver
                return (r.probePackets, r.probeBytes)
            }
        } catch {
            _ = await window.ask("The speed test failed: \(describe(error)).\nReturn or Esc to go on.", secret: false)
            return nil
        }
        guard !result.isEmpty else {
            _ = await window.ask("The host ran no speed test (it is busy, or runs them only for clients that ask with PROBE_SEQ).\nReturn or Esc to go on.", secret: false)
            return nil
        }
        var outcome = Stats.SpeedTest(targetKbps: target, goodputKbps: result.goodputKbps, linkLoss: result.linkLoss,
                                      recommendedKbps: result.recommendedKbps)
        let prompt = String(format: "Speed test: %.0f Mbit/s arrived of %.0f sent, %.2f %% lost.\nBitrate in Mbit/s: Return for the recommended %.0f, Esc keeps %.0f.",
                            result.goodputKbps / 1000, Double(target) / 1000, result.linkLoss * 100,
                            Double(result.recommendedKbps) / 1000, Double(current) / 1000)
        // Until the answer is a number in range (or cancelled).
        var ask = prompt
        while let answer = await window.ask(ask, secret: false) {
            let text = answer.trimmingCharacters(in: .whitespaces)
            let kbps: UInt32?
            if text.isEmpty { kbps = max(1000, result.recommendedKbps) } else if let mbps = Double(text), mbps >= 1, mbps <= 3000 { kbps = UInt32(mbps * 1000) } else { kbps = nil }
            if let kbps {
                client.send(.setBitrate(kbps: kbps))
                outcome.appliedKbps = kbps
                break
            }
            ask = prompt + "\n'\(text)' is not a bitrate between 1 and 3000 Mbit/s."
        }
        return outcome
    }

    static func codecBits(_ codec: VideoCodec) -> Hello.Codecs {
        switch codec {
        case .hevc: return .hevc
        case .h264: return .h264
        case .av1: return .av1
        }
    }

    /// The stream's lines in the statistics overlay (F8 → Statistics, or --hud), below the window's own.
    /// What the pictures are and how the window shows them (it takes only 8-bit 4:2:0).
    static func formatDescription(_ layout: PictureLayout) -> String {
        switch layout {
        case .i420, .nv12: return "8-bit 4:2:0"
        case .i420p10, .p010: return "10-bit 4:2:0, shown at 8 bits"
        case .i444: return "8-bit 4:4:4, shown at 4:2:0"
        case .i444p10: return "10-bit 4:4:4, shown at 8-bit 4:2:0"
        }
    }

    static func hudLines(_ s: VideoStreamSession.Statistics, _ q: VideoDecodeQueue.Statistics, _ p: PictureStatistics, decoder: String,
                         rate: (fps: Double, mbps: Double)) -> [String] {
        func ms(_ ns: Int64?) -> String { ns.map { String(format: "%.1f", Double($0) / 1e6) } ?? "–" }
        func ms(_ v: Double?) -> String { v.map { String(format: "%.1f", $0) } ?? "–" }
        return [
            String(format: "%.1f fps shown  %.1f Mbit/s received", rate.fps, rate.mbps),
            "\(decoder)  decoded \(q.pictures)  shown \(p.presented)  replaced \(p.replaced)  skipped \(q.skipped)",
            "FEC repaired \(s.receiver.fecRecoveredShards) shards  lost \(s.receiver.framesLost) frames  \(s.bitrateKbps / 1000) Mbit/s asked",
            "capture→receipt p50 \(ms(s.latency.percentile(50))) p95 \(ms(s.latency.percentile(95))) ms",
            "capture→present p50 \(ms(p.latencyP50Milliseconds)) p95 \(ms(p.latencyP95Milliseconds)) ms",
        ]
    }
}

/// The stream's own items in the window's menu (F8): another mode (Reconfigure: the host answers
/// with an IDR at that size, and the window follows it) and the bitrate a quarter down or up.
enum StreamMenu {
    static let modes = [StreamMode(width: 1280, height: 720, refreshHz: 60), StreamMode(width: 1920, height: 1080, refreshHz: 60),
                        StreamMode(width: 2560, height: 1440, refreshHz: 60), StreamMode(width: 3840, height: 2160, refreshHz: 60)]
    static let lower = "Bitrate: a quarter lower"
    static let higher = "Bitrate: a quarter higher"
    static let microphone = "Microphone on/off"
    static let speedTest = "Speed test"

    static func label(_ mode: StreamMode) -> String { "Mode: \(mode)" }

    static func actions(current: StreamMode) -> [String] {
        modes.filter { $0 != current }.map(label) + [lower, higher, speedTest]
    }

    /// What a speed test asks the host to send: four times the stream's bitrate, at least
    /// 200 Mbit/s and at most the protocol's 3 Gbit/s, so the link's ceiling is what it finds.
    static func speedTestTargetKbps(current: UInt32) -> UInt32 {
        min(3_000_000, max(200_000, current.multipliedReportingOverflow(by: 4).overflow ? .max : current * 4))
    }

    /// What choosing the item labelled `label` asks the host for.
    static func request(_ label: String, bitrateKbps: UInt32) -> ControlMessage? {
        if let mode = modes.first(where: { label == Self.label($0) }) { return .reconfigure(mode) }
        let current = max(bitrateKbps, 1000)
        switch label {
        case lower: return .setBitrate(kbps: max(1000, current / 4 * 3))
        case higher: return .setBitrate(kbps: min(3_000_000, current / 4 * 5))
        default: return nil
        }
    }
}

/// One speed test at a time from the menu, and the last one's outcome.
final class SpeedTestSlot: Sendable {
    private let state = Mutex<(running: Bool, last: PunktfunkConnectCommand.Stats.SpeedTest?)>((false, nil))

    /// False when one is already running.
    func begin() -> Bool { state.withLock { s in defer { s.running = true }; return !s.running } }
    func end(with outcome: PunktfunkConnectCommand.Stats.SpeedTest?) { state.withLock { $0 = (false, outcome ?? $0.last) } }
    var last: PunktfunkConnectCommand.Stats.SpeedTest? { state.withLock { $0.last } }
}

/// The first and last frame number the stream delivered: how many frames the host sent in
/// between, received or not.
struct FrameNumbers {
    private var first: UInt32?
    private var last: UInt32?

    mutating func saw(_ index: UInt32) {
        if first == nil { first = index }
        if let l = last, Int32(bitPattern: index &- l) <= 0 { return }
        last = index
    }

    var span: UInt64 {
        guard let first, let last else { return 0 }
        return UInt64(last &- first) + 1
    }
}

/// A decoded picture as the window takes it (the two modules do not know each other).
final class StreamPicture: ViewerPicture {
    let picture: DecodedPicture
    init(_ picture: DecodedPicture) { self.picture = picture }
    var width: Int { picture.width }
    var height: Int { picture.height }
    var layout: ViewerPictureLayout { picture.layout == .i420 ? .i420 : .nv12 }
    var colour: ViewerPictureColour {
        let c = picture.colour
        let matrix: ViewerPictureColour.Matrix = c.matrix == .bt601 ? .bt601 : c.matrix == .bt2020 ? .bt2020 : .bt709
        return ViewerPictureColour(matrix: matrix, fullRange: c.fullRange)
    }
    func withPlanes<R>(_ body: ([UnsafePointer<UInt8>], [Int]) throws -> R) rethrows -> R { try picture.withPlanes(body) }
}

/// The window's input as punktfunk input events: keys as Windows virtual keys (from the
/// physical key's USB usage, else the keysym), the pointer absolute in the stream's pixels (or
/// relative in capture mode), buttons as presses and releases, the wheel in WHEEL_DELTA steps.
struct PunktfunkInputMapper {
    private var buttons: UInt16 = 0
    private var lastPosition: (x: Int, y: Int)?
    private var pointer = PointerAccumulator()
    private var modifiers: KeyModifiers = []
    /// Virtual keys down, so a release is sent only for what was pressed.
    private var held: Set<UInt8> = []
    /// The window's pad forwarded as the host's pad 0 (the first to arrive; the next one after it leaves).
    private(set) var forwardedPad: Int32?
    private let gamepadType: PunktfunkConnectCommand.Gamepad
    private var pad: PadForwarder

    init(gamepadType: PunktfunkConnectCommand.Gamepad = .auto, wholePadState: Bool = false) {
        self.gamepadType = gamepadType
        pad = PadForwarder(pad: 0, sendsWholeState: wholePadState)
    }

    /// The datagrams that carry `input` to the host.
    mutating func map(_ input: ViewerInput, streamWidth: Int, streamHeight: Int) -> [[UInt8]] {
        if case .gamepad(let event) = input { return gamepad(event) }
        return events(input, streamWidth: streamWidth, streamHeight: streamHeight).map(\.datagram)
    }

    private mutating func events(_ input: ViewerInput, streamWidth: Int, streamHeight: Int) -> [InputEvent] {
        switch input {
        case .key(let key, let down, let usage):
            let vk = usage.flatMap { KeyMap.virtualKey(usbUsage: $0) } ?? {
                switch key {
                case .keysym(let sym): return KeyMap.virtualKey(keysym: sym)
                case .character(let c): return KeyMap.virtualKey(keysym: c.value < 0x100 ? c.value : 0x0100_0000 | c.value)
                }
            }()
            guard let vk else { return [] }
            return press(vk, down: down)
        case .pointer(let x, let y, let newButtons):
            var out: [InputEvent] = []
            if lastPosition.map({ $0 != (x, y) }) ?? true {
                lastPosition = (x, y)
                out.append(.mouseMoveAbsolute(x: Int32(clamping: x), y: Int32(clamping: y),
                                              width: UInt16(clamping: streamWidth), height: UInt16(clamping: streamHeight)))
            }
            return out + buttonChanges(to: newButtons)
        case .pointerMotion(let dx, let dy, let newButtons):
            return (pointer.move(dx: dx, dy: dy).map { [$0] } ?? []) + buttonChanges(to: newButtons)
        case .command(.pressKeys(let keysyms)):
            let vks = keysyms.compactMap { KeyMap.virtualKey(keysym: $0) }
            return vks.flatMap { press($0, down: true) } + vks.reversed().flatMap { press($0, down: false) }
        case .gamepad, .clipboard, .resizeRemote, .command, .closed:
            return []
        }
    }

    /// One forwarded pad (`PadForwarder`): arrival with the type the host should emulate,
    /// buttons and axes (sticks with y up, as XInput has them; triggers 0…255), the touchpad,
    /// motion, removal.
    private mutating func gamepad(_ event: ViewerGamepadEvent) -> [[UInt8]] {
        guard gamepadType != .off else { return [] }
        switch event {
        case .arrived(let id, _, let kind):
            guard forwardedPad == nil else { return [] }
            forwardedPad = id
            let type: UInt32
            switch gamepadType {
            case .xbox360: type = 1
            case .dualsense: type = 2
            case .auto, .off:
                switch kind {
                case .dualSense: type = 2
                case .xboxOne: type = 3
                case .dualShock4: type = 4
                case .xbox360, .nintendo, .other: type = 1
                }
            }
            return pad.datagrams(for: .arrival(type: type))
        case .removed(let id):
            guard id == forwardedPad else { return [] }
            forwardedPad = nil
            return pad.datagrams(for: .removal)
        case .button(let id, let button, let down):
            guard id == forwardedPad, let bit = Self.bit(button) else { return [] }
            return pad.datagrams(for: .button(bit, pressed: down))
        case .axis(let id, let axis, let value):
            guard id == forwardedPad else { return [] }
            let report: PadForwarder.Report
            switch axis {
            case .leftX: report = .axis(.leftStickX, Int32(value))
            case .leftY: report = .axis(.leftStickY, -max(-32767, Int32(value)))
            case .rightX: report = .axis(.rightStickX, Int32(value))
            case .rightY: report = .axis(.rightStickY, -max(-32767, Int32(value)))
            case .leftTrigger: report = .axis(.leftTrigger, Int32(max(0, value)) * 255 / 32767)
            case .rightTrigger: report = .axis(.rightTrigger, Int32(max(0, value)) * 255 / 32767)
            }
            return pad.datagrams(for: report)
        case .touch(let id, let finger, let down, let x, let y):
            guard id == forwardedPad, (0...255).contains(finger) else { return [] }
            return pad.datagrams(for: .touch(finger: UInt8(finger), active: down, x: Double(x), y: Double(y)))
        case .sensor(let id, let sensor, let x, let y, let z):
            guard id == forwardedPad else { return [] }
            switch sensor {
            case .gyro: return pad.datagrams(for: .gyro(x: Double(x), y: Double(y), z: Double(z)))
            case .accelerometer: return pad.datagrams(for: .accelerometer(x: Double(x), y: Double(y), z: Double(z)))
            }
        }
    }

    static func bit(_ button: ViewerGamepadButton) -> GamepadButtons? {
        switch button {
        case .a: .a
        case .b: .b
        case .x: .x
        case .y: .y
        case .back: .back
        case .guide: .guide
        case .start: .start
        case .leftStick: .leftStick
        case .rightStick: .rightStick
        case .leftShoulder: .leftShoulder
        case .rightShoulder: .rightShoulder
        case .dpadUp: .dpadUp
        case .dpadDown: .dpadDown
        case .dpadLeft: .dpadLeft
        case .dpadRight: .dpadRight
        case .misc: .misc
        case .paddle1: .paddle1
        case .paddle2: .paddle2
        case .paddle3: .paddle3
        case .paddle4: .paddle4
        case .touchpad: .touchpad
        }
    }

    private mutating func press(_ vk: UInt8, down: Bool) -> [InputEvent] {
        let flag: KeyModifiers? = switch vk {
        case 0x10, 0xA0, 0xA1: .shift
        case 0x11, 0xA2, 0xA3: .control
        case 0x12, 0xA4, 0xA5: .alt
        case 0x5B, 0x5C: .meta
        default: nil
        }
        if down {
            held.insert(vk)
            if let flag { modifiers.insert(flag) }
            return [.keyDown(virtualKey: UInt32(vk), modifiers: modifiers)]
        }
        guard held.remove(vk) != nil else { return [] }
        if let flag { modifiers.remove(flag) }
        return [.keyUp(virtualKey: UInt32(vk), modifiers: modifiers)]
    }

    /// Presses and releases for the buttons that changed (bit 0 left, 1 middle, 2 right, 3/4
    /// wheel up/down clicks, 7/8 back/forward), and a WHEEL_DELTA step per wheel click.
    private mutating func buttonChanges(to newButtons: UInt16) -> [InputEvent] {
        var out: [InputEvent] = []
        let pressed = newButtons & ~buttons, released = buttons & ~newButtons
        let map: [(UInt16, MouseButton)] = [(1 << 0, .left), (1 << 1, .middle), (1 << 2, .right), (1 << 7, .back), (1 << 8, .forward)]
        for (bit, button) in map {
            if pressed & bit != 0 { out.append(.mouseButtonDown(button)) }
            if released & bit != 0 { out.append(.mouseButtonUp(button)) }
        }
        if pressed & (1 << 3) != 0, let up = pointer.scroll(notches: 1) { out.append(up) }
        if pressed & (1 << 4) != 0, let down = pointer.scroll(notches: -1) { out.append(down) }
        buttons = newButtons
        return out
    }
}
