import FarcastSupport

/// Splits the control stream into messages: every message is `u16 LE length ‖ payload`.
///
/// Bytes arrive in arbitrary pieces; `append` keeps at most one partial frame (≤ 2 + 65535 bytes)
/// and `next()` returns whole payloads in order. A zero-length frame is legal and yields `[]`.
public struct ControlFrameDecoder: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0

    public init() {}

    /// Adds bytes received on the stream.
    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        if start > 0, start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 65536 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete payload, or nil when more bytes are needed.
    public mutating func next() -> [UInt8]? {
        guard buffer.count - start >= 2 else { return nil }
        let length = Int(buffer[start]) | Int(buffer[start + 1]) << 8
        guard buffer.count - start - 2 >= length else { return nil }
        let payload = Array(buffer[(start + 2)..<(start + 2 + length)])
        start += 2 + length
        return payload
    }

    /// Bytes waiting for the rest of their frame.
    public var pendingByteCount: Int { buffer.count - start }

    /// Frames a payload for the stream.
    public static func frame(_ payload: [UInt8]) -> [UInt8] {
        precondition(payload.count <= 0xFFFF, "control payloads are at most 65535 bytes")
        var out = [UInt8]()
        out.reserveCapacity(payload.count + 2)
        out.append(UInt8(payload.count & 0xFF))
        out.append(UInt8(payload.count >> 8))
        out.append(contentsOf: payload)
        return out
    }
}
