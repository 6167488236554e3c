import FarcastSupport
@testable import RFB
import Testing

/// Normal-phase server messages and pseudo-encodings, and what the client answers.
@Suite struct MessageTests {
    private func ready(_ configuration: RFBConnection.Configuration = .init(), width: Int = 16, height: Int = 8) -> Harness {
        var h = Harness(configuration: configuration)
        h.feed(ServerScript.handshake(width: width, height: height).bytes)
        h.actions = []
        return h
    }

    @Test func setEncodingsListsPreferencePseudoEncodingsAndQualityOnlyWhenAsked() {
        var lossless = RFBConnection(configuration: .init())
        _ = lossless.receive(ServerScript.handshake(width: 2, height: 2).bytes)
        let list = lossless.encodingList()
        #expect(Array(list.prefix(3)) == [.copyRect, .tight, .zrle])
        #expect(list.contains(.extendedDesktopSize) && list.contains(.lastRect) && list.contains(.cursor) && list.contains(.fence))
        #expect(!list.contains { (-32 ... -23).contains($0.rawValue) }, "no JPEG quality means lossless Tight")

        var configuration = RFBConnection.Configuration()
        configuration.encodings = [.zrle]
        configuration.jpegQuality = 6
        configuration.jpegFineQuality = 80
        configuration.jpegSubsampling = .x1
        configuration.compressionLevel = 2
        let jpeg = RFBConnection(configuration: configuration).encodingList()
        #expect(jpeg.first == .zrle)
        #expect(jpeg.contains(.jpegQuality(6)) && jpeg.contains(.jpegFineQuality(80)) && jpeg.contains(RFBEncoding(-768)) && jpeg.contains(.compressionLevel(2)))
    }

    @Test func updatesArePipelined() {
        var h = ready()
        h.feed([0, 0, 0, 1])     // FramebufferUpdate header, 1 rect (not yet arrived)
        #expect(h.sent == [ClientMessage.framebufferUpdateRequest(incremental: true, RFBRect(x: 0, y: 0, width: 16, height: 8)).encoded()],
                "the next request goes out as soon as an update starts")
    }

    @Test func continuousUpdatesAreEnabledWhenOfferedAndStopPipelining() {
        var h = ready()
        h.feed([150])
        #expect(h.sent == [ClientMessage.enableContinuousUpdates(true, RFBRect(x: 0, y: 0, width: 16, height: 8)).encoded()])
        #expect(h.connection.continuousUpdatesActive == true)
        h.feed([0, 0, 0, 0])
        #expect(h.sent.count == 1, "no FramebufferUpdateRequest while continuous updates run")
        // The server ending continuous updates falls back to requests.
        h.feed([150])
        #expect(h.connection.continuousUpdatesActive == false)
        #expect(h.sent.last?.first == 3)
    }

    @Test func fenceRequestsAreAnsweredWithTheSamePayloadAndSupportedFlags() {
        var h = ready()
        h.feed([248, 0, 0, 0, 0x80, 0, 0, 0x07, 3, 9, 8, 7])
        #expect(h.sent == [ClientMessage.clientFence(flags: 0x07, payload: [9, 8, 7]).encoded()])
        // A fence response (no Request bit) needs no answer.
        h.feed([248, 0, 0, 0, 0, 0, 0, 0, 0])
        #expect(h.sent.count == 1)
    }

    @Test func qemuAudioIsStartedOnceConfirmedAndItsMessagesBecomeEvents() {
        var configuration = RFBConnection.Configuration()
        configuration.audio = RFBAudioFormat(sample: .s16, channels: 2, sampleRate: 44100)
        #expect(configuration.audio != nil && RFBConnection(configuration: configuration).encodingList().contains(.qemuAudio))
        var h = ready(configuration)
        let before = h.sent.count
        var s = ServerScript()
        s.updateHeader(rects: 1)
        s.rect(RFBRect(x: 0, y: 0, width: 16, height: 8), .qemuAudio, [])
        h.feed(s.bytes)
        // Set format (S16, 2 channels, 44100 Hz), then enable.
        #expect(h.sent.dropFirst(before).contains([255, 1, 0, 2, 3, 2, 0, 0, 0xAC, 0x44, 255, 1, 0, 0]), "sent \(h.sent.dropFirst(before))")
        #expect(h.connection.serverSupportsAudio == true)
        h.feed([255, 1, 0, 1] + [255, 1, 0, 2, 0, 0, 0, 4, 1, 2, 3, 4] + [255, 1, 0, 0])
        #expect(h.events.suffix(3) == [.audio(.began), .audio(.samples([1, 2, 3, 4])), .audio(.ended)])
    }

    @Test func hostileQEMUMessagesEndTheSessionWithAReason() {
        var huge = ready()
        huge.feed([255, 1, 0, 2, 0xFF, 0xFF, 0xFF, 0xFF])
        #expect(huge.closeError == .protocolViolation("QEMU audio data of 4294967295 bytes (limit 1 MiB)"))
        var unknown = ready()
        unknown.feed([255, 7])
        #expect(unknown.closeError == .protocolViolation("QEMU server message of unknown subtype 7"))
        var operation = ready()
        operation.feed([255, 1, 0, 9])
        #expect(operation.closeError == .protocolViolation("QEMU audio message of unknown operation 9"))
    }

    @Test func bellClipboardAndColourMap() {
        var h = ready()
        var script = ServerScript()
        script.bytes += [2]
        script.bytes += [3, 0, 0, 0, 0, 0, 0, 5] + Array("caf".utf8) + [0xE9, 0x21]   // "café!" in Latin-1
        script.colourMap(first: 3, colours: [0xFF0000, 0x00FF00])
        h.feed(script.bytes)
        #expect(h.events == [.bell, .serverClipboard("café!"), .colourMapChanged(first: 3, count: 2)])
    }

    @Test func desktopNameCursorAndXCursor() {
        var h = ready()
        var s = ServerScript()
        s.updateHeader(rects: 3)
        s.rect(RFBRect(x: 0, y: 0, width: 0, height: 0), .desktopName, [0, 0, 0, 4] + Array("neu!".utf8))
        // 2×2 rich cursor, hotspot (1, 0): pixels red, green, blue, white; mask 10 / 01.
        s.rect(RFBRect(x: 1, y: 0, width: 2, height: 2), .cursor,
               [0, 0, 255, 0, 0, 255, 0, 0, 255, 0, 0, 0, 255, 255, 255, 0] + [0b1000_0000, 0b0100_0000])
        // 2×1 X cursor: primary black, secondary white; bitmap 10, mask 11.
        s.rect(RFBRect(x: 0, y: 0, width: 2, height: 1), .xCursor, [0, 0, 0, 255, 255, 255, 0b1000_0000, 0b1100_0000])
        h.feed(s.bytes)
        #expect(h.closeError == nil)
        #expect(h.connection.desktopName == "neu!")
        let cursors = h.events.compactMap { if case .cursorChanged(let c) = $0 { return c } else { return nil } }
        #expect(cursors.count == 2)
        #expect(cursors[0] == RFBCursor(width: 2, height: 2, hotspotX: 1, hotspotY: 0,
                                        rgba: [255, 0, 0, 255, 0, 255, 0, 0, 0, 0, 255, 0, 255, 255, 255, 255]))
        #expect(cursors[1] == RFBCursor(width: 2, height: 1, hotspotX: 0, hotspotY: 0, rgba: [0, 0, 0, 255, 255, 255, 255, 255]))
    }

    @Test func cursorWithAlphaIsUnpremultipliedAndCursorPositionIsReported() {
        var h = ready()
        var s = ServerScript()
        s.updateHeader(rects: 2)
        // 2×1, hotspot (1, 0), Raw: opaque red; half-transparent white premultiplied (128,128,128,128).
        s.rect(RFBRect(x: 1, y: 0, width: 2, height: 1), .cursorWithAlpha, [0, 0, 0, 0] + [255, 0, 0, 255, 128, 128, 128, 128])
        s.rect(RFBRect(x: 13, y: 4, width: 0, height: 0), .vmwareCursorPosition, [])
        h.feed(s.bytes)
        #expect(h.closeError == nil)
        #expect(h.events.contains(.cursorChanged(RFBCursor(width: 2, height: 1, hotspotX: 1, hotspotY: 0,
                                                           rgba: [255, 0, 0, 255, 255, 255, 255, 128]))))
        #expect(h.events.contains(.pointerMoved(x: 13, y: 4)))
    }

    @Test func cursorWithAlphaInAnEncodingOtherThanRawEndsWithAReason() {
        var h = ready()
        var s = ServerScript()
        s.updateHeader(rects: 1)
        s.rect(RFBRect(x: 0, y: 0, width: 1, height: 1), .cursorWithAlpha, [0, 0, 0, 16] + [0, 0, 0, 0])
        h.feed(s.bytes)
        #expect(h.closeError?.description.contains("only Raw") == true, "\(String(describing: h.closeError))")
    }

    @Test func buttonsBeyondEightWaitForExtendedMouseButtons() throws {
        var h = ready()
        #expect(h.connection.encodingList().contains(.extendedMouseButtons))
        // Before the server confirms: 1–8 in the classic mask, 9–15 refused with a reason.
        #expect(try h.connection.pointerMessage(buttons: 0x80, x: 1, y: 2) == .pointerEvent(buttonMask: 0x80, x: 1, y: 2))
        #expect(throws: RFBError.self) { try h.connection.pointerMessage(buttons: 0x100, x: 1, y: 2) }
        var s = ServerScript()
        s.updateHeader(rects: 1)
        s.rect(RFBRect(x: 0, y: 0, width: 0, height: 0), .extendedMouseButtons, [])
        h.feed(s.bytes)
        #expect(h.connection.serverSupportsExtendedMouseButtons == true)
        // After: button 8 (bit 7) moves to the extra byte, the mask's top bit is the marker.
        let back = try h.connection.pointerMessage(buttons: 0x81, x: 1, y: 2)
        #expect(back == .extendedPointerEvent(buttons: 0x81, x: 1, y: 2))
        #expect(back.encoded() == [5, 0x81, 0, 1, 0, 2, 0x01])
        #expect(try h.connection.pointerMessage(buttons: 0x100, x: 3, y: 4).encoded() == [5, 0x80, 0, 3, 0, 4, 0x02])
        #expect(try h.connection.pointerMessage(buttons: 0x05, x: 3, y: 4).encoded() == [5, 0x05, 0, 3, 0, 4])
    }

    @Test func extendedDesktopSizeResizesAndExposesMonitors() {
        var h = ready()
        var s = ServerScript()
        s.updateHeader(rects: 1)
        var body = ByteWriter()
        body.writeUInt8(2); body.writeZeros(3)
        for (id, x) in [(UInt32(7), 0), (UInt32(9), 20)] {
            body.writeInteger(id); body.writeInteger(UInt16(x)); body.writeInteger(UInt16(0))
            body.writeInteger(UInt16(20)); body.writeInteger(UInt16(10)); body.writeInteger(UInt32(0))
        }
        s.rect(RFBRect(x: 0, y: 0, width: 40, height: 10), .extendedDesktopSize, body.bytes)
        h.feed(s.bytes)
        let screens = [RFBScreen(id: 7, x: 0, y: 0, width: 20, height: 10), RFBScreen(id: 9, x: 20, y: 0, width: 20, height: 10)]
        #expect(h.events.first == .resized(width: 40, height: 10, screens: screens))
        #expect(h.connection.framebuffer.width == 40 && h.connection.framebuffer.height == 10)
        #expect(h.connection.screens == screens)
        // This client's own request refused (reason 1, status 1): no resize, an event instead.
        var refused = ServerScript()
        refused.updateHeader(rects: 1)
        refused.rect(RFBRect(x: 1, y: 1, width: 40, height: 10), .extendedDesktopSize, [0, 0, 0, 0])
        h.feed(refused.bytes)
        #expect(h.events.contains(.resizeRefused(status: 1)))
        #expect(h.connection.framebuffer.width == 40)
    }

    @Test func desktopSizeKeepsTheOverlappingContent() {
        var h = ready(width: 4, height: 2)
        var s = ServerScript()
        s.updateHeader(rects: 1)
        s.rect(RFBRect(x: 0, y: 0, width: 4, height: 2), .raw, TestEncoder().raw(TestImage(width: 4, height: 2, pixels: Array(1...8)), RFBRect(x: 0, y: 0, width: 4, height: 2)))
        s.updateHeader(rects: 1)
        s.rect(RFBRect(x: 0, y: 0, width: 2, height: 3), .desktopSize, [])
        h.feed(s.bytes)
        #expect(h.rgb == [1, 2, 5, 6, 0, 0])
        #expect(h.events.contains(.resized(width: 2, height: 3, screens: [RFBScreen(id: 0, x: 0, y: 0, width: 2, height: 3)])))
    }

    @Test func clientMessagesEncodeAsSpecified() {
        #expect(ClientMessage.keyEvent(down: true, keysym: 0xFF0D).encoded() == [4, 1, 0, 0, 0, 0, 0xFF, 0x0D])
        #expect(ClientMessage.pointerEvent(buttonMask: 5, x: 300, y: 2).encoded() == [5, 5, 1, 44, 0, 2])
        #expect(ClientMessage.setEncodings([.tight, .lastRect]).encoded() == [2, 0, 0, 2, 0, 0, 0, 7, 0xFF, 0xFF, 0xFF, 0x20])
        #expect(ClientMessage.clientCutText([0x41]).encoded() == [6, 0, 0, 0, 0, 0, 0, 1, 0x41])
        #expect(ClientMessage.setDesktopSize(width: 800, height: 600, screens: [RFBScreen(id: 1, x: 0, y: 0, width: 800, height: 600)]).encoded()
            == [251, 0, 3, 32, 2, 88, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 3, 32, 2, 88, 0, 0, 0, 0])
        #expect(ClientMessage.setPixelFormat(.rgb888).encoded() == [0, 0, 0, 0, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0])
    }
}
