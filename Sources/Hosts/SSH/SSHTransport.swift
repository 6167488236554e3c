import Logging
import NIOCore

/// How connections reach a target through an SSH server: the seam between the protocol clients
/// and the SSH client that carries them. Two implementations: `SSHConnection` (the built-in
/// client on swift-nio-ssh, for where no `ssh` program exists) and `OpenSSHTransport` (the
/// user's own OpenSSH, `ssh -W`, with everything its configuration and agent can do).
public protocol SSHTransport: Sendable {
    /// The SSH server as messages name it (`user@host[:port]`).
    var via: String { get }

    /// A byte stream to `host:port`, resolved and connected from the SSH server's side (what
    /// `ssh -W` gives a program). `peerSpeaksFirst` (an RFB server does) lets a transport that
    /// cannot see the channel open wait for the first byte or for the reason it failed. `prepare`
    /// runs on the channel before anything is read (a client adds its handlers there).
    func openByteStream(host: String, port: Int, peerSpeaksFirst: Bool,
                        prepare: @escaping @Sendable (any Channel) throws -> Void) async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer>

    /// Listens on `listenHost:listenPort` (a loopback address; port 0: the system picks) and
    /// carries every accepted connection to `host:port`, as `ssh -L` does. Stopping the
    /// forwarding ends this transport too.
    func forward(to host: String, port: Int, listenHost: String, listenPort: Int, logger: Logger) async throws -> any SSHForwarding

    /// Whether new streams can still be opened (the SSH session is up).
    var isOpen: Bool { get }

    /// Ends every connection carried and the SSH session itself.
    func close() async
}

/// A running local forwarding (`ssh -L`): protocol clients connect to `localHost:localPort`.
public protocol SSHForwarding: Sendable {
    var localHost: String { get }
    var localPort: Int { get }
    /// The SSH server it goes through, for messages.
    var via: String { get }
    /// Stops listening and ends the SSH session it runs on.
    func stop() async
}

extension SSHConnection: SSHTransport {
    public var via: String { route.display }
    public var isOpen: Bool { isActive }

    public func openByteStream(host: String, port: Int, peerSpeaksFirst: Bool,
                               prepare: @escaping @Sendable (any Channel) throws -> Void) async throws -> NIOAsyncChannel<ByteBuffer, ByteBuffer> {
        // The channel-open confirmation already says whether the target was reached.
        try await openByteStream(host: host, port: port, prepare: prepare)
    }

    public func forward(to host: String, port: Int, listenHost: String, listenPort: Int, logger: Logger) async throws -> any SSHForwarding {
        try await SSHLocalForwarder.start(over: self, to: host, port: port, listenHost: listenHost, listenPort: listenPort, logger: logger)
    }
}

extension SSHLocalForwarder: SSHForwarding {
    public var via: String { connection.route.display }
}
