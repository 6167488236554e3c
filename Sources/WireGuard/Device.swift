import Foundation
import FarcastSupport
import Tunnel

/// A peer as configured (a `[Peer]` section of a wg-quick file).
public struct PeerConfiguration: Sendable {
    public var publicKey: PublicKey
    public var presharedKey: PresharedKey
    /// The inner addresses this peer may send from and that are routed to it.
    public var allowedIPs: [IPPrefix]
    /// Where to send until the peer is heard from (then: wherever it was last heard from).
    public var endpoint: UDPEndpoint?
    /// Send a keepalive after this long without sending anything (to keep NAT mappings open).
    public var persistentKeepalive: Duration?

    public init(publicKey: PublicKey, presharedKey: PresharedKey = .none, allowedIPs: [IPPrefix] = [],
                endpoint: UDPEndpoint? = nil, persistentKeepalive: Duration? = nil) {
        self.publicKey = publicKey
        self.presharedKey = presharedKey
        self.allowedIPs = allowedIPs
        self.endpoint = endpoint
        self.persistentKeepalive = persistentKeepalive
    }
}

/// What the device asks its I/O layer to do. The bulk cryptography comes out as work to do
/// outside the device (`seal`, `open`), so an I/O layer holding the device under a lock can
/// encrypt and decrypt on several threads at once; `completingCrypto` does it in place.
public enum DeviceAction: Sendable {
    /// Send this datagram to this endpoint.
    case send([UInt8], to: UDPEndpoint)
    /// Seal this packet with this job (its counter is reserved) and send it to this endpoint.
    case seal(SealJob, packet: [UInt8], to: UDPEndpoint)
    /// Open this transport message; then hand the result to `opened(_:packet:from:size:now:)`.
    case open(OpenJob, from: UDPEndpoint, size: Int)
    /// Write this IP packet to the tunnel.
    case deliver([UInt8])
    /// Something a person may want in the log (a handshake completed, a peer gave up…).
    case note(String)
}

/// What `wg show` shows for a peer.
public struct PeerStatus: Sendable, Equatable {
    public var publicKey: PublicKey
    public var hasPresharedKey: Bool
    public var endpoint: UDPEndpoint?
    public var allowedIPs: [IPPrefix]
    /// When the last handshake completed, on the device's monotonic clock.
    public var lastHandshake: MonotonicInstant?
    public var receivedBytes: UInt64
    public var sentBytes: UInt64
    public var persistentKeepalive: Duration?
}

/// A WireGuard interface's protocol state: every peer's handshakes, sessions and timers, the
/// session index table, cryptokey routing and cookies. Pure: the I/O layer feeds it packets
/// from the tunnel, datagrams from the socket and clock ticks, and carries out the actions it
/// returns. Not thread-safe: one owner (the I/O layer holds it under one lock).
public struct WireGuardDevice: Sendable {
    public private(set) var identity: LocalIdentity
    public let timers: WireGuardTimers
    /// Handshake messages per second beyond which MAC2 (a cookie) is required.
    public var loadThreshold: Int
    private var peers: [PeerState] = []
    private var peerByKey: [PublicKey: Int] = [:]
    /// Our session and handshake indices → the peer they belong to.
    private var indices: [UInt32: Int] = [:]
    private var cookies: CookieChecker
    private var handshakeCount = (second: Int64(0), count: 0)
    /// Cryptokey routing: the peer each allowed-IPs prefix belongs to.
    private var routes = AllowedIPsTable([])
    /// The wall clock at `started`: an initiation's TAI64N is this plus the monotonic time since,
    /// so the timestamps follow the clock the device is fed (real or a test's) and never go back.
    private let started: (instant: MonotonicInstant, wallClock: Date)

    /// The most packets held for a peer while its handshake is under way (older ones dropped).
    public static let queueLimit = 1024

    public init(privateKey: PrivateKey, peers: [PeerConfiguration], timers: WireGuardTimers = .standard,
                loadThreshold: Int = 1000, now: MonotonicInstant, wallClock: Date = Date()) {
        started = (now, wallClock)
        identity = LocalIdentity(privateKey: privateKey)
        self.timers = timers
        self.loadThreshold = loadThreshold
        cookies = CookieChecker(local: identity, now: now)
        for peer in peers {
            peerByKey[peer.publicKey] = self.peers.count
            self.peers.append(PeerState(configuration: peer))
            claim(peer.allowedIPs, for: self.peers.count - 1)
        }
        routes = AllowedIPsTable(self.peers.map(\.configuration.allowedIPs))
    }

    /// Gives `prefixes` to peer `index` alone: another peer listing one of them loses it, as
    /// `wg set … allowed-ips` moves a prefix between peers (a prefix has one owner).
    private mutating func claim(_ prefixes: [IPPrefix], for index: Int) {
        let networks = Set(prefixes.map(\.network))
        for other in peers.indices where other != index {
            peers[other].configuration.allowedIPs.removeAll { networks.contains($0.network) }
        }
    }

    /// The TAI64N an initiation made at `now` carries.
    func timestamp(at now: MonotonicInstant) -> TAI64N {
        TAI64N(started.wallClock.addingTimeInterval(Double(now.nanoseconds(since: started.instant)) / 1e9))
    }

    public var status: [PeerStatus] {
        peers.map {
            PeerStatus(publicKey: $0.configuration.publicKey, hasPresharedKey: $0.configuration.presharedKey != .none,
                       endpoint: $0.endpoint, allowedIPs: $0.configuration.allowedIPs, lastHandshake: $0.lastHandshake,
                       receivedBytes: $0.receivedBytes, sentBytes: $0.sentBytes, persistentKeepalive: $0.configuration.persistentKeepalive)
        }
    }

    /// Every peer's preshared key (for the UAPI's get).
    var presharedKeys: [PublicKey: PresharedKey] {
        Dictionary(peers.map { ($0.configuration.publicKey, $0.configuration.presharedKey) }, uniquingKeysWith: { a, _ in a })
    }

    // MARK: - From the tunnel

    /// An IP packet the kernel routed into the interface: sealed for the peer whose allowed IPs
    /// hold its destination (longest prefix), or held while a handshake is made.
    public mutating func packetFromTunnel(_ packet: [UInt8], now: MonotonicInstant) -> [DeviceAction] {
        var actions: [DeviceAction] = []
        let sealing = packet.withUnsafeBytes { packetFromTunnel($0, now: now, actions: &actions) }
        if let (job, endpoint) = sealing { actions.insert(.seal(job, packet: packet, to: endpoint), at: 0) }
        return actions
    }

    /// The same for batched I/O, with the packet left where it is: when the current session can
    /// take it, the job that seals it and where to send it come back (the caller seals it in
    /// place, `SealJob.seal(_:into:)`); otherwise it is copied into the peer's queue and a
    /// handshake started, or dropped when no peer has its destination. Other work (a handshake
    /// initiation) lands in `actions`.
    public mutating func packetFromTunnel(_ packet: UnsafeRawBufferPointer, now: MonotonicInstant,
                                          actions: inout [DeviceAction]) -> (SealJob, UDPEndpoint)? {
        guard let destination = IPHeader.destination(of: packet), let index = route(destination) else {
            return nil   // no peer has this address: dropped (the kernel answers nothing; wireguard-go neither)
        }
        if let sealing = reserve(packet.count, toPeer: index, now: now, actions: &actions) { return sealing }
        peers[index].queue.append(Array(packet))
        if peers[index].queue.count > Self.queueLimit { peers[index].queue.removeFirst() }
        initiate(index, now: now, actions: &actions)
        return nil
    }

    /// The peer index whose allowed IPs hold `address` most specifically.
    func route(_ address: IPAddress) -> Int? { routes.lookup(address) }

    /// Reserves a counter on the current session and asks for the packet to be sealed and sent,
    /// if that session may still send; false if it may not.
    private mutating func send(_ packet: [UInt8], toPeer index: Int, now: MonotonicInstant, actions: inout [DeviceAction]) -> Bool {
        guard let (job, endpoint) = reserve(packet.count, toPeer: index, now: now, actions: &actions) else { return false }
        actions.append(.seal(job, packet: packet, to: endpoint))
        return true
    }

    /// A counter on the current session for a packet of `length` bytes (0: a keepalive) and the
    /// peer's endpoint, with the accounting and timers of sending it; nil when that session may
    /// not send (none yet, too old, a responder's not yet confirmed, its counters used up).
    private mutating func reserve(_ length: Int, toPeer index: Int, now: MonotonicInstant,
                                  actions: inout [DeviceAction]) -> (SealJob, UDPEndpoint)? {
        guard let endpoint = peers[index].endpoint, var session = peers[index].current,
              now.nanoseconds(since: session.established) < timers.rejectAfterTime.wholeNanoseconds,
              session.keys.isInitiator || session.hasReceived,
              let job = try? session.reserve() else { return nil }
        peers[index].current = session
        account(sent: job.sealedLength(length), toPeer: index, now: now)
        if length > 0, peers[index].newHandshakeDue == nil {
            peers[index].newHandshakeDue = now.advanced(byNanoseconds: (timers.keepaliveTimeout + timers.rekeyTimeout).wholeNanoseconds)
        }
        // The initiator renews an old or much-used session when it next sends.
        if session.keys.isInitiator,
           now.nanoseconds(since: session.established) >= timers.rekeyAfterTime.wholeNanoseconds
            || session.sendingCounter >= TransportSession.rekeyAfterMessages {
            initiate(index, now: now, actions: &actions)
        }
        return (job, endpoint)
    }

    private mutating func emit(_ datagram: [UInt8], toPeer index: Int, endpoint: UDPEndpoint, now: MonotonicInstant, actions: inout [DeviceAction]) {
        actions.append(.send(datagram, to: endpoint))
        account(sent: datagram.count, toPeer: index, now: now)
    }

    private mutating func account(sent bytes: Int, toPeer index: Int, now: MonotonicInstant) {
        peers[index].sentBytes += UInt64(bytes)
        peers[index].lastSent = now
        peers[index].keepaliveDue = nil
    }

    /// Starts a handshake with the peer unless one was sent less than REKEY_TIMEOUT ago.
    private mutating func initiate(_ index: Int, now: MonotonicInstant, actions: inout [DeviceAction]) {
        if case .initiating(_, let sentAt, _, _) = peers[index].handshake,
           now.nanoseconds(since: sentAt) < timers.rekeyTimeout.wholeNanoseconds { return }
        guard let endpoint = peers[index].endpoint else {
            actions.append(.note("peer \(peers[index].configuration.publicKey): no endpoint to send a handshake to (it has to reach us first)"))
            return
        }
        let firstAttempt: MonotonicInstant
        if case .initiating(let old, _, let first, _) = peers[index].handshake {
            indices[old.senderIndex] = nil
            firstAttempt = first
        } else {
            firstAttempt = now
        }
        let senderIndex = newIndex(for: index)
        guard let (pending, initiation) = try? InitiatorHandshake.start(local: identity, remote: peers[index].remote, senderIndex: senderIndex,
                                                                           timestamp: timestamp(at: now)) else {
            indices[senderIndex] = nil
            actions.append(.note("peer \(peers[index].configuration.publicKey): its public key is a low-order point; no handshake is possible"))
            return
        }
        let jitter = Int64.random(in: 0...max(0, timers.rekeyTimeoutJitter.wholeNanoseconds))
        let retryAt = now.advanced(byNanoseconds: timers.rekeyTimeout.wholeNanoseconds + jitter)
        peers[index].handshake = .initiating(pending, sentAt: now, firstAttempt: firstAttempt, retryAt: retryAt)
        let stamped = peers[index].jar.stamp(initiation, now: now)
        emit(stamped, toPeer: index, endpoint: endpoint, now: now, actions: &actions)
    }

    private mutating func newIndex(for peer: Int) -> UInt32 {
        var index = UInt32.random(in: 1...UInt32.max)
        while indices[index] != nil { index = UInt32.random(in: 1...UInt32.max) }
        indices[index] = peer
        return index
    }

    // MARK: - From the network

    /// A datagram from `source`. Anything that fails a check is dropped without effect.
    public mutating func datagram(_ bytes: [UInt8], from source: UDPEndpoint, now: MonotonicInstant) -> [DeviceAction] {
        guard let message = try? Message(parsing: bytes) else { return [] }
        var actions: [DeviceAction] = []
        switch message {
        case .initiation(let initiation):
            guard admitHandshake(bytes, senderIndex: initiation.senderIndex, from: source, now: now, actions: &actions) else { break }
            receiveInitiation(initiation, bytes: bytes, from: source, now: now, actions: &actions)
        case .response(let response):
            guard admitHandshake(bytes, senderIndex: response.senderIndex, from: source, now: now, actions: &actions) else { break }
            receiveResponse(response, bytes: bytes, from: source, now: now, actions: &actions)
        case .cookieReply(let reply):
            guard let index = indices[reply.receiverIndex], case .initiating(let pending, _, _, _) = peers[index].handshake,
                  pending.senderIndex == reply.receiverIndex else { break }
            try? peers[index].jar.consume(reply, now: now)
        case .transport(let receiver, let counter, let sealed):
            receiveTransport(receiver: receiver, counter: counter, sealed: sealed, size: bytes.count, from: source, now: now, actions: &actions)
        }
        return actions
    }

    /// MAC1 always; under load MAC2 too, else a cookie reply instead of any work.
    private mutating func admitHandshake(_ bytes: [UInt8], senderIndex: UInt32, from source: UDPEndpoint, now: MonotonicInstant,
                                         actions: inout [DeviceAction]) -> Bool {
        guard MessageMACs.verifyMAC1(bytes, local: identity) else { return false }
        let second = now.nanoseconds / 1_000_000_000
        handshakeCount = handshakeCount.second == second ? (second, handshakeCount.count + 1) : (second, 1)
        guard handshakeCount.count > loadThreshold else { return true }
        let sourceBytes = source.address.bytes + [UInt8(source.port >> 8), UInt8(source.port & 0xFF)]
        if cookies.verifyMAC2(bytes, source: sourceBytes, now: now) { return true }
        let reply = cookies.reply(to: bytes, senderIndex: senderIndex, source: sourceBytes, now: now)
        actions.append(.send(reply.bytes, to: source))
        return false
    }

    private mutating func receiveInitiation(_ initiation: HandshakeInitiation, bytes: [UInt8], from source: UDPEndpoint,
                                            now: MonotonicInstant, actions: inout [DeviceAction]) {
        guard let consumed = try? ConsumedInitiation(consuming: initiation, local: identity) else { return }
        guard let index = peerByKey[consumed.peerPublicKey] else {
            actions.append(.note("handshake from \(source) with a public key that is no peer here: \(consumed.peerPublicKey)"))
            return
        }
        if let last = peers[index].lastInitiationTimestamp, !(last < consumed.timestamp) { return }   // replayed
        if let at = peers[index].lastInitiationReceived,
           now.nanoseconds(since: at) < timers.initiationRateInterval.wholeNanoseconds { return }       // flood
        let senderIndex = newIndex(for: index)
        guard let (response, keys) = try? consumed.respond(remote: peers[index].remote, senderIndex: senderIndex) else {
            indices[senderIndex] = nil
            return
        }
        peers[index].lastInitiationTimestamp = consumed.timestamp
        peers[index].lastInitiationReceived = now
        peers[index].endpoint = source
        peers[index].receivedBytes += UInt64(bytes.count)
        // The responder's session waits as `next` until the initiator's first message proves it.
        if let old = peers[index].next { indices[old.localIndex] = nil }
        peers[index].next = TransportSession(keys: keys, established: now)
        peers[index].lastHandshake = now
        let stamped = peers[index].jar.stamp(response, now: now)
        emit(stamped, toPeer: index, endpoint: source, now: now, actions: &actions)
    }

    private mutating func receiveResponse(_ response: HandshakeResponse, bytes: [UInt8], from source: UDPEndpoint,
                                          now: MonotonicInstant, actions: inout [DeviceAction]) {
        guard let index = indices[response.receiverIndex], case .initiating(let pending, _, _, _) = peers[index].handshake,
              pending.senderIndex == response.receiverIndex else { return }
        let keys: SessionKeys
        do {
            keys = try pending.finish(response, local: identity)
        } catch {
            // MAC1 proved the sender has our public key; what fails now is the preshared key
            // (or a forgery). Said once per attempt: a retry follows REKEY_TIMEOUT later.
            actions.append(.note("handshake response from \(source) for \(peers[index].configuration.publicKey) did not decrypt: the preshared keys differ (\(error))"))
            return
        }
        peers[index].handshake = .none
        peers[index].endpoint = source
        peers[index].receivedBytes += UInt64(bytes.count)
        install(TransportSession(keys: keys, established: now), forPeer: index)
        peers[index].lastHandshake = now
        actions.append(.note("handshake with \(peers[index].configuration.publicKey) at \(source) completed"))
        // Send what waited; with nothing waiting, a keepalive confirms the session to the responder.
        let queued = peers[index].queue
        peers[index].queue = []
        for packet in queued.isEmpty ? [[]] : queued {
            _ = send(packet, toPeer: index, now: now, actions: &actions)
        }
    }

    /// Makes `session` current; the old current stays as `previous` for packets in flight.
    private mutating func install(_ session: TransportSession, forPeer index: Int) {
        if let previous = peers[index].previous { indices[previous.localIndex] = nil }
        peers[index].previous = peers[index].current
        peers[index].current = session
        peers[index].keysMade = session.established
    }

    /// A transport message: asks for it to be opened if a live session has its index and its
    /// counter is still free (`opened` finishes the work).
    private mutating func receiveTransport(receiver: UInt32, counter: UInt64, sealed: ArraySlice<UInt8>, size: Int,
                                           from source: UDPEndpoint, now: MonotonicInstant, actions: inout [DeviceAction]) {
        guard let index = indices[receiver], let slot = peers[index].slot(of: receiver),
              let session = peers[index][keyPath: slot],
              now.nanoseconds(since: session.established) < timers.rejectAfterTime.wholeNanoseconds,
              let job = try? session.openJob(counter: counter, sealed: sealed) else { return }
        actions.append(.open(job, from: source, size: size))
    }

    /// A transport message `job` opened to `packet` (padded; empty for a keepalive): its counter
    /// taken, the responder's session confirmed, the peer's endpoint and timers updated, and
    /// the packet delivered if its source is one of the peer's allowed IPs.
    public mutating func opened(_ job: OpenJob, packet: [UInt8], from source: UDPEndpoint, size: Int, now: MonotonicInstant) -> [DeviceAction] {
        var actions: [DeviceAction] = []
        // The session may have moved (previous, current) or gone since the job was made.
        guard let index = indices[job.localIndex], let slot = peers[index].slot(of: job.localIndex),
              var session = peers[index][keyPath: slot], (try? session.accept(job.counter)) != nil else { return [] }
        peers[index][keyPath: slot] = session
        if slot == \PeerState.next {
            // The initiator has the keys: the responder's session becomes current.
            peers[index].next = nil
            install(session, forPeer: index)
            let queued = peers[index].queue
            peers[index].queue = []
            for packet in queued { _ = send(packet, toPeer: index, now: now, actions: &actions) }
        }
        peers[index].endpoint = source          // roaming: answer where the peer is now
        peers[index].receivedBytes += UInt64(size)
        peers[index].lastReceived = now
        peers[index].newHandshakeDue = nil
        if let current = peers[index].current, current.keys.isInitiator,
           now.nanoseconds(since: current.established)
            >= (timers.rejectAfterTime - timers.keepaliveTimeout - timers.rekeyTimeout).wholeNanoseconds {
            initiate(index, now: now, actions: &actions)
        }
        guard !packet.isEmpty else { return actions }   // a keepalive
        // Cryptokey routing: the inner source must be one of the peer's allowed IPs.
        guard let (sourceAddress, length) = IPHeader.sourceAndLength(of: packet), length <= packet.count,
              route(sourceAddress) == index else { return actions }
        if peers[index].keepaliveDue == nil {
            peers[index].keepaliveDue = now.advanced(byNanoseconds: timers.keepaliveTimeout.wholeNanoseconds)
        }
        actions.append(.deliver(length == packet.count ? packet : Array(packet.prefix(length))))
        return actions
    }

    /// `actions` with the cryptography done here: every `seal` becomes a `send`, every `open`
    /// is opened and its outcome taken in. For callers without threads of their own (tests,
    /// a single-threaded loop).
    public mutating func completingCrypto(_ actions: [DeviceAction], now: MonotonicInstant) -> [DeviceAction] {
        var done: [DeviceAction] = []
        for action in actions {
            switch action {
            case .seal(let job, let packet, let endpoint):
                done.append(.send(job.seal(packet), to: endpoint))
            case .open(let job, let source, let size):
                guard let packet = try? job.open() else { continue }
                done += completingCrypto(opened(job, packet: packet, from: source, size: size, now: now), now: now)
            case .send, .deliver, .note:
                done.append(action)
            }
        }
        return done
    }

    // MARK: - Configuration while running (the UAPI's set)

    /// Applies a `wg set`: peers added, changed or removed, a new private key. Every check is
    /// made before anything changes, so a refused request leaves the device as it was.
    public mutating func apply(_ request: UAPISetRequest, listenPort: UInt16, now: MonotonicInstant) throws(UAPIError) {
        if let port = request.listenPort, port != listenPort {
            throw UAPIError(errno: 95, reason: "changing the listen port of a running farcast interface (take it down and up)")
        }
        if let mark = request.firewallMark, mark != 0 {
            throw UAPIError(errno: 95, reason: "firewall marks are not supported")
        }
        if let key = request.privateKey {
            identity = LocalIdentity(privateKey: key)
            cookies = CookieChecker(local: identity, now: now)
            for index in peers.indices { forgetSessions(ofPeer: index) }
        }
        if request.replacePeers { peers.removeAll() }
        for change in request.peers {
            let existing = peers.firstIndex { $0.configuration.publicKey == change.publicKey }
            if change.remove {
                if let existing { peers.remove(at: existing) }
                continue
            }
            if existing == nil && change.updateOnly { continue }
            let index = existing ?? {
                peers.append(PeerState(configuration: PeerConfiguration(publicKey: change.publicKey)))
                return peers.count - 1
            }()
            var configuration = peers[index].configuration
            if let psk = change.presharedKey { configuration.presharedKey = psk }
            if let endpoint = change.endpoint {
                configuration.endpoint = endpoint
                peers[index].endpoint = endpoint
            }
            if let interval = change.persistentKeepalive { configuration.persistentKeepalive = interval == .zero ? nil : interval }
            if change.replaceAllowedIPs { configuration.allowedIPs = [] }
            configuration.allowedIPs += change.allowedIPs.filter { !configuration.allowedIPs.contains($0) }
            if configuration.presharedKey != peers[index].configuration.presharedKey {
                peers[index].remote = RemoteIdentity(publicKey: configuration.publicKey, presharedKey: configuration.presharedKey)
                peers[index].jar = CookieJar(remote: peers[index].remote)
            }
            peers[index].configuration = configuration
            claim(change.allowedIPs, for: index)
        }
        rebuildIndices()
    }

    private mutating func forgetSessions(ofPeer index: Int) {
        peers[index].handshake = .none
        peers[index].previous = nil
        peers[index].current = nil
        peers[index].next = nil
        peers[index].keysMade = nil
        peers[index].queue = []
    }

    /// The index tables and the routing table, made again after peers or prefixes changed.
    private mutating func rebuildIndices() {
        routes = AllowedIPsTable(peers.map(\.configuration.allowedIPs))
        peerByKey = [:]
        indices = [:]
        for (index, peer) in peers.enumerated() {
            peerByKey[peer.configuration.publicKey] = index
            for session in [peer.previous, peer.current, peer.next].compactMap({ $0 }) { indices[session.localIndex] = index }
            if case .initiating(let pending, _, _, _) = peer.handshake { indices[pending.senderIndex] = index }
        }
    }

    // MARK: - Time

    /// Runs the timers due at `now`. Call it at least every `tickInterval`.
    public mutating func tick(now: MonotonicInstant) -> [DeviceAction] {
        var actions: [DeviceAction] = []
        for index in peers.indices {
            if case .initiating(_, _, let first, let retryAt) = peers[index].handshake, now >= retryAt {
                if now.nanoseconds(since: first) >= timers.rekeyAttemptTime.wholeNanoseconds {
                    if case .initiating(let pending, _, _, _) = peers[index].handshake { indices[pending.senderIndex] = nil }
                    peers[index].handshake = .none
                    peers[index].queue = []
                    actions.append(.note("handshake with \(peers[index].configuration.publicKey) did not complete after \(timers.rekeyAttemptTime); giving up until there is traffic for it"))
                } else {
                    initiate(index, now: now, actions: &actions)
                }
            }
            if let due = peers[index].keepaliveDue, now >= due {
                peers[index].keepaliveDue = nil
                _ = send([], toPeer: index, now: now, actions: &actions)
            }
            if let due = peers[index].newHandshakeDue, now >= due {
                peers[index].newHandshakeDue = nil
                initiate(index, now: now, actions: &actions)
            }
            if let interval = peers[index].configuration.persistentKeepalive, interval > .zero,
               now.nanoseconds(since: peers[index].lastSent ?? MonotonicInstant(nanoseconds: .min / 2)) >= interval.wholeNanoseconds {
                if !send([], toPeer: index, now: now, actions: &actions), peers[index].endpoint != nil {
                    initiate(index, now: now, actions: &actions)
                }
            }
            // Keys unused for three REJECT_AFTER_TIMEs are forgotten.
            if let made = peers[index].keysMade, now.nanoseconds(since: made) >= 3 * timers.rejectAfterTime.wholeNanoseconds {
                for session in [peers[index].previous, peers[index].current, peers[index].next].compactMap({ $0 }) {
                    indices[session.localIndex] = nil
                }
                peers[index].previous = nil
                peers[index].current = nil
                peers[index].next = nil
                peers[index].keysMade = nil
            }
        }
        return actions
    }

    /// How often `tick` should run: often enough for the shortest timer's resolution.
    public var tickInterval: Duration { min(timers.rekeyTimeout / 10, .milliseconds(100)) }
}

/// One peer's mutable state.
struct PeerState: Sendable {
    enum Handshake: Sendable {
        case none
        case initiating(InitiatorHandshake, sentAt: MonotonicInstant, firstAttempt: MonotonicInstant, retryAt: MonotonicInstant)
    }

    var configuration: PeerConfiguration
    var remote: RemoteIdentity
    var jar: CookieJar
    var endpoint: UDPEndpoint?
    var handshake = Handshake.none
    var previous: TransportSession?
    var current: TransportSession?
    var next: TransportSession?
    var keysMade: MonotonicInstant?
    var queue: [[UInt8]] = []
    var lastInitiationTimestamp: TAI64N?
    var lastInitiationReceived: MonotonicInstant?
    var lastHandshake: MonotonicInstant?
    var lastSent: MonotonicInstant?
    var lastReceived: MonotonicInstant?
    var keepaliveDue: MonotonicInstant?
    var newHandshakeDue: MonotonicInstant?
    var receivedBytes: UInt64 = 0
    var sentBytes: UInt64 = 0

    /// Which of the three sessions has our index `localIndex`.
    func slot(of localIndex: UInt32) -> WritableKeyPath<PeerState, TransportSession?>? {
        if current?.localIndex == localIndex { return \.current }
        if previous?.localIndex == localIndex { return \.previous }
        if next?.localIndex == localIndex { return \.next }
        return nil
    }

    init(configuration: PeerConfiguration) {
        self.configuration = configuration
        remote = RemoteIdentity(publicKey: configuration.publicKey, presharedKey: configuration.presharedKey)
        jar = CookieJar(remote: remote)
        endpoint = configuration.endpoint
    }
}

/// The few IP header fields cryptokey routing reads.
enum IPHeader {
    /// The destination address (read in place: once per packet sent).
    static func destination(of packet: UnsafeRawBufferPointer) -> IPAddress? {
        guard let version = packet.first.map({ $0 >> 4 }) else { return nil }
        if version == 4, packet.count >= 20 { return .v4(UInt32(bigEndian: packet.loadUnaligned(fromByteOffset: 16, as: UInt32.self))) }
        if version == 6, packet.count >= 40 {
            return .v6(high: UInt64(bigEndian: packet.loadUnaligned(fromByteOffset: 24, as: UInt64.self)),
                       low: UInt64(bigEndian: packet.loadUnaligned(fromByteOffset: 32, as: UInt64.self)))
        }
        return nil
    }

    /// The source address and the packet's length from its header (the rest is padding).
    static func sourceAndLength(of packet: [UInt8]) -> (IPAddress, Int)? {
        guard let version = packet.first.map({ $0 >> 4 }) else { return nil }
        if version == 4, packet.count >= 20, let address = IPAddress(bytes: packet[12..<16]) {
            return (address, Int(packet[2]) << 8 | Int(packet[3]))
        }
        if version == 6, packet.count >= 40, let address = IPAddress(bytes: packet[8..<24]) {
            return (address, 40 + (Int(packet[4]) << 8 | Int(packet[5])))
        }
        return nil
    }
}
