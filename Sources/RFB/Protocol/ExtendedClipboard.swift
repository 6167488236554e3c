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
    /// The largest text the server accepts (its caps' size for text; 0 when it gave none).
    public private(set) var serverTextLimit = 0
    /// Text the client offered, handed over each time the server requests it, until the
    /// server announces a clipboard of its own or the client offers something else.
    var offeredText: String?

    public var isActive: Bool { serverFlags & Self.caps != 0 }
    func serverSupports(_ action: UInt32) -> Bool { serverFlags & action != 0 }

    /// What handling a server message produced.
    struct Outcome: Sendable {
        /// Encoded client messages to send back.
        var replies: [[UInt8]] = []
        var text: String?
        /// The server fetched the offered text.
        var fetched = false
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
            // One size per announced format, in bit order; text (bit 0) comes first.
            if flags & Self.text != 0, let limit = try? reader.readInteger(as: UInt32.self) { serverTextLimit = Int(limit) }
            outcome.replies.append(Self.clientCaps())
            return outcome
        }
        let formats = flags & Self.formatMask
        if flags & Self.request != 0, formats & Self.text != 0 {
            // The server wants our text: provide what we offered (or an empty text).
            outcome.replies.append(try Self.provideMessage(offeredText ?? ""))
            outcome.fetched = offeredText != nil
        }
        if flags & Self.peek != 0 {
            outcome.replies.append(Self.message(flags: Self.notify | (offeredText == nil ? 0 : Self.text)))
        }
        if flags & Self.notify != 0 {
            if formats & Self.text != 0 {
                // The server has new text (someone copied there): ours is no longer current.
                offeredText = nil
                outcome.replies.append(Self.message(flags: Self.request | Self.text))
            }
        }
        if flags & Self.provide != 0 {
            outcome.text = try Self.readProvidedText(flags: formats, compressed: Array(body.dropFirst(4)))
        }
        return outcome
    }

    /// True when the server fetches offered text lazily (notify, then request): the text is
    /// only transferred when someone pastes, so the client must stay connected until then.
    var deliversLazily: Bool { serverSupports(Self.notify) && serverSupports(Self.request) }

    /// The message that hands `text` to the server: a notify when it can ask for it, else the
    /// text itself.
    mutating func offer(_ text: String) throws(RFBError) -> [UInt8] {
        let size = text.replacingCRLF().utf8.count + 1
        if serverTextLimit > 0 && size > serverTextLimit {
            throw .unsupported("clipboard text of \(size) bytes is over the server's limit of \(serverTextLimit) bytes")
        }
        if deliversLazily {
            offeredText = text
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

    /// Compresses `input` as one zlib stream ended by a sync flush, not a final block, as
    /// TigerVNC writes it: libvncserver's reader rejects a stream that reaches its end.
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
                return deflate(&stream, Z_SYNC_FLUSH)
            }
        }
        guard status == Z_OK, stream.avail_in == 0 else { throw .unsupported("zlib could not compress the clipboard (status \(status))") }
        return Array(output.prefix(Int(stream.total_out)))
    }

    static func inflateAll(_ input: [UInt8], limit: Int, name: String = "Extended Clipboard") throws(RFBError) -> [UInt8] {
        let inflater = Inflater(name: name)
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
