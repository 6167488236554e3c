#if canImport(Glibc)
import Glibc
#endif
import Foundation
@testable import Tunnel
import Testing

/// The async batch write waits for room instead of dropping. A Linux TUN device never says it is
/// full (its kernel queues or drops), and utun, which does (`ENOBUFS`/`EAGAIN` when its socket
/// buffer is full), cannot run on these machines, so a Unix datagram socket pair with a small
/// send buffer stands in for the device descriptor here: the same non-blocking writes, the same
/// "no room" errors, the same writability wake-up.
@Suite struct AsyncWriteTests {
    /// A queue over one end of a datagram socket pair (its buffer a few packets deep) and the
    /// other end, to read what was written.
    static func pair() throws -> (TunQueue, Int32) {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0, &fds) == 0)
        var size: Int32 = 4096
        _ = setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        return (try TunQueue(fileDescriptor: fds[0], framing: .none), fds[1])
    }

    /// 200 packets of 1000 bytes, each starting with its index.
    static func batch() -> PacketBatch {
        let batch = PacketBatch(capacity: 200, slotSize: 1000)
        for i in 0..<200 { _ = batch.append([0x45, UInt8(i >> 8), UInt8(i & 0xff)] + [UInt8](repeating: UInt8(i & 0xff), count: 997)) }
        return batch
    }

    /// Reads datagrams from `fd` until `count` arrived or `seconds` passed; returns their indices.
    static func drain(_ fd: Int32, count: Int, seconds: Double) -> [Int] {
        var seen: [Int] = []
        var buffer = [UInt8](repeating: 0, count: 2000)
        let deadline = Date().addingTimeInterval(seconds)
        while seen.count < count && Date() < deadline {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n == 1000 { seen.append(Int(buffer[1]) << 8 | Int(buffer[2])) }
        }
        return seen
    }

    @Test func aFullDescriptorMakesTheAsyncWriteWaitAndNothingIsLostOrReordered() async throws {
        let (queue, peer) = try Self.pair()
        defer { queue.close(); close(peer) }
        let batch = Self.batch()
        // The reader starts only after the write has filled the buffer and had to wait.
        let reader = Task.detached {
            try await Task.sleep(for: .milliseconds(200))
            return Self.drain(peer, count: 200, seconds: 10)
        }
        let started = ContinuousClock.now
        let outcome = try await queue.writePackets(batch)
        #expect(outcome.written == 200 && outcome.dropped == 0, "\(outcome)")
        // 200 KB cannot fit a 4 KiB buffer: the write can only end after the reader began.
        #expect(ContinuousClock.now - started >= .milliseconds(150), "the write never waited for room")
        let seen = try await reader.value
        #expect(seen == Array(0..<200), "\(seen.count) of 200 arrived, in order: \(seen.prefix(20))…")
        #expect(queue.statistics.packetsWritten == 200 && queue.statistics.writeDropped == 0)
    }

    @Test func theBlockingWriteCountsWhatDidNotFitAsDropped() throws {
        let (queue, peer) = try Self.pair()
        defer { queue.close(); close(peer) }
        let outcome = try queue.writePackets(Self.batch())
        #expect(outcome.written + outcome.dropped == 200)
        #expect(outcome.dropped > 0, "a 4 KiB buffer cannot take 200 KB at once: \(outcome)")
        #expect(outcome.lastErrno == EAGAIN || outcome.lastErrno == ENOBUFS)
    }

    @Test func closingTheQueueEndsAWaitingWriteWithInterrupted() async throws {
        let (queue, peer) = try Self.pair()
        defer { close(peer) }
        let writer = Task { try await queue.writePackets(Self.batch()) }
        try await Task.sleep(for: .milliseconds(200))
        queue.close()
        await #expect(throws: TunnelError.interrupted) { _ = try await writer.value }
    }

    @Test func cancellingTheTaskEndsAWaitingWrite() async throws {
        let (queue, peer) = try Self.pair()
        defer { queue.close(); close(peer) }
        let writer = Task { try await queue.writePackets(Self.batch()) }
        try await Task.sleep(for: .milliseconds(200))
        writer.cancel()
        await #expect(throws: CancellationError.self) { _ = try await writer.value }
        // The queue still works: a write that fits goes through.
        _ = Self.drain(peer, count: 200, seconds: 0.3)
        let one = PacketBatch(capacity: 1, slotSize: 1000)
        _ = one.append([0x45] + [UInt8](repeating: 1, count: 99))
        #expect(try await queue.writePackets(one).written == 1)
    }
}
