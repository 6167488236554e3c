#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation

/// ssh's questions answered by farcast itself (a viewer window's prompt), through SSH_ASKPASS:
/// ssh runs the askpass program — farcast again, `OpenSSHAskpass.answer` — which hands the
/// question to this process over a Unix socket in a private 0700 folder and prints the answer
/// for ssh. The answer travels only over that socket and ssh's pipe: never argv, the
/// environment or a file.
///
/// The exchange: the askpass side sends one byte (`s` secret, `c` a yes/no confirmation) and the
/// question, then shuts its writing half; this side writes the answer and closes — or closes
/// without writing when the person declined, and the askpass side exits 1 (ssh then fails).
public enum OpenSSHAskpass {
    /// The variable that tells a farcast run as SSH_ASKPASS where to ask.
    public static let socketVariable = "FARCAST_ASKPASS_SOCKET"

    /// When this process was started as ssh's askpass (the socket variable set, one argument:
    /// the question), asks through the socket, prints the answer and returns the exit status;
    /// nil when it was started as anything else.
    public static func answerIfAsked(arguments: [String] = CommandLine.arguments,
                                     environment: [String: String] = ProcessInfo.processInfo.environment) -> Int32? {
        guard let path = environment[socketVariable], arguments.count <= 2 else { return nil }
        let question = arguments.count == 2 ? arguments[1] : ""
        let kind: UInt8 = environment["SSH_ASKPASS_PROMPT"] == "confirm" ? UInt8(ascii: "c") : UInt8(ascii: "s")
        let fd = socket(AF_UNIX, streamType, 0)
        guard fd >= 0 else { return 1 }
        defer { _ = closeFD(fd) }
        guard connectUnix(fd, path: path) else { return 1 }
        guard writeAll(fd, [kind] + Array(question.utf8)) else { return 1 }
        _ = shutdown(fd, Int32(SHUT_WR))
        guard let answer = readAll(fd), !answer.isEmpty else { return 1 }
        return writeAll(1, answer + [UInt8(ascii: "\n")]) ? 0 : 1
    }

    #if os(Linux)
    static let streamType = Int32(SOCK_STREAM.rawValue)
    #else
    static let streamType = SOCK_STREAM
    #endif

    static func closeFD(_ fd: Int32) -> Int32 {
        #if canImport(Glibc)
        return Glibc.close(fd)
        #else
        return Darwin.close(fd)
        #endif
    }

    static func address(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        return address
    }

    static func connectUnix(_ fd: Int32, path: String) -> Bool {
        guard var address = address(path) else { return false }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0 }
        }
    }

    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
    }

    /// Reads to EOF, at most 64 KiB (a question or an answer is a line or a few).
    static func readAll(_ fd: Int32) -> [UInt8]? {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while result.count < 65536 {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count < 0 { return nil }
            if count == 0 { break }
            result += buffer[0..<count]
        }
        return result
    }
}

/// The listening side: a Unix socket whose every connection is one question for `ask`.
final class OpenSSHAskpassServer: Sendable {
    let socketPath: String
    private let fd: Int32

    init(socketPath: String, ask: @escaping @Sendable (_ question: String, _ secret: Bool) async -> String?) throws(SSHTunnelError) {
        self.socketPath = socketPath
        let fd = socket(AF_UNIX, OpenSSHAskpass.streamType, 0)
        guard fd >= 0, var address = OpenSSHAskpass.address(socketPath) else {
            throw .connectionLost(host: "SSH_ASKPASS", reason: "cannot make the askpass socket \(socketPath)")
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(fd, 4) == 0 else {
            let reason = String(cString: strerror(errno))
            _ = OpenSSHAskpass.closeFD(fd)
            throw .connectionLost(host: "SSH_ASKPASS", reason: "cannot listen on \(socketPath): \(reason)")
        }
        self.fd = fd
        let thread = Thread {
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 {
                    if errno == EINTR { continue }
                    return   // closed
                }
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                guard let message = OpenSSHAskpass.readAll(client), let kind = message.first else {
                    _ = OpenSSHAskpass.closeFD(client)
                    continue
                }
                let question = String(decoding: message.dropFirst(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                Task {
                    if let answer = await ask(question, kind != UInt8(ascii: "c")) {
                        _ = OpenSSHAskpass.writeAll(client, Array(answer.utf8))
                    }
                    _ = OpenSSHAskpass.closeFD(client)
                }
            }
        }
        thread.name = "farcast askpass"
        thread.start()
    }

    /// Stops answering: the listening socket is shut and removed.
    func close() {
        _ = shutdown(fd, Int32(SHUT_RDWR))
        _ = OpenSSHAskpass.closeFD(fd)
        unlink(socketPath)
    }
}
