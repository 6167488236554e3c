import FarcastSupport
import Foundation

/// A recorded RFB session: everything the server sent (after TLS decryption), plus what the
/// recording client asked for, so the stream can be decoded again without a network.
///
/// File layout: the line `FARCAST-RFB-CAPTURE 1`, one line of JSON metadata, then the raw
/// server→client bytes to the end of the file.
public struct RFBCapture: Sendable {
    public struct Metadata: Codable, Sendable, Equatable {
        /// The 16-byte PIXEL_FORMAT the client requested, hex.
        public var pixelFormat: String
        /// Encodings the client sent in SetEncodings.
        public var encodings: [Int32]
        public var server: String
        public var recordedAt: String

        public init(pixelFormat: PixelFormat, encodings: [RFBEncoding], server: String, recordedAt: Date = Date()) {
            var w = ByteWriter()
            pixelFormat.encode(into: &w)
            self.pixelFormat = hexString(w.bytes)
            self.encodings = encodings.map(\.rawValue)
            self.server = server
            self.recordedAt = ISO8601DateFormatter().string(from: recordedAt)
        }

        /// The requested pixel format, decoded.
        public func decodedPixelFormat() throws -> PixelFormat {
            var bytes: [UInt8] = []
            var chars = Array(pixelFormat.utf8)[...]
            while chars.count >= 2, let b = UInt8(String(decoding: chars.prefix(2), as: UTF8.self), radix: 16) {
                bytes.append(b)
                chars = chars.dropFirst(2)
            }
            guard bytes.count == 16 else { throw CaptureError.malformed("pixel format is not 16 bytes of hex") }
            var reader = ByteReader(bytes)
            let format = try PixelFormat.decode(from: &reader)
            try format.validate()
            return format
        }
    }

    public enum CaptureError: Error, CustomStringConvertible, Equatable {
        case malformed(String)
        public var description: String {
            switch self {
            case .malformed(let detail): return "not a Farcast RFB capture: \(detail)"
            }
        }
    }

    static let magic = Array("FARCAST-RFB-CAPTURE 1\n".utf8)

    public var metadata: Metadata
    /// The server's bytes. A slice, so a capture read from a file is not copied again.
    public var stream: ArraySlice<UInt8>

    public init(metadata: Metadata, stream: [UInt8]) {
        self.metadata = metadata
        self.stream = stream[...]
    }

    /// The header (magic and metadata line) that starts a capture file.
    public static func header(for metadata: Metadata) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        encoder.outputFormatting = [.sortedKeys]
        return magic + Array(try encoder.encode(metadata)) + [0x0A]
    }

    public init(bytes: [UInt8]) throws {
        guard bytes.starts(with: Self.magic) else { throw CaptureError.malformed("missing the FARCAST-RFB-CAPTURE header") }
        let rest = bytes[Self.magic.count...]
        guard let newline = rest.prefix(1 << 16).firstIndex(of: 0x0A) else { throw CaptureError.malformed("metadata line is missing") }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        do {
            metadata = try decoder.decode(Metadata.self, from: Data(rest[..<newline]))
        } catch {
            throw CaptureError.malformed("metadata is not valid JSON (\(error))")
        }
        stream = bytes[(newline + 1)...]
    }

    public func serialized() throws -> [UInt8] { try Self.header(for: metadata) + stream }

    /// The capture cut back to its last complete server message, so a recording stopped in the
    /// middle of an update still decodes to its end.
    public func trimmedToLastCompleteMessage() throws -> RFBCapture {
        let result = try RFBReplay.run(self)
        var trimmed = self
        trimmed.stream = stream.prefix(result.lastMessageBoundary)
        return trimmed
    }
}

/// What decoding a capture produced.
public struct ReplayResult: Sendable {
    public var framebuffer: Framebuffer
    public var updates: Int
    public var rectangles: Int
    public var pixels: Int
    /// Why decoding stopped early, if it did (nil: the stream decoded to its end).
    public var error: RFBError?
    /// Bytes of the stream consumed before it ended or failed.
    public var bytesFed: Int
    /// Offset just past the last complete message (see `RFBConnection.lastMessageBoundary`).
    public var lastMessageBoundary: Int
    /// The most memory the engine's buffers held (see `RFBConnection.peakBufferBytes`).
    public var peakBufferBytes: Int
}

/// Feeds a capture through the engine with no network: the decode path exactly as a live
/// session runs it, for benchmarks, differential tests and fuzzing.
public enum RFBReplay {
    /// Decodes the capture in chunks of `chunkSize` bytes (a socket delivers similar pieces).
    public static func run(_ capture: RFBCapture, chunkSize: Int = 65536,
                           jpegDecoder: (any JPEGDecoding)? = makeDefaultJPEGDecoder()) throws -> ReplayResult {
        var configuration = RFBConnection.Configuration()
        configuration.pixelFormat = try capture.metadata.decodedPixelFormat()
        configuration.encodings = capture.metadata.encodings.map(RFBEncoding.init(rawValue:)).filter(\.isPixelData)
        // Whatever the recorded server chose must be accepted: offer every method.
        configuration.securityPreference = SecurityMethod.allCases.filter { SecurityMethod.implemented.contains($0) }
        var connection = RFBConnection(configuration: configuration, jpegDecoder: jpegDecoder)
        var error: RFBError?
        var fed = 0
        let stream = capture.stream
        func handle(_ actions: [RFBConnection.Action]) {
            var queue = actions[...]
            while let action = queue.popFirst() {
                switch action {
                case .requestCredentials:
                    // The recorded server already accepted the real answer; any will do.
                    queue += connection.provideCredentials(VNCCredentials(username: "replay", password: "replay"))
                case .startTLS:
                    queue += connection.tlsEstablished()
                case .close(let e):
                    error = e
                default:
                    break
                }
            }
        }
        let step = max(1, chunkSize)
        stream.withUnsafeBytes { raw in
            while fed < raw.count && !connection.isClosed {
                let n = min(step, raw.count - fed)
                handle(connection.receive(UnsafeRawBufferPointer(rebasing: raw[fed..<fed + n])))
                fed += n
            }
        }
        if error == nil && !connection.isClosed {
            // End of capture: a stream cut inside an update is worth knowing about.
            let actions = connection.connectionClosed()
            for case .close(let e) in actions where e != .connectionClosed("by the server") { error = e }
        }
        return ReplayResult(framebuffer: connection.framebuffer, updates: connection.updatesReceived,
                            rectangles: connection.rectanglesDecoded, pixels: connection.pixelsDecoded, error: error, bytesFed: fed,
                            lastMessageBoundary: connection.lastMessageBoundary, peakBufferBytes: connection.peakBufferBytes)
    }
}
