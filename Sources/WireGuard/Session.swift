import Crypto
import FarcastSupport

/// One direction pair of transport keys in use: seals outgoing packets with a counter nonce,
/// opens incoming ones through the replay window. A value owned by one peer's state machine.
public struct TransportSession: Sendable {
    /// After this many messages a new handshake is started (REKEY_AFTER_MESSAGES, 2^60).
    public static let rekeyAfterMessages: UInt64 = 1 << 60
    /// No counter at or beyond this is sent or accepted (REJECT_AFTER_MESSAGES, 2^64 − 2^13 − 1).
    public static let rejectAfterMessages: UInt64 = UInt64.max - (1 << 13)

    public let keys: SessionKeys
    public let established: MonotonicInstant
    public private(set) var sendingCounter: UInt64 = 0
    public private(set) var replay = ReplayWindow()
    /// Whether a transport message has been received (a responder may not send before).
    public private(set) var hasReceived = false

    public init(keys: SessionKeys, established: MonotonicInstant) {
        self.keys = keys
        self.established = established
    }

    public var localIndex: UInt32 { keys.localIndex }
    public var remoteIndex: UInt32 { keys.remoteIndex }

    /// The transport message carrying `packet` (an IP packet, or empty for a keepalive), padded
    /// with zeros to a multiple of 16 bytes but not beyond `mtu`.
    public mutating func seal(_ packet: [UInt8], mtu: Int = Int.max) throws(WireGuardError) -> [UInt8] {
        try reserve(mtu: mtu).seal(packet)
    }

    /// Takes the next counter for one packet; the returned job seals it, on any thread.
    public mutating func reserve(mtu: Int = Int.max) throws(WireGuardError) -> SealJob {
        guard sendingCounter < Self.rejectAfterMessages else { throw .sessionExhausted }
        defer { sendingCounter += 1 }
        return SealJob(key: keys.sendingKey, receiverIndex: keys.remoteIndex, counter: sendingCounter, mtu: mtu)
    }

    /// The padded packet inside a transport message for this session (the caller finds the
    /// session by the message's receiver index). Nothing changes unless it authenticates and
    /// its counter is new.
    public mutating func open(counter: UInt64, sealed: ArraySlice<UInt8>) throws(WireGuardError) -> [UInt8] {
        let plaintext = try openJob(counter: counter, sealed: sealed).open()
        try accept(counter)
        return plaintext
    }

    /// The decryption of one message, on any thread, if its counter may still be accepted.
    public func openJob(counter: UInt64, sealed: ArraySlice<UInt8>) throws(WireGuardError) -> OpenJob {
        guard replay.mayAccept(counter) else { throw .replayedCounter(counter) }
        return OpenJob(key: keys.receivingKey, localIndex: keys.localIndex, counter: counter, sealed: sealed)
    }

    /// Records a counter whose message authenticated; throws if it was taken meanwhile.
    public mutating func accept(_ counter: UInt64) throws(WireGuardError) {
        guard replay.accept(counter) else { throw .replayedCounter(counter) }
        hasReceived = true
    }

    static func nonce(_ counter: UInt64) -> ChaChaPoly.Nonce {
        var bytes = [UInt8](repeating: 0, count: 12)
        for i in 0..<8 { bytes[4 + i] = UInt8(truncatingIfNeeded: counter >> UInt64(8 * i)) }
        // 12 bytes, as ChaChaPoly requires: cannot fail.
        return try! ChaChaPoly.Nonce(data: bytes)
    }
}

/// One packet's encryption, its counter reserved by a `TransportSession`: the key, the
/// receiver's index and the counter, so it can run outside whatever guards the session.
public struct SealJob: Sendable {
    let key: SymmetricKey
    let receiverIndex: UInt32
    let counter: UInt64
    let mtu: Int

    /// Bytes of the transport message for a packet of `length` bytes.
    public func sealedLength(_ length: Int) -> Int {
        Message.transportHeaderLength + min((length + 15) & ~15, max(mtu, length)) + 16
    }

    /// The transport message for `packet` written into `out` (at least `sealedLength` bytes):
    /// header, then the packet padded with zeros, sealed. Returns its length.
    public func seal(_ packet: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) -> Int {
        let header = Message.transportHeaderLength
        let padded = min((packet.count + 15) & ~15, max(mtu, packet.count))
        precondition(out.count >= header + padded + 16, "room for the sealed message")
        out.storeBytes(of: MessageType.transport.rawValue.littleEndian, toByteOffset: 0, as: UInt32.self)
        out.storeBytes(of: receiverIndex.littleEndian, toByteOffset: 4, as: UInt32.self)
        out.storeBytes(of: counter.littleEndian, toByteOffset: 8, as: UInt64.self)
        let body = UnsafeMutableRawBufferPointer(rebasing: out[header..<(header + padded)])
        if let source = packet.baseAddress, packet.count > 0 { body.baseAddress!.copyMemory(from: source, byteCount: packet.count) }
        if padded > packet.count { (body.baseAddress! + packet.count).initializeMemory(as: UInt8.self, repeating: 0, count: padded - packet.count) }
        // Sealing with a 32-byte key and a 12-byte nonce cannot fail.
        let box = try! ChaChaPoly.seal(UnsafeRawBufferPointer(body), using: key, nonce: TransportSession.nonce(counter))
        box.ciphertext.withUnsafeBytes { body.copyMemory(from: $0) }
        box.tag.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: out[(header + padded)...]).copyMemory(from: $0) }
        return header + padded + 16
    }

    /// The transport message: header, then the packet padded with zeros, sealed.
    public func seal(_ packet: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: sealedLength(packet.count)) { buffer, count in
            count = packet.withUnsafeBytes { seal($0, into: UnsafeMutableRawBufferPointer(buffer)) }
        }
    }
}

/// One message's decryption, for a session's counter that was still free when it was made.
public struct OpenJob: Sendable {
    let key: SymmetricKey
    /// The session it belongs to (our index).
    public let localIndex: UInt32
    public let counter: UInt64
    let sealed: ArraySlice<UInt8>

    /// The padded packet; throws when the message does not authenticate.
    public func open() throws(WireGuardError) -> [UInt8] {
        do {
            let box = try ChaChaPoly.SealedBox(nonce: TransportSession.nonce(counter), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16))
            return Array(try ChaChaPoly.open(box, using: key))
        } catch {
            throw .decryptionFailed(field: "transport packet")
        }
    }
}

/// Which counters have been seen: a sliding bitmap behind the highest counter (the scheme of
/// RFC 6479), 8128 counters wide as in WireGuard's implementations, so packets reordered by up
/// to that many are still accepted once and only once.
public struct ReplayWindow: Sendable, Equatable {
    static let blockBits: UInt64 = 64
    static let blockCount: UInt64 = 128
    /// Counters this far below the highest one seen are still judged (older ones are refused).
    public static let width: UInt64 = (blockCount - 1) * blockBits

    private var blocks = [UInt64](repeating: 0, count: Int(blockCount))
    private var highest: UInt64 = 0

    public init() {}

    /// Whether `counter` would be accepted (no change).
    public func mayAccept(_ counter: UInt64) -> Bool {
        guard counter < TransportSession.rejectAfterMessages else { return false }
        if counter > highest { return true }
        guard highest - counter <= Self.width else { return false }
        return blocks[Self.slot(counter)] & Self.bit(counter) == 0
    }

    /// Marks `counter` seen; false when it was seen before or is too old.
    public mutating func accept(_ counter: UInt64) -> Bool {
        guard mayAccept(counter) else { return false }
        if counter > highest {
            let from = highest / Self.blockBits
            let to = counter / Self.blockBits
            // Blocks the window slides past are cleared (all of them, when it jumps far).
            let cleared = min(to - from, Self.blockCount)
            var block = from
            for _ in 0..<cleared {
                block += 1
                blocks[Int(block % Self.blockCount)] = 0
            }
            highest = counter
        }
        blocks[Self.slot(counter)] |= Self.bit(counter)
        return true
    }

    private static func slot(_ counter: UInt64) -> Int { Int((counter / blockBits) % blockCount) }
    private static func bit(_ counter: UInt64) -> UInt64 { 1 << (counter % blockBits) }
}
