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
