/// Caller-owned buffers for moving many packets per call: `capacity` slots of `slotSize` bytes
/// in one allocation made at init, so batch reads and writes allocate nothing per packet.
///
/// Invariants: slot `i` holds packet `i` for `i < count`, starting `headroom` bytes into the slot
/// (the headroom takes a vnet header or a 4-byte prefix without copying the packet) and never
/// longer than `slotSize`. A batch belongs to one thread at a time; it is not `Sendable`.
public final class PacketBatch {
    /// Number of slots.
    public let capacity: Int
    /// Largest packet a slot holds.
    public let slotSize: Int
    /// Bytes reserved before each packet; at least `PacketBatch.minimumHeadroom`.
    public let headroom: Int
    /// Packets held (slots `0..<count`).
    public private(set) var count = 0

    /// Room for the largest prefix the devices use: a 12-byte virtio header.
    public static let minimumHeadroom = 12
    /// Largest IP packet (and GSO super-packet) a TUN device hands over.
    public static let maximumPacketSize = 65535

    @usableFromInline let stride: Int
    @usableFromInline let storage: UnsafeMutableRawPointer
    @usableFromInline let lengths: UnsafeMutablePointer<Int>

    /// Where a super-packet read from a device waits to be split. The device's reader owns it
    /// through the batch so the queue itself stays stateless (and `Sendable`).
    let scratch: UnsafeMutableRawPointer
    static let scratchSize = 16 + maximumPacketSize + 64
    /// Bytes of a super-packet read (vnet header first) but not yet split because it did not fit
    /// in the slots left; the next read splits it first.
    var pendingScratchLength = 0
    /// The first segment of that super-packet not yet handed out (the rest of one that filled
    /// the batch before it was split whole).
    var pendingScratchSegment = 0
    /// For a coalesced UDP read waiting in the scratch: its segment size.
    var pendingSegmentSize = 0
    /// For a coalesced UDP read waiting in the scratch on an unconnected socket: its sender.
    var pendingSource: UDPEndpoint?

    #if os(Linux)
    /// Message vectors for batch socket calls, made on first use.
    lazy var messageVectors = MessageVectors(capacity: capacity)
    #endif

    /// - Parameters:
    ///   - capacity: slots (packets per call); 64–128 is where syscall savings level off.
    ///   - slotSize: the largest packet a slot takes: the device MTU for plain reads and writes;
    ///     up to 65535 to hold coalesced super-packets.
    ///   - headroom: bytes before each packet for a caller's own header (at least 12).
    public init(capacity: Int = 64, slotSize: Int = 1500, headroom: Int = PacketBatch.minimumHeadroom) {
        precondition(capacity > 0, "a batch needs at least one slot")
        precondition(slotSize >= 68 && slotSize <= Self.maximumPacketSize, "slotSize must be 68...65535")
        precondition(headroom >= Self.minimumHeadroom, "headroom must be at least \(Self.minimumHeadroom)")
        self.capacity = capacity
        self.slotSize = slotSize
        // Round the headroom up so every packet starts 8-byte aligned (the checksum loop reads
        // 8 bytes at a time).
        self.headroom = (headroom + 7) & ~7
        stride = (self.headroom + slotSize + 63) & ~63
        storage = .allocate(byteCount: stride * capacity, alignment: 64)
        lengths = .allocate(capacity: capacity)
        lengths.initialize(repeating: 0, count: capacity)
        scratch = .allocate(byteCount: Self.scratchSize, alignment: 64)
    }

    deinit {
        storage.deallocate()
        lengths.deallocate()
        scratch.deallocate()
    }

    /// Slots still free.
    public var freeSlots: Int { capacity - count }

    public var isEmpty: Bool { count == 0 }

    /// Packet `index` (`index < count`).
    @inlinable
    public subscript(index: Int) -> UnsafeMutableRawBufferPointer {
        precondition(index >= 0 && index < count, "packet index \(index) outside 0..<\(count)")
        return UnsafeMutableRawBufferPointer(start: storage + index * stride + headroom, count: lengths[index])
    }

    /// Length of packet `index`.
    @inlinable
    public func length(at index: Int) -> Int { lengths[index] }

    /// The whole slot `index` after its headroom, `slotSize` bytes, for filling.
    @inlinable
    public func slot(_ index: Int) -> UnsafeMutableRawBufferPointer {
        precondition(index >= 0 && index < capacity, "slot index \(index) outside 0..<\(capacity)")
        return UnsafeMutableRawBufferPointer(start: storage + index * stride + headroom, count: slotSize)
    }

    /// The start of slot `index`'s headroom (`headroom` bytes before the packet).
    @inlinable
    public func headroomStart(_ index: Int) -> UnsafeMutableRawPointer { storage + index * stride }

    /// Forgets every packet (keeps the memory).
    public func removeAll() { count = 0 }

    /// Drops the packets `shouldRemove` picks (it is given each index in order, and may read the
    /// packet there), moving the others down so slots `0..<count` stay filled, in their order.
    public func removeAll(where shouldRemove: (Int) throws -> Bool) rethrows {
        var kept = 0
        for index in 0..<count {
            if try shouldRemove(index) { continue }
            if kept != index {
                (storage + kept * stride + headroom).copyMemory(from: storage + index * stride + headroom, byteCount: lengths[index])
                lengths[kept] = lengths[index]
            }
            kept += 1
        }
        count = kept
    }

    /// Fills the next free slot through `body`, which returns the packet length it wrote (0 to
    /// leave the slot free). Returns false when the batch is full.
    @discardableResult
    public func append(_ body: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows -> Bool {
        guard count < capacity else { return false }
        let n = try body(slot(count))
        precondition(n >= 0 && n <= slotSize, "packet length \(n) outside the slot")
        if n > 0 {
            lengths[count] = n
            count += 1
        }
        return true
    }

    /// Copies a packet into the next free slot; false when the batch is full or the packet is
    /// larger than a slot.
    @discardableResult
    public func append(copying packet: UnsafeRawBufferPointer) -> Bool {
        guard count < capacity, packet.count <= slotSize, packet.count > 0, let source = packet.baseAddress else { return false }
        (storage + count * stride + headroom).copyMemory(from: source, byteCount: packet.count)
        lengths[count] = packet.count
        count += 1
        return true
    }

    /// Copies a packet from an array (tests and tools).
    @discardableResult
    public func append(_ packet: [UInt8]) -> Bool {
        packet.withUnsafeBytes { append(copying: $0) }
    }

    /// Records that slot `count` now holds a packet of `length` bytes written in place.
    @usableFromInline
    func commit(length: Int) {
        lengths[count] = length
        count += 1
    }

    /// Changes the recorded length of packet `index` (after rewriting it in place).
    @usableFromInline
    func setLength(_ length: Int, at index: Int) {
        lengths[index] = length
    }

    /// Splits the coalesced datagram waiting in the scratch (`pendingScratchLength` bytes of
    /// `pendingSegmentSize`-byte segments, a shorter last) into the free slots; a segment longer
    /// than a slot is dropped (`tooLarge`). False when segments are left for the next call (the batch is
    /// then full).
    func splitPendingDatagram(tooLarge: () -> Void) -> Bool {
        let total = pendingScratchLength
        let size = max(1, pendingSegmentSize)
        var offset = pendingScratchSegment * size
        while offset < total {
            guard freeSlots > 0 else {
                pendingScratchSegment = offset / size
                return false
            }
            let length = min(size, total - offset)
            if length > slotSize || !append(copying: UnsafeRawBufferPointer(start: scratch + offset, count: length)) { tooLarge() }
            offset += length
        }
        pendingScratchLength = 0
        pendingScratchSegment = 0
        return true
    }

    /// Packet `index` copied out (tests and tools).
    public func packetBytes(_ index: Int) -> [UInt8] { Array(UnsafeRawBufferPointer(self[index])) }
}

@available(*, unavailable, message: "a PacketBatch belongs to one thread at a time")
extension PacketBatch: Sendable {}
