import FarcastSupport

/// One artwork channel as the client asks for it (`client/state.artwork.channels[i]`) and as
/// the server echoes it in `stream/start`: what picture (the album's, the artist's, none), in
/// which format, at which size (the server scales to fit and pads with black, never crops).
public struct ArtworkChannel: Codable, Sendable, Equatable, CustomStringConvertible {
    public enum Source: String, Codable, Sendable, CaseIterable { case album, artist, none }
    public enum Format: String, Codable, Sendable, CaseIterable { case jpeg, png }

    public var source: Source
    public var format: Format?
    public var width: Int?
    public var height: Int?

    public init(source: Source, format: Format? = nil, width: Int? = nil, height: Int? = nil) {
        self.source = source
        self.format = source == .none ? nil : format
        self.width = source == .none ? nil : width
        self.height = source == .none ? nil : height
    }

    /// Parses `SOURCE[:FORMAT[:WIDTHxHEIGHT]]` (`album:jpeg:300x300`, `artist:png`, `none`);
    /// format and size default to JPEG at 300×300; the reason when it is not that.
    public static func parse(_ text: String) -> Result<ArtworkChannel, ArtworkChannelError> {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        guard let source = Source(rawValue: parts[0].lowercased()) else {
            return .failure(ArtworkChannelError(text: text, reason: "the source is album, artist or none"))
        }
        if source == .none {
            return parts.count == 1 ? .success(ArtworkChannel(source: .none)) : .failure(ArtworkChannelError(text: text, reason: "none takes no format or size"))
        }
        guard parts.count <= 3 else { return .failure(ArtworkChannelError(text: text, reason: "SOURCE[:FORMAT[:WIDTHxHEIGHT]]")) }
        var format = Format.jpeg
        if parts.count >= 2 {
            guard let chosen = Format(rawValue: parts[1].lowercased()) else {
                return .failure(ArtworkChannelError(text: text, reason: "the format is jpeg or png"))
            }
            format = chosen
        }
        var (width, height) = (300, 300)
        if parts.count == 3 {
            let size = parts[2].lowercased().split(separator: "x", omittingEmptySubsequences: false)
            guard size.count == 2, let w = Int(size[0]), let h = Int(size[1]), (1...4096).contains(w), (1...4096).contains(h) else {
                return .failure(ArtworkChannelError(text: text, reason: "the size is WIDTHxHEIGHT, each 1–4096"))
            }
            (width, height) = (w, h)
        }
        return .success(ArtworkChannel(source: source, format: format, width: width, height: height))
    }

    public var description: String {
        guard source != .none, let format, let width, let height else { return source.rawValue }
        return "\(source.rawValue) \(format.rawValue) \(width)×\(height)"
    }
}

public struct ArtworkChannelError: Error, Equatable, Sendable, CustomStringConvertible {
    public let text: String
    public let reason: String
    public var description: String { "invalid artwork channel '\(text)': \(reason)" }
}

/// The `artwork` object of `client/state` and of `stream/start`: one entry per channel, its
/// index the channel number (0–3).
struct ArtworkChannels: Codable, Equatable {
    var channels: [ArtworkChannel]
}

/// A picture for one channel, complete, to be shown from `timestamp` (server clock, µs). Empty
/// `data` clears the channel. `format`, `width` and `height` are read from the image's own
/// header (nil when it is neither a JPEG nor a PNG the header describes).
public struct ArtworkImage: Sendable, Equatable {
    public var channel: Int
    public var timestamp: Int64
    public var data: [UInt8]
    public var format: ArtworkChannel.Format?
    public var width: Int?
    public var height: Int?

    public init(channel: Int, timestamp: Int64, data: [UInt8]) {
        self.channel = channel
        self.timestamp = timestamp
        self.data = data
        if let (format, width, height) = Self.header(data) {
            (self.format, self.width, self.height) = (format, width, height)
        }
    }

    public var isClear: Bool { data.isEmpty }

    /// The format and size a JPEG (its first start-of-frame marker) or PNG (IHDR) declares.
    static func header(_ data: [UInt8]) -> (ArtworkChannel.Format, Int, Int)? {
        if data.count >= 24, data.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]), data[12..<16].elementsEqual(Array("IHDR".utf8)) {
            let width = data[16..<20].reduce(0) { $0 << 8 | Int($1) }, height = data[20..<24].reduce(0) { $0 << 8 | Int($1) }
            return (.png, width, height)
        }
        guard data.count >= 4, data[0] == 0xFF, data[1] == 0xD8 else { return nil }
        var i = 2
        while i + 9 < data.count {
            guard data[i] == 0xFF else { return nil }
            let marker = data[i + 1]
            if marker == 0xFF { i += 1; continue }           // fill byte
            if marker == 0xD8 || (0xD0...0xD7).contains(marker) || marker == 0x01 { i += 2; continue }
            let length = Int(data[i + 2]) << 8 | Int(data[i + 3])
            // SOF0–SOF15 except DHT (C4), JPG (C8) and DAC (CC): height, then width.
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                let height = Int(data[i + 5]) << 8 | Int(data[i + 6]), width = Int(data[i + 7]) << 8 | Int(data[i + 8])
                return (.jpeg, width, height)
            }
            guard length >= 2 else { return nil }
            i += 2 + length
        }
        return nil
    }
}

/// artwork@v1's binary messages (types 8–11: channels 0–3) on the current wire: an announce
/// `[type][0x02][timestamp i64][size u32]` (14 bytes; size 0 clears), parts `[type][0x00][data]`
/// until `size` bytes came, a cancel `[type][0x01]`. One transfer is in flight at a time, over
/// all channels. Every rule broken is a protocol violation (the session closes, as the spec
/// requires); an announced size over `maximumImage` too, so a server cannot make the client
/// hold an unbounded picture.
struct ArtworkTransfers: Sendable {
    static let firstType: UInt8 = 8
    static let lastType: UInt8 = 11
    /// Largest artwork message: one Noise transport message's plaintext.
    static let maximumMessage = SendspinFraming.maximumPlaintext
    /// Largest picture accepted (a 4096×4096 PNG of noise is about 50 MB; artwork is small).
    static let maximumImage = 32 << 20

    enum Outcome: Equatable {
        case image(ArtworkImage)
        /// The server withdrew the channel's picture that was on its way (in flight or waiting
        /// for its time).
        case cancelled(channel: Int)
    }

    private var inFlight: (channel: Int, timestamp: Int64, size: Int, data: [UInt8])?

    /// Takes one message of `type` (8–11) with `body`, the bytes after the type.
    mutating func receive(type: UInt8, body: [UInt8]) throws(SendspinError) -> Outcome? {
        let channel = Int(type - Self.firstType)
        guard body.count >= 1, body.count + 1 <= Self.maximumMessage else {
            throw .protocolViolation("an artwork message of \(body.count + 1) bytes (2–\(Self.maximumMessage) allowed)")
        }
        let flags = body[0]
        guard flags & 0xFC == 0 else { throw .protocolViolation("artwork flags 0x\(String(flags, radix: 16)) use reserved bits") }
        switch flags {
        case 0x02:
            guard body.count == 13 else { throw .protocolViolation("an artwork announce of \(body.count + 1) bytes (14 expected)") }
            guard inFlight == nil else { throw .protocolViolation("an artwork announce while another picture was on its way") }
            var reader = ByteReader(Array(body.dropFirst()))
            // 12 bytes are there: these reads cannot fail.
            let timestamp = (try? reader.readInteger(as: Int64.self)) ?? 0
            let size = Int((try? reader.readInteger(as: UInt32.self)) ?? 0)
            guard size <= Self.maximumImage else {
                throw .protocolViolation("an artwork picture of \(size) bytes announced (at most \(Self.maximumImage) accepted)")
            }
            if size == 0 { return .image(ArtworkImage(channel: channel, timestamp: timestamp, data: [])) }
            inFlight = (channel, timestamp, size, [])
            inFlight?.data.reserveCapacity(size)
            return nil
        case 0x01:
            guard body.count == 1 else { throw .protocolViolation("an artwork cancel of \(body.count + 1) bytes (2 expected)") }
            if inFlight?.channel == channel { inFlight = nil }
            return .cancelled(channel: channel)
        case 0x00:
            guard var transfer = inFlight else { throw .protocolViolation("an artwork part with no picture announced") }
            guard transfer.channel == channel else {
                throw .protocolViolation("an artwork part for channel \(channel) while channel \(transfer.channel)'s picture was on its way")
            }
            guard transfer.data.count + body.count - 1 <= transfer.size else {
                throw .protocolViolation("artwork parts beyond the \(transfer.size) bytes announced")
            }
            inFlight = nil          // no copy of the buffer while it grows
            transfer.data += body.dropFirst()
            guard transfer.data.count == transfer.size else {
                inFlight = transfer
                return nil
            }
            return .image(ArtworkImage(channel: channel, timestamp: transfer.timestamp, data: transfer.data))
        default:
            throw .protocolViolation("artwork flags 0x03 (announce and cancel at once)")
        }
    }

    /// The artwork stream ended: whatever was on its way is dropped.
    mutating func reset() { inFlight = nil }
}
