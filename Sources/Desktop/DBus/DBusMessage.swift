/// One D-Bus message: its kind, the header fields that address it, and its body.
public struct DBusMessage: Equatable, Sendable {
    public enum Kind: UInt8, Sendable {
        case methodCall = 1
        case methodReturn = 2
        case error = 3
        case signal = 4
    }

    public var kind: Kind
    /// 0x1: no reply expected.
    public var flags: UInt8 = 0
    public var serial: UInt32 = 0
    public var path: String?
    public var interface: String?
    public var member: String?
    public var errorName: String?
    public var replySerial: UInt32?
    public var destination: String?
    public var sender: String?
    public var body: [DBusValue] = []

    public init(kind: Kind, path: String? = nil, interface: String? = nil, member: String? = nil, errorName: String? = nil,
                replySerial: UInt32? = nil, destination: String? = nil, body: [DBusValue] = []) {
        self.kind = kind
        self.path = path
        self.interface = interface
        self.member = member
        self.errorName = errorName
        self.replySerial = replySerial
        self.destination = destination
        self.body = body
    }

    public var expectsReply: Bool { kind == .methodCall && flags & 0x1 == 0 }

    /// Largest message accepted (the specification allows 128 MiB; a desktop service's are small).
    static let maximumSize = 4 << 20

    /// The message in wire form (little-endian).
    public func encoded() -> [UInt8] {
        var bodyWriter = DBusWriter()
        for value in body { bodyWriter.write(value) }
        var fields: [DBusValue] = []
        func field(_ code: UInt8, _ value: DBusValue?) {
            if let value { fields.append(.structure([.byte(code), .variant(value)])) }
        }
        field(1, path.map(DBusValue.objectPath))
        field(2, interface.map(DBusValue.string))
        field(3, member.map(DBusValue.string))
        field(4, errorName.map(DBusValue.string))
        field(5, replySerial.map(DBusValue.uint32))
        field(6, destination.map(DBusValue.string))
        field(7, sender.map(DBusValue.string))
        if !body.isEmpty { field(8, .signature(body.map(\.type.description).joined())) }
        var header = DBusWriter()
        for byte in [UInt8(ascii: "l"), kind.rawValue, flags, 1] { header.write(.byte(byte)) }
        header.write(.uint32(UInt32(bodyWriter.bytes.count)))
        header.write(.uint32(serial))
        header.write(.array(element: .structure([.byte, .variant]), fields))
        header.pad(to: 8)
        return header.bytes + bodyWriter.bytes
    }

    /// The whole message's length from its first 16 bytes, or nil when fewer have come.
    static func length(of prefix: [UInt8]) throws(DBusError) -> Int? {
        guard prefix.count >= 16 else { return nil }
        guard prefix[0] == UInt8(ascii: "l") || prefix[0] == UInt8(ascii: "B") else { throw .malformed("endianness mark 0x\(String(prefix[0], radix: 16))") }
        guard prefix[3] == 1 else { throw .malformed("protocol version \(prefix[3])") }
        var reader = DBusReader(prefix, position: 4, bigEndian: prefix[0] == UInt8(ascii: "B"))
        let bodyLength = Int(try reader.read(.uint32).uint32Value ?? 0)
        _ = try reader.read(.uint32)
        let fieldsLength = Int(try reader.read(.uint32).uint32Value ?? 0)
        let headerEnd = (16 + fieldsLength + 7) / 8 * 8
        let total = headerEnd + bodyLength
        guard fieldsLength <= maximumSize, bodyLength <= maximumSize, total <= maximumSize else {
            throw .malformed("a message of \(total) bytes (at most \(maximumSize) accepted)")
        }
        return total
    }

    /// Reads one whole message.
    public static func decode(_ bytes: [UInt8]) throws(DBusError) -> DBusMessage {
        guard let total = try length(of: bytes), total == bytes.count else { throw .malformed("\(bytes.count) bytes are not one whole message") }
        let bigEndian = bytes[0] == UInt8(ascii: "B")
        guard let kind = Kind(rawValue: bytes[1]) else { throw .malformed("message type \(bytes[1])") }
        var reader = DBusReader(bytes, position: 4, bigEndian: bigEndian)
        let bodyLength = Int(try reader.read(.uint32).uint32Value ?? 0)
        var message = DBusMessage(kind: kind)
        message.flags = bytes[2]
        message.serial = try reader.read(.uint32).uint32Value ?? 0
        guard case .array(_, let fields) = try reader.read(.array(.structure([.byte, .variant]))) else { throw .malformed("no header fields") }
        var signature = ""
        for field in fields {
            guard case .structure(let parts) = field, parts.count == 2, case .byte(let code) = parts[0], case .variant(let value) = parts[1] else { continue }
            switch code {
            case 1: message.path = value.stringValue
            case 2: message.interface = value.stringValue
            case 3: message.member = value.stringValue
            case 4: message.errorName = value.stringValue
            case 5: message.replySerial = value.uint32Value
            case 6: message.destination = value.stringValue
            case 7: message.sender = value.stringValue
            case 8: signature = value.stringValue ?? ""
            case 9: throw .malformed("a message carrying file descriptors (this client takes none)")
            default: break                                      // unknown fields are ignored
            }
        }
        try reader.align(8)
        guard bytes.count - reader.position == bodyLength else { throw .malformed("the body is not as long as the header says") }
        var body = DBusReader(bytes, position: reader.position, base: reader.position, bigEndian: bigEndian)
        for type in try DBusType.parse(signature) { message.body.append(try body.read(type)) }
        guard body.atEnd else { throw .malformed("bytes after the body's values") }
        return message
    }
}
