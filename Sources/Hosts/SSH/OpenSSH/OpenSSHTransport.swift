#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import FarcastSupport
import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The user's own OpenSSH as the transport: every connection is an `ssh -W host:port` child
/// whose stdin and stdout are one end of a socket pair, so agent keys, RSA keys,
/// keyboard-interactive and one-time codes, certificates, `ProxyJump` chains, `Match` and
/// `Include` all work as they do for `ssh` itself.
///
/// One authentication per command: unless the user's own configuration runs a ControlMaster
/// (which is then respected), farcast starts a master of its own first (`ControlMaster=yes`,
/// its socket in a private 0700 folder) and carries each stream through it, so a password or
/// code is asked once however many connections the command opens; `close()` ends the master
/// with `-O exit`. At a terminal ssh asks its questions there itself; without one it runs with
/// `BatchMode=yes` unless `SSH_ASKPASS` says how to ask.
public final class OpenSSHTransport: SSHTransport {
    public struct Options: Sendable {
        /// Accept a host key seen for the first time (`StrictHostKeyChecking=accept-new`).
        public var acceptNewHostKeys = false
        /// ssh's `ConnectTimeout`, and how long a stream to a server that speaks first may stay silent.
        public var connectTimeout: Duration = .seconds(15)
        /// Whether ssh may ask questions: nil decides by whether a terminal or SSH_ASKPASS exists.
        public var interactive: Bool?
        /// Where to ask when there is no terminal (a viewer window's prompt): ssh's questions
        /// come here through SSH_ASKPASS, with `askpassProgram` (farcast's own executable, which
        /// answers through `OpenSSHAskpass.answerIfAsked`) as the askpass program.
        public var ask: (@Sendable (_ question: String, _ secret: Bool) async -> String?)?
        public var askpassProgram: String?
        public init() {}
    }

    public let route: SSHRoute
    public let command: OpenSSHCommand
    public var via: String { route.description }
    /// farcast's own master, nil when the user's configuration decides (its ControlMaster).
    let master: ChildProcess?
    /// A private 0700 folder for the master's socket and the askpass socket, when either exists.
    let controlFolder: String?
    let askpass: OpenSSHAskpassServer?
    /// Variables every ssh child gets (SSH_ASKPASS when farcast answers its questions).
    let environment: [String: String]
    let settings: [String]
    let connectTimeout: Duration
    let logger: Logger
    private let streams = Mutex<[pid_t: Stream]>([:])
    private let closed = Mutex(false)

    public var isOpen: Bool { !closed.withLock { $0 } && master?.exitStatus == nil }

    var controlPath: String? { master == nil ? nil : controlFolder.map { $0 + "/master" } }

    private init(route: SSHRoute, command: OpenSSHCommand, master: ChildProcess?, controlFolder: String?, askpass: OpenSSHAskpassServer?,
                 environment: [String: String], settings: [String], connectTimeout: Duration, logger: Logger) {
        self.route = route
        self.command = command
        self.master = master
        self.controlFolder = controlFolder
        self.askpass = askpass
        self.environment = environment
        self.settings = settings
        self.connectTimeout = connectTimeout
        self.logger = logger
    }

    /// Prepares the route: asks ssh for its configuration (`-G`), and unless that runs a
    /// ControlMaster, starts farcast's own master and waits until it has authenticated; a
    /// failure there (host key, authentication, DNS, refused port) is reported in ssh's words.
    public static func start(route: SSHRoute, command: OpenSSHCommand, options: Options = Options(),
                             logger: Logger = Logger(label: "farcast.ssh")) async throws -> OpenSSHTransport {
        let terminal = hasTerminal()
        let inWindow = options.interactive == nil && !terminal && options.ask != nil && options.askpassProgram != nil
        let interactive = options.interactive ?? (terminal || inWindow)
        var settings = ["-o", "ConnectTimeout=\(max(1, Int(options.connectTimeout.components.seconds)))"]
        if !interactive { settings += ["-o", "BatchMode=yes"] }
        if options.acceptNewHostKeys { settings += ["-o", "StrictHostKeyChecking=accept-new"] }
        logger.debug("OpenSSH", metadata: ["program": "\(command.program)", "leading": "\(command.leadingArguments)",
                                           "interactive": "\(interactive)"])

        let configuration = try await capture(try command.configurationQuery(route))
        guard configuration.status == 0 else {
            throw OpenSSHCommand.failure(stderr: configuration.stderr, status: configuration.status, via: route.description, target: nil)
        }
        let effective = Dictionary(configuration.stdout.split(separator: "\n").compactMap { line -> (String, String)? in
            let parts = line.split(separator: " ", maxSplits: 1)
            return parts.count == 2 ? (parts[0].lowercased(), String(parts[1])) : nil
        }, uniquingKeysWith: { first, _ in first })
        let usersMaster = effective["controlmaster"].map { $0 != "false" && $0 != "no" } ?? false
        var folder: String?
        var askpass: OpenSSHAskpassServer?
        var environment: [String: String] = [:]
        if !usersMaster || inWindow { folder = try makeControlFolder() }
        if inWindow, let folder, let ask = options.ask, let program = options.askpassProgram {
            do {
                askpass = try OpenSSHAskpassServer(socketPath: folder + "/askpass", ask: ask)
            } catch {
                rmdir(folder)
                throw error
            }
            environment = ["SSH_ASKPASS": program, "SSH_ASKPASS_REQUIRE": "force", OpenSSHAskpass.socketVariable: folder + "/askpass"]
            logger.debug("ssh's questions are asked in the window (SSH_ASKPASS)")
        }
        if usersMaster {
            logger.debug("the user's ssh configuration runs a ControlMaster: using it", metadata: ["controlmaster": "\(effective["controlmaster"] ?? "")",
                                                                                                      "controlpath": "\(effective["controlpath"] ?? "")"])
            return OpenSSHTransport(route: route, command: command, master: nil, controlFolder: folder, askpass: askpass, environment: environment,
                                    settings: settings, connectTimeout: options.connectTimeout, logger: logger)
        }

        let controlFolder = folder ?? ""
        let controlPath = controlFolder + "/master"
        let master: ChildProcess
        do {
            // In farcast's own process group: at a terminal it may ask for a password or code.
            master = try await ChildProcess.ssh(try command.master(route, controlPath: controlPath, settings: settings),
                                                ownGroup: false, environment: environment)
        } catch {
            askpass?.close()
            rmdir(controlFolder)
            throw error
        }
        let transport = OpenSSHTransport(route: route, command: command, master: master, controlFolder: controlFolder, askpass: askpass,
                                         environment: environment, settings: settings, connectTimeout: options.connectTimeout, logger: logger)
        // The socket appears once the master has authenticated. At a terminal a person may be
        // typing a password or a code: no deadline then beyond ssh's own.
        let deadline = ContinuousClock.now + options.connectTimeout + .seconds(5)
        do {
            while !FileManager.default.fileExists(atPath: controlPath) {
                if let status = master.exitStatus {
                    throw OpenSSHCommand.failure(stderr: master.stderr, status: status, via: route.description, target: nil)
                }
                if !interactive && ContinuousClock.now > deadline {
                    throw SSHTunnelError.timedOut(host: route.description, what: "authenticated session (ssh: \(master.stderr.suffix(200)))",
                                                  seconds: Int(options.connectTimeout.components.seconds) + 5)
                }
                try await Task.sleep(for: .milliseconds(5))
            }
        } catch {
            await transport.close()
            throw error
        }
        logger.debug("OpenSSH master ready", metadata: ["via": "\(route)", "pid": "\(master.pid)"])
        return transport
    }

    /// Whether ssh can ask a person: a controlling terminal, or SSH_ASKPASS set.
    static func hasTerminal() -> Bool {
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC)
        if fd >= 0 {
            closeDescriptor(fd)
            return true
        }
        return ProcessInfo.processInfo.environment["SSH_ASKPASS"].map { !$0.isEmpty } ?? false
    }

    /// A 0700 folder for the master's socket: in XDG_RUNTIME_DIR when there is one (and the
    /// path stays within a socket address's 108 bytes), else in /tmp.
    static func makeControlFolder() throws(SSHTunnelError) -> String {
        var bases = ["/tmp"]
        if let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/"), runtime.utf8.count < 60 {
            bases.insert(runtime, at: 0)
        }
        for base in bases {
            var template = Array("\(base)/farcast-ssh-XXXXXX".utf8CString)
            if let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) {
                return String(cString: made)
            }
        }
        throw .connectionLost(host: "OpenSSH", reason: "cannot make a private folder for the SSH master: \(String(cString: strerror(errno)))")
    }

    /// Runs a short ssh command to its end, with its stdout.
    static func capture(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        let (ours, theirs) = try pipe()
        defer { closeDescriptor(ours) }
        let child: ChildProcess
        do {
            child = try await ChildProcess.ssh(arguments, stdout: theirs, ownGroup: true)
        } catch {
            closeDescriptor(theirs)
            throw error
        }
        closeDescriptor(theirs)
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 8192)
        _ = fcntl(ours, F_SETFL, fcntl(ours, F_GETFL) | O_NONBLOCK)
        while true {
            let count = read(ours, &buffer, buffer.count)
            if count > 0 { output += buffer[0..<count]; continue }
            if count == 0 { break }
            if child.exitStatus != nil, errno == EAGAIN { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        let status = await child.waitForExit()
        return (status, String(decoding: output, as: UTF8.self), child.stderr)
    }

    /// A pipe, both ends close-on-exec: (read, write).
    static func pipe() throws(SSHTunnelError) -> (Int32, Int32) {
        guard let pipe = ChildProcess.makePipe() else {
            throw .connectionLost(host: "OpenSSH", reason: "cannot make a pipe: \(String(cString: strerror(errno)))")
        }
        return pipe
    }

    /// farcast's ends of a stream's pipes: what ssh writes arrives on `read`; `write` is ssh's
    /// stdin. Pipes, not a socket pair: when the target closes, ssh exits with what farcast sent
    /// last still unread, which a socket reports to the reader as a reset instead of the end of
    /// the stream. `spareReader` is a second read end of ssh's stdin kept here while the stream
    /// lives, so a write after ssh has exited waits instead of failing with EPIPE — a failed
    /// write would close the channel and drop what ssh wrote before exiting but was not yet read.
    struct Ends {
        let read: Int32
        let write: Int32
        let spareReader: Int32
        func close() {
            closeDescriptor(read)
            closeDescriptor(write)
            closeDescriptor(spareReader)
        }
    }

    /// Starts `ssh -W host:port`; returns farcast's end of its stdin/stdout and the child.
    func openStream(to host: String, port: Int) async throws -> (Ends, Stream) {
        guard !closed.withLock({ $0 }) else { throw SSHTunnelError.connectionLost(host: via, reason: "the SSH route was closed") }
        let arguments = try command.stream(route, to: host, port: port, controlPath: controlPath, settings: settings)
        let (stdinRead, stdinWrite) = try Self.pipe()
        let stdoutRead: Int32, stdoutWrite: Int32
        do { (stdoutRead, stdoutWrite) = try Self.pipe() } catch {
            closeDescriptor(stdinRead)
            closeDescriptor(stdinWrite)
            throw error
        }
        let mark = master?.stderrWritten ?? 0
        let child: ChildProcess
        do {
            // Through farcast's master a stream never asks anything: a group of its own. Without
            // one, the stream may be the one that authenticates and must reach the terminal.
            child = try await ChildProcess.ssh(arguments, stdin: stdinRead, stdout: stdoutWrite, ownGroup: master != nil, environment: environment)
        } catch {
            for fd in [stdinRead, stdinWrite, stdoutRead, stdoutWrite] { closeDescriptor(fd) }
            throw error
        }
        closeDescriptor(stdoutWrite)
        #if os(Linux)
        // 1 MiB pipes where the system allows it (64 KiB by default): fewer wake-ups per megabyte
        // on a bulk stream. F_SETPIPE_SZ (1031) is not imported from Glibc.
        for fd in [stdoutRead, stdinWrite] { _ = fcntl(fd, 1031, Int32(1 << 20)) }
        #endif
        let stream = Stream(child: child, masterMark: mark, target: "\(host):\(port)")
        streams.withLock { $0[child.pid] = stream }
        logger.debug("OpenSSH stream", metadata: ["target": "\(host):\(port)", "pid": "\(child.pid)"])
        return (Ends(read: stdoutRead, write: stdinWrite, spareReader: stdinRead), stream)
    }

    /// A running `-W` child, with where the master's stderr stood when it started.
    struct Stream: Sendable {
        let child: ChildProcess
        let masterMark: Int
        let target: String
    }

    /// Why a stream's ssh ended, in the words of whoever knows: through a master, the stream
    /// itself only hears "Stdio forwarding request failed: Session open refused by peer", while
    /// the master logs the server's reason ("open failed: administratively prohibited").
    func failure(of stream: Stream, status: Int32) async -> SSHTunnelError {
        var text = stream.child.stderr
        if let master {
            let mark = stream.masterMark
            // The master writes its line before it answers the stream; its reader may lag a little.
            for _ in 0..<30 where !master.stderr(since: mark).contains("open failed") { try? await Task.sleep(for: .milliseconds(10)) }
            text = master.stderr(since: mark) + "\n" + text
        }
        return OpenSSHCommand.failure(stderr: text, status: status, via: via, target: stream.target)
    }

    /// Follows a stream to its end; a failure nobody else reports (a forwarded connection's) is
    /// logged in ssh's words.
    private func follow(_ stream: Stream, reported: Bool) {
        Task { [self] in
            let status = await stream.child.waitForExit()
            // 128 + SIGTERM/SIGKILL is farcast ending it; anything else non-zero is worth saying.
            if !reported && status != 0 && status != 128 + SIGTERM && status != 128 + SIGKILL {
                let reason = await failure(of: stream, status: status)
                logger.warning("SSH: \(reason)")
            }
            streams.withLock { _ = $0.removeValue(forKey: stream.child.pid) }
        }
    }

    public func openByteStream(host: String, port: Int, peerSpeaksFirst: Bool,
                               prepare: @escaping @Sendable (any Channel) throws -> Void) async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        let (ends, stream) = try await openStream(to: host, port: port)
        let child = stream.child
        // Its failure is this call's error (or the client's, once it runs): not logged as well.
        follow(stream, reported: true)
        var first: [UInt8] = []
        do {
            if peerSpeaksFirst { first = try await waitForFirstBytes(ends.read, from: stream) }
        } catch {
            ends.close()
            await child.terminate()
            throw error
        }
        // From here NIO owns the descriptors (a failed channel closes them): never closed here too.
        let initial = first
        do {
            let channel = try await NIOPipeBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .channelOption(.allowRemoteHalfClosure, value: true)
                .channelOption(.recvAllocator, value: Self.reads)
                .takingOwnershipOfDescriptors(input: ends.read, output: ends.write) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        // What was read to see the stream open goes to the client first.
                        if !initial.isEmpty { try channel.pipeline.syncOperations.addHandler(BytesReadAhead(initial)) }
                        try prepare(channel)
                        return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                    }
                }
            channel.channel.closeFuture.whenComplete { _ in
                closeDescriptor(ends.spareReader)
                Task { await child.terminate() }
            }
            return channel
        } catch {
            closeDescriptor(ends.spareReader)
            await child.terminate()
            throw error
        }
    }

    /// Reads of up to 256 KiB, as the RFB client's own TCP connections make.
    static let reads = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 256 << 10)

    /// Waits until the target has said something through the stream (and returns what it
    /// said), or ssh has ended (then its stderr says why), or the connect timeout has passed.
    func waitForFirstBytes(_ fd: Int32, from stream: Stream) async throws -> [UInt8] {
        let child = stream.child
        let deadline = ContinuousClock.now + connectTimeout
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            try Task.checkCancellation()
            let count = read(fd, &buffer, buffer.count)
            if count > 0 { return Array(buffer[0..<count]) }
            if count == 0 || (errno != EAGAIN && errno != EINTR) {
                // EOF: ssh closed its end, and is exiting.
                let status = await child.waitForExit()
                throw await failure(of: stream, status: status)
            }
            if let status = child.exitStatus {
                throw await failure(of: stream, status: status)
            }
            if ContinuousClock.now > deadline {
                throw SSHTunnelError.timedOut(host: via, what: "greeting from \(stream.target) through ssh", seconds: Int(connectTimeout.components.seconds))
            }
            try await Task.sleep(for: .milliseconds(2))
        }
    }

    public func forward(to host: String, port: Int, listenHost: String, listenPort: Int, logger: Logger) async throws -> any SSHForwarding {
        let listener: any Channel
        do {
            listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.backlog, value: 16)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelOption(.allowRemoteHalfClosure, value: true)
                .childChannelInitializer { [self] local in
                    let glue = TunnelGlue(name: "local")
                    let bound = NIOLoopBound(glue, eventLoop: local.eventLoop)
                    return local.eventLoop.makeCompletedFuture {
                        try local.pipeline.syncOperations.addHandler(glue)
                        let loop = local.eventLoop
                        Task { await self.carry(bound, on: loop, to: host, port: port, logger: logger) }
                    }
                }
                .bind(host: listenHost, port: listenPort).get()
        } catch {
            throw SSHTunnelError.connectionLost(host: listenHost, reason: "cannot listen for the tunnel on \(listenHost):\(listenPort): \(SSHConnection.describe(error))")
        }
        guard let bound = listener.localAddress?.port else {
            listener.close(promise: nil)
            throw SSHTunnelError.connectionLost(host: listenHost, reason: "the tunnel's listener has no port")
        }
        logger.debug("SSH tunnel listening (OpenSSH)", metadata: ["local": "\(listenHost):\(bound)", "target": "\(host):\(port)", "via": "\(via)"])
        return OpenSSHForwarder(transport: self, listener: listener, localHost: listenHost, localPort: bound)
    }

    /// Carries one accepted local connection: a stream of its own, glued to it on its event loop.
    private func carry(_ local: NIOLoopBound<TunnelGlue>, on loop: any EventLoop, to host: String, port: Int, logger: Logger) async {
        do {
            let (ends, stream) = try await openStream(to: host, port: port)
            let child = stream.child
            follow(stream, reported: false)
            do {
                let channel = try await NIOPipeBootstrap(group: loop)
                    .channelOption(.allowRemoteHalfClosure, value: true)
                    .channelOption(.recvAllocator, value: Self.reads)
                    .channelInitializer { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try channel.pipeline.syncOperations.addHandler(TunnelGlue(name: "ssh") { glue in local.value.attach(glue) })
                        }
                    }
                    .takingOwnershipOfDescriptors(input: ends.read, output: ends.write).get()
                channel.closeFuture.whenComplete { _ in
                    closeDescriptor(ends.spareReader)
                    Task { await child.terminate() }
                }
            } catch {
                // NIO owns the two pipe ends once handed over (a failed channel closes them).
                closeDescriptor(ends.spareReader)
                await child.terminate()
                throw error
            }
        } catch {
            logger.warning("SSH tunnel: \(error)")
            loop.execute { local.value.closeAll() }
        }
    }

    public func close() async {
        guard closed.withLock({ let was = $0; $0 = true; return !was }) else { return }
        let running = streams.withLock { $0.values.map(\.child) }
        await withTaskGroup(of: Void.self) { group in
            for child in running { group.addTask { await child.terminate() } }
        }
        if let master, let controlPath {
            if master.exitStatus == nil, let exit = try? command.exitMaster(route, controlPath: controlPath) {
                _ = try? await Self.capture(exit)
            }
            await master.terminate()
        }
        askpass?.close()
        if let controlFolder {
            if let controlPath { unlink(controlPath) }
            rmdir(controlFolder)
        }
    }
}

/// Bytes read before the channel existed, delivered first once it is active.
final class BytesReadAhead: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer
    private var bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        guard !bytes.isEmpty else { return }
        let buffer = context.channel.allocator.buffer(bytes: bytes)
        bytes = []
        context.fireChannelRead(wrapInboundOut(buffer))
        context.fireChannelReadComplete()
    }
}

@available(*, unavailable)
extension BytesReadAhead: Sendable {}

/// close(2), named apart from the `close()` methods around it.
func closeDescriptor(_ fd: Int32) {
    #if canImport(Glibc)
    _ = Glibc.close(fd)
    #else
    _ = Darwin.close(fd)
    #endif
}

/// A local listener whose connections each ride an `ssh -W` stream of an `OpenSSHTransport`.
final class OpenSSHForwarder: SSHForwarding {
    let transport: OpenSSHTransport
    let listener: any Channel
    let localHost: String
    let localPort: Int
    var via: String { transport.via }

    init(transport: OpenSSHTransport, listener: any Channel, localHost: String, localPort: Int) {
        self.transport = transport
        self.listener = listener
        self.localHost = localHost
        self.localPort = localPort
    }

    func stop() async {
        try? await listener.close().get()
        await transport.close()
    }
}

extension ChildProcess {
    /// Starts an `ssh` (or the user's SSH command); a failure to start is a lost connection.
    static func ssh(_ arguments: [String], stdin: Int32? = nil, stdout: Int32? = nil, ownGroup: Bool,
                    environment: [String: String] = [:]) async throws(SSHTunnelError) -> ChildProcess {
        do {
            return try await spawn(arguments, stdin: stdin, stdout: stdout, ownGroup: ownGroup, environment: environment)
        } catch {
            throw .connectionLost(host: arguments[0], reason: error.description)
        }
    }
}
