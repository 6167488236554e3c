import FarcastSupport
import Foundation
import Tunnel

/// The cross-platform userspace API that wireguard-go serves on `/var/run/wireguard/NAME.sock`
/// and Debian's `wg` speaks: `get=1` answered with `key=value` lines, `set=1` followed by
/// `key=value` lines; every answer ends with `errno=N` and an empty line. Keys travel as hex.
/// Pure: the interface's socket thread feeds it requests.
public enum UAPI {
    /// The answer to `get=1`. `wallClock` turns a monotonic instant into seconds and nanoseconds
    /// since 1970.
    public static func get(privateKey: PrivateKey, listenPort: UInt16, peers: [PeerStatus], presharedKeys: [PublicKey: PresharedKey],
                           wallClock: (MonotonicInstant) -> (seconds: Int64, nanoseconds: Int64)) -> String {
        var lines = ["private_key=\(hex(privateKey.rawBytes))", "listen_port=\(listenPort)"]
        for peer in peers {
            lines.append("public_key=\(hex(peer.publicKey.bytes))")
            if let psk = presharedKeys[peer.publicKey], psk != .none { lines.append("preshared_key=\(hex(psk.bytes))") }
            lines.append("protocol_version=1")
            if let endpoint = peer.endpoint { lines.append("endpoint=\(endpoint)") }
            let (seconds, nanoseconds) = peer.lastHandshake.map(wallClock) ?? (0, 0)
            lines.append("last_handshake_time_sec=\(seconds)")
            lines.append("last_handshake_time_nsec=\(nanoseconds)")
            lines.append("tx_bytes=\(peer.sentBytes)")
            lines.append("rx_bytes=\(peer.receivedBytes)")
            lines.append("persistent_keepalive_interval=\(peer.persistentKeepalive?.components.seconds ?? 0)")
            for prefix in peer.allowedIPs { lines.append("allowed_ip=\(prefix)") }
        }
        lines.append("errno=0")
        return lines.joined(separator: "\n") + "\n\n"
    }

    /// Parses the lines after `set=1` (up to the empty line).
    public static func parseSet(_ lines: [Substring]) throws(UAPIError) -> UAPISetRequest {
        var request = UAPISetRequest()
        var peer: UAPISetRequest.Peer?
        func finishPeer() { if let peer { request.peers.append(peer) } }
        for line in lines {
            guard let equals = line.firstIndex(of: "=") else { throw UAPIError(errno: 22, reason: "a line without '=': \(line.prefix(40))") }
            let key = String(line[..<equals]), value = String(line[line.index(after: equals)...])
            if key == "public_key" {
                finishPeer()
                peer = UAPISetRequest.Peer(publicKey: try key32(value, key, PublicKey.init(bytes:)))
                continue
            }
            if var current = peer {
                switch key {
                case "remove": current.remove = value == "true"
                case "update_only": current.updateOnly = value == "true"
                case "preshared_key": current.presharedKey = try key32(value, key, PresharedKey.init(bytes:))
                case "endpoint":
                    guard let endpoint = UDPEndpoint(value) else { throw UAPIError(errno: 22, reason: "endpoint '\(value)' is not ADDRESS:PORT") }
                    current.endpoint = endpoint
                case "persistent_keepalive_interval":
                    guard let seconds = UInt16(value) else { throw UAPIError(errno: 22, reason: "persistent_keepalive_interval '\(value)'") }
                    current.persistentKeepalive = .seconds(Int(seconds))
                case "replace_allowed_ips": current.replaceAllowedIPs = value == "true"
                case "allowed_ip":
                    do { current.allowedIPs.append(try IPPrefix(value)) }
                    catch { throw UAPIError(errno: 22, reason: "allowed_ip: \(error)") }
                case "protocol_version":
                    guard value == "1" else { throw UAPIError(errno: 22, reason: "protocol_version \(value) (only 1 exists)") }
                default: throw UAPIError(errno: 22, reason: "unknown peer key \(key)")
                }
                peer = current
                continue
            }
            switch key {
            case "private_key": request.privateKey = try key32(value, key, PrivateKey.init(bytes:))
            case "listen_port":
                guard let port = UInt16(value) else { throw UAPIError(errno: 22, reason: "listen_port '\(value)'") }
                request.listenPort = port
            case "fwmark":
                guard let mark = UInt32(value) else { throw UAPIError(errno: 22, reason: "fwmark '\(value)'") }
                request.firewallMark = mark
            case "replace_peers": request.replacePeers = value == "true"
            default: throw UAPIError(errno: 22, reason: "unknown interface key \(key)")
            }
        }
        finishPeer()
        return request
    }

    private static func key32<Key>(_ text: String, _ name: String, _ make: ([UInt8]) throws(WireGuardError) -> Key) throws(UAPIError) -> Key {
        let bytes = try unhex(text, name)
        do { return try make(bytes) } catch { throw UAPIError(error) }
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func unhex(_ text: String, _ key: String) throws(UAPIError) -> [UInt8] {
        let digits = Array(text.utf8)
        guard digits.count == 64 else { throw UAPIError(errno: 22, reason: "\(key) is not 64 hex digits") }
        var bytes: [UInt8] = []
        for i in stride(from: 0, to: 64, by: 2) {
            guard let byte = UInt8(String(decoding: digits[i..<(i + 2)], as: UTF8.self), radix: 16) else {
                throw UAPIError(errno: 22, reason: "\(key) is not 64 hex digits")
            }
            bytes.append(byte)
        }
        return bytes
    }
}

/// What a `set=1` asks for.
public struct UAPISetRequest: Sendable {
    public struct Peer: Sendable {
        public var publicKey: PublicKey
        public var remove = false
        public var updateOnly = false
        public var presharedKey: PresharedKey?
        public var endpoint: UDPEndpoint?
        public var persistentKeepalive: Duration?
        public var replaceAllowedIPs = false
        public var allowedIPs: [IPPrefix] = []
    }

    public var privateKey: PrivateKey?
    public var listenPort: UInt16?
    public var firewallMark: UInt32?
    public var replacePeers = false
    public var peers: [Peer] = []
}

/// A refused UAPI request: the errno `wg` shows ("Unable to modify interface: …") and why.
public struct UAPIError: Error, Equatable, Sendable, CustomStringConvertible {
    public let errno: Int32
    public let reason: String

    public init(errno: Int32, reason: String) {
        self.errno = errno
        self.reason = reason
    }

    init(_ error: WireGuardError) { self.init(errno: 22, reason: "\(error)") }

    public var description: String { "\(reason) (errno \(errno))" }
}

extension PrivateKey {
    /// The key's bytes as given (unclamped), for the UAPI's `private_key`.
    var rawBytes: [UInt8] { Array(agreement.rawRepresentation) }
}

/// An interface as a `get=1` describes it (ours or wireguard-go's).
public struct UAPIInterfaceState: Sendable, Equatable {
    public struct Peer: Sendable, Equatable {
        public var publicKey: PublicKey
        public var hasPresharedKey = false
        public var endpoint: String?
        /// Seconds since 1970 of the last completed handshake; nil when there was none.
        public var lastHandshake: Double?
        public var receivedBytes: UInt64 = 0
        public var sentBytes: UInt64 = 0
        public var persistentKeepalive: Int = 0
        public var allowedIPs: [String] = []
    }

    public var publicKey: PublicKey?
    public var listenPort: UInt16 = 0
    public var firewallMark: UInt32 = 0
    public var peers: [Peer] = []
}

extension UAPI {
    /// Parses the answer to `get=1`. The private key is read only to derive the public key.
    public static func parseGet(_ text: String) throws(UAPIError) -> UAPIInterfaceState {
        var state = UAPIInterfaceState()
        var peer: UAPIInterfaceState.Peer?
        var seconds: Int64 = 0
        func finishPeer() {
            guard var done = peer else { return }
            if seconds > 0 { done.lastHandshake = Double(seconds) + (done.lastHandshake ?? 0) }
            else { done.lastHandshake = nil }
            state.peers.append(done)
            seconds = 0
        }
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            let key = String(line[..<equals]), value = String(line[line.index(after: equals)...])
            switch key {
            case "errno":
                guard value == "0" else { throw UAPIError(errno: Int32(value) ?? 22, reason: "the interface refused the request") }
            case "private_key":
                state.publicKey = try key32(value, key, PrivateKey.init(bytes:)).publicKey
            case "listen_port": state.listenPort = UInt16(value) ?? 0
            case "fwmark": state.firewallMark = UInt32(value) ?? 0
            case "public_key":
                finishPeer()
                peer = UAPIInterfaceState.Peer(publicKey: try key32(value, key, PublicKey.init(bytes:)))
            case "preshared_key": peer?.hasPresharedKey = value != String(repeating: "0", count: 64)
            case "endpoint": peer?.endpoint = value
            case "last_handshake_time_sec": seconds = Int64(value) ?? 0
            case "last_handshake_time_nsec": peer?.lastHandshake = Double(Int64(value) ?? 0) / 1e9
            case "rx_bytes": peer?.receivedBytes = UInt64(value) ?? 0
            case "tx_bytes": peer?.sentBytes = UInt64(value) ?? 0
            case "persistent_keepalive_interval": peer?.persistentKeepalive = Int(value) ?? 0
            case "allowed_ip": peer?.allowedIPs.append(value)
            default: continue   // protocol_version and keys a later version adds
            }
        }
        finishPeer()
        return state
    }
}

#if os(Linux)
import Glibc

/// `path` as a `sockaddr_un` (truncated to its 107 bytes) for the duration of `body`.
func withUnixSocketAddress<T>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        for (i, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
    }
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
}

/// Asks a running interface (farcast's or wireguard-go's) for its state over its UAPI socket.
public enum UAPIClient {
    public static let directory = "/var/run/wireguard"

    /// The interfaces with a socket in /var/run/wireguard.
    public static func interfaces() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasSuffix(".sock") }.map { String($0.dropLast(5)) }.sorted()
    }

    public static func get(_ interface: String) throws(UAPIError) -> UAPIInterfaceState {
        let path = "\(directory)/\(interface).sock"
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw UAPIError(errno: errno, reason: "cannot open a Unix socket") }
        defer { close(fd) }
        let connected = withUnixSocketAddress(path) { connect(fd, $0, $1) }
        guard connected == 0 else {
            let code = errno
            throw UAPIError(errno: code, reason: code == ENOENT || code == ECONNREFUSED
                ? "no WireGuard interface \(interface) is running (no live \(path))"
                : "\(path): \(String(cString: strerror(code)))")
        }
        var wait = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        let request = Array("get=1\n\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else {
            throw UAPIError(errno: errno, reason: "\(path): the request could not be sent")
        }
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while answer.count < 4 << 20, !(answer.count >= 2 && answer.suffix(2) == [10, 10]) {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            answer += chunk.prefix(n)
        }
        guard answer.suffix(2) == [10, 10] else { throw UAPIError(errno: EPROTO, reason: "\(path): the answer was cut short") }
        return try UAPI.parseGet(String(decoding: answer, as: UTF8.self))
    }
}
#endif
