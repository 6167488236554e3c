import FarcastSupport
import Foundation
import RFB
import Testing

/// RSA-AES (RA2, RA2ne, RA2_256, RA2ne_256) against TigerVNC's own server: x0vncserver 1.15 from
/// Debian trixie (scripts/setup), scraping an Xvfb display.
@Suite(.tags(.groupB), .serialized, .timeLimit(.minutes(3)))
struct RSAAESTests {
    @Test func everyRSAAESTypeLogsInAndAnEncryptedSessionIsPixelExact() async throws {
        let folder = try TemporaryFolder()
        let (server, passwords) = try X0vncServer.start(securityTypes: "RA2,RA2ne,RA2_256,RA2ne_256", in: folder)
        let viewer = try server.drawTestContent(width: 200, height: 120, in: folder)
        defer { viewer.stop() }
        let store = TrustStore(directory: StateDirectory(path: folder.path + "/state"), fileName: "vnc/pins.json")

        for (method, name) in [(SecurityMethod.ra2_256, "RA2_256"), (.ra2, "RA2"), (.ra2ne_256, "RA2ne_256"), (.ra2ne, "RA2ne")] {
            var options = VNCClient.Options()
            options.configuration.securityPreference = [method]
            options.configuration.encodings = [.zrle]
            options.trustStore = store
            let client = try await VNCClient.connect(to: server.endpoint, credentials: { _ in VNCCredentials(password: passwords.password) },
                                                     options: options)
            #expect(await client.serverInfo?.security == name)
            try await client.waitForFirstFrame()
            let framebuffer = await client.framebuffer
            await client.close()
            let screen = try XWDImage.captureRoot(of: server)
            // x0vncserver draws the X cursor into its framebuffer (xwd leaves it out): skip the
            // 32×32 pixels from the pointer's position.
            try #require(framebuffer.width == screen.width && framebuffer.height == screen.height)
            let pointer = try server.pointerLocation()
            var differing = 0
            for y in 0..<screen.height {
                for x in 0..<screen.width where !((pointer.x - 16)..<(pointer.x + 32)).contains(x) || !((pointer.y - 16)..<(pointer.y + 32)).contains(y) {
                    if framebuffer.pixels[y * framebuffer.width + x] & 0xFF_FFFF != screen.pixels[y * screen.width + x] { differing += 1 }
                }
            }
            #expect(differing == 0, "\(name): the decoded screen differs from xwd -root")
        }
        // One pin for the server's key, shared by all four types.
        #expect(try store.pin(for: "rsa-aes " + server.endpoint.pinKey) != nil)
    }

    /// RSA-AES seals every message with a counter nonce, so TigerVNC drops the session at the
    /// first message that arrives out of the order it was sealed in. Two tasks sending as fast as
    /// they can through one client (the viewer's keyboard and pointer do) must therefore leave the
    /// session up, and the last pointer position sent must be where the X pointer ends.
    @Test func twoTasksSendingTenThousandMessagesEachArriveInOrder() async throws {
        let folder = try TemporaryFolder()
        let (server, passwords) = try X0vncServer.start(securityTypes: "RA2", in: folder)
        var options = VNCClient.Options()
        options.configuration.securityPreference = [.ra2]
        options.trustStore = TrustStore(directory: StateDirectory(path: folder.path + "/state"), fileName: "vnc/pins.json")
        let client = try await VNCClient.connect(to: server.endpoint, credentials: { _ in VNCCredentials(password: passwords.password) },
                                                 options: options)
        try await client.waitForFirstFrame()
        let (width, height) = (320, 240)   // X0vncServer's default geometry
        let count = 10_000
        func position(_ i: Int) -> (x: Int, y: Int) { (i % width, (i / width * 7) % height) }
        async let pointer: Void = {
            for i in 0..<count {
                let p = position(i)
                try await client.send(.pointerEvent(buttonMask: 0, x: p.x, y: p.y))
            }
        }()
        async let keys: Void = {
            for i in 0..<count {
                // Shift alone changes nothing on the screen; pressed and released in turn.
                try await client.send(.keyEvent(down: i % 2 == 0, keysym: 0xFFE1))
            }
        }()
        _ = try await (pointer, keys)
        // A round trip after both: answered only if the server read all 20,000 messages intact.
        try await client.sync(timeout: .seconds(30))
        #expect(await client.isConnected, "the session ended: \(server.server?.log ?? "")")
        let last = position(count - 1)
        let location = try server.pointerLocation()
        #expect(location.x == last.x && location.y == last.y, "the X pointer ended at \(location), not at the last position sent \(last)")
        await client.close()
    }

    @Test func wrongPasswordGetsTheServersReason() async throws {
        let folder = try TemporaryFolder()
        let (server, _) = try X0vncServer.start(securityTypes: "RA2_256", in: folder)
        var options = VNCClient.Options()
        options.trustStore = TrustStore(directory: StateDirectory(path: folder.path + "/state"), fileName: "vnc/pins.json")
        do {
            _ = try await VNCClient.connect(to: server.endpoint, credentials: { _ in VNCCredentials(password: "wrong-pw") }, options: options)
            Issue.record("a wrong password was accepted")
        } catch let error as RFBError {
            guard case .authenticationFailed(let reason) = error else { Issue.record("unexpected \(error)"); return }
            #expect(reason.lowercased().contains("authentication"), "the server's own words: \(reason)")
        }
    }

    @Test func aChangedServerKeyIsRefusedUntilTrusted() throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let first = folder.path + "/first.pem", second = folder.path + "/second.pem"
        try X0vncServer.makeRSAKey(first)
        try X0vncServer.makeRSAKey(second)
        let server = try X0vncServer(securityTypes: "RA2", rsaKey: first, passwords: passwords)
        var env = ProcessInfo.processInfo.environment
        env["XDG_STATE_HOME"] = folder.path + "/state"
        env["FARCAST_VNC_PASSWORD"] = passwords.password
        let url = "127.0.0.1::\(server.port)"
        let pinned = try run(try farcastBinary(), ["vnc", "info", url, "--json"], environment: env, stdin: Data())
        #expect(pinned.status == 0, "stderr: \(pinned.stderr)")
        #expect(pinned.stderr.contains("pinned the RSA-AES key"), "stderr: \(pinned.stderr)")
        let object = try JSONSerialization.jsonObject(with: Data(pinned.stdout.utf8)) as? [String: Any]
        #expect(object?["security"] as? String == "RA2", "stdout: \(pinned.stdout)")

        try server.start(securityTypes: "RA2", rsaKey: second)
        let refused = try run(try farcastBinary(), ["vnc", "info", url], environment: env, stdin: Data())
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("the RSA-AES key of") && refused.stderr.contains("--trust"), "stderr: \(refused.stderr)")
        let trusted = try run(try farcastBinary(), ["vnc", "info", url, "--trust"], environment: env, stdin: Data())
        #expect(trusted.status == 0, "stderr: \(trusted.stderr)")
        let again = try run(try farcastBinary(), ["vnc", "info", url], environment: env, stdin: Data())
        #expect(again.status == 0, "the new key is pinned now: \(again.stderr)")
    }

    /// Debian's Xvnc 1.12 lists RA2 when told to but drops the connection once it is chosen:
    /// the failure must say so instead of looking like a network fault.
    @Test func xvnc112ListsRA2ButCannotDoItAndTheErrorSaysSo() async throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(geometry: "64x64", securityTypes: "RA2", passwords: passwords)
        var options = VNCClient.Options()
        options.trustStore = TrustStore(directory: StateDirectory(path: folder.path + "/state"), fileName: "vnc/pins.json")
        do {
            _ = try await VNCClient.connect(to: server.endpoint, credentials: { _ in VNCCredentials(password: passwords.password) }, options: options)
            Issue.record("Xvnc 1.12 unexpectedly completed an RA2 login")
        } catch let error as RFBError {
            #expect(error.description.contains("TigerVNC before 1.13"), "\(error)")
        }
    }
}
