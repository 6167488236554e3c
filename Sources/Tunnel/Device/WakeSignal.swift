#if canImport(Glibc)
import Glibc
import CTunnelLinux
#elseif canImport(Darwin)
import Darwin
#endif

/// A descriptor that becomes readable, and stays readable, once `signal()` is called: how a
/// blocked `poll` is woken for shutdown. An eventfd on Linux, a pipe elsewhere.
struct WakeSignal: Sendable {
    let readDescriptor: Int32
    let writeDescriptor: Int32

    init() throws(TunnelError) {
        #if os(Linux)
        let fd = eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC))
        guard fd >= 0 else { throw .system(operation: "eventfd", errno: errno) }
        readDescriptor = fd
        writeDescriptor = fd
        #else
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw .system(operation: "pipe", errno: errno) }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        readDescriptor = fds[0]
        writeDescriptor = fds[1]
        #endif
    }

    /// Makes the read side readable for good (never drained).
    func signal() {
        #if os(Linux)
        var one: UInt64 = 1
        _ = write(writeDescriptor, &one, 8)
        #else
        var one: UInt8 = 1
        _ = write(writeDescriptor, &one, 1)
        #endif
    }

    func close() {
        _ = systemClose(readDescriptor)
        if writeDescriptor != readDescriptor { _ = systemClose(writeDescriptor) }
    }
}

/// `close(2)`, reachable from types that have a `close()` of their own.
@inline(__always)
func systemClose(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    Glibc.close(fd)
    #else
    Darwin.close(fd)
    #endif
}
