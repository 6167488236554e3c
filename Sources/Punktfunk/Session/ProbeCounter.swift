import Synchronization

/// Counts the speed-test filler that arrives: datagrams that open under the session key and
/// carry the PROBE flag. Anything else on the data socket (late video, garbage) is not counted.
///
/// `@unchecked Sendable`: `crypto` (not thread-safe) is used only inside `count`, which is only
/// ever called from the one `DataPlaneSocket` thread the counter is handed to; the totals that
/// other tasks read are behind a mutex.
public final class ProbeCounter: @unchecked Sendable {
    private let crypto: DatagramCrypto
    private let totals = Mutex<(packets: UInt64, bytes: UInt64, rejected: UInt64)>((0, 0, 0))

    public init(welcome: Welcome) throws(DataPlaneError) {
        let key = try welcome.datagramKey()
        crypto = try DatagramCrypto(key: key, direction: .hostToClient, sealing: false)
    }

    /// Call from the data socket's thread only.
    public func count(_ datagram: UnsafeMutableRawBufferPointer) {
        let wire = UInt64(datagram.count)
        guard let length = try? crypto.open(datagram), length >= VideoHeader.size,
              let header = try? VideoHeader(parsing: UnsafeRawBufferPointer(rebasing: datagram[DatagramCrypto.sequenceBytes..<(DatagramCrypto.sequenceBytes + VideoHeader.size)])),
              header.flags.contains(.probe) else {
            totals.withLock { $0.rejected += 1 }
            return
        }
        totals.withLock { $0.packets += 1; $0.bytes += wire }
    }

    /// (packets, wire bytes) of valid probe datagrams so far.
    public var received: (UInt64, UInt64) { totals.withLock { ($0.packets, $0.bytes) } }
    /// Datagrams that failed to open or were not probe filler.
    public var rejected: UInt64 { totals.withLock { $0.rejected } }
}
