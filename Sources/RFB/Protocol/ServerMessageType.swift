/// The server-to-client message types the client understands (the first byte of each message).
enum ServerMessageType: UInt8, Sendable {
    case framebufferUpdate = 0
    case setColourMapEntries = 1
    case bell = 2
    case serverCutText = 3
    /// EndOfContinuousUpdates: first as the announcement that the server supports them, later
    /// as the end of a run.
    case endOfContinuousUpdates = 150
    case serverFence = 248
    /// xvp (power control) status; read and ignored.
    case xvp = 250
    /// QEMU's server messages (audio).
    case qemu = 255
}
