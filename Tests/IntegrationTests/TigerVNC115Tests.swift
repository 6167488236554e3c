import FarcastSupport
import Foundation
import RFB
import Testing

/// What TigerVNC 1.15's server (x0vncserver from Debian trixie, scraping an Xvfb display)
/// negotiates beyond Xvnc 1.12 (ExtendedMouseButtons, so back/forward and buttons up to 15 reach X
/// applications), and CursorWithAlpha, which both send, so the local cursor keeps its alpha.
@Suite(.tags(.groupB), .serialized, .timeLimit(.minutes(2)))
struct TigerVNC115Tests {
    @Test func buttonsBeyondEightArriveThroughExtendedMouseButtons() async throws {
        let folder = try TemporaryFolder()
        let (server, passwords) = try X0vncServer.start(securityTypes: "VncAuth", in: folder)
        let echo = try InputEcho(on: server)
        let client = try await VNCClient.connect(to: server.endpoint, credentials: { _ in VNCCredentials(password: passwords.password) })
        try await client.waitForFirstFrame()
        try await client.sync()
        #expect(await client.serverSupportsExtendedMouseButtons, "x0vncserver 1.15 confirms ExtendedMouseButtons")

        try await client.movePointer(toX: 40, y: 30)
        for button in [8, 9] {
            try await client.button(button, down: true)
            try await client.button(button, down: false)
        }
        try await client.sync()
        try echo.waitForEvents("buttons 8 and 9") { events in
            events.contains(.button(8, x: 40, y: 30)) && events.contains(.release(8))
                && events.contains(.button(9, x: 40, y: 30)) && events.contains(.release(9))
        }
        await client.close()
    }

    /// Xvnc (1.12 here) draws the cursor itself and sends its shape as soon as a client asks for
    /// a local cursor; x0vncserver only forwards changes it sees through XFixes.
    @Test func theCursorArrivesWithItsAlphaChannel() async throws {
        let folder = try TemporaryFolder()
        let passwords = try PasswordFiles(in: folder)
        let server = try XvncServer(passwords: passwords)
        // The rectangle headers name their encoding: collect the stream to see which one the
        // server chose for the cursor (S32 -314 = FF FF FE C6).
        let inbound = Locked<[UInt8]>([])
        var options = VNCClient.Options()
        options.configuration.localCursor = true
        options.inboundTap = { bytes in inbound.withLock { $0 += bytes } }
        let client = try await VNCClient.connect(to: server.endpoint, credentials: { _ in VNCCredentials(password: passwords.password) },
                                                 options: options)
        try await client.waitForFirstFrame()
        // A bare X server shows no cursor: give the root window one, as a desktop would.
        let changed = Task {
            try await client.waitForEvent(timeout: .seconds(10), "a cursor shape") {
                if case .cursorChanged(let c) = $0 { c.width > 0 } else { false }
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        let set = try run(try requireExecutable("xsetroot", package: "x11-xserver-utils"), ["-cursor_name", "left_ptr"], environment: server.environment)
        #expect(set.status == 0, "xsetroot: \(set.stderr)")
        // Xvnc sends the shape of the cursor under the pointer: bring the pointer onto the root.
        try await client.movePointer(toX: 20, y: 20)
        try await client.movePointer(toX: 21, y: 21)
        let event = try await changed.value
        await client.close()
        guard case .cursorChanged(let shape) = event else { return }
        #expect(shape.rgba.count == shape.width * shape.height * 4)
        #expect(shape.rgba.enumerated().contains { $0.offset % 4 == 3 && $0.element == 255 }, "an opaque pixel")
        #expect(shape.rgba.enumerated().contains { $0.offset % 4 == 3 && $0.element == 0 }, "a transparent pixel")
        let stream = inbound.withLock { $0 }
        let marker: [UInt8] = [0xFF, 0xFF, 0xFE, 0xC6]
        #expect(stream.indices.dropLast(3).contains { Array(stream[$0..<($0 + 4)]) == marker },
                "the server sent the cursor as CursorWithAlpha")
    }
}
