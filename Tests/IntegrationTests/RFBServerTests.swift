import FarcastSupport
import Foundation
import RFB
import Testing

/// The RFB engine against real servers on loopback: TigerVNC Xvnc and x11vnc on Xvfb. Every
/// encoding each server really serves is forced in turn and the decoded framebuffer is compared
/// with the X server's own (`xwd -root`): lossless encodings pixel for pixel. Serialized: each
/// test runs its own X and VNC servers, and two cores cannot run twenty of them at once.
@Suite(.tags(.groupB), .serialized, .timeLimit(.minutes(5)))
struct RFBServerTests {
    static func connect(_ server: some XDisplay, password: String?, configure: (inout RFBConnection.Configuration) -> Void = { _ in },
                        options: (inout VNCClient.Options) -> Void = { _ in }) async throws -> VNCClient {
        var o = VNCClient.Options()
        configure(&o.configuration)
        options(&o)
        return try await VNCClient.connect(to: server.endpoint, credentials: { _ in
            guard let password else { throw RFBError.credentialsRequired("a password") }
            return VNCCredentials(password: password)
        }, options: o)
    }

    /// Forces one encoding, waits for the first full frame and compares with xwd.
    static func frame(_ server: some XDisplay, password: String?, encoding: RFBEncoding,
                      configure: (inout RFBConnection.Configuration) -> Void = { _ in }) async throws -> (Framebuffer, XWDImage, [RFBEncoding: Int], Int) {
        let client = try await connect(server, password: password) { c in
            c.encodings = [encoding]
            configure(&c)
        }
        try await client.waitForFirstFrame(timeout: .seconds(20))
        let framebuffer = await client.framebuffer
        let used = await client.rectanglesByEncoding
        let jpeg = await client.tightJPEGRectangles
        await client.close()
        return (framebuffer, try XWDImage.captureRoot(of: server), used, jpeg)
    }

    static func differingPixels(_ framebuffer: Framebuffer, _ screen: XWDImage) -> Int {
        guard framebuffer.width == screen.width, framebuffer.height == screen.height else { return Int.max }
        return zip(framebuffer.pixels, screen.pixels).reduce(0) { $0 + (($1.0 & 0xFFFFFF) != $1.1 ? 1 : 0) }
    }

    /// Xvnc 1.12 serves Raw, RRE, Hextile, Tight and ZRLE itself; asked for CoRRE, Zlib or TRLE
    /// it falls back to Raw (checked: the fallback must decode exactly too).
    @Test func xvncEveryEncodingMatchesTheXServerExactly() async throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(passwords: passwords)
        let viewer = try server.drawTestContent(in: folder)
        defer { viewer.stop() }
        let served: Set<RFBEncoding> = [.raw, .rre, .hextile, .tight, .zrle]
        for name in ["raw", "rre", "hextile", "tight", "zrle", "corre", "zlib", "trle"] {
            let encoding = RFBEncoding(name: name)!
            let (framebuffer, screen, used, _) = try await Self.frame(server, password: passwords.password, encoding: encoding)
            let expected: RFBEncoding = served.contains(encoding) ? encoding : .raw
            #expect(used[expected, default: 0] > 0, "Xvnc sent \(used) for \(name)")
            #expect(Self.differingPixels(framebuffer, screen) == 0, "\(name): framebuffer differs from xwd -root")
        }
    }

    /// TightVNC 1.3.10 serves Raw, RRE, CoRRE, Hextile, Zlib and Tight (ZRLE and TRLE fall back to
    /// Raw), and offers VncAuth beside its own Tight security type: the login takes VncAuth.
    @Test func tightVNCEveryEncodingMatchesTheXServerExactly() async throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try TightVNCServer(passwords: passwords)
        let viewer = try server.drawTestContent(in: folder)
        defer { viewer.stop() }
        let client = try await Self.connect(server, password: passwords.password) { _ in }
        let info = await client.serverInfo
        await client.close()
        #expect(info?.securityTypes == [SecurityType.vncAuth, SecurityType.tight] && info?.security == "VncAuth", "\(String(describing: info))")
        let served: Set<RFBEncoding> = [.raw, .rre, .coRRE, .hextile, .zlib, .tight]
        for name in ["raw", "rre", "corre", "hextile", "zlib", "tight", "zrle", "trle"] {
            let encoding = RFBEncoding(name: name)!
            let (framebuffer, screen, used, _) = try await Self.frame(server, password: passwords.password, encoding: encoding)
            let expected: RFBEncoding = served.contains(encoding) ? encoding : .raw
            #expect(used[expected, default: 0] > 0, "Xtightvnc sent \(used) for \(name)")
            #expect(Self.differingPixels(framebuffer, screen) == 0, "\(name): framebuffer differs from xwd -root")
        }
    }

    /// x11vnc 0.9.16 serves all of these, CoRRE and Zlib included.
    @Test func x11vncEveryEncodingMatchesTheXServerExactly() async throws {
        let folder = try TemporaryFolder()
        let server = try X11vncServer(password: "secret12", folder: folder)
        let viewer = try server.drawTestContent(in: folder)
        defer { viewer.stop() }
        for name in ["raw", "rre", "corre", "hextile", "zlib", "tight", "zrle"] {
            let encoding = RFBEncoding(name: name)!
            let (framebuffer, screen, used, _) = try await Self.frame(server, password: "secret12", encoding: encoding)
            #expect(used[encoding, default: 0] > 0, "x11vnc sent \(used) for \(name)")
            #expect(Self.differingPixels(framebuffer, screen) == 0, "\(name): framebuffer differs from xwd -root")
        }
    }

    /// Tight JPEG is lossy by design. Stated tolerance: mean absolute channel error ≤ 4 and
    /// every channel within 48 of the X server's pixel on photographic content at quality 8.
    @Test func xvncTightJPEGIsWithinTolerance() async throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(passwords: passwords)
        let viewer = try server.drawTestContent(kind: "photo", width: 400, height: 300, in: folder)
        defer { viewer.stop() }
        let (framebuffer, screen, used, jpeg) = try await Self.frame(server, password: passwords.password, encoding: .tight) { $0.jpegQuality = 8 }
        #expect(used[.tight, default: 0] > 0)
        #expect(jpeg > 0, "Xvnc sent no JPEG rectangles for photographic content")
        var total = 0, worst = 0
        for (ours, theirs) in zip(framebuffer.pixels, screen.pixels) {
            for shift: UInt32 in [16, 8, 0] {
                let d = abs(Int((ours >> shift) & 255) - Int((theirs >> shift) & 255))
                total += d
                worst = max(worst, d)
            }
        }
        let mean = Double(total) / Double(screen.pixels.count * 3)
        #expect(mean <= 4, "mean absolute error \(mean)")
        #expect(worst <= 48, "largest channel error \(worst)")
    }

    /// Other wire formats from a real server: within one quantisation step of the screen.
    @Test func xvncServesOtherPixelFormats() async throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(passwords: passwords)
        let viewer = try server.drawTestContent(in: folder)
        defer { viewer.stop() }
        for name in ["rgb565", "bgr233", "map8"] {
            let format = PixelFormat(name: name)!
            let (framebuffer, screen, _, _) = try await Self.frame(server, password: passwords.password, encoding: .zrle) { $0.pixelFormat = format }
            #expect(framebuffer.width == screen.width && framebuffer.height == screen.height)
            // Colour-mapped: TigerVNC fills the map with a colour cube; allow one cube step.
            let tolerance: [Int] = format.trueColour
                ? [255 / Int(format.redMax), 255 / Int(format.greenMax), 255 / Int(format.blueMax)].map { $0 + 1 }
                : [52, 52, 52]
            var outside = 0
            for (ours, theirs) in zip(framebuffer.pixels, screen.pixels) {
                for (i, shift) in [UInt32(16), 8, 0].enumerated() where abs(Int((ours >> shift) & 255) - Int((theirs >> shift) & 255)) > tolerance[i] {
                    outside += 1
                }
            }
            #expect(outside == 0, "\(outside) channel values beyond one quantisation step in \(name)")
        }
    }

    @Test func rightAndWrongPasswordAgainstXvnc() async throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(passwords: passwords)
        let good = try await Self.connect(server, password: passwords.password)
        #expect(await good.serverInfo?.security == "VncAuth")
        await good.close()
        do {
            _ = try await Self.connect(server, password: "wrong-pw")
            Issue.record("a wrong password was accepted")
        } catch let error as RFBError {
            guard case .authenticationFailed(let reason) = error else { Issue.record("unexpected \(error)"); return }
            // Xvnc's own words, passed through.
            #expect(reason.lowercased().contains("authentication failure") || reason.lowercased().contains("failed"), "reason: \(reason)")
        }
    }

    @Test func rightAndWrongPasswordAgainstX11vnc() async throws {
        let folder = try TemporaryFolder()
        let server = try X11vncServer(password: "secret12", folder: folder)
        let good = try await Self.connect(server, password: "secret12")
        #expect(await good.serverInfo?.security == "VncAuth")
        await good.close()
        do {
            _ = try await Self.connect(server, password: "wrong-pw")
            Issue.record("a wrong password was accepted")
        } catch let error as RFBError {
            guard case .authenticationFailed(let reason) = error else { Issue.record("unexpected \(error)"); return }
            #expect(!reason.isEmpty)
        }
    }

    @Test func noAuthenticationAgainstXvnc() async throws {
        let server = try XvncServer(securityTypes: "None", passwords: nil)
        let client = try await Self.connect(server, password: nil) { $0.securityPreference = [.none] }
        #expect(await client.serverInfo?.security == "None")
        try await client.waitForFirstFrame()
        await client.close()
        // The default preference accepts None last, so it works without asking for anything.
        let again = try await Self.connect(server, password: nil)
        #expect(await again.serverInfo?.security == "None")
        await again.close()
    }

    @Test func veNCryptX509VncPinsOnFirstUseAndRefusesASwappedCertificate() async throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        func makeCertificate(_ name: String) throws -> (cert: String, key: String) {
            let made = try TestCertificate(name: name, in: folder)
            return (made.cert, made.key)
        }
        func fingerprint(_ pem: String) throws -> String { try TestCertificate.fingerprint(ofPEM: pem) }
        let first = try makeCertificate("first"), second = try makeCertificate("second")
        let store = TrustStore(directory: StateDirectory(path: folder.path + "/state"), fileName: "vnc/pins.json")
        let types = "X509Vnc,TLSVnc,X509Plain,VncAuth"

        var server = try XvncServer(securityTypes: types, passwords: passwords, extra: ["-X509Cert", first.cert, "-X509Key", first.key])
        let client = try await Self.connect(server, password: passwords.password, options: { $0.trustStore = store })
        #expect(await client.serverInfo?.security == "X509Vnc")
        #expect(await client.serverInfo?.veNCryptSubtypes.contains(261) == true)
        try await client.waitForFirstFrame()
        await client.close()
        #expect(try store.pin(for: server.endpoint.pinKey) == fingerprint(first.cert))
        // Same certificate again: the pin matches.
        let again = try await Self.connect(server, password: passwords.password, options: { $0.trustStore = store })
        await again.close()
        let port = server.port, display = server.display
        server.stop()

        // Same address, new certificate: refused, naming both fingerprints.
        server = try XvncServer(securityTypes: types, passwords: passwords,
                                extra: ["-X509Cert", second.cert, "-X509Key", second.key])
        let key = server.endpoint.pinKey
        if server.port != port { try store.remove(peer: key); _ = display }
        if try store.pin(for: key) == nil { _ = try store.check(peer: key, fingerprint: fingerprint(first.cert), acceptChange: false) }
        do {
            _ = try await Self.connect(server, password: passwords.password, options: { $0.trustStore = store })
            Issue.record("a swapped certificate was accepted")
        } catch let error as RFBError {
            #expect(error == .certificateChanged(host: key, pinned: try fingerprint(first.cert), presented: try fingerprint(second.cert)))
        }
        // --trust accepts it deliberately and re-pins.
        let trusted = try await Self.connect(server, password: passwords.password, options: {
            $0.trustStore = store
            $0.acceptChangedCertificate = true
        })
        #expect(await trusted.serverInfo?.security == "X509Vnc")
        await trusted.close()
        #expect(try store.pin(for: key) == fingerprint(second.cert))
    }

    /// A consumer that falls behind loses the oldest events, but never a region of the picture:
    /// after an update fell out of the buffer, the next reports the whole framebuffer dirty.
    @Test func aConsumerThatFellBehindIsToldToRepaintEverything() async throws {
        let server = try XvncServer(geometry: "400x300", securityTypes: "None", passwords: nil)
        let client = try await Self.connect(server, password: nil) { _ in } options: { $0.eventBuffer = 2 }
        try await client.waitForFirstFrame()
        // Small changes, one after another, while nobody reads the events: each an update with
        // one small dirty rectangle.
        for i in 0..<6 {
            let logo = try BackgroundProcess(try requireExecutable("xlogo", package: "x11-apps"), ["-geometry", "24x24+\(20 + i * 40)+20"],
                                             environment: server.environment, logName: "xlogo")
            try await Task.sleep(for: .milliseconds(300))
            logo.stop()
            try await Task.sleep(for: .milliseconds(150))
        }
        await client.close()
        var updates: [[RFBRect]] = []
        for await event in client.events { if case .framebufferUpdated(let dirty, _) = event { updates.append(dirty) } }
        #expect(!updates.isEmpty, "the newest events were kept")
        #expect(updates.last == [RFBRect(x: 0, y: 0, width: 400, height: 300)], "the last update kept says: repaint everything (\(updates))")
    }

    @Test func resizeOnTheServerReachesTheClient() async throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(geometry: "400x300", passwords: passwords)
        let viewer = try server.drawTestContent(width: 200, height: 120, in: folder)
        defer { viewer.stop() }
        let client = try await Self.connect(server, password: passwords.password)
        try await client.waitForFirstFrame()
        // Watch the event stream for the resize while polling the picture.
        let watcher = Task { () -> Bool in
            for await event in client.events {
                if case .resized(let w, let h, _) = event, w == 640, h == 480 { return true }
            }
            return false
        }
        try server.x("xrandr", ["--fb", "640x480"])
        let deadline = ContinuousClock.now + .seconds(20)
        var differing = Int.max
        while ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(200))
            let framebuffer = await client.framebuffer
            guard framebuffer.width == 640 else { continue }
            differing = Self.differingPixels(framebuffer, try XWDImage.captureRoot(of: server))
            if differing == 0 { break }
        }
        await client.close()
        #expect(await watcher.value, "no 640×480 resize event arrived")
        let framebuffer = await client.framebuffer
        #expect(framebuffer.width == 640 && framebuffer.height == 480)
        #expect(differing == 0, "\(differing) pixels differ after the resize")
        // Xvnc keeps its one monitor at the old mode inside the larger framebuffer.
        #expect(await client.screens.count == 1)
    }

    /// A fresh recording from the live server, mutated and replayed (the committed fixtures are
    /// fuzzed in the unit tests; this keeps the corpus honest against the server installed now).
    @Test func liveRecordingSurvivesMutation() async throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(geometry: "200x150", passwords: passwords)
        let viewer = try server.drawTestContent(width: 150, height: 100, in: folder)
        defer { viewer.stop() }
        let recorded = RecordedBytes()
        var configuration = RFBConnection.Configuration()
        configuration.encodings = [.tight]
        configuration.jpegQuality = 7
        configuration.continuousUpdates = false
        let client = try await Self.connect(server, password: passwords.password, configure: { $0 = configuration },
                                            options: { $0.inboundTap = { recorded.append($0) } })
        try await client.waitForFirstFrame()
        await client.close()
        let capture = RFBCapture(metadata: .init(pixelFormat: .rgb888, encodings: RFBConnection(configuration: configuration).encodingList(),
                                                 server: "Xvnc"), stream: recorded.bytes)
        let clean = try RFBReplay.run(capture)
        #expect(clean.error == nil && clean.pixels > 0)
        var state: UInt64 = 0x5EED
        for _ in 0..<300 {
            var mutated = capture
            var bytes = Array(capture.stream)
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let position = 40 + Int(state >> 33) % max(1, bytes.count - 40)
            bytes[min(position, bytes.count - 1)] ^= UInt8(truncatingIfNeeded: state >> 8) | 1
            mutated.stream = bytes[...]
            _ = try RFBReplay.run(mutated, chunkSize: 1 + Int(state >> 50) % 4096)
        }
    }
}

final class RecordedBytes: @unchecked Sendable {
    // @unchecked: guarded by the lock below.
    private let lock = NSLock()
    private var storage: [UInt8] = []
    func append(_ bytes: [UInt8]) { lock.withLock { storage += bytes } }
    var bytes: [UInt8] { lock.withLock { storage } }
}
