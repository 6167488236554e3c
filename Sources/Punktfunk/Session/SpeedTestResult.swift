/// A speed test's outcome, from the host's ProbeResult and what the client received.
///
/// link loss = (wire_sent − received) / wire_sent; host drop = dropped / (wire_sent + dropped);
/// goodput = received bytes · 8 / duration; the recommendation is 70 % of the goodput, the share a
/// stream can use while leaving room for FEC and bursts.
public struct SpeedTestResult: Equatable, Sendable {
    public var targetKbps: UInt32
    public var durationMs: UInt32
    public var hostPacketsSent: UInt32
    public var hostWirePacketsSent: UInt32
    public var hostSendDropped: UInt32
    public var hostBytesSent: UInt64
    public var receivedPackets: UInt64
    public var receivedBytes: UInt64

    public init(targetKbps: UInt32, result: ControlMessage.ProbeResult, receivedPackets: UInt64, receivedBytes: UInt64) {
        self.targetKbps = targetKbps
        durationMs = result.durationMs
        hostPacketsSent = result.packetsSent
        hostWirePacketsSent = result.wirePacketsSent ?? result.packetsSent
        hostSendDropped = result.sendDropped ?? 0
        hostBytesSent = result.bytesSent
        self.receivedPackets = receivedPackets
        self.receivedBytes = receivedBytes
    }

    /// Fraction of the datagrams that left the host and never arrived (0…1).
    public var linkLoss: Double {
        guard hostWirePacketsSent > 0 else { return 0 }
        return max(0, Double(Int64(hostWirePacketsSent) - Int64(receivedPackets)) / Double(hostWirePacketsSent))
    }

    /// Fraction of datagrams the host's own socket refused (0…1).
    public var hostDrop: Double {
        let total = Double(hostWirePacketsSent) + Double(hostSendDropped)
        return total > 0 ? Double(hostSendDropped) / total : 0
    }

    /// Received payload rate in kbit/s.
    public var goodputKbps: Double {
        durationMs > 0 ? Double(receivedBytes) * 8 / Double(durationMs) : 0
    }

    /// What to ask the host for: about 70 % of the goodput.
    public var recommendedKbps: UInt32 { UInt32(min(goodputKbps * 0.7, Double(UInt32.max))) }

    /// True when the host answered with the zeroed result it gives clients without PROBE_SEQ.
    public var isEmpty: Bool { durationMs == 0 && hostPacketsSent == 0 }
}
