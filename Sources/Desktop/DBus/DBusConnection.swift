#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// A connection to the D-Bus session bus over its Unix socket, spoken directly (no libdbus):
/// EXTERNAL authentication, Hello, then calls answered on a reader thread of its own. Set-up
/// (`session()`, `requestName`) is synchronous; after `serve(_:)` incoming method calls go to
/// the handler and its answers, and `emit` signals, are written under one lock.
public final class DBusConnection: Sendable {
    /// What a method call is answered with.
    public enum Reply: Sendable {
        case values([DBusValue])
        case error(name: String, message: String)
    }

    public typealias Handler = @Sendable (DBusMessage) -> Reply

    private let descriptor: Int32
    private let serials = Mutex<UInt32>(1)
    private let writeLock = Mutex(())
    private struct ReadState { var buffer: [UInt8] = [] }
    private let readState = Mutex(ReadState())
    private let closed = Atomic<Bool>(false)

    /// Connects to the session bus `DBUS_SESSION_BUS_ADDRESS` names (its first Unix socket).
    public static func session(environment: [String: String] = ProcessInfo.processInfo.environment) throws(DBusError) -> DBusConnection {
        guard let address = environment["DBUS_SESSION_BUS_ADDRESS"], !address.isEmpty else {
            throw .noBus("DBUS_SESSION_BUS_ADDRESS is not set (no desktop session here)")
        }
        return try DBusConnection(address: address)
    }

    /// Where a bus address's first Unix transport points: a path, or an abstract name.
    static func socketTarget(_ address: String) -> (path: String, abstract: Bool)? {
        for transport in address.split(separator: ";") {
            guard transport.hasPrefix("unix:") else { continue }
            for pair in transport.dropFirst(5).split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                guard parts.count == 2, let value = parts[1].removingPercentEncoding else { continue }
                if parts[0] == "path" { return (value, false) }
                if parts[0] == "abstract" { return (value, true) }
            }
        }
        return nil
    }

    public init(address: String) throws(DBusError) {
        guard let (path, abstract) = Self.socketTarget(address) else {
            throw .noBus("'\(address)' names no Unix socket (unix:path= or unix:abstract=)")
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .noBus("cannot make a socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let name = (abstract ? [0] : []) + Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard name.count < capacity else {
            Glibc.close(fd)
            throw .noBus("the socket path \(path) is too long")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in name.enumerated() { raw[i] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + name.count + (abstract ? 0 : 1))
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw .noBus("cannot reach the bus at \(abstract ? "@" : "")\(path): \(reason)")
        }
        descriptor = fd
        do {
            try Self.authenticate(fd)
        } catch {
            Glibc.close(fd)
            throw error
        }
        let hello = try call(DBusMessage(kind: .methodCall, path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "Hello",
                                         destination: "org.freedesktop.DBus"))
        guard let name = hello.body.first?.stringValue else { throw .failed("the bus answered Hello without a name") }
        uniqueNameStorage.withLock { $0 = name }
    }

    private let uniqueNameStorage = Mutex("")
    /// The bus's name for this connection (`:1.42`).
    public var uniqueName: String { uniqueNameStorage.withLock { $0 } }

    deinit { if !closed.load(ordering: .relaxed) { Glibc.close(descriptor) } }

    /// EXTERNAL: the kernel tells the bus who we are; our uid in hex-encoded decimal confirms it.
    private static func authenticate(_ fd: Int32) throws(DBusError) {
        let uid = Array(String(getuid()).utf8).map { String(format: "%02x", $0) }.joined()
        try writeAll(fd, [0] + Array("AUTH EXTERNAL \(uid)\r\n".utf8))
        var line: [UInt8] = []
        while !line.suffix(2).elementsEqual([13, 10]) {
            var byte: UInt8 = 0
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            guard n == 1, line.count < 512 else { throw .failed("the bus closed during authentication") }
            line.append(byte)
        }
        let answer = String(decoding: line.dropLast(2), as: UTF8.self)
        guard answer.hasPrefix("OK ") else { throw .failed("the bus refused EXTERNAL authentication (\(answer))") }
        try writeAll(fd, Array("BEGIN\r\n".utf8))
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(DBusError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw .failed("cannot write to the bus: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    /// Sends `message` with the next serial; returns the serial.
    @discardableResult
    public func send(_ message: DBusMessage) throws(DBusError) -> UInt32 {
        var message = message
        message.serial = serials.withLock { s in
            defer { s = s == UInt32.max ? 1 : s + 1 }
            return s
        }
        let bytes = message.encoded()
        let result: Result<Void, DBusError> = writeLock.withLock { _ in
            do throws(DBusError) { try Self.writeAll(descriptor, bytes); return .success(()) } catch { return .failure(error) }
        }
        try result.get()
        return message.serial
    }

    /// Reads the next whole message (blocking); nil when the bus closed the connection.
    func receive() throws(DBusError) -> DBusMessage? {
        while true {
            let pending = try readState.withLock { s throws(DBusError) -> DBusMessage? in
                guard let length = try DBusMessage.length(of: Array(s.buffer.prefix(16))), s.buffer.count >= length else { return nil }
                let message = try DBusMessage.decode(Array(s.buffer[..<length]))
                s.buffer.removeFirst(length)
                return message
            }
            if let pending { return pending }
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            readState.withLock { $0.buffer += chunk[..<n] }
        }
    }

    /// A method call answered synchronously (only before `serve`: the reader thread takes
    /// every message after that). Messages that are not the answer are dropped.
    public func call(_ message: DBusMessage) throws(DBusError) -> DBusMessage {
        let serial = try send(message)
        while let reply = try receive() {
            guard reply.replySerial == serial else { continue }
            if reply.kind == .error {
                throw .failed("\(message.member ?? "a call") failed: \(reply.errorName ?? "?") \(reply.body.first?.stringValue ?? "")")
            }
            return reply
        }
        throw .failed("the bus closed the connection")
    }

    /// Asks for a well-known name, not queueing behind an owner; false when another has it.
    public func requestName(_ name: String) throws(DBusError) -> Bool {
        let reply = try call(DBusMessage(kind: .methodCall, path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus", member: "RequestName",
                                         destination: "org.freedesktop.DBus", body: [.string(name), .uint32(4)]))
        // 1: primary owner; 4: already the owner.
        return reply.body.first?.uint32Value == 1 || reply.body.first?.uint32Value == 4
    }

    /// Answers method calls on a thread of its own with `handler` until `close()` or the bus
    /// goes away (`ended` is then called with the reason, nil for `close()`).
    public func serve(_ handler: @escaping Handler, ended: @escaping @Sendable (DBusError?) -> Void = { _ in }) {
        let thread = Thread { [self] in
            var failure: DBusError?
            do throws(DBusError) {
                while let message = try receive() {
                    guard message.kind == .methodCall else { continue }
                    let reply = handler(message)
                    guard message.expectsReply, let sender = message.sender else { continue }
                    var answer: DBusMessage
                    switch reply {
                    case .values(let values):
                        answer = DBusMessage(kind: .methodReturn, replySerial: message.serial, destination: sender, body: values)
                    case .error(let name, let text):
                        answer = DBusMessage(kind: .error, errorName: name, replySerial: message.serial, destination: sender, body: [.string(text)])
                    }
                    try send(answer)
                }
            } catch {
                failure = error
            }
            ended(closed.load(ordering: .relaxed) ? nil : failure ?? .failed("the bus closed the connection"))
        }
        thread.name = "farcast-dbus"
        thread.start()
    }

    /// Emits a signal from `path`.
    public func emit(path: String, interface: String, member: String, body: [DBusValue]) throws(DBusError) {
        try send(DBusMessage(kind: .signal, path: path, interface: interface, member: member, body: body))
    }

    /// Ends the connection (the reader thread, if any, ends with it).
    public func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        shutdown(descriptor, Int32(SHUT_RDWR))
        Glibc.close(descriptor)
    }
}
