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
        guard sendingCounter < Self.rejectAfterMessages else { throw .sessionExhausted }
        let counter = sendingCounter
        sendingCounter += 1
        var plaintext = packet
        let padded = min((packet.count + 15) & ~15, max(mtu, packet.count))
        plaintext += [UInt8](repeating: 0, count: padded - packet.count)
        let box = try! ChaChaPoly.seal(plaintext, using: keys.sendingKey, nonce: Self.nonce(counter))
        var out = wireWord(MessageType.transport.rawValue) + wireWord(keys.remoteIndex)
        out += wireWord(UInt32(truncatingIfNeeded: counter)) + wireWord(UInt32(truncatingIfNeeded: counter >> 32))
        out += box.ciphertext
        out += box.tag
        return out
    }

    /// The padded packet inside a transport message for this session (the caller finds the
    /// session by the message's receiver index). Nothing changes unless it authenticates and
    /// its counter is new.
    public mutating func open(counter: UInt64, sealed: ArraySlice<UInt8>) throws(WireGuardError) -> [UInt8] {
        guard replay.mayAccept(counter) else { throw .replayedCounter(counter) }
        let plaintext: [UInt8]
        do {
            let box = try ChaChaPoly.SealedBox(nonce: Self.nonce(counter), ciphertext: sealed.dropLast(16), tag: sealed.suffix(16))
            plaintext = Array(try ChaChaPoly.open(box, using: keys.receivingKey))
        } catch {
            throw .decryptionFailed(field: "transport packet")
        }
        guard replay.accept(counter) else { throw .replayedCounter(counter) }
        hasReceived = true
        return plaintext
    }

    static func nonce(_ counter: UInt64) -> ChaChaPoly.Nonce {
        var bytes = [UInt8](repeating: 0, count: 12)
        for i in 0..<8 { bytes[4 + i] = UInt8(truncatingIfNeeded: counter >> UInt64(8 * i)) }
        return try! ChaChaPoly.Nonce(data: bytes)
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
