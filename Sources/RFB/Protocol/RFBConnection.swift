import FarcastSupport

/// The RFB client protocol as a pure state machine: feed it the bytes the server sent, get back
/// what to send, what happened, and whether to start TLS or ask for credentials. It owns no
/// socket, thread or clock, so every rule is testable with byte vectors and a recorded stream
/// replays without a network.
///
/// The state is phase-typed: each `State` case carries what only that phase needs (the security
/// sub-machine and the credentials, the ServerInit flavour), so an impossible combination cannot
/// be represented. The phases live one per file (`RFBConnection+Version`, `+Security`,
/// `+ServerInit`, `+Session`); every byte in and out passes one `RecordLayerStage`.
///
/// Invariants: bytes are consumed strictly in order; a rectangle is decoded only after it has
/// been validated against the framebuffer; sends are sealed in the order they are produced;
/// after `.close` no further action is produced.
public struct RFBConnection: ~Copyable, Sendable {
    /// How the client wants the session to go.
    public struct Configuration: Sendable {
        /// Security methods in the order the user prefers them.
        public var securityPreference: [SecurityMethod] = SecurityMethod.defaultPreference
        /// Share the desktop with other clients (ClientInit shared-flag).
        public var shared = true
        /// The pixel format to ask the server for.
        public var pixelFormat: PixelFormat = .rgb888
        /// Pixel-data encodings in preference order; nil means Farcast's default order.
        /// Raw is always accepted even when not listed, as the protocol requires.
        public var encodings: [RFBEncoding]?
        /// JPEG quality level 0–9 for Tight; nil keeps Tight lossless (no JPEG).
        public var jpegQuality: Int?
        /// JPEG fine quality 0–100 (TigerVNC servers); sent only with `jpegQuality`.
        public var jpegFineQuality: Int?
        /// JPEG chroma subsampling (TigerVNC servers); sent only with `jpegQuality`.
        public var jpegSubsampling: JPEGSubsampling?
        /// zlib compression level 0–9, or nil for the server's default.
        public var compressionLevel: Int?
        /// Use ContinuousUpdates when the server offers it.
        public var continuousUpdates = true
        /// Keep asking for incremental updates (false: only the first frame is requested).
        public var requestsUpdates = true
        /// Ask for cursor shapes (Cursor, XCursor) so the client can draw the pointer itself.
        public var localCursor = true
        /// With `localCursor`, also ask for CursorWithAlpha and the VMware cursor position. Off for
        /// recordings that other clients replay (libvncclient knows neither).
        public var alphaCursor = true
        /// Ask a QEMU server for the guest's sound in this format (nil: no audio). Once the
        /// server confirms, the client sets the format and starts the stream; samples arrive as
        /// `RFBEvent.audio`.
        public var audio: RFBAudioFormat?
        /// Never send input (keys, pointer, clipboard) to the server.
        public var viewOnly = false
        /// Offer QEMU extended key events (scancodes beside keysyms).
        public var extendedKeyEvents = true
        /// Offer the Extended Clipboard (UTF-8). Off: the classic Latin-1 messages only.
        public var extendedClipboard = true

        /// Random bytes for key exchanges (tests substitute known values).
        var randomBytes: @Sendable (Int) -> [UInt8] = { count in
            var generator = SystemRandomNumberGenerator()
            return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
        /// The RSA-AES client key (tests); nil makes a fresh 2048-bit key per connection.
        var rsaClientKey: RSAAES.ClientKey?
        /// Never enter VeNCrypt: set for a second attempt after VeNCrypt offered nothing this
        /// client can complete (the subtypes are only revealed after choosing it).
        var avoidVeNCrypt = false

        public init() {}

        /// Default pixel-data encodings, best compression first (TigerVNC's order plus the ones
        /// its viewer lacks).
        public static let defaultEncodings: [RFBEncoding] = [.copyRect, .tight, .zrle, .hextile, .zlib, .trle, .coRRE, .rre, .raw]
    }

    /// What the transport must do.
    public enum Action: Sendable {
        /// Write these bytes to the server.
        case send([UInt8])
        /// Start a TLS client handshake on the connection now, then call `tlsEstablished()`.
        case startTLS
        /// Obtain credentials and call `provideCredentials(_:)`.
        case requestCredentials(CredentialRequest)
        /// Check the server's RSA-AES public key (trust on first use), then call
        /// `serverKeyVerified()` — or close the connection.
        case verifyServerKey(ServerKeyCheck)
        /// The handshake finished; the session is ready.
        indirect case ready(ServerInfo)
        case event(RFBEvent)
        /// The session is over; close the connection.
        case close(RFBError)
    }

    /// Where the connection is, with each phase's own data.
    enum State: Sendable {
        /// Waiting for the server's RFB banner.
        case version
        /// Choosing and running a security method; the credentials live only here.
        case security(SecurityPhase)
        /// ClientInit sent; ServerInit expected (`tightCapabilities`: with Tight's capability
        /// lists after the name).
        case serverInit(tightCapabilities: Bool)
        /// The normal phase: server messages, and client messages through `send`.
        case session
        case closed
    }

    /// What the handshake agreed, kept for reports and error messages after it ends.
    struct Negotiation: Sendable {
        var banner = ""
        var minorVersion = 0
        var offeredSecurityTypes: [SecurityType] = []
        var offeredVeNCryptSubtypes: [UInt32] = []
        var chosenMethod: SecurityMethod?
    }

    struct RectHeader: Sendable {
        var rect: RFBRect
        var encoding: RFBEncoding
    }

    struct UpdateInProgress: Sendable {
        /// Rectangles still to come; nil when the server announced 65535 and ends with LastRect.
        var remaining: Int?
        var current: RectHeader?
        var progress: RectProgress = .start
        var dirty: [RFBRect] = []
    }

    public internal(set) var configuration: Configuration
    var state: State = .version
    var negotiation = Negotiation()
    /// Frames and unframes every byte once a security method agreed keys.
    private var stage = RecordLayerStage()

    /// Minor version agreed (3, 7 or 8).
    public var minorVersion: Int { negotiation.minorVersion }
    public var banner: String { negotiation.banner }
    /// Security types the server offered, for reports and error messages.
    public var offeredSecurityTypes: [SecurityType] { negotiation.offeredSecurityTypes }
    public var offeredVeNCryptSubtypes: [UInt32] { negotiation.offeredVeNCryptSubtypes }
    public var chosenMethod: SecurityMethod? { negotiation.chosenMethod }

    // The session's data. It outlives the session phase (a closed connection still shows the
    // last picture) and is mutated in place on the hot path, so it is stored here rather than
    // in the `.session` case, where every change would have to move megabytes out and back.
    public internal(set) var serverInfo: ServerInfo?
    /// The client's copy of the remote screen.
    public internal(set) var framebuffer = Framebuffer(width: 0, height: 0)
    /// The monitor layout (one screen covering the framebuffer unless the server said otherwise).
    public internal(set) var screens: [RFBScreen] = []
    public internal(set) var desktopName = ""
    public internal(set) var cursor: RFBCursor?
    /// True once the server announced ContinuousUpdates support.
    public internal(set) var serverSupportsContinuousUpdates = false
    public internal(set) var continuousUpdatesActive = false
    public internal(set) var serverSupportsFence = false
    /// Extended Clipboard state (UTF-8 clipboard), active once the server sent its caps.
    public internal(set) var clipboard = ExtendedClipboard()
    /// True once the server sent an ExtendedDesktopSize rectangle (it then accepts SetDesktopSize).
    public internal(set) var serverSupportsExtendedDesktopSize = false
    /// True once the server confirmed QEMU extended key events (a -258 pseudo-rectangle).
    public internal(set) var serverSupportsExtendedKeyEvents = false
    /// False until this session has pressed a key (`keyMessages`).
    var keyboardUsed = false
    /// True once the server confirmed ExtendedMouseButtons (a -316 pseudo-rectangle).
    public internal(set) var serverSupportsExtendedMouseButtons = false
    /// The server confirmed QEMU audio (and the stream was started in `Configuration.audio`).
    public internal(set) var serverSupportsAudio = false
    /// Updates completed so far.
    public internal(set) var updatesReceived = 0
    /// Rectangles decoded so far (pixel data only) and their pixels.
    public internal(set) var rectanglesDecoded = 0
    public internal(set) var pixelsDecoded = 0
    /// Tight rectangles that carried JPEG (lossy) data.
    public var tightJPEGRectangles: Int { decoder.jpegRectangles }
    /// Rectangles decoded per encoding (pixel data only), to see what the server really used.
    public internal(set) var rectanglesByEncoding: [RFBEncoding: Int] = [:]
    /// Tight's interaction capabilities from ServerInit: the encodings the server names.
    public internal(set) var tightEncodingCapabilities: [String] = []
    var decoder: DecoderState
    var update: UpdateInProgress?
    var coverage: CoverageMap?

    // The receive buffer: plaintext (after the record-layer stage), consumed in order.
    private var input: [UInt8] = []
    private(set) var readIndex = 0
    /// Stream offset of input[0] (input is compacted as it is consumed).
    private var inputBase = 0
    /// Stream offset just past the last complete server message of the normal phase: a
    /// recording cut anywhere can be trimmed back to here and still decode to its end.
    public private(set) var lastMessageBoundary = 0
    /// The most memory the engine's own buffers held at once: framebuffer, scratch, receive
    /// buffer and zlib windows (codec libraries' internal state aside).
    public private(set) var peakBufferBytes = 0

    /// Memory the engine's buffers hold now (see `peakBufferBytes`).
    public var bufferBytes: Int {
        framebuffer.pixels.capacity * 4 + decoder.scratch.capacity + decoder.gradientRow.capacity * 4 + input.capacity
            + 6 * (32 << 10)      // one 32 KiB window per zlib stream (Zlib, ZRLE, four Tight)
    }
    /// Don't re-parse until the input holds this many bytes (avoids re-parsing a large
    /// length-prefixed payload on every arriving segment).
    private var waitUntil = 0

    public init(configuration: Configuration = Configuration(), jpegDecoder: (any JPEGDecoding)? = makeDefaultJPEGDecoder()) {
        self.configuration = configuration
        decoder = DecoderState(format: configuration.pixelFormat, jpeg: jpegDecoder)
    }

    public var isClosed: Bool {
        if case .closed = state { return true }
        return false
    }

    public var isReady: Bool {
        if case .session = state { return true }
        return false
    }

    /// Bytes received from the server so far (after decryption).
    public var bytesReceived: Int { inputBase + input.count }

    /// Input received but not yet consumed (a message in progress).
    var hasUnreadInput: Bool { readIndex < input.count }

    /// While the handshake runs, what the client waits for from the server, for timeout messages;
    /// nil once the session is ready.
    public var handshakeStep: String? {
        switch state {
        case .version: return "its RFB banner"
        case .security(let phase): return phase.waitingFor
        case .serverInit: return "its ServerInit (desktop size and name)"
        case .session, .closed: return nil
        }
    }

    // MARK: - Inputs

    /// Feeds bytes received from the server.
    ///
    /// In the session, whatever `bytes` holds past a message in progress is parsed straight from
    /// `bytes` (`processBorrowed`): only the rest of that message is copied into the input buffer
    /// to finish it, and only a message the read cuts off at its end is kept there for the next.
    public mutating func receive(_ bytes: UnsafeRawBufferPointer) -> [Action] {
        guard !isClosed else { return [] }
        var out = takeOutput()
        if out.stage.opensInput {
            do {
                input += try out.open(bytes)
            } catch {
                fail(error, &out)
                return finish(out)
            }
            process(&out)
            return finish(out)
        }
        var rest = bytes
        // A message in progress gets what it still needs, a step at a time (a decoder may learn
        // of more as it reads: a length, then the data).
        while inSession, readIndex < input.count, waitUntil > input.count, !rest.isEmpty {
            let take = min(waitUntil - input.count, rest.count)
            input.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<take]))
            rest = UnsafeRawBufferPointer(rebasing: rest[take...])
            process(&out)
        }
        guard !rest.isEmpty, !isClosed else { return finish(out) }
        if inSession && input.isEmpty {
            let consumed = processBorrowed(rest, &out)
            if !isClosed {
                inputBase += consumed
                input.append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[consumed...]))
                peakBufferBytes = max(peakBufferBytes, bufferBytes)
            }
        } else {
            input.append(contentsOf: rest)
            process(&out)
        }
        return finish(out)
    }

    private var inSession: Bool {
        if case .session = state { return true }
        return false
    }

    public mutating func receive(_ bytes: [UInt8]) -> [Action] {
        bytes.withUnsafeBytes { receive($0) }
    }

    /// The server key offered in `.verifyServerKey` is trusted: carry on with the login.
    public mutating func serverKeyVerified() -> [Action] {
        guard case .security(var phase) = state, case .method(.rsaAES(var machine)) = phase.step else { return [] }
        var out = takeOutput()
        do {
            guard let outcome = try machine.serverKeyVerified(configuration, &out) else { return finish(out) }
            phase.step = .method(.rsaAES(machine))
            _ = apply(outcome, to: phase, &out)
        } catch {
            fail(error, &out)
            return finish(out)
        }
        process(&out)
        return finish(out)
    }

    /// Supplies the credentials asked for with `.requestCredentials`. They are kept only until
    /// the security phase ends.
    public mutating func provideCredentials(_ credentials: VNCCredentials) -> [Action] {
        guard case .security(var phase) = state else { return [] }
        phase.credentials = credentials
        state = .security(phase)
        var out = takeOutput()
        process(&out)
        return finish(out)
    }

    /// The TLS handshake asked for with `.startTLS` completed; bytes from now on are the
    /// decrypted stream.
    public mutating func tlsEstablished() -> [Action] {
        guard case .security(let phase) = state, case .method(let machine) = phase.step,
              let outcome = machine.tlsEstablished() else { return [] }
        var out = takeOutput()
        _ = apply(outcome, to: phase, &out)
        process(&out)
        return finish(out)
    }

    /// The transport saw end of stream or an error (`cause`: the OS reason, e.g. "connection
    /// reset by peer", when the connection broke rather than ended).
    public mutating func connectionClosed(cause: String? = nil) -> [Action] {
        let context: String
        switch state {
        case .closed: return []
        case .version: context = "before the server sent its RFB banner"
        case .security(let phase): context = phase.closedContext
        case .serverInit: context = "during the handshake"
        case .session: context = sessionClosedContext
        }
        state = .closed
        return [.close(.connectionClosed(cause.map { "\(context) (\($0))" } ?? context))]
    }

    /// Sends a normal-phase message (input events, update requests, resize requests). In
    /// view-only mode input is refused here with `.viewOnly`: the one place that rule is kept,
    /// so nothing can slip through whichever way it was sent.
    public mutating func send(_ message: ClientMessage) throws(RFBError) -> [Action] {
        guard isReady else { return [] }
        if configuration.viewOnly && message.isInput { throw .viewOnly }
        return sending(message.encoded())
    }

    /// Hands clipboard text to the server: Extended Clipboard (UTF-8) when the server offers it,
    /// else ClientCutText in ISO 8859-1, where characters outside Latin-1 become "?".
    public mutating func setClipboard(_ text: String) throws(RFBError) -> [Action] {
        guard isReady else { return [] }
        guard !configuration.viewOnly else { throw .viewOnly }
        if clipboard.isActive { return sending(try clipboard.offer(text)) }
        let latin1 = text.unicodeScalars.map { $0.value <= 0xFF ? UInt8($0.value) : UInt8(ascii: "?") }
        return try send(.clientCutText(latin1))
    }

    /// Asks an Extended Clipboard server for its text (it answers with a provide message).
    public mutating func requestClipboard() -> [Action] {
        guard isReady, clipboard.isActive, !configuration.viewOnly else { return [] }
        return sending(ExtendedClipboard.message(flags: ExtendedClipboard.request | ExtendedClipboard.text))
    }

    /// Asks for an update of the whole framebuffer.
    public mutating func requestUpdate(incremental: Bool) -> [Action] {
        guard isReady else { return [] }
        return sending(ClientMessage.framebufferUpdateRequest(incremental: incremental, fullFrame).encoded())
    }

    private mutating func sending(_ bytes: [UInt8]) -> [Action] {
        var out = takeOutput()
        out.send(bytes)
        return finish(out)
    }

    // MARK: - The parse loop

    /// Moves the stage into an output for one call (its buffers stay uniquely referenced).
    private mutating func takeOutput() -> ConnectionOutput {
        defer { stage = RecordLayerStage() }
        return ConnectionOutput(stage: stage)
    }

    private mutating func finish(_ out: ConnectionOutput) -> [Action] {
        stage = out.stage
        return out.actions
    }

    private mutating func process(_ out: inout ConnectionOutput) {
        while !isClosed, input.count >= waitUntil {
            var reader = ByteReader(input, offset: readIndex)
            let framedBefore = out.stage.opensInput
            do {
                let progressed = try step(&reader, &out)
                readIndex = reader.offset
                waitUntil = 0
                if !framedBefore && out.stage.opensInput {
                    // Keys were just agreed: what arrived after that message is framed.
                    let plaintext = try out.open(input[readIndex...])
                    input.removeSubrange(readIndex...)
                    input += plaintext
                }
                if case .session = state, update == nil { lastMessageBoundary = inputBase + readIndex }
                if !progressed { break }
            } catch let truncated as TruncatedInput {
                // Steps leave the reader at their last commit point when input runs out.
                readIndex = reader.offset
                waitUntil = truncated.offset + truncated.needed
                break
            } catch {
                fail(error, &out)
            }
        }
        compactInput()
        peakBufferBytes = max(peakBufferBytes, bufferBytes)
    }

    /// The session's parse loop over a read, with nothing pending in `input` (which is empty
    /// and starts at stream offset `inputBase`). Returns how many bytes whole steps consumed;
    /// the caller keeps the rest in `input`, and `waitUntil` is set relative to that rest.
    private mutating func processBorrowed(_ bytes: UnsafeRawBufferPointer, _ out: inout ConnectionOutput) -> Int {
        var consumed = 0
        waitUntil = 0
        // Until a step runs out of bytes, as `process` does: a step that consumes nothing may
        // still finish something (the update whose last rectangle ended the read).
        while !isClosed, inSession {
            var reader = ByteReader(borrowing: bytes, offset: consumed)
            do {
                try readMessage(&reader, &out)
                consumed = reader.offset
                if update == nil { lastMessageBoundary = inputBase + consumed }
            } catch let truncated as TruncatedInput {
                // Steps leave the reader at their last commit point when input runs out.
                consumed = reader.offset
                waitUntil = truncated.offset + truncated.needed - consumed
                break
            } catch {
                fail(error, &out)
            }
        }
        return consumed
    }

    private mutating func fail(_ error: any Error, _ out: inout ConnectionOutput) {
        state = .closed
        update = nil
        input = []
        readIndex = 0
        out.append(.close(error as? RFBError ?? .protocolViolation(String(describing: error))))
    }

    private mutating func compactInput() {
        if readIndex == input.count {
            waitUntil = max(0, waitUntil - readIndex)
            input.removeAll(keepingCapacity: input.capacity <= 4 << 20)
            inputBase += readIndex
            readIndex = 0
        } else if readIndex >= 1 << 16 && readIndex * 2 >= input.count {
            input.removeSubrange(0..<readIndex)
            waitUntil = max(0, waitUntil - readIndex)
            inputBase += readIndex
            readIndex = 0
        }
    }

    /// Runs one step of the current phase. Returns false when blocked on something other than
    /// input (credentials, TLS, a key check).
    private mutating func step(_ reader: inout ByteReader, _ out: inout ConnectionOutput) throws -> Bool {
        switch state {
        case .session:
            try readMessage(&reader, &out)
            return true
        case .version:
            try readVersion(&reader, &out)
            return true
        case .security(let phase):
            return try securityStep(phase, &reader, &out)
        case .serverInit(let tightCapabilities):
            try readServerInit(&reader, tightCapabilities: tightCapabilities, &out)
            return true
        case .closed:
            return false
        }
    }

    /// Ends the security phase: ClientInit (the shared flag), then ServerInit is expected.
    mutating func sendClientInit(_ out: inout ConnectionOutput) {
        out.send([configuration.shared ? 1 : 0])
        state = .serverInit(tightCapabilities: negotiation.chosenMethod == .tight)
    }
}

/// Which pixels have been received at least once; tracks the first complete frame.
struct CoverageMap: Sendable {
    let width: Int, height: Int
    private var bits: [UInt64]
    private var covered = 0

    init(width: Int, height: Int) {
        self.width = width
        self.height = height
        bits = [UInt64](repeating: 0, count: (width * height + 63) / 64)
    }

    var isComplete: Bool { covered >= width * height }

    mutating func mark(_ rect: RFBRect) {
        let r = rect.intersection(RFBRect(x: 0, y: 0, width: width, height: height))
        guard !r.isEmpty else { return }
        for y in r.y..<(r.y + r.height) {
            var i = y * width + r.x
            let end = i + r.width
            while i < end {
                let word = i >> 6, bit = i & 63
                let n = min(64 - bit, end - i)
                let mask: UInt64 = (n == 64 ? ~0 : ((1 << UInt64(n)) - 1)) << UInt64(bit)
                covered += (mask & ~bits[word]).nonzeroBitCount
                bits[word] |= mask
                i += n
            }
        }
    }
}
