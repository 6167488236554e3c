import FarcastSupport

/// source@v1: the client as an input (a line-in, a turntable, a microphone) whose audio the
/// server places on its clock and plays to the group. The server asks (`server/command.source`:
/// start, stop); the client announces the format (`client-stream/start`), sends chunks
/// `[12][server time i64 BE of the first sample's capture][codec data]` and ends with
/// `client-stream/end`.

/// The format a source stream is sent in (`client-stream/start.source`).
public struct SourceFormat: Codable, Sendable, Equatable, CustomStringConvertible {
    public var codec: String
    public var channels: Int
    public var sampleRate: Int
    public var bitDepth: Int
    /// Standard base64 (FLAC: "fLaC" + STREAMINFO); none for PCM.
    public var codecHeader: String?

    public init(codec: String, channels: Int, sampleRate: Int, bitDepth: Int, codecHeader: String? = nil) {
        self.codec = codec
        self.channels = channels
        self.sampleRate = sampleRate
        self.bitDepth = bitDepth
        self.codecHeader = codecHeader
    }

    enum CodingKeys: String, CodingKey { case codec, channels, sampleRate = "sample_rate", bitDepth = "bit_depth", codecHeader = "codec_header" }

    public var description: String { "\(codec) \(sampleRate) Hz \(bitDepth)-bit \(channels) ch" }
}

/// What the server asks of a source.
public enum SourceCommand: String, Codable, Sendable, Equatable {
    case start, stop
}

/// Binary type of a source's audio chunk.
enum SourceFraming {
    static let audio: UInt8 = 12

    /// `[timestamp i64 BE][payload]`, the bytes after the type.
    static func chunk(timestamp: Int64, payload: [UInt8]) -> [UInt8] {
        var writer = ByteWriter()
        writer.writeInteger(timestamp)
        writer.writeBytes(payload)
        return writer.bytes
    }
}

/// `source@v1_support` in client/hello (no optional features: no line sense).
struct SourceSupport: Codable {}

/// `source@v1_support` in server/hello: the codecs it takes from a source.
public struct ServerSourceSupport: Codable, Sendable, Equatable {
    public var supportedCodecs: [String]
    enum CodingKeys: String, CodingKey { case supportedCodecs = "supported_codecs" }
}

/// `client/state.source` (empty: this client reports no line-sense signal).
struct SourceState: Codable {}

struct ClientStreamStart: Codable { var source: SourceFormat }

struct ServerSourceCommand: Codable { var command: SourceCommand }
