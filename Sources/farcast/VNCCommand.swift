import ArgumentParser
import FarcastSupport
import Foundation
import Logging
import RFB
import Synchronization

struct VNCCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vnc",
        abstract: "Remote desktops over RFB/VNC.",
        discussion: """
            Server addresses:
              myhost:1                   display 1, i.e. TCP port 5901 (displays < 100)
              myhost::5901               TCP port 5901
              vnc://[user@]myhost:5901   a URL: its port is a TCP port (default 5900)
              vncs://myhost:5901         TLS from the first byte (x11vnc -sslonly)
              [::1]:1, vnc://[::1]:5901  IPv6 addresses go in brackets

            Passwords come from --password-file, the FARCAST_VNC_PASSWORD environment variable, the password saved with a host (farcast hosts add NAME URL --password-file F), or a prompt on the terminal; never from the command line. User names (Plain, X509Plain, RSA-AES servers that ask, Apple Remote Desktop, MS-Logon II) come from --username, the URL, FARCAST_VNC_USERNAME or a prompt. TLS certificates (VeNCrypt X509*) and RSA-AES server keys are pinned on first use in the state directory; a changed one is refused until you connect once with --trust.
            """,
        subcommands: [VNCViewCommand.self, VNCInfoCommand.self, VNCScreenshotCommand.self, VNCTypeCommand.self, VNCKeyCommand.self, VNCClickCommand.self, VNCMoveCommand.self,
                      VNCClipboardCommand.self, VNCResizeCommand.self, VNCDoCommand.self,
                      VNCRecordCommand.self, VNCReplayCommand.self, VNCWatchCommand.self]
    )
}

/// Options every `farcast vnc` command that connects shares.
struct VNCConnectionOptions: ParsableArguments {
    @Argument(help: "The server: vnc://[user@]host[:port][?ssh=user@bastion], host:display, host::port, or a saved host's name.")
    var server: String

    @OptionGroup var route: HostOptions

    @Option(name: .customLong("password-file"), help: ArgumentHelp("Read the password from the first line of this file.", valueName: "path"))
    var passwordFile: String?

    @Option(help: "User name, for methods that need one (else the URL's user, FARCAST_VNC_USERNAME, or a prompt).")
    var username: String?

    @Option(help: ArgumentHelp("Security methods to accept, most preferred first, comma-separated, from: x509vnc, x509plain, x509none, ra2_256, ra2, ra2ne_256, ra2ne, tlsvnc, tlsnone, anontls, vncauth, ard, tight, none (the default order), and plain, tlsplain, mslogon2 (only when listed).", valueName: "list"))
    var security: String?

    @Flag(help: "Accept a TLS certificate or RSA-AES server key that differs from the pinned one, and pin it.")
    var trust = false

    @Flag(help: "Ask for exclusive access (other viewers are disconnected) instead of sharing.")
    var exclusive = false

    @Flag(name: .customLong("view-only"), help: "Never send input (keys, pointer, clipboard, resize) to the server.")
    var viewOnly = false

    @Flag(name: .customLong("latin1-clipboard"), help: "Use only the classic Latin-1 clipboard messages, even when the server offers the UTF-8 Extended Clipboard (x11vnc 0.9.16 offers it but ignores text sent that way).")
    var latin1Clipboard = false

    @Flag(name: .customLong("tls-first"), help: "Start TLS before the RFB banner, as x11vnc -sslonly and servers behind stunnel expect (the same as a vncs:// address).")
    var tlsFirst = false

    @Option(name: .customLong("client-cert"), help: ArgumentHelp("A PEM certificate to present when the server asks for one during TLS (with --client-key).", valueName: "path"))
    var clientCert: String?

    @Option(name: .customLong("client-key"), help: ArgumentHelp("The unencrypted PEM private key of --client-cert.", valueName: "path"))
    var clientKey: String?

    @Option(help: ArgumentHelp("Seconds allowed for the TCP connection, and again for the RFB handshake (time at a password prompt not counted).", valueName: "seconds"))
    var timeout: Double = 10

    @Option(name: .customLong("connect-timeout"), help: RenamedOption.help(now: "--timeout"))
    var oldConnectTimeout: Double?

    /// `--timeout`, or its old spelling.
    var connectTimeout: Double { oldConnectTimeout ?? timeout }

    func endpoint() throws -> VNCEndpoint {
        try route.vncEndpoint(server, tlsFirst: tlsFirst)
    }

    func securityPreference() throws -> [SecurityMethod] {
        guard let security else { return SecurityMethod.defaultPreference }
        var list: [SecurityMethod] = []
        for name in security.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).lowercased() }) where !name.isEmpty {
            let known = SecurityMethod.allCases.filter { SecurityMethod.implemented.contains($0) }
            guard let method = SecurityMethod(rawValue: name), SecurityMethod.implemented.contains(method) else {
                throw ValidationError("unknown security method '\(name)'; choose from \(known.map(\.rawValue).joined(separator: ", "))")
            }
            list.append(method)
        }
        guard !list.isEmpty else { throw ValidationError("--security needs at least one method") }
        return list
    }

    func validate() throws {
        _ = try securityPreference()
        // A missing or unreadable password file is a mistake in the command: say so before
        // connecting, not after the server asked.
        if let passwordFile {
            do { _ = try Secrets.readFirstLine(ofFile: passwordFile) } catch let failure as CommandFailure { throw ValidationError(failure.message) }
        }
        guard connectTimeout > 0 && connectTimeout <= 3600 else { throw ValidationError("--timeout must be within 0…3600 seconds") }
        _ = try clientIdentity()
    }

    /// The client certificate and key, read and matched before connecting.
    func clientIdentity() throws -> TLSClientIdentity? {
        switch (clientCert, clientKey) {
        case (nil, nil): return nil
        case (_?, nil): throw ValidationError("--client-cert needs --client-key (the certificate's private key)")
        case (nil, _?): throw ValidationError("--client-key needs --client-cert")
        case let (cert?, key?):
            do { return try TLSClientIdentity(certificateFile: cert, keyFile: key) } catch { throw ValidationError(error.description) }
        }
    }

    /// Options for `VNCClient.connect`, starting from `configuration`.
    func clientOptions(_ configuration: RFBConnection.Configuration) throws -> VNCClient.Options {
        var options = VNCClient.Options()
        var configuration = configuration
        configuration.securityPreference = try securityPreference()
        configuration.shared = !exclusive
        configuration.viewOnly = viewOnly
        configuration.extendedClipboard = !latin1Clipboard
        options.configuration = configuration
        options.connectTimeout = .milliseconds(Int(connectTimeout * 1000))
        options.handshakeTimeout = .milliseconds(Int(connectTimeout * 1000))
        options.acceptChangedCertificate = trust
        options.clientIdentity = try clientIdentity()
        return options
    }

    /// Connects with these options: credentials from the file, the environment or a prompt, and
    /// a failed login that names where the password came from.
    /// `promptAttempts` > 1 asks again after a password typed at the prompt was refused (a
    /// viewer window does; one-shot commands fail at once). `ask` prompts somewhere else (a
    /// viewer's window) when there is no terminal.
    func connect(_ endpoint: VNCEndpoint, options: VNCClient.Options, logger: Logger, promptAttempts: Int = 1,
                 ask: Asker? = nil) async throws -> VNCClient {
        var options = options
        _ = try await route.prepareVNC(server, endpoint: endpoint, options: &options, timeout: options.connectTimeout, logger: logger, ask: ask)
        var attempt = 1
        while true {
            let source = PasswordSource()
            // Asked again in a window, the question says why.
            var asker = ask
            if attempt > 1, let ask {
                asker = { prompt, secret in await ask("That was refused; try again. " + prompt, secret) }
            }
            do {
                let client = try await VNCClient.connect(to: endpoint, credentials: credentialProvider(endpoint: endpoint, logger: logger, source: source, ask: asker),
                                                         options: options, logger: logger)
                route.markConnected(server)
                return client
            } catch RFBError.authenticationFailed(let reason) {
                if source.used == "the prompt" && attempt < promptAttempts {
                    attempt += 1
                    FileHandle.standardError.write(Data("\(RFBError.authenticationFailed(reason: reason).description); try again\n".utf8))
                    continue
                }
                let from = source.used.map { " (the password came from \($0))" } ?? ""
                throw CommandFailure(message: RFBError.authenticationFailed(reason: reason).description + from)
            }
        }
    }

    /// Where the password a connection used came from, for a failed login's message.
    final class PasswordSource: Sendable {
        private let value = Mutex<String?>(nil)
        var used: String? { value.withLock { $0 } }
        func record(_ source: String) { value.withLock { $0 = source } }
    }

    /// Asks the person for a line of text (prompt, secret) somewhere other than the terminal;
    /// nil when they decline.
    typealias Asker = @Sendable (String, Bool) async -> String?

    /// Supplies credentials from the file, the environment or a prompt: at the terminal, or
    /// through `ask` when there is none.
    func credentialProvider(endpoint: VNCEndpoint, logger: Logger, source: PasswordSource = PasswordSource(),
                            ask: Asker? = nil) -> VNCCredentialProvider {
        let passwordFile = passwordFile
        let username = username ?? endpoint.username ?? ProcessInfo.processInfo.environment["FARCAST_VNC_USERNAME"]
        let route = route, server = server
        return { request in
            var user = username
            if request.needsUsername && user == nil {
                user = Secrets.prompt("User name for \(endpoint): ", echo: true)
                if user == nil, let ask { user = await ask("User name for \(endpoint)", false) }
                if user == nil { throw RFBError.credentialsRequired("a user name (\(request.method))") }
            }
            if let passwordFile {
                let (password, warning) = try Secrets.readFirstLine(ofFile: passwordFile)
                if let warning { logger.warning("\(warning)") }
                source.record("the file \(passwordFile)")
                return VNCCredentials(username: user, password: password)
            }
            if let password = ProcessInfo.processInfo.environment["FARCAST_VNC_PASSWORD"] {
                source.record("FARCAST_VNC_PASSWORD")
                return VNCCredentials(username: user, password: password)
            }
            if let password = route.savedPassword(server, logger: logger) {
                source.record("the password saved with the host (farcast hosts)")
                return VNCCredentials(username: user, password: password)
            }
            if let password = Secrets.prompt("Password for \(endpoint) (\(request.method)): ") {
                source.record("the prompt")
                return VNCCredentials(username: user, password: password)
            }
            if let ask, let password = await ask("Password for \(endpoint) (\(request.method))", true) {
                source.record("the prompt")
                return VNCCredentials(username: user, password: password)
            }
            throw RFBError.credentialsRequired("a password (\(request.method))")
        }
    }
}

/// What to ask the server to send: encoding, JPEG quality, compression, pixel format.
struct VNCEncodingOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Ask for only this encoding (plus Raw, which servers may always use): \(RFBEncoding.decodable.map(\.name).joined(separator: ", ")).", valueName: "name"))
    var encoding: RFBEncoding?

    @Option(help: ArgumentHelp("Allow JPEG in Tight at this quality level, 0 (smallest) to 9 (best). Without it Tight stays lossless.", valueName: "0-9"))
    var quality: Int?

    @Option(name: .customLong("fine-quality"), help: ArgumentHelp("JPEG quality 0-100 (TigerVNC servers; needs --quality).", valueName: "0-100"))
    var fineQuality: Int?

    @Option(help: ArgumentHelp("JPEG chroma subsampling: \(JPEGSubsampling.allCases.map(\.rawValue).joined(separator: ", ")) (TigerVNC servers; needs --quality).", valueName: "mode"))
    var subsampling: JPEGSubsampling?

    @Option(name: .customLong("compress-level"), help: ArgumentHelp("zlib compression level 0-9 for Tight, Zlib and ZRLE.", valueName: "0-9"))
    var compressLevel: Int?

    @Option(name: .customLong("pixel-format"), help: ArgumentHelp("Pixel format to ask for: rgb888 (default), rgb565, bgr233, map8.", valueName: "name"))
    var pixelFormat: PixelFormat?

    func validate() throws {
        if let quality, !(0...9).contains(quality) { throw ValidationError("--quality must be 0…9") }
        if let fineQuality, !(0...100).contains(fineQuality) { throw ValidationError("--fine-quality must be 0…100") }
        if (fineQuality != nil || subsampling != nil) && quality == nil { throw ValidationError("--fine-quality and --subsampling need --quality") }
        if let compressLevel, !(0...9).contains(compressLevel) { throw ValidationError("--compress-level must be 0…9") }
    }

    /// A session configuration asking for what these options say (the rest as the core's defaults).
    func configuration() -> RFBConnection.Configuration {
        var configuration = RFBConnection.Configuration()
        apply(to: &configuration)
        return configuration
    }

    func apply(to configuration: inout RFBConnection.Configuration) {
        if let encoding { configuration.encodings = [encoding] }
        configuration.jpegQuality = quality
        configuration.jpegFineQuality = fineQuality
        configuration.jpegSubsampling = subsampling
        configuration.compressionLevel = compressLevel
        if let pixelFormat { configuration.pixelFormat = pixelFormat }
    }
}

struct VNCInfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Connect, authenticate and describe the server: name, size, pixel format, version, security types.",
        discussion: """
            Example: farcast vnc info vnc://myhost:5901 --password-file ~/.vnc/pw.txt --json
            """
    )

    @OptionGroup var connection: VNCConnectionOptions
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await reportingFailures {
            let logger = global.makeLogger(label: "farcast.vnc")
            let endpoint = try connection.endpoint()
            let client = try await connection.connect(endpoint, options: try connection.clientOptions(RFBConnection.Configuration()), logger: logger)
            let info = await client.serverInfo!
            // The monitor layout and the extensions arrive with the first update.
            let complete = (try? await client.waitForFirstFrame(timeout: .seconds(10))) != nil
            let screens = complete ? await client.screens : []
            let extensions = complete ? await client.extensions : []
            await client.close()
            if global.json {
                try printJSON(VNCInfoReport(server: endpoint.description, info: info, screens: screens, extensions: extensions))
            } else {
                print("server            \(endpoint)")
                print("protocol          RFB \(info.protocolVersion) (server banner \"\(info.banner)\")")
                print("security offered  \(info.securityTypes.map(\.description).joined(separator: ", "))")
                if !info.veNCryptSubtypes.isEmpty {
                    print("VeNCrypt subtypes \(info.veNCryptSubtypes.map(veNCryptSubtypeName).joined(separator: ", "))")
                }
                print("security used     \(info.security)")
                if info.usesAnonymousTLS {
                    print("                  anonymous TLS: encrypted against eavesdropping, but no certificate proves who the")
                    print("                  server is, so a man in the middle would not be noticed (give the server a")
                    print("                  certificate and use x509vnc/x509plain/x509none to close that gap)")
                }
                print("desktop name      \(info.name)")
                print("size              \(info.width)x\(info.height)")
                print("pixel format      \(info.serverPixelFormat)")
                if complete {
                    print("monitors          \(screens.enumerated().map { "\($0.offset): \(monitorDescription($0.element))" }.joined(separator: ", "))")
                    print("extensions        \(extensions.isEmpty ? "none" : extensions.joined(separator: ", "))")
                } else {
                    print("monitors          unknown (no complete frame within 10 s)")
                }
            }
        }
    }
}

struct VNCInfoReport: Encodable {
    var server: String
    var protocolVersion: String
    var banner: String
    var securityTypes: [String]
    var vencryptSubtypes: [String]
    var security: String
    /// True for anonymous TLS (encrypted, but no certificate proves who the server is); absent
    /// otherwise.
    var anonymousTls: Bool?
    var name: String
    var width: Int
    var height: Int
    var pixelFormat: String
    var monitors: [Monitor]
    var extensions: [String]

    struct Monitor: Encodable {
        var id: UInt32
        var x: Int
        var y: Int
        var width: Int
        var height: Int
    }

    init(server: String, info: ServerInfo, screens: [RFBScreen], extensions: [String]) {
        self.server = server
        protocolVersion = info.protocolVersion
        banner = info.banner
        securityTypes = info.securityTypes.map(\.description)
        vencryptSubtypes = info.veNCryptSubtypes.map(veNCryptSubtypeName)
        security = info.security
        anonymousTls = info.usesAnonymousTLS ? true : nil
        name = info.name
        width = info.width
        height = info.height
        pixelFormat = info.serverPixelFormat
        monitors = screens.map { Monitor(id: $0.id, x: $0.x, y: $0.y, width: $0.width, height: $0.height) }
        self.extensions = extensions
    }
}

func monitorDescription(_ s: RFBScreen) -> String { "\(s.width)x\(s.height)+\(s.x)+\(s.y)" }

struct VNCScreenshotCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "screenshot",
        abstract: "Connect, wait for a complete first frame and write it as a PNG or JPEG.",
        discussion: """
            Lossless by default: Tight sends JPEG only when --quality is given. The file name's extension picks the format (.png, or .jpg for a JPEG at quality 92); -o - writes PNG to standard output.

            Examples: farcast vnc screenshot myhost:1 -o desktop.png
                      farcast vnc screenshot vnc://myhost:5901 --monitor 1 -o - | display
            """
    )

    @OptionGroup var connection: VNCConnectionOptions

    @Option(name: .shortAndLong, help: ArgumentHelp("Where to write the image: a .png or .jpg file, or - for PNG on standard output.", valueName: "path"))
    var output: String

    @OptionGroup var encodingOptions: VNCEncodingOptions

    @Option(name: .customLong("frame-timeout"), help: ArgumentHelp("Seconds to wait for the first complete frame, once connected.", valueName: "seconds"))
    var frameTimeout: Double = 30

    @Option(help: ArgumentHelp("Write only this monitor (0 is the first; `farcast vnc info` lists them).", valueName: "n"))
    var monitor: Int?

    @OptionGroup var global: GlobalOptions

    func validate() throws {
        guard frameTimeout > 0 else { throw ValidationError("--frame-timeout must be positive") }
        if let monitor, monitor < 0 { throw ValidationError("--monitor counts from 0") }
        do {
            _ = try ImageFormat(path: output)
            try OutputPath.check(output, what: "screenshot")
        } catch let failure as CommandFailure { throw ValidationError(failure.message) }
    }

    func run() async throws {
        try await reportingFailures {
            let logger = global.makeLogger(label: "farcast.vnc")
            let endpoint = try connection.endpoint()
            let configuration = encodingOptions.configuration()
            let started = ContinuousClock.now
            let client = try await connection.connect(endpoint, options: try connection.clientOptions(configuration), logger: logger)
            do {
                try await client.waitForFirstFrame(timeout: .milliseconds(Int(frameTimeout * 1000)))
            } catch {
                await client.close()
                throw error
            }
            var framebuffer = await client.framebuffer
            let stats = await client.statistics
            let used = await client.rectanglesByEncoding
            let screens = await client.screens
            await client.close()
            if let monitor {
                guard screens.indices.contains(monitor) else {
                    throw CommandFailure(message: "monitor \(monitor) does not exist; the server reports \(screens.count): "
                        + screens.enumerated().map { "\($0.offset): \(monitorDescription($0.element))" }.joined(separator: ", "))
                }
                let s = screens[monitor]
                framebuffer = framebuffer.cropped(to: RFBRect(x: s.x, y: s.y, width: s.width, height: s.height))
            }
            let image = try ImageFormat(path: output) == .jpeg ? try JPEGEncoder.encode(framebuffer) : try PNGEncoder.encode(framebuffer)
            try OutputPath.save(image, to: output, what: "screenshot")
            let elapsed = ContinuousClock.now - started
            let encodings = used.sorted { $0.value > $1.value }.map { "\($0.key)×\($0.value)" }
            if output == "-" {
                // The image is the output; the report goes to stderr unless asked for nothing.
                if !global.quiet { FileHandleOutput.stderr("wrote \(framebuffer.width)x\(framebuffer.height) PNG to standard output\n") }
            } else if global.json {
                try printJSON(ScreenshotReport(path: output, width: framebuffer.width, height: framebuffer.height,
                                               rectangles: stats.rectangles, encodings: Dictionary(uniqueKeysWithValues: used.map { ($0.key.description, $0.value) }),
                                               seconds: elapsed.inSeconds))
            } else {
                print("wrote \(output): \(framebuffer.width)x\(framebuffer.height), \(stats.rectangles) rectangle(s) (\(encodings.joined(separator: ", "))) in \(elapsed.formatted(.units(allowed: [.seconds, .milliseconds], width: .abbreviated)))")
            }
        }
    }
}

struct ScreenshotReport: Encodable {
    var path: String
    var width: Int
    var height: Int
    var rectangles: Int
    var encodings: [String: Int]
    var seconds: Double
}
