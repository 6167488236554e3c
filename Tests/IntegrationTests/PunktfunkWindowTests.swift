import COpus
import FarcastSupport
import Foundation
import Punktfunk
import Testing

/// `farcast punktfunk connect`: the stream in a window on Xvfb, checked from the outside. The
/// stand-in host (scripts/punktfunk-host; no real host builds here) paints each picture's number
/// in its sequence as a bar code across the top (scripts/punktfunk-host/media.py) and logs which
/// picture every access unit carries; xwd reads the window back, xdotool types and clicks into it
/// as a person's keyboard and mouse (XTEST), and the host logs the input datagrams that arrive.
@Suite(.tags(.timing), .serialized, .timeLimit(.minutes(5)))
struct PunktfunkWindowTests {
    let folder: TemporaryFolder
    static let mode = "640x360x30"

    init() throws {
        folder = try TemporaryFolder()
    }

    /// The bar code of a capture: the picture's number, or why it is not a clean picture (a cell
    /// neither black nor white, or halves that disagree: a corrupt or torn picture).
    static func pictureNumber(_ image: XWDImage) -> Result<Int, Corrupt> {
        // The strip is bar_rows(360) = 22 rows of the 360 (scaled with the window): 16 cells across.
        let rows = Double(image.height) * 22 / 360
        let top = Int(rows * 0.25), bottom = Int(rows * 0.75)
        func luma(cell: Int, row: Int) -> Int {
            let x = Int((Double(cell) + 0.5) * Double(image.width) / 16)
            let p = image.pixels[row * image.width + x]
            let sum = Int((p >> 16) & 0xFF) + Int((p >> 8) & 0xFF) + Int(p & 0xFF)
            return sum / 3
        }
        var number = 0
        for bit in 0..<16 {
            let a = luma(cell: bit, row: top), b = luma(cell: bit, row: bottom)
            guard (a > 190 && b < 65) || (a < 65 && b > 190) else {
                // A window still black all along the strip has no picture yet.
                let blank = (0..<16).allSatisfy { luma(cell: $0, row: top) < 65 && luma(cell: $0, row: bottom) < 65 }
                return .failure(Corrupt(description: "cell \(bit) reads \(a) over \(b)", blank: blank))
            }
            if a > 128 { number |= 1 << bit }
        }
        return .success(number)
    }

    struct Corrupt: Error, CustomStringConvertible {
        var description: String
        /// Black all along the strip: no picture shown yet (only allowed before the first one).
        var blank = false
    }

    /// Runs `connect` against `host` on `screen`, capturing the window every 150 ms while it runs.
    func watch(_ host: PunktfunkStandInHost, on screen: ViewerScreen, seconds: Int, extra: [String] = ["--audio-device", "none"],
               environment: [String: String] = [:],
               during: (String) throws -> Void = { _ in }) throws -> (captures: [Result<Int, Corrupt>], sizes: Set<String>, stats: [String: Any], log: String) {
        var env = screen.environment.merging(environment) { $1 }
        env["XDG_STATE_HOME"] = folder.path + "/client"
        let statsFile = folder.path + "/stats-\(UUID().uuidString.prefix(6)).json"
        let viewer = try BackgroundProcess(try farcastBinary(), ["punktfunk", "connect", host.address, "--tofu", "--mode", Self.mode,
                                                                  "--duration", "\(seconds)", "--stats-json", statsFile] + extra,
                                           environment: env, logName: "farcast-connect")
        defer { viewer.stop() }
        let window = try screen.viewerWindow(viewer)
        try during(window)
        var captures: [Result<Int, Corrupt>] = []
        var sizes: Set<String> = []
        while viewer.isRunning {
            guard let image = try? XWDImage.capture(window: window, of: screen) else { break }
            sizes.insert("\(image.width)x\(image.height)")
            captures.append(Self.pictureNumber(image))
            usleep(150_000)
        }
        #expect(viewer.waitForExit(timeout: 20) && viewer.terminationStatus == 0, "\(viewer.log)")
        // Before the first picture the window is black: those captures say nothing yet.
        if let first = captures.firstIndex(where: { if case .failure(let c) = $0 { !c.blank } else { true } }) {
            captures.removeFirst(first)
        }
        let data = try Data(contentsOf: URL(fileURLWithPath: statsFile))
        let stats = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        return (captures, sizes, stats, viewer.log)
    }

    /// The pictures the host sent, in sending order.
    static func sentPictures(_ host: PunktfunkStandInHost) -> [(frame: Int, picture: Int)] {
        host.events("au").compactMap { e in
            guard let f = e["frame_index"] as? Int, let p = e["picture"] as? Int else { return nil }
            return (f, p)
        }
    }

    /// The shown numbers appear in the host's sending order (shown ones may be skipped between
    /// captures, never out of order or invented). Returns the frame index of the last one matched.
    static func expectInSendingOrder(_ shown: [Int], _ sent: [(frame: Int, picture: Int)], _ what: String) -> Int? {
        var at = 0
        var lastFrame: Int?
        for number in shown {
            // The same picture may be captured twice; otherwise find it later in the sequence.
            if let last = lastFrame, sent[at - 1].frame == last, sent[at - 1].picture == number { continue }
            guard let found = sent[at...].firstIndex(where: { $0.picture == number }) else {
                Issue.record("\(what): picture \(number) shown out of order (shown: \(shown))")
                return nil
            }
            lastFrame = sent[found].frame
            at = found + 1
        }
        return lastFrame
    }

    @Test func theWindowShowsEveryPictureInOrderAndCleanAlsoUnderFivePercentLoss() throws {
        let screen = try ViewerScreen()
        for loss in ["0", "5"] {
            let host = try PunktfunkStandInHost(stateDir: folder.path + "/host-\(loss)", arguments: ["--mode", Self.mode, "--loss", loss], folder: folder)
            defer { host.stop() }
            let run = try watch(host, on: screen, seconds: 6)
            let shown = run.captures.compactMap { try? $0.get() }
            let corrupt = run.captures.compactMap { if case .failure(let c) = $0 { c.description } else { nil } }
            #expect(corrupt.isEmpty, "loss \(loss)%: corrupt captures: \(corrupt)")
            #expect(shown.count >= 15, "loss \(loss)%: only \(shown.count) captures")
            // At 1:1 (the window fits the picture).
            #expect(run.sizes == ["640x360"], "loss \(loss)%: \(run.sizes)")
            let sent = Self.sentPictures(host)
            _ = Self.expectInSendingOrder(shown, sent, "loss \(loss)%")
            // The pictures moved on: the last capture is not the first picture.
            #expect(Set(shown).count >= 10, "loss \(loss)%: \(shown)")
            let s = run.stats
            #expect(s["decode_errors"] as? Int == 0, "\(s)")
            let sentByHost = s["frames_sent_by_host"] as? Int ?? 0, presented = s["frames_presented"] as? Int ?? 0
            #expect(sentByHost >= 150 && presented > 0, "\(s)")
            // The host's own numbering agrees with its log.
            #expect(abs(sentByHost - sent.count) <= 5, "stats say \(sentByHost) sent, the host logged \(sent.count)")
            if loss == "5" { #expect((s["fec_recovered_shards"] as? Int ?? 0) > 0, "\(s)") }
            #expect(s["capture_to_present_ms_p50"] as? Double != nil, "\(s)")
            // Without --max-fps the cadence is the display's (Xvfb does not say: 60).
            #expect(s["present_cadence_hz"] as? Double == 60, "\(s)")
        }
    }

    /// A client that offers 10-bit or 4:4:4 gets it from a host told to send it (Main 10,
    /// Main 4:4:4); the window, which takes only 8-bit 4:2:0, shows every picture clean and in order.
    @Test(arguments: [("10", "420", "10-bit 4:2:0, shown at 8 bits"), ("8", "444", "8-bit 4:4:4, shown at 4:2:0")])
    func tenBitAndFourFourFourPicturesAreShownCleanAndInOrder(bitDepth: String, chroma: String, format: String) throws {
        let screen = try ViewerScreen()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", Self.mode, "--bit-depth", bitDepth, "--chroma", chroma],
                                            folder: folder)
        defer { host.stop() }
        let run = try watch(host, on: screen, seconds: 5, extra: ["--audio-device", "none", "--bit-depth", bitDepth, "--chroma", chroma])
        let welcome = try #require(host.events("welcome").first)
        #expect(welcome["bit_depth"] as? Int == Int(bitDepth) && welcome["chroma_format_idc"] as? Int == (chroma == "444" ? 3 : 1), "\(welcome)")
        #expect(run.stats["picture_format"] as? String == format, "\(run.stats)")
        let shown = run.captures.compactMap { try? $0.get() }
        let corrupt = run.captures.compactMap { if case .failure(let c) = $0 { c.description } else { nil } }
        #expect(corrupt.isEmpty && shown.count >= 10, "corrupt: \(corrupt) of \(run.captures.count)")
        _ = Self.expectInSendingOrder(shown, Self.sentPictures(host), "\(bitDepth)-bit \(chroma)")
        #expect(Set(shown).count >= 8 && run.stats["decode_errors"] as? Int == 0, "\(shown) \(run.stats)")
    }

    /// The present pacer: at --max-fps 10 a 30 fps stream is shown ten times a second, the
    /// pictures in between replaced in the slot (dropped, never queued), every capture clean.
    @Test func aPresentCadenceBelowTheStreamsRateShowsThatManyPicturesAndDropsTheRest() throws {
        let screen = try ViewerScreen()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", Self.mode], folder: folder)
        defer { host.stop() }
        let run = try watch(host, on: screen, seconds: 6, extra: ["--audio-device", "none", "--max-fps", "10"])
        let s = run.stats
        #expect(s["present_cadence_hz"] as? Double == 10, "\(s)")
        let presented = s["frames_presented"] as? Int ?? 0, decoded = s["frames_decoded"] as? Int ?? 0, replaced = s["frames_replaced"] as? Int ?? 0
        let seconds = s["seconds"] as? Double ?? 0
        // Ten a second from the first picture on (the stream starts within the first second or so;
        // the second picture may come half a period early, the pacer's tolerance).
        #expect(presented <= Int(seconds * 10) + 2 && presented >= Int((seconds - 2) * 10), "\(presented) shown in \(seconds) s: \(s)")
        // Every picture decoded was shown or replaced (the last one may still wait).
        #expect(decoded >= 2 * presented && abs(decoded - presented - replaced) <= 1, "decoded \(decoded), shown \(presented), replaced \(replaced)")
        let corrupt = run.captures.compactMap { if case .failure(let c) = $0 { c.description } else { nil } }
        #expect(corrupt.isEmpty, "\(corrupt)")
        _ = Self.expectInSendingOrder(run.captures.compactMap { try? $0.get() }, Self.sentPictures(host), "at 10 fps")
    }

    @Test func afterAnUnrecoverableLossTheWindowFreezesThenRecoversAtTheNextKeyframe() throws {
        let screen = try ViewerScreen()
        // Everything lost from 2.0 s to 2.5 s after the first datagram: no FEC can repair that.
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", Self.mode, "--loss-schedule", "2:100,2.5:0"], folder: folder)
        defer { host.stop() }
        let run = try watch(host, on: screen, seconds: 7)
        let corrupt = run.captures.compactMap { if case .failure(let c) = $0 { c.description } else { nil } }
        #expect(corrupt.isEmpty, "corrupt captures (a picture built on lost references): \(corrupt)")
        let shown = run.captures.compactMap { try? $0.get() }
        let sent = Self.sentPictures(host)
        let lastShownFrame = Self.expectInSendingOrder(shown, sent, "outage")
        // The host was asked for a keyframe and restarted its sequence at its IDR; the window
        // shows pictures sent after that.
        let keyframe = try #require(host.events("keyframe_sent").first?["frame_index"] as? Int, "no keyframe was asked for: \(run.log)")
        #expect((lastShownFrame ?? 0) > keyframe, "the window never got past the outage: shown \(shown), keyframe at frame \(keyframe)")
        let s = run.stats
        // Frames that arrived after the gap, built on lost ones, were held back, not decoded.
        #expect((s["frames_skipped"] as? Int ?? 0) > 0 || (s["unrecoverable_frames"] as? Int ?? 0) > 0, "\(s)")
        #expect(s["decode_errors"] as? Int == 0, "\(s)")
        #expect((s["unrecoverable_frames"] as? Int ?? 0) > 0, "\(s)")
    }

    @Test func keyboardAndMouseInTheWindowArriveAtTheHostAsVirtualKeysAndPointerEvents() throws {
        let screen = try ViewerScreen()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", Self.mode], folder: folder)
        defer { host.stop() }
        var marks: [String: Int] = [:]
        func mark(_ name: String) { usleep(300_000); marks[name] = host.events("input").count }
        _ = try watch(host, on: screen, seconds: 7) { window in
            try screen.x("xdotool", ["windowfocus", "--sync", window], package: "xdotool")
            // Not captured: keys go to the host, the pointer is absolute.
            try screen.x("xdotool", ["type", "--delay", "40", "ab"], package: "xdotool")
            try screen.x("xdotool", ["key", "shift+Return"], package: "xdotool")
            try screen.x("xdotool", ["mousemove", "--window", window, "320", "90"], package: "xdotool")
            mark("before capture")
            // A click captures the mouse (not sent itself); then motion is relative, clicks and the wheel go through.
            try screen.x("xdotool", ["click", "1"], package: "xdotool")
            mark("captured")
            try screen.x("xdotool", ["mousemove_relative", "--", "30", "20"], package: "xdotool")
            usleep(200_000)
            try screen.x("xdotool", ["click", "1"], package: "xdotool")
            try screen.x("xdotool", ["click", "4"], package: "xdotool")
            // The chord frees it: what it held (Ctrl, Alt, Shift) is released at the host; absolute again.
            try screen.x("xdotool", ["key", "ctrl+alt+shift+z"], package: "xdotool")
            mark("released")
            try screen.x("xdotool", ["mousemove", "--window", window, "100", "50"], package: "xdotool")
            mark("end")
        }
        let inputs = host.events("input").compactMap { ($0["hex"] as? String).flatMap { InputEvent(datagram: Self.bytes(hex: $0)) } }
        func slice(_ from: String, _ to: String) -> [InputEvent] { Array(inputs[(marks[from] ?? 0)..<min(inputs.count, marks[to] ?? inputs.count)]) }
        let before = Array(inputs.prefix(marks["before capture"] ?? 0))
        let keys = before.compactMap { e -> String? in
            switch e {
            case .keyDown(let vk, let m): return "down \(vk)\(m.contains(.shift) ? "+shift" : "")"
            case .keyUp(let vk, _): return "up \(vk)"
            default: return nil
            }
        }
        // A = 0x41, B = 0x42, Shift = 0xA0 (left), Return = 0x0D; xdotool lets go of shift first.
        #expect(keys == ["down 65", "up 65", "down 66", "up 66", "down 160+shift", "down 13+shift", "up 160", "up 13"], "\(keys)")
        #expect(before.contains(.mouseMoveAbsolute(x: 320, y: 90, width: 640, height: 360)), "\(before)")
        // The capturing click sent nothing.
        #expect(slice("before capture", "captured").isEmpty, "\(slice("before capture", "captured"))")
        let captured = slice("captured", "released")
        var moved = (x: Int32(0), y: Int32(0))
        for case .mouseMove(let dx, let dy) in captured { moved.x += dx; moved.y += dy }
        #expect(moved.x == 30 && moved.y == 20, "relative motion while captured: \(captured)")
        // Until the chord (after it the pointer is absolute again, from where it is).
        let beforeChord = captured.prefix { if case .keyDown = $0 { false } else { true } }
        #expect(!beforeChord.contains { if case .mouseMoveAbsolute = $0 { true } else { false } }, "\(captured)")
        let buttons = captured.filter { if case .mouseButtonDown = $0 { true } else if case .mouseButtonUp = $0 { true } else { false } }
        #expect(buttons == [.mouseButtonDown(.left), .mouseButtonUp(.left)], "\(captured)")
        #expect(captured.contains(.scroll(120)), "\(captured)")
        // Ctrl (0xA2), Alt (0xA4) and Shift (0xA0) went down with the chord and were released.
        let downs = Set(captured.compactMap { if case .keyDown(let vk, _) = $0 { vk } else { nil } })
        let ups = Set(captured.compactMap { if case .keyUp(let vk, _) = $0 { vk } else { nil } })
        #expect(downs == [0xA2, 0xA4, 0xA0] && ups == downs, "the chord: \(captured)")
        #expect(!downs.contains(0x5A), "Z frees the mouse; it is not sent")
        #expect(slice("released", "end").contains(.mouseMoveAbsolute(x: 100, y: 50, width: 640, height: 360)), "\(slice("released", "end"))")
    }

    @Test func aModeChangeFromTheMenuResizesThePicture() throws {
        let screen = try ViewerScreen(geometry: "1600x1000")
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", Self.mode], folder: folder)
        defer { host.stop() }
        let run = try watch(host, on: screen, seconds: 7) { window in
            try screen.x("xdotool", ["windowfocus", "--sync", window], package: "xdotool")
            // F8, then down to "Mode: 1280x720x60" (the ninth item: full screen, view only, scaling,
            // keyboard grab, relative pointer, statistics, Ctrl+Alt+Del, F8, then the modes) and Return.
            try screen.x("xdotool", ["key", "F8"], package: "xdotool")
            try screen.x("xdotool", ["key", "--delay", "50"] + Array(repeating: "Down", count: 8) + ["Return"], package: "xdotool")
        }
        #expect(host.control("reconfigure").count == 1, "\(host.events("control"))")
        // The window followed the picture: 640x360 first, then 1280x720, every capture clean.
        #expect(run.sizes == ["640x360", "1280x720"], "\(run.sizes)")
        let corrupt = run.captures.compactMap { if case .failure(let c) = $0 { c.description } else { nil } }
        #expect(corrupt.isEmpty, "\(corrupt)")
        #expect(run.stats["mode"] as? String == "1280x720x60", "\(run.stats)")
        #expect(host.events("au").last?["width"] as? Int == 1280)
    }

    /// F8 → Speed test: the host pauses the picture and bursts probe filler; the window shows
    /// the result and asks for a bitrate; Return takes the recommended one, which goes to the
    /// host as SetBitrate; the picture comes back.
    @Test func aSpeedTestFromTheMenuMeasuresTheLinkAndSetsTheBitrateItRecommends() throws {
        let screen = try ViewerScreen()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", Self.mode], folder: folder)
        defer { host.stop() }
        let run = try watch(host, on: screen, seconds: 9) { window in
            try screen.x("xdotool", ["windowfocus", "--sync", window], package: "xdotool")
            // F8, then down to "Speed test" (the fifteenth item: the eight built-in ones before the
            // stream's, the four modes other than 640x360, the bitrate down and up, then it) and Return.
            try screen.x("xdotool", ["key", "F8"], package: "xdotool")
            try screen.x("xdotool", ["key", "--delay", "50"] + Array(repeating: "Down", count: 14) + ["Return"], package: "xdotool")
            try host.waitFor("the probe's result") { e in e.contains { $0["event"] as? String == "probe_result" } }
            // The result on the reliable stream, half a second's grace for filler in flight, then the question.
            usleep(1_500_000)
            try screen.x("xdotool", ["key", "Return"], package: "xdotool")
        }
        let request = try #require(host.control("probe_request").first, "\(host.events("control"))")
        let result = try #require(run.stats["speed_test"] as? [String: Any], "\(run.stats)")
        #expect(request["target_kbps"] as? Int == result["target_kbps"] as? Int && request["duration_ms"] as? Int == 2000)
        // What arrived, measured against what the host says it sent in the same run.
        let sent = try #require(host.events("probe_result").first)
        let sentKbps = Double(sent["bytes_sent"] as? Int ?? 0) * 8 / Double(max(1, sent["duration_ms"] as? Int ?? 0))
        let goodput = result["goodput_kbps"] as? Double ?? 0
        #expect(goodput > 0 && goodput <= sentKbps * 1.02, "goodput \(goodput) kbit/s of \(sentKbps) sent")
        #expect((result["link_loss"] as? Double ?? 1) < 0.2, "\(result)")
        // Return took the recommendation (70 % of the goodput), and the host was asked for it.
        let recommended = try #require(result["recommended_kbps"] as? Int)
        #expect(recommended == Int(goodput * 0.7) || recommended == Int(goodput * 0.7) - 1, "\(result)")
        #expect(result["applied_kbps"] as? Int == max(1000, recommended), "\(result)")
        #expect(host.control("set_bitrate").map { $0["kbps"] as? Int } == [max(1000, recommended)], "\(host.events("control"))")
        // The picture came back after the burst: the last capture is a clean picture sent after it.
        let events = host.events()
        let burstEnd = try #require(events.firstIndex { $0["event"] as? String == "probe_result" })
        let after = Set(events[burstEnd...].filter { $0["event"] as? String == "au" }.compactMap { $0["picture"] as? Int })
        guard case .success(let last)? = run.captures.last else { Issue.record("last capture: \(String(describing: run.captures.last))"); return }
        #expect(after.contains(last), "picture \(last) was not sent after the burst")
    }

    /// The overlay's capture→receipt figures (the same numbers `--stats-json` writes) against the
    /// host's own send log: on loopback a unit arrives as its last datagram leaves, so the two
    /// distributions' p50 and p95 agree within 1 ms once the clock offset is applied.
    @Test func theOverlaysLatencyAgreesWithTheHostsSendLogWithinOneMillisecond() throws {
        let screen = try ViewerScreen()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", Self.mode], folder: folder)
        defer { host.stop() }
        let run = try watch(host, on: screen, seconds: 5, extra: ["--audio-device", "none", "--hud", "--hud-corner", "bottom-right"])
        let events = host.events()
        var pts: [Int: Int] = [:]
        for e in events where e["event"] as? String == "au" { if let f = e["frame_index"] as? Int, let p = e["pts_ns"] as? Int { pts[f] = p } }
        let sendNs = events.filter { $0["event"] as? String == "au_sent" }.compactMap { e -> Int? in
            guard let f = e["frame_index"] as? Int, let p = pts[f], let t = e["t_ns"] as? Int else { return nil }
            return t - p
        }.sorted()
        try #require(sendNs.count > 100, "\(sendNs.count) units in the send log")
        // Nearest rank, as the client computes them.
        func percentile(_ p: Double) -> Double { Double(sendNs[min(sendNs.count - 1, max(0, Int((p / 100 * Double(sendNs.count)).rounded(.up)) - 1))]) / 1e6 }
        let p50 = try #require(run.stats["capture_to_receipt_ms_p50"] as? Double), p95 = try #require(run.stats["capture_to_receipt_ms_p95"] as? Double)
        #expect(abs(p50 - percentile(50)) <= 1, "client p50 \(p50) ms, host's send log \(percentile(50)) ms")
        #expect(abs(p95 - percentile(95)) <= 1, "client p95 \(p95) ms, host's send log \(percentile(95)) ms")
        // With the overlay in the bottom-right corner the bar code along the top stays readable.
        let corrupt = run.captures.compactMap { if case .failure(let c) = $0 { c.description } else { nil } }
        #expect(corrupt.isEmpty && run.captures.count > 10, "\(corrupt) of \(run.captures.count)")
    }

    @Test func theStreamsToneReachesAnALSADeviceWithoutGaps() throws {
        let screen = try ViewerScreen()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", Self.mode], folder: folder)
        defer { host.stop() }
        // ALSA's file plugin in front of the null device, named in a private ~/.asoundrc.
        let device = try ALSACaptureDevice(in: folder)
        let run = try watch(host, on: screen, seconds: 6, extra: ["--audio-device", ALSACaptureDevice.name],
                            environment: ["HOME": device.home])
        let audio = try #require(run.stats["audio"] as? [String: Any], "\(run.stats)")
        let bytes = device.captured
        // 5 ms windows of the left channel (S16LE stereo, 48 kHz).
        let frames = bytes.count / 4
        func left(_ f: Int) -> Double { Double(Int16(bitPattern: UInt16(bytes[4 * f]) | UInt16(bytes[4 * f + 1]) << 8)) }
        let rms = stride(from: 0, to: frames - 240, by: 240).map { start in
            (sqrt((start..<(start + 240)).reduce(0) { $0 + left($1) * left($1) } / 240))
        }
        let peak = rms.max() ?? 0
        let first = try #require(rms.firstIndex { $0 > 0.2 * peak }, "no sound reached the device (\(bytes.count) bytes): \(audio)")
        // The host's 440 Hz tone, measured from where the sound starts.
        let tone = LeftChannelTone(bytes, skipping: first * 240 * 4)
        #expect(abs(tone.hertz - 440) < 5, "\(tone)")
        #expect(tone.seconds > 4, "\(tone); \(audio)")
        // Past the first half second (the jitter ring adapting to the stand-in's own stalls —
        // Python, up to 30 ms late — by concealment), no gap: a run of near-silent windows would be
        // the ring running dry.
        let steady = Array(rms.dropFirst(first + 100))
        let quiet = steady.map { $0 < 0.1 * peak }
        var longest = 0, current = 0
        for q in quiet { current = q ? current + 1 : 0; longest = max(longest, current) }
        #expect(longest <= 8, "a gap of \(longest * 5) ms in the sound; \(audio)")
        #expect(Double(quiet.filter { $0 }.count) <= 0.05 * Double(steady.count), "\(quiet.filter { $0 }.count) of \(steady.count) windows nearly silent; \(audio)")
        #expect(audio["decode_errors"] as? Int == 0 && audio["underruns"] as? Int == 0, "\(audio)")
    }

    @Test func theMicrophoneReachesTheHostAsTwentyMillisecondOpusFrames() throws {
        let screen = try ViewerScreen()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", Self.mode], folder: folder)
        defer { host.stop() }
        // A "microphone" that hears a 440 Hz tone: ALSA's file plugin reading a raw file (S16LE
        // stereo, 48 kHz) in front of the null device, named in a private ~/.asoundrc.
        let home = folder.path + "/mic-home", tone = folder.path + "/tone.raw"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        var pcm = [UInt8]()
        for i in 0..<(48000 * 10) {
            let v = UInt16(bitPattern: Int16(8000 * sin(2 * Double.pi * 440 * Double(i) / 48000)))
            pcm += [UInt8(v & 0xFF), UInt8(v >> 8), UInt8(v & 0xFF), UInt8(v >> 8)]
        }
        try Data(pcm).write(to: URL(fileURLWithPath: tone))
        try "pcm.mictest { type file slave.pcm \"null\" infile \"\(tone)\" file \"/dev/null\" format \"raw\" }\n"
            .write(toFile: home + "/.asoundrc", atomically: true, encoding: .utf8)
        let run = try watch(host, on: screen, seconds: 4, extra: ["--audio-device", "none", "--mic", "alsa:mictest"], environment: ["HOME": home])
        let packets = host.events("mic").compactMap { ($0["hex"] as? String).map(Self.bytes(hex:)) }
        #expect(packets.count >= 150, "\(packets.count) microphone datagrams in 4 s; \(run.stats["microphone"] ?? "-")")
        var error: Int32 = 0
        let decoder = try #require(opus_decoder_create(48000, 2, &error))
        defer { opus_decoder_destroy(decoder) }
        var sequences: [UInt32] = [], left: [Int16] = []
        var out = [Int16](repeating: 0, count: 5760 * 2)
        for p in packets {
            let packet = try #require(AudioPacket(datagram: [AudioPacket.tag] + p.dropFirst()), "a 0xCB datagram with the audio layout")
            #expect(p.first == 0xCB)
            sequences.append(packet.sequence)
            let n = packet.opus.withUnsafeBufferPointer { opus_decode(decoder, $0.baseAddress, Int32($0.count), &out, 5760, 0) }
            #expect(n == 960, "a 20 ms frame")
            for i in 0..<max(0, Int(n)) { left.append(out[2 * i]) }
        }
        #expect(sequences == Array(0..<UInt32(sequences.count)), "in order, none missing")
        // The tone, past the encoder's first frames.
        let steady = left.dropFirst(4800)
        var crossings = 0
        for (a, b) in zip(steady, steady.dropFirst()) where (a < 0) != (b < 0) { crossings += 1 }
        let hertz = Double(crossings) / 2 / (Double(steady.count) / 48000)
        #expect(abs(hertz - 440) < 5, "\(hertz) Hz")
    }

    /// No physical pad can be plugged in here (no input devices, no uinput), so the pad is SDL's
    /// virtual controller inside farcast's window, driven by a script (FARCAST_VIRTUAL_GAMEPAD;
    /// see Sources/Viewer/WindowGamepads.swift); everything from SDL's game-controller events on
    /// is the path a real pad takes. Returns the input datagrams the host logged, the rich-input
    /// ones, and the feedback the pad received.
    func drivePad(script: String, hostArguments: [String]) throws -> (inputs: [InputEvent], rich: [RichInput], feedback: String) {
        let screen = try ViewerScreen()
        let host = try PunktfunkStandInHost(stateDir: folder.path + "/host", arguments: ["--mode", Self.mode, "--feedback-at", "2.5"] + hostArguments,
                                            folder: folder)
        defer { host.stop() }
        let scriptFile = folder.path + "/pad-\(UUID().uuidString.prefix(6)).txt"
        try script.write(toFile: scriptFile, atomically: true, encoding: .utf8)
        _ = try watch(host, on: screen, seconds: 5, environment: ["FARCAST_VIRTUAL_GAMEPAD": scriptFile]) { window in
            try screen.x("xdotool", ["windowfocus", "--sync", window], package: "xdotool")
        }
        let inputs = host.events("input").compactMap { ($0["hex"] as? String).flatMap { InputEvent(datagram: Self.bytes(hex: $0)) } }
        let rich = host.events("rich_input").compactMap { ($0["hex"] as? String).flatMap { RichInput(datagram: Self.bytes(hex: $0)) } }
        return (inputs, rich, (try? String(contentsOfFile: scriptFile + ".feedback", encoding: .utf8)) ?? "")
    }

    static let padScript = "800 button a down\n900 button a up\n1000 axis leftX 16000\n1100 axis leftY -20000\n1200 axis rightTrigger 32767\n1300 button dpadUp down\n"

    /// Toward a host without host_caps 0x01, each change goes as its own button or axis event.
    @Test func aControllerDrivesTheHostsPadAndTheHostsRumbleAndLightsComeBackToIt() throws {
        let (inputs, _, feedback) = try drivePad(script: Self.padScript, hostArguments: ["--host-caps", "0"])
        let pad = inputs.filter {
            switch $0 {
            case .gamepadArrival, .gamepadButton, .gamepadAxis, .gamepadRemove, .gamepadState: true
            default: false
            }
        }
        // An Xbox 360 pad (SDL reads the virtual pad's USB ids as one) arrives as the host's pad 0,
        // then A down and up, the left stick right and up (y up on the wire), the right trigger
        // fully in, the d-pad up.
        #expect(Array(pad.prefix(7)) == [
            .gamepadArrival(pad: 0, type: 1),
            .gamepadButton(pad: 0, button: .a, pressed: true), .gamepadButton(pad: 0, button: .a, pressed: false),
            .gamepadAxis(pad: 0, axis: .leftStickX, value: 16000), .gamepadAxis(pad: 0, axis: .leftStickY, value: 20000),
            .gamepadAxis(pad: 0, axis: .rightTrigger, value: 255), .gamepadButton(pad: 0, button: .dpadUp, pressed: true),
        ], "\(pad)")
        // The host's five rumble commands (1000/2000 … 5000/10000) reached the pad's motors, the
        // 14-byte one's trigger motors too, its light-bar colour (255, 64, 0) the pad's light, and
        // its three player LEDs (0b10101) the pad as player 3 (SDL's index 2).
        for i in 1...5 { #expect(feedback.contains("rumble \(1000 * i) \(2000 * i)\n"), "\(feedback)") }
        #expect(feedback.contains("triggers 7000 9000\n"), "\(feedback)")
        #expect(feedback.contains("led 255 64 0\n"), "\(feedback)")
        #expect(feedback.contains("player 2\n"), "\(feedback)")
        #expect(!feedback.contains("effect "), "an Xbox pad got a DualSense effect: \(feedback)")
    }

    /// Toward a host with host_caps 0x01 (the stand-in's default) the pad goes as whole states
    /// with a sequence number; a DualSense's touchpad and motion go as rich input, and the host's
    /// player LEDs and adaptive trigger come back as DualSense effect blocks.
    @Test func aDualSenseSendsWholeStatesTouchAndMotionAndGetsItsTriggerAndPlayerLights() throws {
        let script = "type dualsense\n" + Self.padScript
            + "1400 touch 0 down 0.25 0.75\n1500 touch 0 up 0.25 0.75\n1600 accel 0 9.80665 0\n1700 gyro 0.5 0 -0.25\n"
        let (inputs, rich, feedback) = try drivePad(script: script, hostArguments: [])
        let pad = inputs.filter {
            switch $0 {
            case .gamepadArrival, .gamepadButton, .gamepadAxis, .gamepadRemove, .gamepadState: true
            default: false
            }
        }
        func state(_ sequence: UInt8, _ buttons: GamepadButtons, lx: Int16 = 0, ly: Int16 = 0, rt: UInt8 = 0) -> InputEvent {
            .gamepadState(GamepadState(pad: 0, sequence: sequence, buttons: buttons, leftStickX: lx, leftStickY: ly, rightTrigger: rt))
        }
        #expect(Array(pad.prefix(7)) == [
            .gamepadArrival(pad: 0, type: 2),
            state(1, .a), state(2, []), state(3, [], lx: 16000), state(4, [], lx: 16000, ly: 20000),
            state(5, [], lx: 16000, ly: 20000, rt: 255), state(6, .dpadUp, lx: 16000, ly: 20000, rt: 255),
        ], "\(pad)")
        // 0.25/0.75 of the pad → 16384/49151 of 65535; 1 g up; 0.5 and −0.25 rad/s as 20 LSB per °/s.
        #expect(rich == [
            .touchpad(pad: 0, finger: 0, active: true, x: 16384, y: 49151),
            .touchpad(pad: 0, finger: 0, active: false, x: 16384, y: 49151),
            .motion(pad: 0, gyro: [0, 0, 0], accel: [0, 10000, 0]),
            .motion(pad: 0, gyro: [573, 0, -286], accel: [0, 10000, 0]),
        ], "\(rich)")
        // Player LEDs 0b10101: enable bits byte 1 = 0x10, LEDs at byte 43.
        #expect(feedback.contains("effect 0010" + String(repeating: "00", count: 41) + "15000000\n"), "\(feedback)")
        // R2 (enable 0x04) with the host's block at bytes 10…20: zoned feedback, zones 3-9 at strength 5.
        #expect(feedback.contains("effect 04" + String(repeating: "00", count: 9) + "21f80300489224" + String(repeating: "00", count: 4)
                                  + String(repeating: "00", count: 26) + "\n"), "\(feedback)")
        #expect(feedback.contains("led 255 64 0\n"), "\(feedback)")
    }

    static func bytes(hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex, let j = hex.index(i, offsetBy: 2, limitedBy: hex.endIndex), let b = UInt8(hex[i..<j], radix: 16) {
            out.append(b)
            i = j
        }
        return out
    }
}
