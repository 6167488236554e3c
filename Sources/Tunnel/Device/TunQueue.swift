#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// One descriptor of a TUN/TAP device: a device has one per queue, and each queue is read by one
/// thread or task (the kernel spreads flows across queues).
///
/// Reads and writes come in three shapes: single packets into a caller's buffer, batches into a
/// caller-owned `PacketBatch` (many packets per call, no allocation), and async versions that
/// hold no thread while waiting. A read blocks until at least one packet arrives, the timeout
/// passes, or `interrupt()`/`close()` ends it with `TunnelError.interrupted`/`.closed`.
///
/// On a queue with a virtio-net header (offload on), batch reads split GSO super-packets into
/// MTU-sized, fully checksummed packets (Ethernet frames on a TAP device) and batch writes
/// coalesce through a `GROTable`; a packet with a header that does not hold up is dropped and
/// counted, never passed on.
///
/// The descriptor is non-blocking; the queue owns and closes it. Thread-safe: its state is
/// immutable or atomic; a batch or GRO table passed in belongs to the caller's thread.
public final class TunQueue: Sendable {
    /// The descriptor (`/dev/net/tun` on Linux, a utun control socket on Apple platforms).
    public let fileDescriptor: Int32
    /// What precedes each packet on the descriptor.
    public let framing: PacketFraming
    /// What each packet starts with: an IP header (TUN), or an Ethernet header (TAP) before it.
    public let linkLayer: GSOSplitter.LinkLayer

    private let descriptor: InterruptibleDescriptor
    private let readiness: ReadinessWaiter
    /// Async writes wait here when the descriptor has no room (a utun socket's buffer is full).
    private let writability: ReadinessWaiter
    private let counters = Counters()

    /// Takes ownership of `fileDescriptor` and makes it non-blocking.
    init(fileDescriptor: Int32, framing: PacketFraming, linkLayer: GSOSplitter.LinkLayer = .none) throws(TunnelError) {
        let readiness = ReadinessWaiter(fileDescriptor: fileDescriptor)
        descriptor = try InterruptibleDescriptor(fileDescriptor, what: "the device descriptor",
                                                 onInterrupt: { readiness.cancel() })
        self.fileDescriptor = fileDescriptor
        self.framing = framing
        self.linkLayer = linkLayer
        self.readiness = readiness
        writability = ReadinessWaiter(fileDescriptor: fileDescriptor, writable: true)
    }

    deinit {
        close()
    }

    // MARK: - Lifecycle

    @inline(__always) private func enter(reading: Bool = true) throws(TunnelError) { try descriptor.enter(reading: reading) }
    @inline(__always) private func leave() { descriptor.leave() }

    /// Ends every read in progress and every later one with `TunnelError.interrupted`: for
    /// shutting a reader thread down. Writes keep working until `close()`.
    public func interrupt() { descriptor.interrupt() }

    /// Whether `interrupt()` or `close()` was called.
    public var isInterrupted: Bool { descriptor.isInterrupted }

    /// Interrupts, waits for calls in progress to return, then closes the descriptor. Idempotent.
    /// An async write waiting for room ends with `TunnelError.interrupted`.
    public func close() {
        writability.cancel()
        descriptor.close()
    }

    // MARK: - Statistics

    /// Counts since the queue was opened.
    public struct Statistics: Sendable, Equatable {
        /// Packets handed to callers (after splitting).
        public var packetsRead = 0
        /// GSO super-packets read and split.
        public var superPacketsRead = 0
        /// Packets written (before coalescing).
        public var packetsWritten = 0
        /// Coalesced super-packets written.
        public var superPacketsWritten = 0
        /// Packets read with a virtio-net header that did not hold up, or truncated by the kernel.
        public var malformedDropped = 0
        /// Packets the kernel refused on write.
        public var writeDropped = 0
        /// The errno of the last refused write (0: none).
        public var lastWriteErrno: Int32 = 0
        /// The last reason a read packet was dropped.
        public var lastMalformed: OffloadError?
    }

    private final class Counters: Sendable {
        let packetsRead = Atomic<Int>(0)
        let superPacketsRead = Atomic<Int>(0)
        let packetsWritten = Atomic<Int>(0)
        let superPacketsWritten = Atomic<Int>(0)
        let malformedDropped = Atomic<Int>(0)
        let writeDropped = Atomic<Int>(0)
        let lastWriteErrno = Atomic<Int32>(0)
        let lastMalformed = Mutex<OffloadError?>(nil)
    }

    public var statistics: Statistics {
        Statistics(packetsRead: counters.packetsRead.load(ordering: .relaxed),
                   superPacketsRead: counters.superPacketsRead.load(ordering: .relaxed),
                   packetsWritten: counters.packetsWritten.load(ordering: .relaxed),
                   superPacketsWritten: counters.superPacketsWritten.load(ordering: .relaxed),
                   malformedDropped: counters.malformedDropped.load(ordering: .relaxed),
                   writeDropped: counters.writeDropped.load(ordering: .relaxed),
                   lastWriteErrno: counters.lastWriteErrno.load(ordering: .relaxed),
                   lastMalformed: counters.lastMalformed.withLock { $0 })
    }

    private func dropMalformed(_ error: OffloadError) {
        counters.malformedDropped.add(1, ordering: .relaxed)
        counters.lastMalformed.withLock { $0 = error }
    }

    // MARK: - Waiting

    private func waitReadable(_ timeout: Duration?) throws(TunnelError) -> Bool {
        try descriptor.wait(timeout: timeout)
    }

    static func milliseconds(_ duration: Duration) -> Int32 { InterruptibleDescriptor.milliseconds(duration) }

    // MARK: - Single packets

    /// Reads one packet into `buffer` (without any prefix), waiting up to `timeout` (nil: no
    /// limit; the async `read(into:)` waits without holding a thread). Returns its length, or 0 when the timeout passed. A packet longer than the buffer
    /// is cut by the kernel. Not for queues with a virtio-net header, whose reads may carry a
    /// 64 KiB super-packet: use `readPackets(into:)` there.
    public func read(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration?) throws(TunnelError) -> Int {
        if case .virtioNetHeader = framing {
            throw .unsupported("single-packet reads are not available with offload: use readPackets(into:), which splits GSO super-packets")
        }
        try enter()
        defer { leave() }
        while true {
            if let n = try readOne(into: buffer) {
                if n > 0 { counters.packetsRead.add(1, ordering: .relaxed) }
                if n >= 0 { return n }
                continue    // a truncated packet, dropped
            }
            guard try waitReadable(timeout) else { return 0 }
        }
    }

    /// One non-blocking read: the length, -1 for a dropped packet, nil when nothing is there.
    private func readOne(into buffer: UnsafeMutableRawBufferPointer) throws(TunnelError) -> Int? {
        var prefix: UInt32 = 0
        let prefixLength = framing.prefixLength
        let n: Int = withUnsafeMutableBytes(of: &prefix) { prefixBytes in
            guard prefixLength > 0 else { return systemRead(fileDescriptor, buffer.baseAddress, buffer.count) }
            return withUnsafeTemporaryAllocation(of: iovec.self, capacity: 2) { iov in
                iov[0] = iovec(iov_base: prefixBytes.baseAddress, iov_len: prefixLength)
                iov[1] = iovec(iov_base: buffer.baseAddress, iov_len: buffer.count)
                return readv(fileDescriptor, iov.baseAddress, 2)
            }
        }
        if n < 0 {
            let code = errno
            if code == EAGAIN || code == EWOULDBLOCK || code == EINTR { return nil }
            throw .system(operation: "read from the device", errno: code)
        }
        if prefixLength > 0 {
            guard n >= prefixLength else { return -1 }
            let received = withUnsafeBytes(of: &prefix) { framing.decodePrefix($0) }
            if received == .truncated {
                counters.malformedDropped.add(1, ordering: .relaxed)
                return -1
            }
        }
        return n - prefixLength
    }

    /// Writes one packet (without prefix; the queue adds what its framing needs).
    public func write(_ packet: UnsafeRawBufferPointer) throws(TunnelError) {
        try enter(reading: false)
        defer { leave() }
        guard let base = packet.baseAddress, packet.count > 0 else { return }
        var prefix = (UInt64(0), UInt64(0))
        let prefixLength = framing.prefixLength
        let n: Int = withUnsafeMutableBytes(of: &prefix) { prefixBytes in
            guard prefixLength > 0 else { return systemWrite(fileDescriptor, base, packet.count) }
            framing.storePrefix(to: prefixBytes.baseAddress!, firstByte: base.load(as: UInt8.self))
            return withUnsafeTemporaryAllocation(of: iovec.self, capacity: 2) { iov in
                iov[0] = iovec(iov_base: prefixBytes.baseAddress, iov_len: prefixLength)
                iov[1] = iovec(iov_base: UnsafeMutableRawPointer(mutating: base), iov_len: packet.count)
                return writev(fileDescriptor, iov.baseAddress, 2)
            }
        }
        if n < 0 { throw .system(operation: "write to the device", errno: errno) }
        counters.packetsWritten.add(1, ordering: .relaxed)
    }

    // MARK: - Batches

    /// Reads packets into the free slots of `batch` until it is full or nothing more is waiting,
    /// after waiting up to `timeout` (nil: no limit) for the first. Returns how many it added
    /// (0: the timeout passed). With a virtio-net header each GSO super-packet becomes its
    /// segments; those that do not fit the slots left wait in the batch for the next call, so a
    /// batch of any capacity carries super-packets of any number of segments.
    /// Slots must be at least the device MTU long (on a TAP device, 22 bytes more: the Ethernet
    /// header and up to two VLAN tags).
    public func readPackets(into batch: PacketBatch, timeout: Duration?) throws(TunnelError) -> Int {
        try enter()
        defer { leave() }
        let start = batch.count
        while true {
            try drain(into: batch)
            if batch.count > start || batch.freeSlots == 0 { break }
            guard try waitReadable(timeout) else { break }
        }
        let added = batch.count - start
        if added > 0 { counters.packetsRead.add(added, ordering: .relaxed) }
        return added
    }

    /// Non-blocking reads until the batch is full or the descriptor has nothing more.
    private func drain(into batch: PacketBatch) throws(TunnelError) {
        if batch.pendingScratchLength > 0 {
            guard splitScratch(batch) else { return }
        }
        while batch.freeSlots > 0 {
            switch framing {
            case .none, .packetInformation, .addressFamily:
                // The slot, then the batch's scratch: a packet longer than a slot spills into the
                // scratch, so it is recognised and dropped instead of being passed on cut short.
                let slot = batch.slot(batch.count)
                let prefix = framing.prefixLength
                let start = slot.baseAddress! - prefix
                let n = withUnsafeTemporaryAllocation(of: iovec.self, capacity: 2) { iov in
                    iov[0] = iovec(iov_base: start, iov_len: slot.count + prefix)
                    iov[1] = iovec(iov_base: batch.scratch, iov_len: PacketBatch.scratchSize)
                    return readv(fileDescriptor, iov.baseAddress, 2)
                }
                guard try Self.check(n, "read from the device") else { return }
                if n > slot.count + prefix {
                    dropMalformed(.segmentLargerThanSlot(segment: n - prefix, slot: slot.count))
                    continue
                }
                guard n > prefix else { continue }
                if prefix > 0, framing.decodePrefix(UnsafeRawBufferPointer(start: start, count: prefix)) == .truncated {
                    counters.malformedDropped.add(1, ordering: .relaxed)
                    continue
                }
                batch.commit(length: n - prefix)
            case .virtioNetHeader:
                let n = systemRead(fileDescriptor, batch.scratch, PacketBatch.scratchSize)
                guard try Self.check(n, "read from the device") else { return }
                batch.pendingScratchLength = n
                guard splitScratch(batch) else { return }
            }
        }
    }

    /// Splits the super-packet waiting in the batch's scratch into the free slots. False when
    /// segments of it are left for the next call (the batch is then full).
    private func splitScratch(_ batch: PacketBatch) -> Bool {
        let n = batch.pendingScratchLength
        guard case .virtioNetHeader(let size) = framing else { return true }
        guard n >= size else {
            batch.pendingScratchLength = 0
            dropMalformed(.truncatedVirtioHeader(length: n))
            return true
        }
        guard batch.freeSlots > 0 else { return false }
        let header = VirtioNetHeader(loading: batch.scratch)
        let packet = UnsafeRawBufferPointer(start: batch.scratch + size, count: n - size)
        do {
            let plan = try GSOSplitter.plan(header, packet: packet, linkLayer: linkLayer)
            let first = batch.pendingScratchSegment
            let end = min(plan.segments, first + batch.freeSlots)
            try GSOSplitter.split(packet, plan: plan, into: batch, segments: first..<end)
            if end < plan.segments {
                batch.pendingScratchSegment = end
                return false
            }
            if plan.segments > 1 { counters.superPacketsRead.add(1, ordering: .relaxed) }
        } catch {
            dropMalformed(error)
        }
        batch.pendingScratchLength = 0
        batch.pendingScratchSegment = 0
        return true
    }

    /// true: a result to use; false: nothing there (EAGAIN); throws for real failures.
    @inline(__always)
    private static func check(_ n: Int, _ operation: String) throws(TunnelError) -> Bool {
        if n >= 0 { return true }
        let code = errno
        if code == EAGAIN || code == EWOULDBLOCK || code == EINTR { return false }
        throw .system(operation: operation, errno: code)
    }

    /// What a batch write did.
    public struct WriteOutcome: Sendable, Equatable {
        /// Packets the kernel took (counted before coalescing).
        public var written = 0
        /// Packets it refused (a malformed packet from a peer, a down device).
        public var dropped = 0
        /// Writes made (fewer than packets when coalesced).
        public var writes = 0
        /// The errno of the last refusal, 0 when none.
        public var lastErrno: Int32 = 0
    }

    /// Writes every packet of `batch`. With a virtio-net header and a `GROTable`, packets of one
    /// flow are coalesced into super-packets first (their headers are rewritten in place, so the
    /// batch's contents change). A packet the kernel refuses is counted and the rest still go.
    /// TUN writes never wait for room (the kernel queues or drops), so async code on Linux may
    /// call this directly; the async `writePackets` waits where a descriptor can be full (utun).
    @discardableResult
    public func writePackets(_ batch: PacketBatch, coalescingWith gro: GROTable? = nil) throws(TunnelError) -> WriteOutcome {
        try enter(reading: false)
        defer { leave() }
        var outcome = WriteOutcome()
        let coalescing = plan(batch, gro)
        _ = try write(batch, coalescing, from: 0, waitingForRoom: false, &outcome)
        record(outcome)
        return outcome
    }

    /// Plans the coalesced writes when the framing and a table allow it; nil: one write per packet.
    private func plan(_ batch: PacketBatch, _ gro: GROTable?) -> GROTable? {
        guard case .virtioNetHeader(let size) = framing, let gro else { return nil }
        gro.plan(batch, headerSize: size)
        return gro
    }

    /// Whether a write failed for want of room: in the descriptor's buffer (EAGAIN), or in the
    /// kernel's (ENOBUFS: utun under mbuf or input-queue pressure).
    @inline(__always)
    private static func isFull(_ code: Int32) -> Bool { code == EAGAIN || code == EWOULDBLOCK || code == ENOBUFS }

    /// A write left undone for want of room: its index, and the errno that refused it.
    private typealias Refused = (index: Int, errno: Int32)

    /// Makes the writes from `first` on (GRO writes, or one per packet). A write refused for want
    /// of room is counted dropped, or, `waitingForRoom`, left undone and returned.
    private func write(_ batch: PacketBatch, _ gro: GROTable?, from first: Int, waitingForRoom: Bool,
                       _ outcome: inout WriteOutcome) throws(TunnelError) -> Refused? {
        if let gro {
            for w in first..<gro.writeCount {
                let write = gro.write(w)
                var n: Int
                repeat { n = writev(fileDescriptor, gro.iovecs + write.firstIOVec, Int32(write.iovecCount)) }
                while n < 0 && errno == EINTR
                if n < 0 && waitingForRoom && Self.isFull(errno) { return (w, errno) }
                try account(n, packets: write.segments, &outcome)
                if n >= 0 && write.segments > 1 { counters.superPacketsWritten.add(1, ordering: .relaxed) }
            }
        } else {
            let prefixLength = framing.prefixLength
            for i in first..<batch.count {
                let packet = batch[i]
                let start = packet.baseAddress! - prefixLength
                if prefixLength > 0 { framing.storePrefix(to: start, firstByte: packet.load(as: UInt8.self)) }
                var n: Int
                repeat { n = systemWrite(fileDescriptor, start, packet.count + prefixLength) }
                while n < 0 && errno == EINTR
                if n < 0 && waitingForRoom && Self.isFull(errno) { return (i, errno) }
                try account(n, packets: 1, &outcome)
            }
        }
        return nil
    }

    private func record(_ outcome: WriteOutcome) {
        counters.packetsWritten.add(outcome.written, ordering: .relaxed)
        if outcome.dropped > 0 {
            counters.writeDropped.add(outcome.dropped, ordering: .relaxed)
            counters.lastWriteErrno.store(outcome.lastErrno, ordering: .relaxed)
        }
    }

    private func account(_ n: Int, packets: Int, _ outcome: inout WriteOutcome) throws(TunnelError) {
        outcome.writes += 1
        if n >= 0 {
            outcome.written += packets
            return
        }
        let code = errno
        if code == EBADF { throw .closed }
        if code == EFAULT { throw .system(operation: "write to the device", errno: code) }
        outcome.dropped += packets
        outcome.lastErrno = code
    }

    // MARK: - Async

    /// Waits without holding a thread, then reads like `readPackets(into:timeout:)`.
    /// Cancelling the task ends the wait with `CancellationError`.
    nonisolated(nonsending) public func readPackets(into batch: PacketBatch) async throws -> Int {
        while true {
            let n = try readPackets(into: batch, timeout: .zero)
            if n > 0 { return n }
            try await readiness.wait()
        }
    }

    /// Writes like `writePackets(_:coalescingWith:)`, except that a write refused for want of
    /// room (a Linux TUN device never refuses for that, its kernel queues or drops) is not
    /// dropped: the task waits, holding no thread, and the writes go on from there in order.
    /// `EAGAIN` (the descriptor's buffer is full) waits until it is writable; `ENOBUFS` (utun when
    /// the kernel is short of buffers, while its socket still polls writable) waits 1 ms,
    /// doubling to 64 ms while it lasts. Cancelling the task ends the wait with
    /// `CancellationError`, `close()` with `TunnelError.interrupted` (or `.closed`); what was
    /// written by then is in the queue's statistics.
    nonisolated(nonsending) public func writePackets(_ batch: PacketBatch, coalescingWith gro: GROTable? = nil) async throws -> WriteOutcome {
        var outcome = WriteOutcome()
        defer { record(outcome) }
        let coalescing = plan(batch, gro)
        var first = 0
        var backOff = Duration.milliseconds(1)
        while true {
            try enter(reading: false)
            let refused: Refused?
            do {
                refused = try write(batch, coalescing, from: first, waitingForRoom: true, &outcome)
                leave()
            } catch {
                leave()
                throw error
            }
            guard let refused else { break }
            first = refused.index
            // Not inside enter/leave: close() must not wait for this task to find room.
            if refused.errno == ENOBUFS {
                try await Task.sleep(for: backOff)
                backOff = min(backOff * 2, .milliseconds(64))
            } else {
                backOff = .milliseconds(1)
                try await writability.wait()
            }
        }
        return outcome
    }

    /// Waits without holding a thread, then reads one packet like `read(into:timeout:)`.
    nonisolated(nonsending) public func read(into buffer: UnsafeMutableRawBufferPointer) async throws -> Int {
        while true {
            let n = try read(into: buffer, timeout: .zero)
            if n > 0 { return n }
            try await readiness.wait()
        }
    }
}

/// `read(2)`/`write(2)` under names that do not collide with the queue's own methods.
@inline(__always)
func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    #if canImport(Glibc)
    Glibc.read(fd, buffer, count)
    #else
    Darwin.read(fd, buffer, count)
    #endif
}

@inline(__always)
func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    #if canImport(Glibc)
    Glibc.write(fd, buffer, count)
    #else
    Darwin.write(fd, buffer, count)
    #endif
}
