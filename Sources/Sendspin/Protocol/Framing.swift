/// Sendspin transport framing inside the Noise plaintext: byte 0 is the message type; messages
/// that do not fit one Noise transport message (65,535 bytes with the tag) are fragmented.
public enum SendspinFraming {
    public static let json: UInt8 = 0
    public static let fragment: UInt8 = 1
    public static let playerAudio: UInt8 = 4

    /// Largest plaintext in one Noise transport message: 65,535 − 16-byte tag.
    public static let maximumPlaintext = 65_535 - 16
    /// Largest reassembled message accepted (aiosendspin's limit).
    public static let maximumMessage = 64 << 20

    static let flagLast: UInt8 = 0x01
    static let flagFirst: UInt8 = 0x02

    /// Splits a typed message into transport plaintexts: unchanged when it fits, else a first
    /// fragment `[1][first|last?][type] data…` and continuations `[1][last?] data…`.
    public static func plaintexts(type: UInt8, body: [UInt8]) -> [[UInt8]] {
        if body.count + 1 <= maximumPlaintext { return [[type] + body] }
        var frames: [[UInt8]] = []
        let firstCapacity = maximumPlaintext - 3, laterCapacity = maximumPlaintext - 2
        var offset = min(firstCapacity, body.count)
        frames.append([fragment, flagFirst | (offset == body.count ? flagLast : 0), type] + body[0..<offset])
        while offset < body.count {
            let end = min(offset + laterCapacity, body.count)
            frames.append([fragment, end == body.count ? flagLast : 0] + body[offset..<end])
            offset = end
        }
        return frames
    }
}

/// Reassembles fragmented messages; one may be in flight at a time. Every rule violation is a
/// protocol error (the session closes), as the spec requires.
public struct FragmentReassembler: Sendable {
    private var inFlightType: UInt8?
    private var buffer: [UInt8] = []

    public init() {}

    public var isReassembling: Bool { inFlightType != nil }

    /// Takes one decrypted transport plaintext; returns a complete message when one is done.
    public mutating func accept(_ plaintext: [UInt8]) throws(SendspinError) -> (type: UInt8, body: [UInt8])? {
        guard let type = plaintext.first else { throw .protocolViolation("an empty transport message") }
        guard type == SendspinFraming.fragment else {
            guard inFlightType == nil else { throw .protocolViolation("message type \(type) arrived while a fragmented message was unfinished") }
            return (type, Array(plaintext.dropFirst()))
        }
        guard plaintext.count >= 2 else { throw .protocolViolation("a fragment without flags") }
        let flags = plaintext[1]
        guard flags & 0xFC == 0 else { throw .protocolViolation("fragment flags 0x\(String(flags, radix: 16)) use reserved bits") }
        var data = plaintext[2...]
        if flags & SendspinFraming.flagFirst != 0 {
            guard inFlightType == nil else { throw .protocolViolation("a first fragment while another message was unfinished") }
            guard let original = data.first else { throw .protocolViolation("a first fragment without the original type") }
            guard original != SendspinFraming.fragment else { throw .protocolViolation("a fragment whose original type is 'fragment'") }
            inFlightType = original
            data = data.dropFirst()
            buffer = []
        } else {
            guard inFlightType != nil else { throw .protocolViolation("a continuation fragment with no message in flight") }
        }
        guard buffer.count + data.count <= SendspinFraming.maximumMessage else {
            throw .protocolViolation("a fragmented message larger than \(SendspinFraming.maximumMessage >> 20) MiB")
        }
        buffer += data
        guard flags & SendspinFraming.flagLast != 0, let type = inFlightType else { return nil }
        inFlightType = nil
        defer { buffer = [] }
        return (type, buffer)
    }
}
