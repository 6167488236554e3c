import FarcastSupport

/// The RFB client protocol as a pure state machine: feed it the bytes the server sent, get back
/// what to send, what happened, and whether to start TLS or ask for credentials. It owns no
/// socket, thread or clock, so every rule is testable with byte vectors and a recorded stream
/// replays without a network.
///
/// Invariants: bytes are consumed strictly in order; a rectangle is decoded only after it has
/// been validated against the framebuffer; after `.close` no further action is produced.
public struct RFBConnection: Sendable {
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
        case ready(ServerInfo)
        case event(RFBEvent)
        /// The session is over; close the connection.
        case close(RFBError)
    }

    enum Phase: Sendable, Equatable {
        case version
        case securityTypes
        case securityType33
        case securityFailureReason(refusedBeforeAuth: Bool)
        case vncAuthChallenge
        case veNCryptVersion
        case veNCryptVersionAck
        case veNCryptSubtypes
        case veNCryptSubtypeAck(SecurityMethod)
        case tlsHandshake(SecurityMethod)
        case plainCredentials
        case rsaServerKey
        case rsaVerifyingKey
        case rsaServerRandom
        case rsaServerHash
        case rsaSubtype
        case rsaCredentials
        case appleDHParameters
        case msLogonIIParameters
        case dhCredentials
        case tightTunnels
        case tightAuthTypes
        case securityResult
        case serverInit
        case messages
        case closed
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

    public private(set) var configuration: Configuration
    private(set) var phase: Phase = .version
    /// Minor version agreed (3, 7 or 8).
    public private(set) var minorVersion = 0
    public private(set) var banner = ""
    /// Security types the server offered, for reports and error messages.
    public private(set) var offeredSecurityTypes: [UInt8] = []
    public private(set) var offeredVeNCryptSubtypes: [UInt32] = []
    public private(set) var chosenMethod: SecurityMethod?
    public private(set) var serverInfo: ServerInfo?
    /// The client's copy of the remote screen.
    public private(set) var framebuffer = Framebuffer(width: 0, height: 0)
    /// The monitor layout (one screen covering the framebuffer unless the server said otherwise).
    public private(set) var screens: [RFBScreen] = []
    public private(set) var desktopName = ""
    public private(set) var cursor: RFBCursor?
    /// True once the server announced ContinuousUpdates support.
    public private(set) var serverSupportsContinuousUpdates = false
    public private(set) var continuousUpdatesActive = false
    public private(set) var serverSupportsFence = false
    /// Extended Clipboard state (UTF-8 clipboard), active once the server sent its caps.
    public private(set) var clipboard = ExtendedClipboard()
    /// True once the server sent an ExtendedDesktopSize rectangle (it then accepts SetDesktopSize).
    public private(set) var serverSupportsExtendedDesktopSize = false
    /// True once the server confirmed QEMU extended key events (a -258 pseudo-rectangle).
    public private(set) var serverSupportsExtendedKeyEvents = false
    /// True once the server confirmed ExtendedMouseButtons (a -316 pseudo-rectangle).
    public private(set) var serverSupportsExtendedMouseButtons = false
    /// The server confirmed QEMU audio (and the stream was started in `Configuration.audio`).
    public private(set) var serverSupportsAudio = false
    /// Updates completed so far.
    public private(set) var updatesReceived = 0
    /// Rectangles decoded so far (pixel data only) and their pixels.
    public private(set) var rectanglesDecoded = 0
    public private(set) var pixelsDecoded = 0
    /// Tight rectangles that carried JPEG (lossy) data.
    public var tightJPEGRectangles: Int { decoder.jpegRectangles }
    /// Rectangles decoded per encoding (pixel data only), to see what the server really used.
    public private(set) var rectanglesByEncoding: [RFBEncoding: Int] = [:]

    private var credentials: VNCCredentials?
    private var credentialsRequested = false
    /// Overrides the chosen method's need for a user name (RSA-AES: the server decides).
    private var usernameNeeded: Bool?
    private var rsa: RSAState?
    /// The Tight security type was used: ServerInit carries Tight's capability lists.
    private var tightServerInit = false
    /// Tight's interaction capabilities from ServerInit: the encodings the server names.
    public private(set) var tightEncodingCapabilities: [String] = []
    /// The EAX record layer of RSA-AES, once keys are agreed.
    private var recordLayer: RA2RecordLayer?
    /// Set by the step that turns the record layer on: input from here on is ciphertext.
    private var decryptRestOfInput = false
    /// Index into this call's actions from which sends are sealed (the step that turned
    /// sealing on sets it).
    private var sealFromAction: Int?
    private var dhResponse: (@Sendable (VNCCredentials) throws(RFBError) -> [UInt8])?

    struct RSAState: Sendable {
        var variant: RSAAES.Variant
        var serverKey: RSAAES.PublicKey?
        var clientKey: RSAAES.ClientKey?
        var clientRandom: [UInt8] = []
    }
    private var decoder: DecoderState
    private var update: UpdateInProgress?
    private var coverage: CoverageMap?
    private var input: [UInt8] = []
    private var readIndex = 0
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

    public var isClosed: Bool { phase == .closed }
    public var isReady: Bool { phase == .messages }

    /// Bytes received from the server so far (after decryption).
    public var bytesReceived: Int { inputBase + input.count }

    /// While the handshake runs, what the client waits for from the server, for timeout messages;
    /// nil once the session is ready.
    public var handshakeStep: String? {
        switch phase {
        case .version: return "its RFB banner"
        case .securityTypes, .securityType33: return "its list of security types"
        case .securityFailureReason: return "the reason for its refusal"
        case .vncAuthChallenge: return "its VNC authentication challenge"
        case .veNCryptVersion, .veNCryptVersionAck, .veNCryptSubtypes, .veNCryptSubtypeAck: return "the VeNCrypt negotiation"
        case .tlsHandshake: return "the TLS handshake"
        case .plainCredentials: return "the user name and password exchange"
        case .rsaServerKey, .rsaVerifyingKey, .rsaServerRandom, .rsaServerHash, .rsaSubtype, .rsaCredentials: return "the RSA-AES key exchange"
        case .appleDHParameters, .msLogonIIParameters, .dhCredentials: return "the Diffie-Hellman login"
        case .tightTunnels, .tightAuthTypes: return "the Tight security type's capability lists"
        case .securityResult: return "the result of authentication"
        case .serverInit: return "its ServerInit (desktop size and name)"
        case .messages, .closed: return nil
        }
    }

    // MARK: - Inputs

    /// Feeds bytes received from the server.
    public mutating func receive(_ bytes: UnsafeRawBufferPointer) -> [Action] {
        guard phase != .closed else { return [] }
        if recordLayer != nil {
            do {
                input += try recordLayer!.open(bytes)
            } catch {
                var actions: [Action] = []
                fail(error, &actions)
                return actions
            }
            // RA2ne: once the server is back to plain text and we send plain, the layer goes.
            if recordLayer!.receivesPlain && !recordLayer!.sealsOutput && phase == .securityResult { recordLayer = nil }
        } else {
            input.append(contentsOf: bytes)
        }
        return process()
    }

    public mutating func receive(_ bytes: [UInt8]) -> [Action] {
        bytes.withUnsafeBytes { receive($0) }
    }

    /// The server key offered in `.verifyServerKey` is trusted: carry on with the login.
    public mutating func serverKeyVerified() -> [Action] {
        guard phase == .rsaVerifyingKey, let serverKey = rsa?.serverKey, let variant = rsa?.variant else { return [] }
        var actions: [Action] = []
        do {
            let clientKey = try configuration.rsaClientKey ?? RSAAES.ClientKey.generate()
            let random = configuration.randomBytes(variant.randomLength)
            rsa?.clientKey = clientKey
            rsa?.clientRandom = random
            var w = ByteWriter()
            w.writeBytes(clientKey.blob)
            w.writeInteger(UInt16(serverKey.byteLength))
            w.writeBytes(serverKey.encrypt(random, random: configuration.randomBytes))
            actions.append(.send(w.bytes))
            phase = .rsaServerRandom
        } catch let error as RFBError {
            fail(error, &actions)
            return actions
        } catch {
            fail(.authenticationFailed(reason: "could not make an RSA key: \(error)"), &actions)
            return actions
        }
        return actions + process()
    }

    /// Supplies the credentials asked for with `.requestCredentials`.
    public mutating func provideCredentials(_ credentials: VNCCredentials) -> [Action] {
        self.credentials = credentials
        return process()
    }

    /// The TLS handshake asked for with `.startTLS` completed; bytes from now on are the
    /// decrypted stream.
    public mutating func tlsEstablished() -> [Action] {
        guard case .tlsHandshake(let method) = phase else { return [] }
        switch method {
        case .x509None, .tlsNone: phase = .securityResult
        case .x509Vnc, .tlsVnc: phase = .vncAuthChallenge
        default: phase = .plainCredentials
        }
        return process()
    }

    /// The transport saw end of stream or an error (`cause`: the OS reason, e.g. "connection
    /// reset by peer", when the connection broke rather than ended).
    public mutating func connectionClosed(cause: String? = nil) -> [Action] {
        guard phase != .closed else { return [] }
        let context: String
        switch phase {
        case .version: context = "before the server sent its RFB banner"
        case .messages where update != nil: context = "in the middle of a framebuffer update"
        case .messages where readIndex < input.count: context = "in the middle of a server message"
        case .messages: context = "by the server"
        case .securityResult, .vncAuthChallenge, .plainCredentials, .rsaSubtype, .rsaCredentials, .dhCredentials:
            context = "during authentication (the server may have rejected the credentials without a reason)"
        case .rsaServerKey, .rsaVerifyingKey, .rsaServerRandom, .rsaServerHash:
            context = "during the RSA-AES key exchange (TigerVNC before 1.13 lists RA2 but cannot do it)"
        default: context = "during the handshake"
        }
        phase = .closed
        return [.close(.connectionClosed(cause.map { "\(context) (\($0))" } ?? context))]
    }

    /// Sends a normal-phase message (input events, update requests, resize requests). In
    /// view-only mode input messages are dropped here, so nothing can slip through.
    public mutating func send(_ message: ClientMessage) -> [Action] {
        guard phase == .messages else { return [] }
        if configuration.viewOnly && message.isInput { return [] }
        return sealed([.send(message.encoded())])
    }

    /// Hands clipboard text to the server: Extended Clipboard (UTF-8) when the server offers it,
    /// else ClientCutText in ISO 8859-1, where characters outside Latin-1 become "?".
    public mutating func setClipboard(_ text: String) throws(RFBError) -> [Action] {
        guard phase == .messages else { return [] }
        guard !configuration.viewOnly else { throw .viewOnly }
        if clipboard.isActive { return sealed([.send(try clipboard.offer(text))]) }
        let latin1 = text.unicodeScalars.map { $0.value <= 0xFF ? UInt8($0.value) : UInt8(ascii: "?") }
        return send(.clientCutText(latin1))
    }

    /// Asks an Extended Clipboard server for its text (it answers with a provide message).
    public mutating func requestClipboard() -> [Action] {
        guard phase == .messages, clipboard.isActive, !configuration.viewOnly else { return [] }
        return sealed([.send(ExtendedClipboard.message(flags: ExtendedClipboard.request | ExtendedClipboard.text))])
    }

    /// Seals `.send` actions into RSA-AES frames when the session is encrypted.
    private mutating func sealed(_ actions: [Action], from start: Int = 0) -> [Action] {
        guard recordLayer?.sealsOutput == true else { return actions }
        var out = actions
        for i in out.indices where i >= start {
            if case .send(let bytes) = out[i] { out[i] = .send(recordLayer!.seal(bytes)) }
        }
        return out
    }

    /// Asks for an update of the whole framebuffer.
    public mutating func requestUpdate(incremental: Bool) -> [Action] {
        send(.framebufferUpdateRequest(incremental: incremental, RFBRect(x: 0, y: 0, width: framebuffer.width, height: framebuffer.height)))
    }

    // MARK: - The parse loop

    private mutating func process() -> [Action] {
        let sealingAlready = recordLayer?.sealsOutput == true
        sealFromAction = nil
        let actions = parse()
        if let start = sealingAlready ? 0 : sealFromAction { return sealed(actions, from: start) }
        return actions
    }

    private mutating func parse() -> [Action] {
        var actions: [Action] = []
        while phase != .closed, input.count >= waitUntil {
            var reader = ByteReader(input, offset: readIndex)
            do {
                let progressed = try step(&reader, &actions)
                readIndex = reader.offset
                waitUntil = 0
                if decryptRestOfInput {
                    // Everything after the message that switched the record layer on is framed.
                    decryptRestOfInput = false
                    let rest = input[readIndex...]
                    let plaintext = try recordLayer!.open(rest)
                    input.removeSubrange(readIndex...)
                    input += plaintext
                }
                if phase == .messages && update == nil { lastMessageBoundary = inputBase + readIndex }
                if !progressed { break }
            } catch let truncated as TruncatedInput {
                // Steps leave the reader at their last commit point when input runs out.
                readIndex = reader.offset
                waitUntil = truncated.offset + truncated.needed
                break
            } catch let error as RFBError {
                fail(error, &actions)
            } catch {
                fail(.protocolViolation(String(describing: error)), &actions)
            }
        }
        compactInput()
        peakBufferBytes = max(peakBufferBytes, bufferBytes)
        return actions
    }

    private mutating func fail(_ error: RFBError, _ actions: inout [Action]) {
        phase = .closed
        update = nil
        input = []
        readIndex = 0
        actions.append(.close(error))
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
    /// input (credentials, TLS).
    private mutating func step(_ reader: inout ByteReader, _ actions: inout [Action]) throws -> Bool {
        switch phase {
        case .version: try readVersion(&reader, &actions)
        case .securityTypes: try readSecurityTypes(&reader, &actions)
        case .securityType33: try readSecurityType33(&reader, &actions)
        case .securityFailureReason(let beforeAuth):
            var r = reader
            let reason = try readReason(&r) ?? "the server's failure message was malformed"
            reader = r
            throw beforeAuth ? RFBError.serverRefused(reason: reason) : RFBError.authenticationFailed(reason: reason)
        case .vncAuthChallenge:
            guard let password = try credentialsOrRequest(&actions)?.password else { return false }
            var r = reader
            let challenge = try r.readBytes(16)
            reader = r
            actions.append(.send(VNCAuthentication.response(challenge: challenge, password: password)))
            phase = .securityResult
        case .veNCryptVersion: try readVeNCryptVersion(&reader, &actions)
        case .veNCryptVersionAck:
            let status = try reader.readUInt8()
            guard status == 0 else { throw RFBError.protocolViolation("the server refused VeNCrypt version 0.2 (status \(status))") }
            phase = .veNCryptSubtypes
        case .veNCryptSubtypes: try readVeNCryptSubtypes(&reader, &actions)
        case .veNCryptSubtypeAck(let method):
            let status = try reader.readUInt8()
            guard status == 1 else { throw RFBError.authenticationFailed(reason: "the server refused VeNCrypt subtype \(method)") }
            try afterSubtypeAccepted(method, &reader, &actions)
        case .tlsHandshake:
            return false
        case .plainCredentials:
            guard let creds = try credentialsOrRequest(&actions) else { return false }
            var w = ByteWriter()
            let user = Array((creds.username ?? "").utf8), pass = Array(creds.password.utf8)
            w.writeInteger(UInt32(user.count))
            w.writeInteger(UInt32(pass.count))
            w.writeBytes(user)
            w.writeBytes(pass)
            actions.append(.send(w.bytes))
            phase = .securityResult
        case .rsaServerKey:
            var r = reader
            let key = try RSAAES.PublicKey.read(&r)
            reader = r
            rsa?.serverKey = key
            phase = .rsaVerifyingKey
            actions.append(.verifyServerKey(ServerKeyCheck(method: chosenMethod ?? .ra2, blob: key.blob)))
            return false
        case .rsaVerifyingKey:
            return false
        case .rsaServerRandom: try readRSAServerRandom(&reader, &actions)
        case .rsaServerHash:
            guard let state = rsa, let serverKey = state.serverKey, let clientKey = state.clientKey else { throw RFBError.notConnected }
            let received = try reader.readBytes(state.variant.hashLength)
            guard received == state.variant.hash(serverKey.blob, clientKey.blob) else {
                throw RFBError.authenticationFailed(reason: "the server's RSA-AES key confirmation does not match what was exchanged (a man in the middle?)")
            }
            phase = .rsaSubtype
        case .rsaSubtype:
            let subtype = try reader.readUInt8()
            switch subtype {
            case 1: usernameNeeded = true
            case 2: usernameNeeded = false
            default: throw RFBError.protocolViolation("unknown RSA-AES subtype \(subtype)")
            }
            phase = .rsaCredentials
            _ = try credentialsOrRequest(&actions)
        case .rsaCredentials:
            guard let creds = try credentialsOrRequest(&actions), var layer = recordLayer, let variant = rsa?.variant else { return false }
            let message = try RSAAES.credentials(username: usernameNeeded == true ? creds.username : nil, password: creds.password)
            actions.append(.send(layer.seal(message)))
            if variant.encryptsSession {
                layer.sealsOutput = true
                sealFromAction = actions.count
            }
            recordLayer = layer
            phase = .securityResult
        case .appleDHParameters:
            var r = reader
            let parameters = try AppleDH.readParameters(&r)
            reader = r
            let random = configuration.randomBytes
            dhResponse = { creds throws(RFBError) in
                try AppleDH.response(parameters, username: creds.username ?? "", password: creds.password, random: random)
            }
            phase = .dhCredentials
            _ = try credentialsOrRequest(&actions)
        case .msLogonIIParameters:
            var r = reader
            let parameters = try MSLogonII.readParameters(&r)
            reader = r
            let random = configuration.randomBytes
            dhResponse = { creds throws(RFBError) in
                try MSLogonII.response(parameters, username: creds.username ?? "", password: creds.password, random: random)
            }
            phase = .dhCredentials
            _ = try credentialsOrRequest(&actions)
        case .dhCredentials:
            guard let creds = try credentialsOrRequest(&actions), let respond = dhResponse else { return false }
            actions.append(.send(try respond(creds)))
            dhResponse = nil
            phase = .securityResult
        case .tightTunnels: try readTightTunnels(&reader, &actions)
        case .tightAuthTypes: try readTightAuthTypes(&reader, &actions)
        case .securityResult:
            let result = try reader.readInteger(as: UInt32.self)
            guard result == 0 else {
                if minorVersion >= 8 {
                    phase = .securityFailureReason(refusedBeforeAuth: false)
                    return true
                }
                throw RFBError.authenticationFailed(reason: "the server rejected the credentials (RFB 3.\(minorVersion) servers give no reason)")
            }
            sendClientInit(&actions)
        case .serverInit: try readServerInit(&reader, &actions)
        case .messages: try readMessage(&reader, &actions)
        case .closed: return false
        }
        return true
    }

    private mutating func credentialsOrRequest(_ actions: inout [Action]) throws(RFBError) -> VNCCredentials? {
        if let credentials { return credentials }
        guard let method = chosenMethod else { throw .protocolViolation("credentials needed before a security method was chosen") }
        if !credentialsRequested {
            credentialsRequested = true
            actions.append(.requestCredentials(CredentialRequest(method: method, needsUsername: usernameNeeded ?? method.needsUsername)))
        }
        return nil
    }

    // MARK: - Handshake

    private mutating func readVersion(_ reader: inout ByteReader, _ actions: inout [Action]) throws {
        var r = reader
        let bytes = try r.readBytes(12)
        reader = r
        let text = String(decoding: bytes, as: UTF8.self)
        guard bytes.starts(with: Array("RFB ".utf8)), bytes[11] == 0x0A, bytes[7] == 0x2E,
              let major = Int(String(decoding: bytes[4..<7], as: UTF8.self)),
              let minor = Int(String(decoding: bytes[8..<11], as: UTF8.self)) else {
            throw RFBError.notAnRFBServer(greeting: bytes)
        }
        banner = String(text.dropLast())
        if major < 3 { throw RFBError.unsupportedVersion("\(major).\(minor)") }
        if major > 3 || minor >= 8 {
            minorVersion = 8        // 3.8, Apple's 3.889 and anything newer speak 3.8
        } else if minor == 7 {
            minorVersion = 7
        } else {
            minorVersion = 3        // 3.3, and the 3.5 some old servers wrongly announce
        }
        actions.append(.send(Array(String(format3(minorVersion)).utf8)))
        phase = minorVersion >= 7 ? .securityTypes : .securityType33
    }

    private func format3(_ minor: Int) -> String { "RFB 003.00\(minor)\n" }

    /// A failure reason, as text a terminal can show: control bytes (QEMU ends its reasons with
    /// a NUL) dropped, surrounding space trimmed. nil when the length is absurd (x11vnc's
    /// -unixpw failure sends text where the length belongs): the session is over either way,
    /// and waiting for gigabytes would hang it.
    private func readReason(_ r: inout ByteReader) throws -> String? {
        let length = Int(try r.readInteger(as: UInt32.self))
        guard length <= 1 << 16 else { return nil }
        let printable = try r.readBytes(length).filter { $0 >= 0x20 }
        let trimmed = printable.drop { $0 == 0x20 }.reversed().drop { $0 == 0x20 }.reversed()
        return trimmed.isEmpty ? "no reason given" : String(decoding: Array(trimmed), as: UTF8.self)
    }

    private mutating func readSecurityTypes(_ reader: inout ByteReader, _ actions: inout [Action]) throws {
        var r = reader
        let count = Int(try r.readUInt8())
        if count == 0 {
            reader = r
            phase = .securityFailureReason(refusedBeforeAuth: true)
            return
        }
        let types = try r.readBytes(count)
        reader = r
        offeredSecurityTypes = types
        for method in configuration.securityPreference {
            if let type = method.topLevelType, types.contains(type) {
                chosenMethod = method
                actions.append(.send([type]))
                try afterTopLevelChosen(type, &actions)
                return
            }
            // VeNCrypt reveals its subtypes only once chosen, so it is entered for the first
            // preferred method that needs it; inside, plain types listed as subtypes are usable
            // too, and if nothing inside can be completed the client reconnects without it.
            if method.onlyInsideVeNCrypt, SecurityMethod.implemented.contains(method), types.contains(19), !configuration.avoidVeNCrypt {
                chosenMethod = nil
                actions.append(.send([19]))
                phase = .veNCryptVersion
                return
            }
        }
        throw RFBError.noCommonSecurityType(offered: types.map(securityTypeName),
                                            accepted: configuration.securityPreference.map(\.description),
                                            hint: hintFor(types))
    }

    /// The top-level types offered that this client could complete without VeNCrypt.
    private func usableWithoutVeNCrypt(_ types: [UInt8]) -> [SecurityMethod] {
        configuration.securityPreference.filter { method in
            guard let type = method.topLevelType else { return false }
            return types.contains(type) && SecurityMethod.implemented.contains(method)
        }
    }

    /// The `--security` values that would work against what the server offers, for the "no
    /// common security type" message.
    private func hintFor(_ types: [UInt8], subtypes: [UInt32] = []) -> String? {
        let usable = SecurityMethod.allCases.filter { method in
            guard SecurityMethod.implemented.contains(method), !configuration.securityPreference.contains(method) else { return false }
            if let type = method.topLevelType, types.contains(type) { return true }
            if let sub = method.veNCryptSubtype, subtypes.contains(sub) { return true }
            return false
        }
        guard !usable.isEmpty else { return nil }
        var hint = "--security \(usable.map(\.rawValue).joined(separator: ",")) would work"
        if usable.contains(.plain) { hint += " (Plain sends the password unencrypted)" }
        if usable.contains(.msLogonII) { hint += " (MS-Logon II is weak)" }
        return hint
    }

    private mutating func readSecurityType33(_ reader: inout ByteReader, _ actions: inout [Action]) throws {
        var r = reader
        let type = try r.readInteger(as: UInt32.self)
        reader = r
        if type == 0 {
            phase = .securityFailureReason(refusedBeforeAuth: true)
            return
        }
        offeredSecurityTypes = [UInt8(truncatingIfNeeded: type)]
        let method: SecurityMethod? = type == 1 ? SecurityMethod.none : type == 2 ? .vncAuth : nil
        guard let method, configuration.securityPreference.contains(method) else {
            throw RFBError.noCommonSecurityType(offered: [type < 256 ? securityTypeName(UInt8(type)) : "type \(type)"],
                                                accepted: configuration.securityPreference.map(\.description), hint: nil)
        }
        chosenMethod = method
        try afterTopLevelChosen(UInt8(type), &actions)
    }

    private mutating func afterTopLevelChosen(_ type: UInt8, _ actions: inout [Action]) throws {
        switch type {
        case 1:
            // 3.3 and 3.7 send no SecurityResult after None.
            if minorVersion >= 8 { phase = .securityResult } else { sendClientInit(&actions) }
        case 2:
            phase = .vncAuthChallenge
            _ = try credentialsOrRequest(&actions)
        case 5, 6, 129, 130:
            rsa = RSAState(variant: RSAAES.Variant.forType(type)!)
            phase = .rsaServerKey
        case 30:
            phase = .appleDHParameters
        case 113:
            phase = .msLogonIIParameters
        case 16:
            tightServerInit = true
            phase = .tightTunnels
        default:
            throw RFBError.protocolViolation("security type \(type) chosen but not implemented")
        }
    }

    private mutating func readRSAServerRandom(_ reader: inout ByteReader, _ actions: inout [Action]) throws {
        guard let state = rsa, let serverKey = state.serverKey, let clientKey = state.clientKey else { throw RFBError.notConnected }
        var r = reader
        let length = Int(try r.readInteger(as: UInt16.self))
        guard length == clientKey.byteLength else {
            throw RFBError.protocolViolation("the server's RSA-AES random is \(length) bytes; our key is \(clientKey.byteLength)")
        }
        let encrypted = try r.readBytes(length)
        reader = r
        let serverRandom = try clientKey.decrypt(encrypted)
        guard serverRandom.count == state.variant.randomLength else {
            throw RFBError.protocolViolation("the server's RSA-AES random is \(serverRandom.count) bytes, not \(state.variant.randomLength)")
        }
        let variant = state.variant
        var layer = RA2RecordLayer(clientToServerKey: variant.sessionKey(serverRandom, state.clientRandom),
                                   serverToClientKey: variant.sessionKey(state.clientRandom, serverRandom))
        // The ne types go plain after the server's hash and subtype frames.
        layer.framesBeforePlain = variant.encryptsSession ? nil : 2
        actions.append(.send(layer.seal(variant.hash(clientKey.blob, serverKey.blob))))
        recordLayer = layer
        decryptRestOfInput = true
        phase = .rsaServerHash
    }

    private mutating func readVeNCryptVersion(_ reader: inout ByteReader, _ actions: inout [Action]) throws {
        var r = reader
        let major = try r.readUInt8(), minor = try r.readUInt8()
        reader = r
        guard major > 0 || minor >= 2 else {
            throw RFBError.protocolViolation("the server speaks VeNCrypt \(major).\(minor); Farcast needs 0.2")
        }
        actions.append(.send([0, 2]))
        phase = .veNCryptVersionAck
    }

    private mutating func readVeNCryptSubtypes(_ reader: inout ByteReader, _ actions: inout [Action]) throws {
        var r = reader
        let count = Int(try r.readUInt8())
        var subtypes: [UInt32] = []
        for _ in 0..<count { subtypes.append(try r.readInteger(as: UInt32.self)) }
        reader = r
        offeredVeNCryptSubtypes = subtypes
        guard count > 0 else { throw RFBError.serverRefused(reason: "the server offered no VeNCrypt subtypes") }
        for method in configuration.securityPreference where SecurityMethod.implemented.contains(method) {
            guard let sub = method.veNCryptSubtype, subtypes.contains(sub) else { continue }
            chosenMethod = method
            var w = ByteWriter()
            w.writeInteger(sub)
            actions.append(.send(w.bytes))
            if method.usesTLS {
                // Only the TLS subtypes are acknowledged (one byte, 1 = go ahead) before the
                // handshake; every other subtype starts its own exchange at once.
                phase = .veNCryptSubtypeAck(method)
                if method.needsPassword { _ = try credentialsOrRequest(&actions) }
            } else if let type = method.topLevelType {
                try afterTopLevelChosen(type, &actions)
            } else {
                phase = .plainCredentials
                _ = try credentialsOrRequest(&actions)
            }
            return
        }
        let names = subtypes.map(veNCryptSubtypeName)
        let fallback = usableWithoutVeNCrypt(offeredSecurityTypes)
        if !fallback.isEmpty {
            throw RFBError.veNCryptUnusable(subtypes: names, fallback: fallback.map(\.description))
        }
        let anonymous = subtypes.compactMap { sub in SecurityMethod.allCases.first { $0.veNCryptSubtype == sub && $0.x509Alternative != nil } }
        var hint = hintFor(offeredSecurityTypes, subtypes: subtypes)
        if hint == nil, let anon = anonymous.first, let alternative = anon.x509Alternative, !SecurityMethod.implemented.contains(anon) {
            hint = "\(anon) needs anonymous TLS cipher suites, which the TLS library here (BoringSSL) does not have; configure the server with a certificate for \(alternative) (TigerVNC: -SecurityTypes \(alternative) -X509Cert … -X509Key …) or allow VncAuth"
        }
        throw RFBError.noCommonSecurityType(offered: names, accepted: configuration.securityPreference.map(\.description), hint: hint)
    }

    private mutating func afterSubtypeAccepted(_ method: SecurityMethod, _ reader: inout ByteReader, _ actions: inout [Action]) throws {
        if method.usesTLS {
            // The TLS client speaks first; nothing may be buffered beyond this point.
            guard reader.remaining == 0 else {
                throw RFBError.protocolViolation("\(reader.remaining) unexpected byte(s) before the TLS handshake")
            }
            phase = .tlsHandshake(method)
            actions.append(.startTLS)
            return
        }
        throw RFBError.protocolViolation("VeNCrypt subtype \(method) was acknowledged but is not a TLS subtype")
    }

    // MARK: - Tight (type 16)

    /// One Tight capability: a code, a 4-byte vendor and an 8-byte name ("STDVVNCAUTH_").
    struct TightCapability: Sendable, Equatable {
        var code: UInt32
        var vendor: String
        var name: String
    }

    private static func readTightCapabilities(_ r: inout ByteReader, count: Int, what: String) throws -> [TightCapability] {
        guard count <= 256 else { throw RFBError.protocolViolation("the server listed \(count) Tight \(what) capabilities") }
        return try (0..<count).map { _ in
            let code = try r.readInteger(as: UInt32.self)
            let vendor = String(decoding: try r.readBytes(4), as: UTF8.self)
            let name = String(decoding: try r.readBytes(8), as: UTF8.self)
            return TightCapability(code: code, vendor: vendor, name: name)
        }
    }

    /// Tunnels the server offers; only "no tunnel" (code 0) is something a client can take.
    private mutating func readTightTunnels(_ reader: inout ByteReader, _ actions: inout [Action]) throws {
        var r = reader
        let count = Int(try r.readInteger(as: UInt32.self))
        let tunnels = try Self.readTightCapabilities(&r, count: count, what: "tunnel")
        reader = r
        if !tunnels.isEmpty {
            guard tunnels.contains(where: { $0.code == 0 }) else {
                throw RFBError.unsupported("the server's Tight security type requires a tunnel (\(tunnels.map { $0.vendor + $0.name }.joined(separator: ", "))), which farcast does not implement")
            }
            actions.append(.send([0, 0, 0, 0]))
        }
        phase = .tightAuthTypes
    }

    /// The authentication types inside Tight: VNC Authentication (2) or none (1).
    private mutating func readTightAuthTypes(_ reader: inout ByteReader, _ actions: inout [Action]) throws {
        var r = reader
        let count = Int(try r.readInteger(as: UInt32.self))
        let types = try Self.readTightCapabilities(&r, count: count, what: "authentication")
        reader = r
        guard !types.isEmpty else {
            // No authentication at all: the server goes on as after None.
            if minorVersion >= 8 { phase = .securityResult } else { sendClientInit(&actions) }
            return
        }
        let codes = types.map(\.code)
        if codes.contains(2) {
            actions.append(.send([0, 0, 0, 2]))
            phase = .vncAuthChallenge
            _ = try credentialsOrRequest(&actions)
        } else if codes.contains(1) {
            actions.append(.send([0, 0, 0, 1]))
            if minorVersion >= 8 { phase = .securityResult } else { sendClientInit(&actions) }
        } else {
            throw RFBError.unsupported("the server's Tight security type offers only \(types.map { "\($0.vendor)\($0.name) (\($0.code))" }.joined(separator: ", ")) inside, which farcast does not implement")
        }
    }

    private mutating func sendClientInit(_ actions: inout [Action]) {
        actions.append(.send([configuration.shared ? 1 : 0]))
        phase = .serverInit
    }

    private mutating func readServerInit(_ reader: inout ByteReader, _ actions: inout [Action]) throws {
        var r = reader
        let width = Int(try r.readInteger(as: UInt16.self))
        let height = Int(try r.readInteger(as: UInt16.self))
        let serverFormat = try PixelFormat.decode(from: &r)
        let nameLength = Int(try r.readInteger(as: UInt32.self))
        guard nameLength <= 1 << 20 else { throw RFBError.protocolViolation("desktop name of \(nameLength) bytes") }
        let name = try r.readUTF8(nameLength)
        if tightServerInit {
            // Tight's interaction capabilities: the server-to-client and client-to-server
            // message types and the encodings it knows, 16 bytes each.
            let serverMessages = Int(try r.readInteger(as: UInt16.self))
            let clientMessages = Int(try r.readInteger(as: UInt16.self))
            let encodings = Int(try r.readInteger(as: UInt16.self))
            _ = try r.readInteger(as: UInt16.self)
            _ = try Self.readTightCapabilities(&r, count: serverMessages, what: "server message")
            _ = try Self.readTightCapabilities(&r, count: clientMessages, what: "client message")
            tightEncodingCapabilities = try Self.readTightCapabilities(&r, count: encodings, what: "encoding").map { $0.vendor + $0.name }
        }
        reader = r
        guard width <= Framebuffer.maximumDimension, height <= Framebuffer.maximumDimension else {
            throw RFBError.framebufferTooLarge(width: width, height: height)
        }
        try configuration.pixelFormat.validate()
        framebuffer = Framebuffer(width: width, height: height)
        screens = [RFBScreen(id: 0, x: 0, y: 0, width: width, height: height)]
        desktopName = name
        coverage = CoverageMap(width: width, height: height)
        let info = ServerInfo(banner: banner, protocolVersion: "3.\(minorVersion)", securityTypes: offeredSecurityTypes,
                              veNCryptSubtypes: offeredVeNCryptSubtypes, security: (chosenMethod ?? .none).description,
                              width: width, height: height, name: name,
                              serverPixelFormat: serverFormat.description, pixelFormat: configuration.pixelFormat.description)
        serverInfo = info
        actions.append(.send(ClientMessage.setPixelFormat(configuration.pixelFormat).encoded()))
        actions.append(.send(ClientMessage.setEncodings(encodingList()).encoded()))
        actions.append(.send(ClientMessage.framebufferUpdateRequest(incremental: false, RFBRect(x: 0, y: 0, width: width, height: height)).encoded()))
        phase = .messages
        actions.append(.ready(info))
    }

    /// Changes the JPEG quality level mid-session (nil: lossless) and returns the SetEncodings
    /// that tells the server; what it sends after that follows the new list.
    public mutating func changeJPEGQuality(_ quality: Int?) -> ClientMessage {
        configuration.jpegQuality = quality.map { min(max($0, 0), 9) }
        return .setEncodings(encodingList())
    }

    /// The SetEncodings list: pixel encodings in preference order, then pseudo-encodings.
    public func encodingList() -> [RFBEncoding] {
        var list = configuration.encodings ?? Configuration.defaultEncodings
        if decoder.jpeg == nil || configuration.jpegQuality == nil {
            // Without a quality level no server sends JPEG; nothing else to do.
        }
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

    // MARK: - Normal phase

    private mutating func readMessage(_ reader: inout ByteReader, _ actions: inout [Action]) throws {
        if update != nil {
            try continueUpdate(&reader, &actions)
            return
        }
        var r = reader
        let type = try r.readUInt8()
        switch type {
        case 0:
            try r.skip(1)
            let count = Int(try r.readInteger(as: UInt16.self))
            reader = r
            update = UpdateInProgress(remaining: count == 0xFFFF ? nil : count)
            // Pipelining: ask for the next update now, so the server prepares it while this
            // one is decoded.
            if configuration.requestsUpdates && !continuousUpdatesActive {
                actions.append(.send(ClientMessage.framebufferUpdateRequest(incremental: true, fullFrame).encoded()))
            }
        case 1:
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
            actions.append(.event(.colourMapChanged(first: first, count: count)))
        case 2:
            reader = r
            actions.append(.event(.bell))
        case 3:
            try r.skip(3)
            let length = Int(try r.readInteger(as: Int32.self))
            guard length.magnitude <= 32 << 20 else {
                throw RFBError.protocolViolation("clipboard text of \(length.magnitude) bytes (limit 32 MiB)")
            }
            if length >= 0 {
                let text = try r.readLatin1(length)
                reader = r
                actions.append(.event(.serverClipboard(text)))
            } else {
                let body = try r.readBytes(Int(length.magnitude))
                reader = r
                let outcome = try clipboard.handle(body)
                for reply in outcome.replies where !configuration.viewOnly || reply == ExtendedClipboard.clientCaps() {
                    actions.append(.send(reply))
                }
                if let text = outcome.text { actions.append(.event(.serverClipboard(text))) }
                if outcome.fetched { actions.append(.event(.clipboardFetched)) }
            }
        case 255:
            // QEMU's server messages: subtype 1 is audio (0 end, 1 begin, 2 data).
            let subtype = try r.readUInt8()
            guard subtype == 1 else { throw RFBError.protocolViolation("QEMU server message of unknown subtype \(subtype)") }
            let operation = try r.readInteger(as: UInt16.self)
            switch operation {
            case 0:
                reader = r
                actions.append(.event(.audio(.ended)))
            case 1:
                reader = r
                actions.append(.event(.audio(.began)))
            case 2:
                let length = Int(try r.readInteger(as: UInt32.self))
                guard length <= 1 << 20 else { throw RFBError.protocolViolation("QEMU audio data of \(length) bytes (limit 1 MiB)") }
                let samples = try r.readBytes(length)
                reader = r
                actions.append(.event(.audio(.samples(samples))))
            default:
                throw RFBError.protocolViolation("QEMU audio message of unknown operation \(operation)")
            }
        case 150:
            reader = r
            if !serverSupportsContinuousUpdates {
                serverSupportsContinuousUpdates = true
                if configuration.continuousUpdates && configuration.requestsUpdates {
                    continuousUpdatesActive = true
                    actions.append(.send(ClientMessage.enableContinuousUpdates(true, fullFrame).encoded()))
                }
            } else if continuousUpdatesActive {
                // The server ended continuous updates: fall back to requesting them.
                continuousUpdatesActive = false
                if configuration.requestsUpdates {
                    actions.append(.send(ClientMessage.framebufferUpdateRequest(incremental: true, fullFrame).encoded()))
                }
            }
        case 248:
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
                actions.append(.send(ClientMessage.clientFence(flags: flags & 0x7, payload: payload).encoded()))
            } else {
                actions.append(.event(.fenceResponse(payload: payload)))
            }
        case 250:
            try r.skip(3)
            reader = r
        default:
            throw RFBError.unknownMessageType(type)
        }
    }

    private var fullFrame: RFBRect { RFBRect(x: 0, y: 0, width: framebuffer.width, height: framebuffer.height) }

    private mutating func continueUpdate(_ reader: inout ByteReader, _ actions: inout [Action]) throws {
        guard var current = update else { return }
        defer { if update != nil { update = current } }
        if current.remaining == 0 {
            finishUpdate(current, &actions)
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
            try decodePseudo(header, &reader, &current, &actions)
        }
        current.current = nil
        if header.encoding == .lastRect {
            current.remaining = 0
        } else if let remaining = current.remaining {
            current.remaining = remaining - 1
        }
        if current.remaining == 0 { finishUpdate(current, &actions) }
    }

    private mutating func decodePseudo(_ header: RectHeader, _ reader: inout ByteReader, _ current: inout UpdateInProgress,
                                       _ actions: inout [Action]) throws {
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
                actions.append(.send(w.bytes))
            }
        case .vmwareCursorPosition:
            // The hotspot's new position, moved by the server or another client (not this one).
            actions.append(.event(.pointerMoved(x: rect.x, y: rect.y)))
        case .cursorWithAlpha:
            var r = reader
            let shape = try CursorDecoder.decodeAlpha(&r, header: rect)
            reader = r
            cursor = shape
            actions.append(.event(.cursorChanged(shape)))
        case .desktopSize:
            try resize(width: rect.width, height: rect.height, screens: nil, &actions)
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
                actions.append(.event(.resizeRefused(status: rect.y)))
            } else {
                // x = 1 answers this client's SetDesktopSize: report it even when nothing changed.
                try resize(width: rect.width, height: rect.height, screens: layout, answersRequest: rect.x == 1, &actions)
            }
        case .cursor:
            var r = reader
            let shape = try CursorDecoder.decodeRich(&r, header: rect, converter: decoder.converter)
            reader = r
            cursor = shape
            actions.append(.event(.cursorChanged(shape)))
        case .xCursor:
            var r = reader
            let shape = try CursorDecoder.decodeX(&r, header: rect)
            reader = r
            cursor = shape
            actions.append(.event(.cursorChanged(shape)))
        case .desktopName:
            var r = reader
            let length = Int(try r.readInteger(as: UInt32.self))
            guard length <= 1 << 20 else { throw RFBError.protocolViolation("desktop name of \(length) bytes") }
            let name = try r.readUTF8(length)
            reader = r
            desktopName = name
            actions.append(.event(.desktopNameChanged(name)))
        default:
            throw RFBError.unsupportedEncoding(header.encoding.rawValue)
        }
    }

    private mutating func resize(width: Int, height: Int, screens layout: [RFBScreen]?, answersRequest: Bool = false,
                                 _ actions: inout [Action]) throws {
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
            actions.append(.event(.resized(width: width, height: height, screens: newScreens)))
        }
        if changed && continuousUpdatesActive {
            actions.append(.send(ClientMessage.enableContinuousUpdates(true, fullFrame).encoded()))
        }
    }

    private mutating func finishUpdate(_ finished: UpdateInProgress, _ actions: inout [Action]) {
        update = nil
        updatesReceived += 1
        var first = false
        if let map = coverage, map.isComplete {
            first = true
            coverage = nil
        }
        actions.append(.event(.framebufferUpdated(dirty: finished.dirty, completesFirstFrame: first)))
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
