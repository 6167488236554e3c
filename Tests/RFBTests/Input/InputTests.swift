import FarcastSupport
@testable import RFB
import Testing

/// Keysyms, key combinations, scancodes, the input tracker and view-only mode.
@Suite struct InputTests {
    @Test func textMapsToLatin1LegacyAndUnicodeKeysyms() {
        #expect(Keysym.forText("aZ ~") == [0x61, 0x5A, 0x20, 0x7E])
        #expect(Keysym.forText("é£ÿ") == [0xE9, 0xA3, 0xFF], "Latin-1 characters are their own keysyms")
        // Legacy tables from keysymdef.h: Greek, Cyrillic, Hebrew, the Euro sign.
        #expect(Keysym.forText("αЖש€") == [0x7E1, 0x6F6, 0xCF9, 0x20AC])
        // Characters without a legacy keysym use the Unicode range.
        #expect(Keysym.forText("日本😀") == [0x0100_65E5, 0x0100_672C, 0x0101_F600])
        #expect(Keysym.forText("a\r\nb\nc\td") == [0x61, 0xFF0D, 0x62, 0xFF0D, 0x63, 0xFF09, 0x64], "CRLF is one Return")
    }

    @Test func namedKeysAliasesAndFunctionKeys() {
        #expect(Keysym.named("Return") == 0xFF0D)
        #expect(Keysym.named("enter") == 0xFF0D)
        #expect(Keysym.named("Page_Up") == 0xFF55 && Keysym.named("pgup") == 0xFF55 && Keysym.named("page_up") == 0xFF55)
        #expect(Keysym.named("F1") == 0xFFBE && Keysym.named("f12") == 0xFFC9 && Keysym.named("F35") == 0xFFE0)
        #expect(Keysym.named("F36") == nil)
        #expect(Keysym.named("ctrl") == 0xFFE3 && Keysym.named("Control_R") == 0xFFE4 && Keysym.named("rctrl") == 0xFFE4)
        #expect(Keysym.named("Super_L") == 0xFFEB && Keysym.named("meta") == 0xFFE7 && Keysym.named("Hyper_L") == 0xFFED)
        #expect(Keysym.named("Home") == 0xFF50 && Keysym.named("End") == 0xFF57 && Keysym.named("Insert") == 0xFF63 && Keysym.named("Delete") == 0xFFFF)
        #expect(Keysym.named("Left") == 0xFF51 && Keysym.named("Up") == 0xFF52 && Keysym.named("Right") == 0xFF53 && Keysym.named("Down") == 0xFF54)
        #expect(Keysym.named("0x1000041") == 0x0100_0041)
        #expect(Keysym.named("ä") == 0xE4 && Keysym.named("λ") == 0x7EB)
        #expect(Keysym.named("no-such-key") == nil)
    }

    @Test func combinationsParseInPressingOrder() throws {
        #expect(try Keysym.combination("ctrl+alt+Delete") == [0xFFE3, 0xFFE9, 0xFFFF])
        #expect(try Keysym.combination("shift+F10") == [0xFFE1, 0xFFC7])
        #expect(try Keysym.combination("ctrl+plus") == [0xFFE3, 0x2B])
        #expect(try Keysym.combination("x") == [0x78])
        #expect(throws: Keysym.UnknownKey(name: "bogus")) { try Keysym.combination("ctrl+bogus") }
        #expect(throws: Keysym.UnknownKey(name: "ctrl++")) { try Keysym.combination("ctrl++") }
        #expect(throws: Keysym.UnknownKey(name: "")) { try Keysym.combination("") }
    }

    @Test func scancodesUseTheRFBEncodingOfExtendedKeys() {
        #expect(XTScancode.forKeysym(0xFF1B) == 0x01, "Escape")
        #expect(XTScancode.forKeysym(0xFF0D) == 0x1C, "Return")
        #expect(XTScancode.forKeysym(0xFF53) == 0xCD, "Right is E0 4D")
        #expect(XTScancode.forKeysym(0xFFE4) == 0x9D, "Control_R is E0 1D")
        #expect(XTScancode.forKeysym(0xFFFF) == 0xD3, "Delete is E0 53")
        #expect(XTScancode.forKeysym(0xFF61) == 0x54, "Print")
        #expect(XTScancode.forKeysym(0xFF13) == 0xC6, "Pause")
        #expect(XTScancode.forKeysym(0x61) == nil, "letters depend on the layout and travel as keysyms")
        #expect(ClientMessage.qemuKeyEvent(down: true, keysym: 0xFF53, scancode: 0xCD).encoded()
                == [255, 0, 0, 1, 0, 0, 0xFF, 0x53, 0, 0, 0, 0xCD])
        #expect(ClientMessage.qemuKeyEvent(down: false, keysym: 0x61, scancode: 0x1E).encoded()
                == [255, 0, 0, 0, 0, 0, 0, 0x61, 0, 0, 0, 0x1E])
    }

    @Test func trackerReleasesWhatIsHeldAndIgnoresStrayReleases() {
        var t = InputTracker()
        let first = t.key(0xFFE3, down: true), second = t.key(0x61, down: true), repeated = t.key(0x61, down: true)
        #expect(first && second && repeated, "presses (repeats included) are sent")
        #expect(t.pressedKeys == [0xFFE3, 0x61])
        let stray = t.key(0x62, down: false)
        #expect(!stray, "releasing a key that is not down sends nothing")
        let mask1 = t.button(1, down: true), mask3 = t.button(3, down: true)
        #expect(mask1 == 0b1 && mask3 == 0b101)
        _ = t.move(toX: 10, y: 20, width: 100, height: 100)
        let release = t.releaseAll()
        #expect(release == [.keyEvent(down: false, keysym: 0x61), .keyEvent(down: false, keysym: 0xFFE3),
                            .pointerEvent(buttonMask: 0, x: 10, y: 20)])
        let again = t.releaseAll()
        #expect(again.isEmpty, "nothing is held any more")
        let wheel = t.button(7, down: true)
        #expect(wheel == 0b100_0000, "wheel right is button 7")
    }

    @Test func relativeMotionAccumulatesFractionsAndClamps() {
        var t = InputTracker()
        _ = t.move(toX: 5, y: 5, width: 50, height: 40)
        var position = (x: 5, y: 5)
        for _ in 0..<10 { position = t.move(byX: 0.25, y: -0.3, width: 50, height: 40) }
        #expect(position.x == 7 && position.y == 2, "ten quarter-pixel moves add up to 2.5 px, not zero")
        let far = t.move(byX: 1000, y: 1000, width: 50, height: 40)
        #expect(far == (49, 39))
        let back = t.move(byX: -0.5, y: 0, width: 50, height: 40)
        #expect(back == (48, 39), "half a pixel back from the clamped edge")
        let clamped = t.move(toX: -4, y: 99, width: 50, height: 40)
        #expect(clamped == (0, 39))
    }

    @Test func viewOnlySessionsSendNoInputAndDoNotOfferScancodes() throws {
        var configuration = RFBConnection.Configuration()
        configuration.viewOnly = true
        var c = RFBConnection(configuration: configuration)
        _ = c.receive(ServerScript.handshake(width: 4, height: 4).bytes)
        #expect(!c.encodingList().contains(.qemuExtendedKeyEvent))
        let blocked: [ClientMessage] = [.keyEvent(down: true, keysym: 0x61), .pointerEvent(buttonMask: 1, x: 0, y: 0),
                                        .clientCutText([0x41]), .setDesktopSize(width: 8, height: 8, screens: []),
                                        .qemuKeyEvent(down: true, keysym: 0x61, scancode: 0x1E)]
        for message in blocked {
            #expect(throws: RFBError.viewOnly, "\(message) must not be sent") { _ = try c.send(message) }
        }
        #expect(throws: RFBError.viewOnly) { _ = try c.setClipboard("x") }
        let request = try c.send(.framebufferUpdateRequest(incremental: true, RFBRect(x: 0, y: 0, width: 4, height: 4)))
        #expect(!request.isEmpty, "update requests are not input")

        var interactive = RFBConnection(configuration: .init())
        _ = interactive.receive(ServerScript.handshake(width: 4, height: 4).bytes)
        #expect(interactive.encodingList().contains(.qemuExtendedKeyEvent))
        #expect(interactive.encodingList().contains(.extendedClipboard))
    }

    @Test func theQEMUPseudoRectangleEnablesScancodes() {
        var h = Harness()
        h.feed(ServerScript.handshake(width: 4, height: 4).bytes)
        #expect(h.connection.serverSupportsExtendedKeyEvents == false)
        var s = ServerScript()
        s.updateHeader(rects: 1)
        s.rect(RFBRect(x: 0, y: 0, width: 0, height: 0), .qemuExtendedKeyEvent, [])
        h.feed(s.bytes)
        #expect(h.connection.serverSupportsExtendedKeyEvents == true)
        #expect(h.closeError == nil)
    }

    /// The key-event choice and Xvnc's first-key rule, in the core: a Shift tap before a session's
    /// first press when that key is beyond Latin-1 (and only then, and only once); QEMU extended
    /// key events with a scancode once the server offers them, the keysym alone for typed text.
    @Test func keyMessagesChooseTheEventAndTapShiftBeforeAFirstKeymapKey() {
        var greek = RFBConnection(configuration: .init())
        _ = greek.receive(ServerScript.handshake(width: 4, height: 4).bytes)
        #expect(greek.keyMessages(0x7E1, down: true) == [.keyEvent(down: true, keysym: 0xFFE1), .keyEvent(down: false, keysym: 0xFFE1),
                                                         .keyEvent(down: true, keysym: 0x7E1)])
        #expect(greek.keyMessages(0x7E1, down: false) == [.keyEvent(down: false, keysym: 0x7E1)])
        #expect(greek.keyMessages(0x7E2, down: true) == [.keyEvent(down: true, keysym: 0x7E2)], "only the session's first key")

        var latin = RFBConnection(configuration: .init())
        _ = latin.receive(ServerScript.handshake(width: 4, height: 4).bytes)
        #expect(latin.keyMessages(0x61, down: true) == [.keyEvent(down: true, keysym: 0x61)])
        #expect(latin.keyMessages(0x7E1, down: true) == [.keyEvent(down: true, keysym: 0x7E1)], "a Latin-1 key took the switch")

        var qemu = RFBConnection(configuration: .init())
        _ = qemu.receive(ServerScript.handshake(width: 4, height: 4).bytes)
        var s = ServerScript()
        s.updateHeader(rects: 1)
        s.rect(RFBRect(x: 0, y: 0, width: 0, height: 0), .qemuExtendedKeyEvent, [])
        _ = qemu.receive(s.bytes)
        #expect(qemu.keyMessages(Keysym.returnKey, down: true) == [.qemuKeyEvent(down: true, keysym: Keysym.returnKey, scancode: 0x1C)])
        #expect(qemu.keyMessages(0x61, down: true) == [.keyEvent(down: true, keysym: 0x61)], "a layout-dependent key has no scancode of its own")
        #expect(qemu.keyMessages(0x61, down: false, scancode: 0x1E) == [.qemuKeyEvent(down: false, keysym: 0x61, scancode: 0x1E)])
        #expect(qemu.keyMessages(Keysym.returnKey, down: false, physicalKey: false) == [.keyEvent(down: false, keysym: Keysym.returnKey)],
                "typed text: the keysym alone")
    }

    @Test func croppingToAMonitorCopiesItsPixels() {
        var fb = Framebuffer(width: 4, height: 3)
        for i in fb.pixels.indices { fb.pixels[i] = UInt32(i) }
        let right = fb.cropped(to: RFBRect(x: 2, y: 1, width: 5, height: 5))
        #expect(right.width == 2 && right.height == 2)
        #expect(right.pixels == [6, 7, 10, 11])
    }
}
