import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The UDP 7359 side of Jellyfin's LAN discovery: answers a datagram that contains
/// `who is JellyfinServer?` (case-insensitively, as the server matches it) with the server's
/// `ServerDiscoveryInfo` JSON, sent back to the asker's address and port. It binds 0.0.0.0, so
/// it is only started inside a private network namespace (the tests' and the benchmark's).
final class DiscoveryResponder: Sendable {
    let fd: Int32
    let port: UInt16

    init(port: UInt16, answer: @escaping @Sendable () -> [UInt8]) throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw Tool.Failure(description: "discovery: socket: \(String(cString: strerror(errno)))") }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &on, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = INADDR_ANY
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Tool.Failure(description: "discovery: cannot bind UDP 0.0.0.0:\(port): \(reason)")
        }
        self.fd = fd
        self.port = port
        let thread = Thread {
            var buffer = [UInt8](repeating: 0, count: 1024)
            while true {
                var source = sockaddr_in()
                var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                let n = buffer.withUnsafeMutableBytes { raw in
                    withUnsafeMutablePointer(to: &source) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, raw.baseAddress, raw.count, 0, $0, &length) }
                    }
                }
                if n < 0 { if errno == EINTR { continue } else { return } }
                let text = String(decoding: buffer[0..<n], as: UTF8.self).lowercased()
                guard text.contains("who is jellyfinserver?") else { continue }
                let reply = answer()
                _ = reply.withUnsafeBytes { raw in
                    withUnsafePointer(to: &source) {
                        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, raw.baseAddress, raw.count, 0, $0, length) }
                    }
                }
            }
        }
        thread.start()
    }
}
