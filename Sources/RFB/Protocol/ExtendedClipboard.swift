import CZlib
import FarcastSupport

/// The Extended Clipboard pseudo-encoding (0xC0A1E5CE): clipboard messages are Server/Client
/// CutText with a negative length, starting with a U32 of flags — formats in the low 16 bits
/// (bit 0 = UTF-8 text), actions in the top byte (caps, request, peek, notify, provide).
/// Provided data is zlib-compressed, a fresh stream per message: for each format, a U32 size
/// and the data; text is UTF-8 with CRLF line ends and a terminating NUL.
///
/// This client handles text only and fetches the server's text as soon as it is announced, so
/// the latest server clipboard is always at hand.
public struct ExtendedClipboard: Sendable, Equatable {
    public static let text: UInt32 = 1 << 0
    static let formatMask: UInt32 = 0xFFFF
    public static let caps: UInt32 = 1 << 24
    public static let request: UInt32 = 1 << 25
    public static let peek: UInt32 = 1 << 26
    public static let notify: UInt32 = 1 << 27
    public static let provide: UInt32 = 1 << 28

    /// Largest text accepted or sent (bytes, before compression).
    public static let maximumText = 32 << 20

    /// The server's announced actions and formats (from its caps message).
    public private(set) var serverFlags: UInt32 = 0
    /// Text the client offered and has not yet handed over (until the server requests it).
    var pendingText: String?

    public var isActive: Bool { serverFlags & Self.caps != 0 }
    func serverSupports(_ action: UInt32) -> Bool { serverFlags & action != 0 }

    /// What handling a server message produced.
    struct Outcome: Sendable {
        /// Encoded client messages to send back.
        var replies: [[UInt8]] = []
        var text: String?
    }

    /// Builds the client message `flags` + payload as ClientCutText with a negative length.
    static func message(flags: UInt32, payload: [UInt8] = []) -> [UInt8] {
        var w = ByteWriter(capacity: 12 + payload.count)
        w.writeUInt8(6)
        w.writeZeros(3)
        w.writeInteger(-Int32(4 + payload.count))
        w.writeInteger(flags)
        w.writeBytes(payload)
        return w.bytes
    }

    /// The client's caps: text, every action, and the largest text it accepts unasked.
    static func clientCaps() -> [UInt8] {
        var w = ByteWriter()
        w.writeInteger(UInt32(maximumText))
        return message(flags: caps | request | peek | notify | provide | text, payload: w.bytes)
    }

    /// Handles one server message (its payload after the length field).
    mutating func handle(_ body: [UInt8]) throws(RFBError) -> Outcome {
        var reader = ByteReader(body)
        guard let flags = try? reader.readInteger(as: UInt32.self) else {
            throw .protocolViolation("an extended clipboard message without flags")
        }
        var outcome = Outcome()
        if flags & Self.caps != 0 {
            serverFlags = flags
            outcome.replies.append(Self.clientCaps())
            return outcome
        }
        let formats = flags & Self.formatMask
        if flags & Self.request != 0, formats & Self.text != 0 {
            // The server wants our text: provide what we offered (or an empty text).
            outcome.replies.append(try Self.provideMessage(pendingText ?? ""))
            pendingText = nil
        }
        if flags & Self.peek != 0 {
            outcome.replies.append(Self.message(flags: Self.notify | (pendingText == nil ? 0 : Self.text)))
        }
        if flags & Self.notify != 0, formats & Self.text != 0 {
            outcome.replies.append(Self.message(flags: Self.request | Self.text))
        }
        if flags & Self.provide != 0 {
            outcome.text = try Self.readProvidedText(flags: formats, compressed: Array(body.dropFirst(4)))
        }
        return outcome
    }

    /// The messages that hand `text` to the server: a notify when it can ask for it, else the
    /// text itself.
    mutating func offer(_ text: String) throws(RFBError) -> [UInt8] {
        if serverSupports(Self.notify) && serverSupports(Self.request) {
            pendingText = text
            return Self.message(flags: Self.notify | Self.text)
        }
        return try Self.provideMessage(text)
    }

    static func provideMessage(_ text: String) throws(RFBError) -> [UInt8] {
        // CRLF line ends and a NUL terminator, as the extension requires.
        var utf8 = Array(text.replacingCRLF().utf8)
        utf8.append(0)
        guard utf8.count <= maximumText else { throw .unsupported("clipboard text of \(utf8.count) bytes is over the 32 MiB limit") }
        var raw = ByteWriter(capacity: utf8.count + 4)
        raw.writeInteger(UInt32(utf8.count))
        raw.writeBytes(utf8)
        return message(flags: provide | Self.text, payload: try deflateAll(raw.bytes))
    }

    static func readProvidedText(flags: UInt32, compressed: [UInt8]) throws(RFBError) -> String? {
        let data = try inflateAll(compressed, limit: maximumText + 64 * 5)
        var reader = ByteReader(data)
        var text: String?
        // Formats appear in bit order; only text is kept, the others are skipped.
        for bit in 0..<16 where flags & (1 << UInt32(bit)) != 0 {
            guard let size = try? reader.readInteger(as: UInt32.self), let bytes = try? reader.readSlice(Int(size)) else {
                throw .protocolViolation("extended clipboard data ends inside format \(bit)")
            }
            if bit == 0 {
                let content = bytes.last == 0 ? bytes.dropLast() : bytes[...]
                text = String(decoding: content, as: UTF8.self).withLFLineEnds()
            }
        }
        return text
    }

    static func deflateAll(_ input: [UInt8]) throws(RFBError) -> [UInt8] {
        var stream = z_stream()
        guard czlib_deflate_init(&stream, 6) == Z_OK else { throw .unsupported("zlib could not start") }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))) + 16)
        var source = input
        let status = source.withUnsafeMutableBufferPointer { src in
            output.withUnsafeMutableBufferPointer { dst in
                stream.next_in = src.baseAddress
                stream.avail_in = uInt(src.count)
                stream.next_out = dst.baseAddress
                stream.avail_out = uInt(dst.count)
                return deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { throw .unsupported("zlib could not compress the clipboard (status \(status))") }
        return Array(output.prefix(Int(stream.total_out)))
    }

    static func inflateAll(_ input: [UInt8], limit: Int) throws(RFBError) -> [UInt8] {
        let inflater = Inflater(name: "Extended Clipboard")
        var buffer: [UInt8] = []
        let outcome: Result<Int, RFBError> = input.withUnsafeBytes { raw in
            do throws(RFBError) { return .success(try inflater.inflate(raw, growing: &buffer, limit: limit)) } catch { return .failure(error) }
        }
        return Array(buffer.prefix(try outcome.get()))
    }
}

extension String {
    /// Every line end (LF, CR or CRLF) as CRLF. ("\r\n" is one Character in Swift.)
    func replacingCRLF() -> String {
        var out = ""
        out.reserveCapacity(utf8.count)
        for c in self {
            if c == "\n" || c == "\r" || c == "\r\n" { out += "\r\n" } else { out.append(c) }
        }
        return out
    }

    /// CRLF line ends as LF.
    func withLFLineEnds() -> String {
        var out = ""
        out.reserveCapacity(utf8.count)
        for c in self { if c == "\r\n" { out += "\n" } else { out.append(c) } }
        return out
    }
}
