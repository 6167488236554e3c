import FarcastSupport

extension RFBConnection {
    /// Changes the JPEG quality level mid-session (nil: lossless) and returns the SetEncodings
    /// that tells the server; what it sends after that follows the new list.
    public mutating func changeJPEGQuality(_ quality: Int?) -> ClientMessage {
        configuration.jpegQuality = quality.map { min(max($0, 0), 9) }
        return .setEncodings(encodingList())
    }

    /// The SetEncodings list: pixel encodings in preference order, then pseudo-encodings.
    public func encodingList() -> [RFBEncoding] {
        var list = configuration.encodings ?? Configuration.defaultEncodings
        if let q = configuration.jpegQuality, decoder.jpeg != nil {
            list.append(.jpegQuality(min(max(q, 0), 9)))
            if let fine = configuration.jpegFineQuality { list.append(.jpegFineQuality(min(max(fine, 0), 100))) }
            if let sub = configuration.jpegSubsampling { list.append(.jpegSubsampling(sub)) }
        }
        if let c = configuration.compressionLevel { list.append(.compressionLevel(min(max(c, 0), 9))) }
        list += [.extendedDesktopSize, .desktopSize, .lastRect, .desktopName, .fence]
        if configuration.continuousUpdates { list.append(.continuousUpdates) }
        if configuration.extendedKeyEvents && !configuration.viewOnly { list.append(.qemuExtendedKeyEvent) }
        if !configuration.viewOnly { list.append(.extendedMouseButtons) }
        if configuration.extendedClipboard { list.append(.extendedClipboard) }
        if configuration.audio != nil { list.append(.qemuAudio) }
        if configuration.localCursor {
            list += configuration.alphaCursor ? [.cursorWithAlpha, .cursor, .xCursor, .vmwareCursorPosition] : [.cursor, .xCursor]
        }
        return list
    }

    /// The PointerEvent for `buttons` (bit n = button n + 1) at (x, y). Once the server has
    /// ExtendedMouseButtons, button 8 and above travel in the extra byte (the mask's top bit is
    /// then the marker); before that, buttons 1–8 fit the classic mask and 9–15 cannot be sent.
    public func pointerMessage(buttons: UInt16, x: Int, y: Int) throws(RFBError) -> ClientMessage {
        if serverSupportsExtendedMouseButtons {
            return buttons & 0xFF80 == 0 ? .pointerEvent(buttonMask: UInt8(buttons), x: x, y: y)
                                         : .extendedPointerEvent(buttons: buttons, x: x, y: y)
        }
        guard buttons <= 0xFF else {
            throw .unsupported("mouse buttons 9–15 need a server with ExtendedMouseButtons (TigerVNC 1.14 or later, QEMU); this one has only 1–8")
        }
        return .pointerEvent(buttonMask: UInt8(buttons), x: x, y: y)
    }

    /// The messages that press or release a key. With QEMU extended key events (when the server
    /// offers them) and a scancode — `scancode`, else the keysym's usual key when `physicalKey` —
    /// the physical key travels too; otherwise the keysym alone (typed text, which must come out
    /// the same whatever the server's layout).
    ///
    /// Xvnc takes the first key event after it starts through a switch of its core keyboard, and
    /// an application then reads a keysym the server had to add to its keymap for that very press
    /// as NoSymbol (checked: a fresh Xvnc, "α" typed first arrives as keysym 0). When a session's
    /// first key press is such a keysym, a Shift tap goes first and takes the switch.
    public mutating func keyMessages(_ keysym: UInt32, down: Bool, scancode: UInt32? = nil, physicalKey: Bool = true) -> [ClientMessage] {
        var messages: [ClientMessage] = []
        if down && !keyboardUsed {
            keyboardUsed = true
            if Self.mayNeedKeymapChange(keysym) {
                messages += [.keyEvent(down: true, keysym: Keysym.shiftLeft), .keyEvent(down: false, keysym: Keysym.shiftLeft)]
            }
        }
        let code = serverSupportsExtendedKeyEvents ? scancode ?? (physicalKey ? XTScancode.forKeysym(keysym) : nil) : nil
        messages.append(code.map { .qemuKeyEvent(down: down, keysym: keysym, scancode: $0) } ?? .keyEvent(down: down, keysym: keysym))
        return messages
    }

    /// Keysyms beyond Latin-1, which a common keymap lacks, except the function-key page
    /// (Return, arrows, modifiers, keypad), which every keymap has.
    public static func mayNeedKeymapChange(_ keysym: UInt32) -> Bool {
        keysym > 0xFF && !(0xFF00...0xFFFF).contains(keysym)
    }

    // MARK: - Normal phase

    mutating func readMessage(_ reader: inout ByteReader, _ out: inout ConnectionOutput) throws {
        if update != nil {
            try continueUpdate(&reader, &out)
            return
        }
        var r = reader
        let byte = try r.readUInt8()
        guard let type = ServerMessageType(rawValue: byte) else { throw RFBError.unknownMessageType(byte) }
        switch type {
        case .framebufferUpdate:
            try r.skip(1)
            let count = Int(try r.readInteger(as: UInt16.self))
            reader = r
            update = UpdateInProgress(remaining: count == 0xFFFF ? nil : count)
            // Pipelining: ask for the next update now, so the server prepares it while this
            // one is decoded.
            if configuration.requestsUpdates && !continuousUpdatesActive {
                out.send(ClientMessage.framebufferUpdateRequest(incremental: true, fullFrame).encoded())
            }
        case .setColourMapEntries:
            try r.skip(1)
            let first = Int(try r.readInteger(as: UInt16.self))
            let count = Int(try r.readInteger(as: UInt16.self))
            let colours = try r.withUnsafeBytes(count: count * 6) { raw -> [UInt32] in
                (0..<count).map { i in
                    // 16-bit intensities; the high byte is the 8-bit value.
                    0xFF00_0000 | UInt32(raw[i * 6]) << 16 | UInt32(raw[i * 6 + 2]) << 8 | UInt32(raw[i * 6 + 4])
                }
            }
            reader = r
            guard first + count <= 65536 else { throw RFBError.protocolViolation("colour map entries \(first)…\(first + count) exceed 65536") }
            decoder.converter.setColours(first: first, colours: colours)
            out.append(.event(.colourMapChanged(first: first, count: count)))
        case .bell:
            reader = r
            out.append(.event(.bell))
        case .serverCutText:
            try r.skip(3)
            let length = Int(try r.readInteger(as: Int32.self))
            guard length.magnitude <= 32 << 20 else {
                throw RFBError.protocolViolation("clipboard text of \(length.magnitude) bytes (limit 32 MiB)")
            }
            if length >= 0 {
                let text = try r.readLatin1(length)
                reader = r
                out.append(.event(.serverClipboard(text)))
            } else {
                let body = try r.readBytes(Int(length.magnitude))
                reader = r
                let outcome = try clipboard.handle(body)
                for reply in outcome.replies where !configuration.viewOnly || reply == ExtendedClipboard.clientCaps() {
                    out.send(reply)
                }
                if let text = outcome.text { out.append(.event(.serverClipboard(text))) }
                if outcome.fetched { out.append(.event(.clipboardFetched)) }
            }
        case .qemu:
            // QEMU's server messages: subtype 1 is audio (0 end, 1 begin, 2 data).
            let subtype = try r.readUInt8()
            guard subtype == 1 else { throw RFBError.protocolViolation("QEMU server message of unknown subtype \(subtype)") }
            let operation = try r.readInteger(as: UInt16.self)
            switch operation {
            case 0:
                reader = r
                out.append(.event(.audio(.ended)))
            case 1:
                reader = r
                out.append(.event(.audio(.began)))
            case 2:
                let length = Int(try r.readInteger(as: UInt32.self))
                guard length <= 1 << 20 else { throw RFBError.protocolViolation("QEMU audio data of \(length) bytes (limit 1 MiB)") }
                let samples = try r.readBytes(length)
                reader = r
                out.append(.event(.audio(.samples(samples))))
            default:
                throw RFBError.protocolViolation("QEMU audio message of unknown operation \(operation)")
            }
        case .endOfContinuousUpdates:
            reader = r
            if !serverSupportsContinuousUpdates {
                serverSupportsContinuousUpdates = true
                if configuration.continuousUpdates && configuration.requestsUpdates {
                    continuousUpdatesActive = true
                    out.send(ClientMessage.enableContinuousUpdates(true, fullFrame).encoded())
                }
            } else if continuousUpdatesActive {
                // The server ended continuous updates: fall back to requesting them.
                continuousUpdatesActive = false
                if configuration.requestsUpdates {
                    out.send(ClientMessage.framebufferUpdateRequest(incremental: true, fullFrame).encoded())
                }
            }
        case .serverFence:
            try r.skip(3)
            let flags = try r.readInteger(as: UInt32.self)
            let length = Int(try r.readUInt8())
            guard length <= 64 else { throw RFBError.protocolViolation("fence payload of \(length) bytes (at most 64)") }
            let payload = try r.readBytes(length)
            reader = r
            serverSupportsFence = true
            if flags & 0x8000_0000 != 0 {
                // Messages are processed strictly in order, so BlockBefore, BlockAfter and
                // SyncNext hold trivially; echo them, clear Request.
                out.send(ClientMessage.clientFence(flags: flags & 0x7, payload: payload).encoded())
            } else {
                out.append(.event(.fenceResponse(payload: payload)))
            }
        case .xvp:
            try r.skip(3)
            reader = r
        }
    }

    /// Why the server's hang-up is worth mentioning: mid-update and mid-message are truncations.
    var sessionClosedContext: String {
        if update != nil { return "in the middle of a framebuffer update" }
        if hasUnreadInput { return "in the middle of a server message" }
        return "by the server"
    }

    var fullFrame: RFBRect { RFBRect(x: 0, y: 0, width: framebuffer.width, height: framebuffer.height) }

    mutating func continueUpdate(_ reader: inout ByteReader, _ out: inout ConnectionOutput) throws {
        guard var current = update else { return }
        defer { if update != nil { update = current } }
        if current.remaining == 0 {
            finishUpdate(current, &out)
            return
        }
        if current.current == nil {
            var r = reader
            let x = Int(try r.readInteger(as: UInt16.self)), y = Int(try r.readInteger(as: UInt16.self))
            let w = Int(try r.readInteger(as: UInt16.self)), h = Int(try r.readInteger(as: UInt16.self))
            let encoding = RFBEncoding(try r.readInteger(as: Int32.self))
            reader = r
            current.current = RectHeader(rect: RFBRect(x: x, y: y, width: w, height: h), encoding: encoding)
            current.progress = .start
        }
        let header = current.current!
        let rect = header.rect
        if header.encoding.isPixelData {
            guard framebuffer.contains(rect) else {
                throw RFBError.rectangleOutOfBounds(encoding: header.encoding.description, x: rect.x, y: rect.y, width: rect.width,
                                                    height: rect.height, framebufferWidth: framebuffer.width, framebufferHeight: framebuffer.height)
            }
            switch header.encoding {
            case .raw:
                var rows = 0
                if case .raw(let done) = current.progress { rows = done }
                defer { current.progress = .raw(rowsDone: rows) }
                try RawDecoder.decode(&reader, rect: rect, rowsDone: &rows, framebuffer: &framebuffer, converter: decoder.converter)
            case .copyRect:
                try CopyRectDecoder.decode(&reader, rect: rect, framebuffer: &framebuffer)
            case .rre, .coRRE:
                try RREDecoder.decode(&reader, rect: rect, compact: header.encoding == .coRRE, progress: &current.progress,
                                      framebuffer: &framebuffer, converter: decoder.converter)
            case .hextile:
                try HextileDecoder.decode(&reader, rect: rect, progress: &current.progress, framebuffer: &framebuffer, converter: decoder.converter)
            case .zlib:
                try ZlibDecoder.decode(&reader, rect: rect, state: &decoder, framebuffer: &framebuffer)
            case .tight:
                try TightDecoder.decode(&reader, rect: rect, state: &decoder, framebuffer: &framebuffer)
            case .trle:
                try TRLEDecoder.decode(&reader, rect: rect, progress: &current.progress, framebuffer: &framebuffer, converter: decoder.converter)
            case .zrle:
                try ZRLEDecoder.decode(&reader, rect: rect, state: &decoder, framebuffer: &framebuffer)
            default:
                throw RFBError.unsupportedEncoding(header.encoding.rawValue)
            }
            current.dirty.append(rect)
            rectanglesDecoded += 1
            pixelsDecoded += rect.area
            rectanglesByEncoding[header.encoding, default: 0] += 1
            coverage?.mark(rect)
        } else {
            try decodePseudo(header, &reader, &current, &out)
        }
        current.current = nil
        if header.encoding == .lastRect {
            current.remaining = 0
        } else if let remaining = current.remaining {
            current.remaining = remaining - 1
        }
        if current.remaining == 0 { finishUpdate(current, &out) }
    }

    mutating func decodePseudo(_ header: RectHeader, _ reader: inout ByteReader, _ current: inout UpdateInProgress,
                                       _ out: inout ConnectionOutput) throws {
        let rect = header.rect
        switch header.encoding {
        case .lastRect:
            break   // ends the update; handled by the caller
        case .qemuExtendedKeyEvent:
            serverSupportsExtendedKeyEvents = true
        case .extendedMouseButtons:
            serverSupportsExtendedMouseButtons = true
        case .qemuAudio:
            // QEMU confirms audio with this rectangle: set the format, then start the stream.
            if let format = configuration.audio, !serverSupportsAudio {
                serverSupportsAudio = true
                var w = ByteWriter()
                w.writeInteger(UInt8(255)); w.writeInteger(UInt8(1)); w.writeInteger(UInt16(2))
                w.writeInteger(format.sample.rawValue); w.writeInteger(UInt8(min(max(format.channels, 1), 2)))
                w.writeInteger(UInt32(clamping: format.sampleRate))
                w.writeInteger(UInt8(255)); w.writeInteger(UInt8(1)); w.writeInteger(UInt16(0))
                out.send(w.bytes)
            }
        case .vmwareCursorPosition:
            // The hotspot's new position, moved by the server or another client (not this one).
            out.append(.event(.pointerMoved(x: rect.x, y: rect.y)))
        case .cursorWithAlpha, .cursor, .xCursor:
            var r = reader
            let shape: RFBCursor
            switch header.encoding {
            case .cursorWithAlpha: shape = try CursorDecoder.decodeAlpha(&r, header: rect)
            case .cursor: shape = try CursorDecoder.decodeRich(&r, header: rect, converter: decoder.converter)
            default: shape = try CursorDecoder.decodeX(&r, header: rect)
            }
            reader = r
            cursor = shape
            out.append(.event(.cursorChanged(shape)))
        case .desktopSize:
            try resize(width: rect.width, height: rect.height, screens: nil, &out)
        case .extendedDesktopSize:
            serverSupportsExtendedDesktopSize = true
            var r = reader
            let count = Int(try r.readUInt8())
            try r.skip(3)
            var layout: [RFBScreen] = []
            for _ in 0..<count {
                let id = try r.readInteger(as: UInt32.self)
                let x = Int(try r.readInteger(as: UInt16.self)), y = Int(try r.readInteger(as: UInt16.self))
                let w = Int(try r.readInteger(as: UInt16.self)), h = Int(try r.readInteger(as: UInt16.self))
                let flags = try r.readInteger(as: UInt32.self)
                layout.append(RFBScreen(id: id, x: x, y: y, width: w, height: h, flags: flags))
            }
            reader = r
            if rect.x == 1 && rect.y != 0 {
                out.append(.event(.resizeRefused(status: rect.y)))
            } else {
                // x = 1 answers this client's SetDesktopSize: report it even when nothing changed.
                try resize(width: rect.width, height: rect.height, screens: layout, answersRequest: rect.x == 1, &out)
            }
        case .desktopName:
            var r = reader
            let length = Int(try r.readInteger(as: UInt32.self))
            guard length <= 1 << 20 else { throw RFBError.protocolViolation("desktop name of \(length) bytes") }
            let name = try r.readUTF8(length)
            reader = r
            desktopName = name
            out.append(.event(.desktopNameChanged(name)))
        default:
            throw RFBError.unsupportedEncoding(header.encoding.rawValue)
        }
    }

    mutating func resize(width: Int, height: Int, screens layout: [RFBScreen]?, answersRequest: Bool = false,
                                 _ out: inout ConnectionOutput) throws {
        guard width <= Framebuffer.maximumDimension, height <= Framebuffer.maximumDimension else {
            throw RFBError.framebufferTooLarge(width: width, height: height)
        }
        let changed = width != framebuffer.width || height != framebuffer.height
        framebuffer.resize(width: width, height: height)
        let newScreens = (layout?.isEmpty ?? true) ? [RFBScreen(id: 0, x: 0, y: 0, width: width, height: height)] : layout!
        let screensChanged = newScreens != screens
        screens = newScreens
        if changed, coverage != nil { coverage = CoverageMap(width: width, height: height) }
        if changed || screensChanged || answersRequest {
            out.append(.event(.resized(width: width, height: height, screens: newScreens)))
        }
        if changed && continuousUpdatesActive {
            out.send(ClientMessage.enableContinuousUpdates(true, fullFrame).encoded())
        }
    }

    mutating func finishUpdate(_ finished: UpdateInProgress, _ out: inout ConnectionOutput) {
        update = nil
        updatesReceived += 1
        var first = false
        if let map = coverage, map.isComplete {
            first = true
            coverage = nil
        }
        out.append(.event(.framebufferUpdated(dirty: finished.dirty, completesFirstFrame: first)))
    }
}
