import FarcastSupport

/// How every punktfunk/1 command starts a stream, in order: connect (QUIC and the trust check),
/// Hello → Welcome, the data socket bound and announced in Start, then the first clock batch
/// applied. What probe, speedtest, receive and the streaming window share.
public struct StreamStart: Sendable {
    public let client: PunktfunkClient
    public let welcome: Welcome
    public let dataSocket: DataPlaneSocket
    /// The offset estimate after the handshake's clock batch.
    public let clock: ClockOffsetEstimator
    /// That batch, for a `VideoStreamSession.applyClock` once the receiver exists.
    public let samples: [ClockSample]

    /// Opens the stream. `connected` runs as soon as the QUIC connection is up (to let an
    /// interrupt close it mid-handshake); `beforeStart` once the data socket exists and before
    /// Start goes out, so a receiver can be listening when the host's first datagram arrives. On
    /// any failure the connection is closed before the error is thrown.
    public static func open(_ options: PunktfunkClient.Options, hello: Hello, timeout: Duration,
                            connected: (PunktfunkClient) -> Void = { _ in },
                            beforeStart: (PunktfunkClient, Welcome, DataPlaneSocket) throws -> Void = { _, _, _ in }) async throws -> StreamStart {
        let client = try await PunktfunkClient.connect(options)
        connected(client)
        do {
            var bound: DataPlaneSocket?
            let (welcome, samples) = try await client.establish(hello, timeout: timeout) { welcome in
                let socket = try DataPlaneSocket(host: client.quic.remoteAddress, udpPort: welcome.udpPort, clock: options.clock)
                try beforeStart(client, welcome, socket)
                bound = socket
                return socket.localPort
            }
            // establish returns only after its bindDataSocket step ran.
            guard let socket = bound else { throw PunktfunkSessionError.closed }
            var clock = ClockOffsetEstimator()
            clock.apply(batch: samples)
            return StreamStart(client: client, welcome: welcome, dataSocket: socket, clock: clock, samples: samples)
        } catch {
            client.close()
            throw error
        }
    }
}

extension VideoStreamSession {
    /// Takes the host's Reconfigured (accepted) and BitrateChanged from `client`'s control inbox
    /// as they arrive, at any time during the stream, and applies them here; `onMode` runs after a
    /// mode change (the window resizes its picture). Other messages stay queued for their waiters.
    public func followControlMessages(of client: PunktfunkClient, onMode: @escaping @Sendable (StreamMode) -> Void = { _ in }) {
        client.inbox.observe { [self] payload in
            guard ControlMessage.isControl(payload), let message = try? ControlMessage.decode(payload) else { return false }
            switch message {
            case .reconfigured(true, let mode):
                modeChanged(to: mode)
                onMode(mode)
                return true
            case .bitrateChanged(let kbps):
                bitrateChanged(to: kbps)
                return true
            case .reconfigured:
                return true
            default:
                return false
            }
        }
    }
}
