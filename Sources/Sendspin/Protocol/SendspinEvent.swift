import FarcastSupport

/// One audio chunk as it arrived: the server timestamp of its first sample, the server's
/// send-ahead figure, the codec payload, and when it arrived on the client clock.
public struct AudioChunk: Sendable, Equatable {
    /// Server clock (µs) at which the first sample must leave the output.
    public var timestamp: Int64
    /// Timestamp minus the server's transmit time (µs); 0 or UInt32.max when saturated.
    public var sendAhead: UInt32
    public var payload: [UInt8]
    /// Client clock (µs) when the WebSocket message arrived.
    public var arrival: Int64

    /// Parses the 13-byte header (type 4, int64 BE timestamp, uint32 BE send-ahead).
    static func parse(_ body: ArraySlice<UInt8>, arrival: Int64) -> AudioChunk? {
        guard body.count >= 12 else { return nil }
        // The header read in place: the payload is copied once, into the chunk.
        let (timestamp, sendAhead) = body.withUnsafeBytes { header in
            (Int64(bigEndian: header.loadUnaligned(fromByteOffset: 0, as: Int64.self)),
             UInt32(bigEndian: header.loadUnaligned(fromByteOffset: 8, as: UInt32.self)))
        }
        return AudioChunk(timestamp: timestamp, sendAhead: sendAhead, payload: Array(body.dropFirst(12)), arrival: arrival)
    }
}

/// What the server did, as the session reports it.
public enum SendspinEvent: Sendable, Equatable {
    case handshakeComplete(serverID: String, pskCategory: PSKCategory)
    case hello(ServerHello)
    /// Activation; `roles` is the active role list in effect (it persists when omitted).
    case activated(activities: [Activity], roles: [String])
    /// A server/time answer and the client time (µs) it arrived.
    case serverTime(ServerTime, receivedAt: Int64)
    case streamStart(StreamFormat?)
    case streamClear
    case streamEnd
    case audioChunk(AudioChunk)
    /// An audio message too short for its header: dropped and counted.
    case malformedAudio(String)
    case groupUpdate(GroupUpdate)
    case metadata(Metadata)
    /// artwork@v1: a stream started with these channels (as the server will send them).
    case artworkStream([ArtworkChannel])
    /// artwork@v1: a picture arrived whole (empty: the channel is cleared), to be shown from
    /// its timestamp.
    case artwork(ArtworkImage)
    /// artwork@v1: the server withdrew the channel's picture that had not been shown yet.
    case artworkCancelled(channel: Int)
    /// artwork@v1: the artwork stream ended: every channel is cleared.
    case artworkEnded
    /// visualizer@v1: the stream (re)started with this setup.
    case visualizerStream(VisualizerStream)
    /// visualizer@v1: one frame, to be delivered when its sound plays.
    case visualizer(VisualizerFrame)
    /// visualizer@v1: frames not yet delivered are void (a seek or track jump).
    case visualizerCleared
    /// visualizer@v1: the visualizer stream ended.
    case visualizerEnded
    /// A visualizer or color message the client cannot read: dropped (the reason), the session
    /// goes on.
    case malformedVisualization(String)
    /// color@v1: a palette, to apply from its timestamp.
    case color(ColorPalette)
    /// source@v1: the server asks the source to start or stop streaming.
    case sourceCommand(SourceCommand)
    case controller(ControllerState)
    case playerCommand(PlayerCommand)
    /// A message type this client does not handle, reported once per type.
    case unknownMessage(String)
    /// Pairing finished: the server stored this long-term PSK for us; keep it.
    case paired(PairedServer)
    /// A pairing activation was answered (pair-init and pair-finalize went out).
    case pairingStarted(method: String)
    /// A pairing attempt ended without a result (the server's or our reason).
    case pairingAborted(String)
    /// The server ended the pairing: forget its record (the session then says goodbye).
    case unpaired(serverID: String)
}
