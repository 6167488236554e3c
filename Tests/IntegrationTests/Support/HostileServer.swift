import Foundation

/// A server that misbehaves in one chosen way (scripts/lib/hostile_server.py): silent after
/// accept, silent after the RFB banner, garbage, HTTP, SSH, closing mid-handshake or
/// mid-stream, a byte per second. Runs on 127.0.0.1 until the value goes away.
final class HostileServer: @unchecked Sendable {
    // @unchecked: immutable after init; the process is only stopped by deinit.
    let port: Int
    let mode: String
    let process: BackgroundProcess

    init(mode: String) throws {
        self.mode = mode
        port = try freeTCPPort()
        let script = packageRoot.appendingPathComponent("scripts/lib/hostile_server.py").path
        process = try BackgroundProcess(try pythonInterpreter(), [script, "--port", "\(port)", "--mode", mode], logName: "hostile-\(mode)")
        let deadline = Date().addingTimeInterval(10)
        while !process.log.contains("ready") {
            guard process.isRunning, Date() < deadline else { throw PeerFailed(name: "hostile server (\(mode))", log: process.log) }
            usleep(20_000)
        }
    }
}

/// A UDP port on 127.0.0.1 that receives and never answers (a host that has gone quiet), for as
/// long as this object lives.
final class SilentUDPPort: Sendable {
    // Immutable after init; the process stops when it is released (BackgroundProcess's deinit).
    let port: Int
    let process: BackgroundProcess

    init() throws {
        port = try freeUDPPort()
        let code = "import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(('127.0.0.1', \(port)))\nprint('ready', flush=True)\ntime.sleep(3600)\n"
        process = try BackgroundProcess(try pythonInterpreter(), ["-c", code], logName: "silent-udp")
        let deadline = Date().addingTimeInterval(10)
        while !process.log.contains("ready") {
            guard process.isRunning, Date() < deadline else { throw PeerFailed(name: "silent UDP port", log: process.log) }
            usleep(20_000)
        }
    }
}

/// A TCP port on 127.0.0.1 that refuses every connection for as long as this object lives: the
/// port is bound but never listened on, so nothing else can take it meanwhile (a port from
/// `freeTCPPort` could be taken by another test's server before the connection is tried).
final class RefusingTCPPort: Sendable {
    let port: Int
    private let fd: Int32

    init() throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let descriptor = fd
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0 }
        }
        guard ok else {
            close(fd)
            throw PeerFailed(name: "refusing port", log: String(cString: strerror(errno)))
        }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}

/// A TCP port nothing listens on right now (the kernel's pick, released at once).
func freeTCPPort() throws -> Int { try freePort(type: Int32(SOCK_STREAM.rawValue)) }

/// A UDP port nothing is bound to right now (the kernel's pick, released at once).
func freeUDPPort() throws -> Int { try freePort(type: Int32(SOCK_DGRAM.rawValue)) }

private func freePort(type: Int32) throws -> Int {
    let fd = socket(AF_INET, type, 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let ok = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard ok else { throw PeerFailed(name: "port allocation", log: String(cString: strerror(errno))) }
    return Int(UInt16(bigEndian: address.sin_port))
}
