import CNGTCP2
import Crypto
import FarcastSupport
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What a QUIC connection reports to its owner, on the connection's I/O thread.
public enum QUICEvent: Sendable {
    /// Bytes arrived on the control stream (in order).
    case streamData([UInt8])
    /// The peer finished its side of the control stream.
    case streamFinished
    /// An unreliable QUIC datagram arrived.
    case datagram([UInt8])
    /// The connection ended; nil when we closed it ourselves.
    case closed(PunktfunkSessionError?)
}

/// A QUIC client connection for punktfunk/1 over ngtcp2 0.12 and GnuTLS: the thin I/O layer.
///
/// It owns one connected UDP socket and one thread that runs everything ngtcp2 needs (reads,
/// timers, writes); every other thread talks to it through a command queue and a wake pipe, so
/// the ngtcp2 and GnuTLS objects are only ever touched on that thread. ALPN `pkf1` and SNI
/// `punktfunk` are fixed, the client certificate is presented, the DATAGRAM extension is on, and
/// the host certificate is checked against a pin (SHA-256 of its DER) inside the TLS handshake.
public final class QUICConnection: Sendable {
    /// How to reach and check the host.
    public struct Configuration: Sendable {
        public var host: String
        public var port: UInt16
        public var identity: ClientIdentity
        /// SHA-256 of the host certificate DER that must be presented; nil accepts any (the caller
        /// then decides trust from `hostFingerprint` before sending anything).
        public var pinnedFingerprint: [UInt8]?
        public var alpn = "pkf1"
        public var serverName = "punktfunk"
        /// QUIC idle timeout (the host uses 8 s).
        public var idleTimeout: Duration = .seconds(8)
        /// Handshake deadline.
        public var handshakeTimeout: Duration = .seconds(10)

        public init(host: String, port: UInt16, identity: ClientIdentity, pinnedFingerprint: [UInt8]? = nil) {
            self.host = host
            self.port = port
            self.identity = identity
            self.pinnedFingerprint = pinnedFingerprint
        }

        /// Keep-alive as the host expects: min(idle / 2, 4 s).
        public var keepAlive: Duration { min(idleTimeout / 2, .seconds(4)) }
    }

    enum Command {
        case stream([UInt8], fin: Bool)
        case datagram([UInt8])
        case close(code: UInt64, reason: String)
    }

    private let mailbox: QUICMailbox

    /// SHA-256 of the host certificate DER seen in the handshake.
    public let hostFingerprint: [UInt8]
    /// The host's resolved address and port, for the data plane.
    public let remoteAddress: SocketAddress
    /// Smoothed RTT reported by QUIC when the handshake completed (ns).
    public let handshakeRTTNs: UInt64

    private init(mailbox: QUICMailbox, fingerprint: [UInt8], remote: SocketAddress, rtt: UInt64) {
        self.mailbox = mailbox
        hostFingerprint = fingerprint
        remoteAddress = remote
        handshakeRTTNs = rtt
    }

    deinit {
        // An abandoned connection still tells the host it is going, and its thread ends.
        mailbox.post(.close(code: 0x51, reason: ""))
    }

    /// Connects, completes the QUIC/TLS handshake (pin checked inside it) and opens the control
    /// stream. `events` is called on the connection's own thread for everything that follows.
    public static func connect(_ configuration: Configuration,
                               events: @escaping @Sendable (QUICEvent) -> Void) async throws(PunktfunkSessionError) -> QUICConnection {
        let remote = try SocketAddress.resolve(host: configuration.host, port: configuration.port)
        let mailbox = try QUICMailbox()
        let engine: QUICEngine
        do {
            engine = try QUICEngine(configuration: configuration, remote: remote, mailbox: mailbox, events: events)
        } catch {
            mailbox.markDone()
            throw error
        }
        let result: Result<(fingerprint: [UInt8], rtt: UInt64), PunktfunkSessionError> = await withCheckedContinuation { continuation in
            engine.handshakeWaiter = { continuation.resume(returning: $0) }
            let thread = Thread { engine.run() }
            thread.name = "punktfunk-quic"
            thread.start()
        }
        switch result {
        case .failure(let error):
            throw error
        case .success(let established):
            return QUICConnection(mailbox: mailbox, fingerprint: established.fingerprint, remote: remote, rtt: established.rtt)
        }
    }

    /// Queues bytes on the control stream.
    public func send(stream bytes: [UInt8]) {
        mailbox.post(.stream(bytes, fin: false))
    }

    /// Queues an unreliable datagram (dropped if it does not fit a packet).
    public func send(datagram bytes: [UInt8]) {
        mailbox.post(.datagram(bytes))
    }

    /// Closes with an application code (0x51 = client quit on purpose); the `.closed(nil)` event follows.
    public func close(code: UInt64 = 0x51, reason: String = "") {
        mailbox.post(.close(code: code, reason: reason))
    }

    /// True once the I/O thread has stopped and released its QUIC and TLS state.
    public var isClosed: Bool { mailbox.isDone }

    /// Waits up to `timeout` for the I/O thread to stop (after `close`, or the connection
    /// ending by itself); true when it has.
    public func waitUntilClosed(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !isClosed {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(nanoseconds: 5_000_000)
        }
        return true
    }
}

/// Commands from any thread to a connection's I/O thread, with a pipe that wakes its poll().
final class QUICMailbox: Sendable {
    private let state = Mutex<(commands: [QUICConnection.Command], open: Bool, done: Bool)>(([], true, false))
    let wakeRead: Int32
    private let wakeWrite: Int32

    init() throws(PunktfunkSessionError) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else {
            throw .network(operation: "create a wake pipe", reason: String(cString: strerror(errno)))
        }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
    }

    deinit {
        close(wakeRead)
        close(wakeWrite)
    }

    /// Queues a command unless a close was already queued or the thread ended.
    func post(_ command: QUICConnection.Command) {
        let accepted = state.withLock { s -> Bool in
            guard s.open, !s.done else { return false }
            s.commands.append(command)
            if case .close = command { s.open = false }
            return true
        }
        guard accepted else { return }
        var one: UInt8 = 1
        _ = write(wakeWrite, &one, 1)
    }

    func take() -> [QUICConnection.Command] {
        state.withLock { s in
            let taken = s.commands
            s.commands.removeAll()
            return taken
        }
    }

    func drainWake() {
        var sink = [UInt8](repeating: 0, count: 64)
        while read(wakeRead, &sink, sink.count) > 0 {}
    }

    func markDone() { state.withLock { $0.done = true } }
    var isDone: Bool { state.withLock { $0.done } }
}

/// A resolved IPv4 or IPv6 socket address.
public struct SocketAddress: Sendable, Equatable, CustomStringConvertible {
    public let family: Int32
    /// The raw `sockaddr_in`/`sockaddr_in6` bytes.
    public let bytes: [UInt8]
    public let port: UInt16
    public let host: String

    public var description: String { family == AF_INET6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Resolves numerically first, then by name (first address wins).
    public static func resolve(host: String, port: UInt16) throws(PunktfunkSessionError) -> SocketAddress {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        hints.ai_family = AF_UNSPEC
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0, let first = list else {
            throw .network(operation: "resolve \(host)", reason: String(cString: gai_strerror(rc)))
        }
        defer { freeaddrinfo(list) }
        let bytes = Array(UnsafeRawBufferPointer(start: first.pointee.ai_addr, count: Int(first.pointee.ai_addrlen)))
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        _ = getnameinfo(first.pointee.ai_addr, first.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST)
        let numeric = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return SocketAddress(family: first.pointee.ai_family, bytes: bytes, port: port, host: numeric)
    }

    /// The same host at another port.
    public func withPort(_ newPort: UInt16) -> SocketAddress {
        var copy = bytes
        copy[2] = UInt8(newPort >> 8)
        copy[3] = UInt8(newPort & 0xFF)
        return SocketAddress(family: family, bytes: copy, port: newPort, host: host)
    }

    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        bytes.withUnsafeBytes { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
    }
}

/// Everything that lives on the I/O thread: socket, GnuTLS session, ngtcp2 connection.
///
/// `@unchecked Sendable`: created on the connecting task, which sets `handshakeWaiter` and then
/// starts exactly one thread (`run`); from then on only that thread touches its mutable state
/// (Thread.start is the happens-before edge). Other threads reach it only through `mailbox`.
final class QUICEngine: @unchecked Sendable {
    let configuration: QUICConnection.Configuration
    let remote: SocketAddress
    let mailbox: QUICMailbox
    let events: @Sendable (QUICEvent) -> Void
    /// Set once before the thread starts; called once on the thread.
    var handshakeWaiter: ((Result<(fingerprint: [UInt8], rtt: UInt64), PunktfunkSessionError>) -> Void)?

    private var fd: Int32 = -1
    private var conn: OpaquePointer?
    private var session: gnutls_session_t?
    private var credentials: gnutls_certificate_credentials_t?
    private var connRef: UnsafeMutablePointer<ngtcp2_crypto_conn_ref>
    private var localAddress = [UInt8](repeating: 0, count: 128)
    private var localLength: socklen_t = 0
    private var path = ngtcp2_path()

    /// Where the connection stands, as the I/O thread sees it.
    private enum Phase {
        case handshaking
        /// The handshake finished; the control stream, once opened (when the connecting task
        /// takes the handshake's result).
        case established(controlStream: Int64?)
        /// The host is gone: it closed or drained the connection, or fell silent past the idle
        /// or handshake timeout. Nothing more is sent to it (not even our close).
        case hostGone
    }
    private var phase = Phase.handshaking
    private var isHostGone: Bool { if case .hostGone = phase { true } else { false } }
    private var handshakeDone: Bool { if case .established = phase { true } else { false } }
    private var controlStream: Int64? { if case .established(let stream?) = phase { stream } else { nil } }
    private(set) var presentedFingerprint: [UInt8]?
    /// When the last packet from the host was processed (monotonic ns). QUIC restarts its idle
    /// timer when a keep-alive goes out, which can stretch a dead host's detection to idle + 4 s;
    /// this bound holds the promise of the idle timeout itself: nothing heard for that long ends it.
    private var lastPacketAt: UInt64 = 0
    private var lastLibraryError: Int32 = 0

    /// Stream bytes handed to ngtcp2, kept until acknowledged (ngtcp2 does not copy them).
    private var sendChunks: [(offset: UInt64, data: UnsafeMutableRawBufferPointer)] = []
    private var streamWritten: UInt64 = 0  // bytes ngtcp2 has accepted
    private var streamQueued: UInt64 = 0   // bytes in sendChunks in total
    private var streamAcked: UInt64 = 0
    /// The control stream's end: asked for by a command, then written with its last bytes.
    private enum Fin { case notAsked, pending, sent }
    private var fin = Fin.notAsked
    private var datagrams: [[UInt8]] = []
    private var datagramMisses = 0

    private var packet = [UInt8](repeating: 0, count: 65536)
    private var outgoing = [UInt8](repeating: 0, count: 1500)

    init(configuration: QUICConnection.Configuration, remote: SocketAddress, mailbox: QUICMailbox,
         events: @escaping @Sendable (QUICEvent) -> Void) throws(PunktfunkSessionError) {
        self.configuration = configuration
        self.remote = remote
        self.mailbox = mailbox
        self.events = events
        try QUICLibraries.load()
        connRef = .allocate(capacity: 1)
        connRef.initialize(to: ngtcp2_crypto_conn_ref())
        do {
            try setUp()
        } catch {
            tearDown()
            throw error
        }
    }

    deinit {
        connRef.deallocate()
    }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    // MARK: - setup

    private func setUp() throws(PunktfunkSessionError) {
        fd = socket(remote.family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .network(operation: "create a UDP socket", reason: String(cString: strerror(errno))) }
        var bufferSize: Int32 = 4 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufferSize, socklen_t(MemoryLayout<Int32>.size))
        let rc = remote.withSockaddr { Glibc.connect(fd, $0, $1) }
        guard rc == 0 else { throw .network(operation: "reach \(remote)", reason: String(cString: strerror(errno))) }
        localLength = socklen_t(localAddress.count)
        let got = localAddress.withUnsafeMutableBytes { raw in
            getsockname(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), &localLength)
        }
        guard got == 0 else { throw .network(operation: "read the UDP socket's address", reason: String(cString: strerror(errno))) }
        try setUpTLS()
        try setUpQUIC()
    }

    private func setUpTLS() throws(PunktfunkSessionError) {
        func check(_ rc: Int32, _ what: String) throws(PunktfunkSessionError) {
            if rc < 0 { throw .tls("\(what): \(String(cString: gnutls_strerror(rc)))") }
        }
        try check(gnutls_certificate_allocate_credentials(&credentials), "allocating credentials")
        let identity = configuration.identity
        let rc = identity.certificatePEM.withUnsafeBufferPointer { cert in
            identity.keyPEM.withUnsafeBufferPointer { key -> Int32 in
                var certDatum = gnutls_datum_t(data: UnsafeMutablePointer(mutating: cert.baseAddress), size: UInt32(cert.count))
                var keyDatum = gnutls_datum_t(data: UnsafeMutablePointer(mutating: key.baseAddress), size: UInt32(key.count))
                return gnutls_certificate_set_x509_key_mem(credentials, &certDatum, &keyDatum, GNUTLS_X509_FMT_PEM)
            }
        }
        try check(rc, "loading the client certificate")
        try check(gnutls_init(&session, GNUTLS_CLIENT.rawValue | GNUTLS_ENABLE_EARLY_DATA.rawValue | GNUTLS_NO_END_OF_EARLY_DATA.rawValue),
                  "creating the TLS session")
        try check(ngtcp2_crypto_gnutls_configure_client_session(session), "configuring TLS for QUIC")
        // TLS 1.3 only (QUIC requires it), the AEADs QUIC defines, common groups.
        let priority = "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:"
            + "+CHACHA20-POLY1305:+AES-128-CCM:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1"
        try check(gnutls_priority_set_direct(session, priority, nil), "setting TLS priorities")
        try check(gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE, UnsafeMutableRawPointer(credentials)), "attaching credentials")
        let alpn = Array(configuration.alpn.utf8)
        let alpnRC = alpn.withUnsafeBufferPointer { buffer -> Int32 in
            var datum = gnutls_datum_t(data: UnsafeMutablePointer(mutating: buffer.baseAddress), size: UInt32(buffer.count))
            return gnutls_alpn_set_protocols(session, &datum, 1, UInt32(GNUTLS_ALPN_MANDATORY.rawValue))
        }
        try check(alpnRC, "setting ALPN")
        let sni = Array(configuration.serverName.utf8)
        try check(gnutls_server_name_set(session, GNUTLS_NAME_DNS, sni, sni.count), "setting the server name")
        connRef.pointee.get_conn = { ref in
            guard let ref, let user = ref.pointee.user_data else { return nil }
            return Unmanaged<QUICEngine>.fromOpaque(user).takeUnretainedValue().conn
        }
        connRef.pointee.user_data = Unmanaged.passUnretained(self).toOpaque()
        gnutls_session_set_ptr(session, UnsafeMutableRawPointer(connRef))
        gnutls_session_set_verify_function(session) { session in
            guard let session, let raw = gnutls_session_get_ptr(session) else { return -1 }
            let ref = raw.assumingMemoryBound(to: ngtcp2_crypto_conn_ref.self)
            guard let user = ref.pointee.user_data else { return -1 }
            return Unmanaged<QUICEngine>.fromOpaque(user).takeUnretainedValue().verifyPeer(session)
        }
    }

    /// The pin check, inside the handshake: GnuTLS has already verified the handshake signature
    /// with this certificate's key; what remains is whether it is the certificate we expect.
    private func verifyPeer(_ session: gnutls_session_t) -> Int32 {
        var count: UInt32 = 0
        guard let list = gnutls_certificate_get_peers(session, &count), count >= 1, let data = list[0].data else {
            return Int32(GNUTLS_E_CERTIFICATE_ERROR)
        }
        let der = UnsafeRawBufferPointer(start: data, count: Int(list[0].size))
        let fingerprint = Array(SHA256.hash(data: der))
        presentedFingerprint = fingerprint
        if let pin = configuration.pinnedFingerprint, pin != fingerprint {
            return Int32(GNUTLS_E_CERTIFICATE_ERROR)   // mapError names it from the two fingerprints
        }
        return 0
    }

    private func setUpQUIC() throws(PunktfunkSessionError) {
        var callbacks = ngtcp2_callbacks()
        callbacks.client_initial = ngtcp2_crypto_client_initial_cb
        callbacks.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb
        callbacks.encrypt = ngtcp2_crypto_encrypt_cb
        callbacks.decrypt = ngtcp2_crypto_decrypt_cb
        callbacks.hp_mask = ngtcp2_crypto_hp_mask_cb
        callbacks.recv_retry = ngtcp2_crypto_recv_retry_cb
        callbacks.update_key = ngtcp2_crypto_update_key_cb
        callbacks.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb
        callbacks.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb
        callbacks.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb
        callbacks.version_negotiation = ngtcp2_crypto_version_negotiation_cb
        callbacks.rand = { dest, length, _ in
            guard let dest else { return }
            var rng = SystemRandomNumberGenerator()
            for i in 0..<length { dest[i] = UInt8.random(in: 0...255, using: &rng) }
        }
        callbacks.get_new_connection_id = { _, cid, token, length, _ in
            guard let cid, let token else { return NGTCP2_ERR_CALLBACK_FAILURE }
            var bytes = [UInt8](repeating: 0, count: length)
            for i in 0..<length { bytes[i] = UInt8.random(in: 0...255) }
            ngtcp2_cid_init(cid, bytes, length)
            for i in 0..<Int(NGTCP2_STATELESS_RESET_TOKENLEN) { token[i] = UInt8.random(in: 0...255) }
            return 0
        }
        callbacks.handshake_completed = { _, user in
            guard let user else { return NGTCP2_ERR_CALLBACK_FAILURE }
            Unmanaged<QUICEngine>.fromOpaque(user).takeUnretainedValue().phase = .established(controlStream: nil)
            return 0
        }
        callbacks.recv_stream_data = { conn, flags, streamID, _, data, length, user, _ in
            guard let user else { return NGTCP2_ERR_CALLBACK_FAILURE }
            let engine = Unmanaged<QUICEngine>.fromOpaque(user).takeUnretainedValue()
            if length > 0, let data {
                engine.events(.streamData(Array(UnsafeBufferPointer(start: data, count: length))))
            }
            if flags & UInt32(NGTCP2_STREAM_DATA_FLAG_FIN) != 0 { engine.events(.streamFinished) }
            // We consume everything at once, so the flow-control window moves on at once.
            ngtcp2_conn_extend_max_stream_offset(conn, streamID, UInt64(length))
            ngtcp2_conn_extend_max_offset(conn, UInt64(length))
            return 0
        }
        callbacks.acked_stream_data_offset = { _, _, offset, length, user, _ in
            guard let user else { return NGTCP2_ERR_CALLBACK_FAILURE }
            Unmanaged<QUICEngine>.fromOpaque(user).takeUnretainedValue().acknowledged(upTo: offset + length)
            return 0
        }
        callbacks.recv_datagram = { _, _, data, length, user in
            guard let user else { return NGTCP2_ERR_CALLBACK_FAILURE }
            let engine = Unmanaged<QUICEngine>.fromOpaque(user).takeUnretainedValue()
            if let data { engine.events(.datagram(Array(UnsafeBufferPointer(start: data, count: length)))) }
            return 0
        }

        var settings = ngtcp2_settings()
        cngtcp2_settings_default(&settings)
        settings.initial_ts = Self.now()
        settings.handshake_timeout = ngtcp2Nanoseconds(configuration.handshakeTimeout)
        var params = ngtcp2_transport_params()
        cngtcp2_transport_params_default(&params)
        params.initial_max_stream_data_bidi_local = 1 << 20
        params.initial_max_stream_data_bidi_remote = 1 << 20
        params.initial_max_stream_data_uni = 1 << 20
        params.initial_max_data = 4 << 20
        params.initial_max_streams_bidi = 1
        params.initial_max_streams_uni = 3
        // Until the handshake completes ngtcp2 applies our own idle timeout, which would end a
        // slow handshake at 8 s whatever `handshakeTimeout` says: advertise the longer of the two.
        // Afterwards the negotiated value is the smaller of both sides' (the host's 8 s), and the
        // idle check in `run` holds `idleTimeout` whatever was negotiated.
        params.max_idle_timeout = ngtcp2Nanoseconds(max(configuration.idleTimeout, configuration.handshakeTimeout))
        params.max_datagram_frame_size = 65535

        var dcidBytes = [UInt8](repeating: 0, count: 18)
        var scidBytes = [UInt8](repeating: 0, count: 16)
        for i in dcidBytes.indices { dcidBytes[i] = UInt8.random(in: 0...255) }
        for i in scidBytes.indices { scidBytes[i] = UInt8.random(in: 0...255) }
        var dcid = ngtcp2_cid()
        var scid = ngtcp2_cid()
        ngtcp2_cid_init(&dcid, dcidBytes, dcidBytes.count)
        ngtcp2_cid_init(&scid, scidBytes, scidBytes.count)

        let user = Unmanaged.passUnretained(self).toOpaque()
        let rc = makePath { path in
            cngtcp2_conn_client_new(&conn, &dcid, &scid, path, NGTCP2_PROTO_VER_V1, &callbacks, &settings, &params, user)
        }
        guard rc == 0, let conn else { throw .quic(code: rc, detail: String(cString: ngtcp2_strerror(rc))) }
        ngtcp2_conn_set_tls_native_handle(conn, UnsafeMutableRawPointer(session))
        ngtcp2_conn_set_keep_alive_timeout(conn, ngtcp2Nanoseconds(configuration.keepAlive))
    }

    /// ngtcp2 keeps copies of the addresses, so a temporary path is enough for each call.
    private func makePath<R>(_ body: (UnsafePointer<ngtcp2_path>) -> R) -> R {
        localAddress.withUnsafeMutableBytes { local in
            remote.bytes.withUnsafeBytes { remoteRaw in
                var p = ngtcp2_path()
                p.local.addr = local.baseAddress!.assumingMemoryBound(to: sockaddr.self)
                p.local.addrlen = localLength
                p.remote.addr = UnsafeMutablePointer(mutating: remoteRaw.baseAddress!.assumingMemoryBound(to: sockaddr.self))
                p.remote.addrlen = socklen_t(remoteRaw.count)
                return withUnsafePointer(to: &p) { body($0) }
            }
        }
    }

    private func tearDown() {
        for chunk in sendChunks { chunk.data.deallocate() }
        sendChunks.removeAll()
        if let conn { ngtcp2_conn_del(conn) }
        conn = nil
        if let session { gnutls_deinit(session) }
        session = nil
        if let credentials { gnutls_certificate_free_credentials(credentials) }
        credentials = nil
        if fd >= 0 { close(fd) }
        fd = -1
    }

    // MARK: - the loop

    func run() {
        let error = loop()
        if let error, !isHostGone {
            // Tell the host why we are going (a TLS failure, our pin refusing it), so it does not
            // wait out its idle timeout.
            sendTransportClose(error)
        }
        if let waiter = handshakeWaiter {
            handshakeWaiter = nil
            waiter(.failure(error ?? .closed))
        } else {
            events(.closed(error))
        }
        // Done only once ngtcp2 and GnuTLS are released: a process may exit right after
        // `waitUntilClosed`, and its library destructors must not race this thread's teardown.
        tearDown()
        mailbox.markDone()
    }

    /// Runs until the connection ends; returns why (nil when we closed it on purpose).
    private func loop() -> PunktfunkSessionError? {
        if let error = writePackets() { return error }
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0), pollfd(fd: mailbox.wakeRead, events: Int16(POLLIN), revents: 0)]
        lastPacketAt = Self.now()
        let idleNs = ngtcp2Nanoseconds(configuration.idleTimeout)
        while true {
            guard let conn else { return .closed }
            let now = Self.now()
            var expiry = ngtcp2_conn_get_expiry(conn)
            if handshakeDone { expiry = min(expiry, lastPacketAt + idleNs) }
            var timeout: Int32 = -1
            if expiry != UInt64.max {
                timeout = expiry <= now ? 0 : Int32(min((expiry - now + 999_999) / 1_000_000, 60_000))
            }
            fds[0].revents = 0
            fds[1].revents = 0
            let ready = poll(&fds, 2, timeout)
            if ready < 0, errno != EINTR {
                return .network(operation: "wait for QUIC packets", reason: String(cString: strerror(errno)))
            }
            if fds[0].revents != 0, let error = readPackets() { return error }
            if fds[1].revents != 0 { mailbox.drainWake() }
            if handshakeDone, let waiter = handshakeWaiter {
                if controlStream == nil {
                    var id: Int64 = -1
                    let rc = ngtcp2_conn_open_bidi_stream(conn, &id, nil)
                    guard rc == 0 else { return .quic(code: rc, detail: "cannot open the control stream: \(String(cString: ngtcp2_strerror(rc)))") }
                    phase = .established(controlStream: id)
                }
                handshakeWaiter = nil
                var stat = ngtcp2_conn_stat()
                cngtcp2_conn_get_conn_stat(conn, &stat)
                waiter(.success((presentedFingerprint ?? [], stat.smoothed_rtt)))
            }
            if handshakeDone {
                for command in mailbox.take() {
                    switch command {
                    case .stream(let bytes, let fin):
                        queueStream(bytes)
                        if fin, case .notAsked = self.fin { self.fin = .pending }
                    case .datagram(let bytes):
                        // Latest wins, as the host's 4 KiB datagram buffer does: never an unbounded queue.
                        if datagrams.count >= 256 { datagrams.removeFirst() }
                        datagrams.append(bytes)
                    case .close(let code, let reason):
                        sendClose(code: code, reason: reason)
                        return nil
                    }
                }
            }
            if handshakeDone, Self.now() >= lastPacketAt + idleNs {
                phase = .hostGone
                return .idleTimeout(seconds: configuration.idleTimeout.inSeconds)
            }
            if Self.now() >= ngtcp2_conn_get_expiry(conn) {
                let rc = ngtcp2_conn_handle_expiry(conn, Self.now())
                if rc != 0 { return mapError(rc) }
            }
            if let error = writePackets() { return error }
        }
    }

    /// Reads what the socket holds, at most a batch, so a host that never pauses cannot keep
    /// commands, timers and writes from their turn.
    private func readPackets() -> PunktfunkSessionError? {
        for _ in 0..<256 {
            let n = packet.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return nil }
                if errno == ECONNREFUSED {
                    // ICMP port unreachable. Before the handshake: nothing listens on that port,
                    // and waiting out the handshake timeout would only hide it. Afterwards a lost
                    // host is the idle timeout's to judge (one stray ICMP message is no verdict).
                    guard handshakeDone else {
                        return .network(operation: "reach a punktfunk host at \(remote)",
                                        reason: "nothing is listening on that UDP port (ICMP port unreachable came back); is the host running, and is the port right?")
                    }
                    continue
                }
                return .network(operation: "receive from \(remote)", reason: String(cString: strerror(errno)))
            }
            let rc = makePath { path in
                packet.withUnsafeBytes { raw in
                    cngtcp2_conn_read_pkt(conn, path, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), n, Self.now())
                }
            }
            if rc != 0 { return mapError(rc) }
            lastPacketAt = Self.now()
        }
        return nil
    }

    private func writePackets() -> PunktfunkSessionError? {
        guard let conn else { return .closed }
        var misses = 0
        while true {
            var written: ngtcp2_ssize = -1
            var n: ngtcp2_ssize
            let now = Self.now()
            if handshakeDone, let datagram = datagrams.first {
                var accepted: Int32 = 0
                n = datagram.withUnsafeBytes { raw in
                    var vec = ngtcp2_vec(base: UnsafeMutablePointer(mutating: raw.baseAddress?.assumingMemoryBound(to: UInt8.self)), len: raw.count)
                    return makePath { path in
                        outgoing.withUnsafeMutableBytes { out in
                            cngtcp2_conn_writev_datagram(conn, UnsafeMutablePointer(mutating: path), out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                         out.count, &accepted, 0, 0, &vec, 1, now)
                        }
                    }
                }
                if accepted != 0 {
                    datagrams.removeFirst()
                    misses = 0
                } else if n > 0 {
                    // The packet filled with other frames first; try once more, then give up on it.
                    misses += 1
                    if misses > 1 { datagrams.removeFirst(); misses = 0 }
                } else if n == 0 {
                    return nil
                }
            } else if let streamID = controlStream, let (pointer, length) = unsentStream() {
                let fin = self.fin == .pending && UInt64(length) == streamQueued - streamWritten
                var vec = ngtcp2_vec(base: pointer, len: length)
                n = makePath { path in
                    outgoing.withUnsafeMutableBytes { out in
                        cngtcp2_conn_writev_stream(conn, UnsafeMutablePointer(mutating: path), out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                                   out.count, &written, fin ? UInt32(NGTCP2_WRITE_STREAM_FLAG_FIN) : 0, streamID, &vec, 1, now)
                    }
                }
                if n == NGTCP2_ERR_STREAM_DATA_BLOCKED || n == NGTCP2_ERR_STREAM_SHUT_WR {
                    n = writeControlOnly(conn, now)
                } else if written >= 0 {
                    streamWritten += UInt64(written)
                    if fin, streamWritten == streamQueued { self.fin = .sent }
                }
            } else {
                n = writeControlOnly(conn, now)
            }
            if n < 0 { return mapError(Int32(n)) }
            if n == 0 { return nil }
            let sent = outgoing.withUnsafeBytes { send(fd, $0.baseAddress, Int(n), 0) }
            if sent < 0, errno != EAGAIN, errno != ECONNREFUSED, errno != EINTR {
                return .network(operation: "send to \(remote)", reason: String(cString: strerror(errno)))
            }
        }
    }

    private func writeControlOnly(_ conn: OpaquePointer, _ now: UInt64) -> ngtcp2_ssize {
        makePath { path in
            outgoing.withUnsafeMutableBytes { out in
                cngtcp2_conn_writev_stream(conn, UnsafeMutablePointer(mutating: path), out.baseAddress!.assumingMemoryBound(to: UInt8.self),
                                           out.count, nil, 0, -1, nil, 0, now)
            }
        }
    }

    private func queueStream(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
        chunk.copyBytes(from: bytes)
        sendChunks.append((streamQueued, chunk))
        streamQueued += UInt64(bytes.count)
    }

    /// The first chunk with unsent bytes, from the first unsent byte.
    private func unsentStream() -> (UnsafeMutablePointer<UInt8>, Int)? {
        guard streamWritten < streamQueued || fin == .pending else { return nil }
        for chunk in sendChunks where chunk.offset + UInt64(chunk.data.count) > streamWritten {
            let skip = Int(streamWritten - chunk.offset)
            return (chunk.data.baseAddress!.assumingMemoryBound(to: UInt8.self) + skip, chunk.data.count - skip)
        }
        return nil
    }

    private func acknowledged(upTo offset: UInt64) {
        streamAcked = max(streamAcked, offset)
        while let first = sendChunks.first, first.offset + UInt64(first.data.count) <= streamAcked {
            first.data.deallocate()
            sendChunks.removeFirst()
        }
    }

    private func sendClose(code: UInt64, reason: String) {
        guard let conn else { return }
        var ccerr = ngtcp2_connection_close_error()
        let reasonBytes = Array(reason.utf8.prefix(200))
        reasonBytes.withUnsafeBufferPointer { buffer in
            ngtcp2_connection_close_error_set_application_error(&ccerr, code, buffer.baseAddress, buffer.count)
            let n = makePath { path in
                outgoing.withUnsafeMutableBytes { out in
                    cngtcp2_conn_write_connection_close(conn, UnsafeMutablePointer(mutating: path),
                                                        out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, &ccerr, Self.now())
                }
            }
            if n > 0 { _ = outgoing.withUnsafeBytes { send(fd, $0.baseAddress, Int(n), 0) } }
        }
    }

    private func sendTransportClose(_ error: PunktfunkSessionError) {
        guard let conn, lastLibraryError != 0, ngtcp2_conn_is_in_closing_period(conn) == 0,
              ngtcp2_conn_is_in_draining_period(conn) == 0 else { return }
        var ccerr = ngtcp2_connection_close_error()
        if lastLibraryError == NGTCP2_ERR_CRYPTO {
            ngtcp2_connection_close_error_set_transport_error_tls_alert(&ccerr, ngtcp2_conn_get_tls_alert(conn), nil, 0)
        } else {
            ngtcp2_connection_close_error_set_transport_error_liberr(&ccerr, lastLibraryError, nil, 0)
        }
        let n = makePath { path in
            outgoing.withUnsafeMutableBytes { out in
                cngtcp2_conn_write_connection_close(conn, UnsafeMutablePointer(mutating: path),
                                                    out.baseAddress!.assumingMemoryBound(to: UInt8.self), out.count, &ccerr, Self.now())
            }
        }
        if n > 0 { _ = outgoing.withUnsafeBytes { send(fd, $0.baseAddress, Int(n), 0) } }
    }

    /// Turns an ngtcp2 result into the reason a person reads.
    private func mapError(_ rc: Int32) -> PunktfunkSessionError {
        lastLibraryError = rc
        let error = describe(rc)
        if [NGTCP2_ERR_DRAINING, NGTCP2_ERR_CLOSING, NGTCP2_ERR_IDLE_CLOSE, NGTCP2_ERR_HANDSHAKE_TIMEOUT].contains(rc) { phase = .hostGone }
        return error
    }

    private func describe(_ rc: Int32) -> PunktfunkSessionError {
        if let presented = presentedFingerprint, let pinned = configuration.pinnedFingerprint, presented != pinned {
            return .fingerprintChanged(host: configuration.host, pinned: hexString(pinned), presented: hexString(presented))
        }
        switch rc {
        case NGTCP2_ERR_DRAINING, NGTCP2_ERR_CLOSING:
            guard let conn else { return .closed }
            var ccerr = ngtcp2_connection_close_error()
            ngtcp2_conn_get_connection_close_error(conn, &ccerr)
            var reason = ""
            if let text = ccerr.reason, ccerr.reasonlen > 0 {
                reason = String(decoding: UnsafeBufferPointer(start: text, count: ccerr.reasonlen), as: UTF8.self)
            }
            if ccerr.type == NGTCP2_CONNECTION_CLOSE_ERROR_CODE_TYPE_APPLICATION {
                return .closedByHost(code: ccerr.error_code, reason: reason)
            }
            return Self.transportError(code: ccerr.error_code, reason: reason, host: configuration.host)
        case NGTCP2_ERR_IDLE_CLOSE:
            return handshakeDone ? .idleTimeout(seconds: configuration.idleTimeout.inSeconds)
                                 : .handshakeTimeout(host: "\(remote)", seconds: configuration.handshakeTimeout.inSeconds)
        case NGTCP2_ERR_HANDSHAKE_TIMEOUT:
            return .handshakeTimeout(host: "\(remote)", seconds: configuration.handshakeTimeout.inSeconds)
        case NGTCP2_ERR_CRYPTO, NGTCP2_ERR_CALLBACK_FAILURE:
            var detail = String(cString: ngtcp2_strerror(rc))
            if let session {
                let alert = gnutls_alert_get(session)
                if let name = gnutls_alert_get_name(alert) { detail = "TLS alert: \(String(cString: name))" }
            }
            return .tls(detail)
        default:
            return .quic(code: rc, detail: String(cString: ngtcp2_strerror(rc)))
        }
    }

    static func transportError(code: UInt64, reason: String, host: String) -> PunktfunkSessionError {
        // 0x100–0x1ff: a TLS alert carried by QUIC (RFC 9001 §4.8).
        if (0x100...0x1FF).contains(code) {
            let alert = TLSAlert(rawValue: UInt8(code - 0x100))
            if alert == .noApplicationProtocol { return .tls("\(host) does not speak punktfunk/1 (it refused ALPN pkf1)") }
            if TLSAlert.clientCertificateRefused.contains(alert) {
                return .tls("\(host) rejected this client's certificate (TLS alert \(alert.rawValue))")
            }
            return .tls("\(host) ended the TLS handshake (alert \(alert.rawValue))\(reason.isEmpty ? "" : ": \(reason)")")
        }
        return .quic(code: Int32(truncatingIfNeeded: code), detail: "the host closed the connection with QUIC error 0x\(String(code, radix: 16))\(reason.isEmpty ? "" : ": \(reason)")")
    }
}

/// A duration as ngtcp2 takes it: nanoseconds.
private func ngtcp2Nanoseconds(_ duration: Duration) -> UInt64 { UInt64(max(.zero, duration) / .nanoseconds(1)) }
