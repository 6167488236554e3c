/// D-Bus values and their wire form (the specification's marshalling, little-endian), as far as
/// a desktop service needs: every basic type but Unix file descriptors, arrays, dictionaries,
/// structures and variants. Pure: unit-tested byte for byte; a hostile message is a
/// `DBusError.malformed`, never a crash or an unbounded allocation.

/// A D-Bus type, parsed from a signature.
public indirect enum DBusType: Equatable, Sendable, CustomStringConvertible {
    case byte, boolean, int16, uint16, int32, uint32, int64, uint64, double, string, objectPath, signature
    case array(DBusType)
    case dictionary(key: DBusType, value: DBusType)
    case structure([DBusType])
    case variant

    /// The type's signature.
    public var description: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .array(let element): "a\(element)"
        case .dictionary(let key, let value): "a{\(key)\(value)}"
        case .structure(let fields): "(\(fields.map(\.description).joined()))"
        case .variant: "v"
        }
    }

    /// Bytes a value of the type is aligned to.
    var alignment: Int {
        switch self {
        case .byte, .signature, .variant: 1
        case .int16, .uint16: 2
        case .boolean, .int32, .uint32, .string, .objectPath, .array, .dictionary: 4
        case .int64, .uint64, .double, .structure: 8
        }
    }

    /// The types a signature lists, in order (a message body's, or one value's).
    public static func parse(_ signature: String) throws(DBusError) -> [DBusType] {
        var characters = Array(signature.utf8)[...]
        guard characters.count <= 255 else { throw .malformed("a signature of \(characters.count) characters (255 at most)") }
        var types: [DBusType] = []
        while !characters.isEmpty { types.append(try parseOne(&characters, depth: 0)) }
        return types
    }

    private static func parseOne(_ s: inout ArraySlice<UInt8>, depth: Int) throws(DBusError) -> DBusType {
        guard depth < 32 else { throw .malformed("a signature nested deeper than 32") }
        guard let c = s.popFirst() else { throw .malformed("a signature that ends inside a type") }
        switch c {
        case UInt8(ascii: "y"): return .byte
        case UInt8(ascii: "b"): return .boolean
        case UInt8(ascii: "n"): return .int16
        case UInt8(ascii: "q"): return .uint16
        case UInt8(ascii: "i"): return .int32
        case UInt8(ascii: "u"): return .uint32
        case UInt8(ascii: "x"): return .int64
        case UInt8(ascii: "t"): return .uint64
        case UInt8(ascii: "d"): return .double
        case UInt8(ascii: "s"): return .string
        case UInt8(ascii: "o"): return .objectPath
        case UInt8(ascii: "g"): return .signature
        case UInt8(ascii: "v"): return .variant
        case UInt8(ascii: "a"):
            if s.first == UInt8(ascii: "{") {
                s.removeFirst()
                let key = try parseOne(&s, depth: depth + 1)
                guard !key.isContainer else {
                    throw .malformed("a dictionary key that is not a basic type")
                }
                let value = try parseOne(&s, depth: depth + 1)
                guard s.popFirst() == UInt8(ascii: "}") else { throw .malformed("a dictionary entry with other than two types") }
                return .dictionary(key: key, value: value)
            }
            return .array(try parseOne(&s, depth: depth + 1))
        case UInt8(ascii: "("):
            var fields: [DBusType] = []
            while s.first != UInt8(ascii: ")") {
                guard !s.isEmpty else { throw .malformed("a structure that is not closed") }
                fields.append(try parseOne(&s, depth: depth + 1))
            }
            s.removeFirst()
            guard !fields.isEmpty else { throw .malformed("an empty structure") }
            return .structure(fields)
        default:
            throw .malformed("type code '\(Character(Unicode.Scalar(c)))' is not one this client reads")
        }
    }

    private var isContainer: Bool {
        switch self {
        case .array, .dictionary, .structure, .variant: true
        default: false
        }
    }
}

/// A D-Bus value.
public indirect enum DBusValue: Equatable, Sendable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(String)
    case signature(String)
    /// Elements all of `element`'s type (kept for an empty array's signature).
    case array(element: DBusType, [DBusValue])
    case dictionary(key: DBusType, value: DBusType, [DictionaryEntry])
    case structure([DBusValue])
    case variant(DBusValue)

    public struct DictionaryEntry: Equatable, Sendable {
        public var key: DBusValue
        public var value: DBusValue
        public init(_ key: DBusValue, _ value: DBusValue) {
            self.key = key
            self.value = value
        }
    }

    public var type: DBusType {
        switch self {
        case .byte: .byte
        case .boolean: .boolean
        case .int16: .int16
        case .uint16: .uint16
        case .int32: .int32
        case .uint32: .uint32
        case .int64: .int64
        case .uint64: .uint64
        case .double: .double
        case .string: .string
        case .objectPath: .objectPath
        case .signature: .signature
        case .array(let element, _): .array(element)
        case .dictionary(let key, let value, _): .dictionary(key: key, value: value)
        case .structure(let fields): .structure(fields.map(\.type))
        case .variant: .variant
        }
    }

    /// `a{sv}`, the shape of property maps and metadata.
    public static func properties(_ entries: [(String, DBusValue)]) -> DBusValue {
        .dictionary(key: .string, value: .variant, entries.map { DictionaryEntry(.string($0.0), .variant($0.1)) })
    }

    /// `as`.
    public static func strings(_ values: [String]) -> DBusValue { .array(element: .string, values.map(DBusValue.string)) }

    public var stringValue: String? {
        switch self {
        case .string(let s), .objectPath(let s), .signature(let s): s
        case .variant(let inner): inner.stringValue
        default: nil
        }
    }

    public var doubleValue: Double? {
        switch self {
        case .double(let d): d
        case .int32(let i): Double(i)
        case .int64(let i): Double(i)
        case .uint32(let u): Double(u)
        case .variant(let inner): inner.doubleValue
        default: nil
        }
    }

    public var int64Value: Int64? {
        switch self {
        case .int64(let i): i
        case .int32(let i): Int64(i)
        case .uint32(let u): Int64(u)
        case .variant(let inner): inner.int64Value
        default: nil
        }
    }

    public var boolValue: Bool? {
        switch self {
        case .boolean(let b): b
        case .variant(let inner): inner.boolValue
        default: nil
        }
    }

    public var uint32Value: UInt32? {
        switch self {
        case .uint32(let u): u
        case .variant(let inner): inner.uint32Value
        default: nil
        }
    }
}

public enum DBusError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes are not a D-Bus message this client can read.
    case malformed(String)
    /// No session bus: `DBUS_SESSION_BUS_ADDRESS` unset or not a Unix socket this client reaches.
    case noBus(String)
    /// The bus refused or failed a step (authentication, a call answered with an error).
    case failed(String)

    public var description: String {
        switch self {
        case .malformed(let detail): "a malformed D-Bus message: \(detail)"
        case .noBus(let detail): "no D-Bus session bus: \(detail)"
        case .failed(let detail): "D-Bus: \(detail)"
        }
    }
}

/// Appends values in wire form, aligned relative to the start of the message (`base`: the
/// position the bytes start at in it).
struct DBusWriter {
    private(set) var bytes: [UInt8] = []
    let base: Int

    init(base: Int = 0) { self.base = base }

    mutating func pad(to alignment: Int) {
        while (base + bytes.count) % alignment != 0 { bytes.append(0) }
    }

    private mutating func integer<T: FixedWidthInteger>(_ value: T) {
        pad(to: MemoryLayout<T>.size)
        withUnsafeBytes(of: value.littleEndian) { bytes += $0 }
    }

    mutating func write(_ value: DBusValue) {
        switch value {
        case .byte(let v): bytes.append(v)
        case .boolean(let v): integer(UInt32(v ? 1 : 0))
        case .int16(let v): integer(v)
        case .uint16(let v): integer(v)
        case .int32(let v): integer(v)
        case .uint32(let v): integer(v)
        case .int64(let v): integer(v)
        case .uint64(let v): integer(v)
        case .double(let v): integer(v.bitPattern)
        case .string(let s), .objectPath(let s):
            let utf8 = Array(s.utf8)
            integer(UInt32(utf8.count))
            bytes += utf8
            bytes.append(0)
        case .signature(let s):
            let utf8 = Array(s.utf8)
            bytes.append(UInt8(truncatingIfNeeded: utf8.count))
            bytes += utf8
            bytes.append(0)
        case .array(let element, let values):
            writeArray(alignment: element.alignment, count: values.count) { writer, i in writer.write(values[i]) }
        case .dictionary(_, _, let entries):
            writeArray(alignment: 8, count: entries.count) { writer, i in
                writer.pad(to: 8)
                writer.write(entries[i].key)
                writer.write(entries[i].value)
            }
        case .structure(let fields):
            pad(to: 8)
            for field in fields { write(field) }
        case .variant(let inner):
            write(.signature(inner.type.description))
            write(inner)
        }
    }

    /// The length, padding to the elements' alignment (not counted), then the elements.
    private mutating func writeArray(alignment: Int, count: Int, element: (inout DBusWriter, Int) -> Void) {
        integer(UInt32(0))
        let lengthAt = bytes.count - 4
        pad(to: alignment)
        let start = bytes.count
        for i in 0..<count { element(&self, i) }
        let length = UInt32(bytes.count - start)
        withUnsafeBytes(of: length.littleEndian) { bytes.replaceSubrange(lengthAt..<lengthAt + 4, with: $0) }
    }
}

/// Reads values of known types, aligned relative to the message's start.
struct DBusReader {
    let bytes: [UInt8]
    private(set) var position: Int
    let base: Int
    let bigEndian: Bool

    /// A message's array may hold at most 64 MiB (the specification's limit; ours is the message's).
    static let maximumArray = 1 << 26

    init(_ bytes: [UInt8], position: Int = 0, base: Int = 0, bigEndian: Bool = false) {
        self.bytes = bytes
        self.position = position
        self.base = base
        self.bigEndian = bigEndian
    }

    var atEnd: Bool { position >= bytes.count }

    mutating func align(_ alignment: Int) throws(DBusError) {
        let aligned = (position - base + alignment - 1) / alignment * alignment + base
        guard aligned <= bytes.count else { throw .malformed("the message ends inside padding") }
        guard bytes[position..<aligned].allSatisfy({ $0 == 0 }) else { throw .malformed("padding that is not zero") }
        position = aligned
    }

    private mutating func integer<T: FixedWidthInteger>(_: T.Type) throws(DBusError) -> T {
        try align(MemoryLayout<T>.size)
        let size = MemoryLayout<T>.size
        guard position + size <= bytes.count else { throw .malformed("the message ends inside a number") }
        var value = T.zero
        for i in 0..<size { value |= T(truncatingIfNeeded: bytes[position + i]) << (8 * i) }
        position += size
        return bigEndian ? value.byteSwapped : value
    }

    private mutating func text(length: Int) throws(DBusError) -> String {
        guard length >= 0, position + length < bytes.count else { throw .malformed("the message ends inside a string") }
        let utf8 = bytes[position..<position + length]
        guard bytes[position + length] == 0, !utf8.contains(0), let string = String(validating: utf8, as: UTF8.self) else {
            throw .malformed("a string that is not valid UTF-8 ending in a nul")
        }
        position += length + 1
        return string
    }

    mutating func read(_ type: DBusType, depth: Int = 0) throws(DBusError) -> DBusValue {
        guard depth < 64 else { throw .malformed("values nested deeper than 64") }
        switch type {
        case .byte:
            guard position < bytes.count else { throw .malformed("the message ends inside a byte") }
            defer { position += 1 }
            return .byte(bytes[position])
        case .boolean:
            let v = try integer(UInt32.self)
            guard v <= 1 else { throw .malformed("a boolean of \(v)") }
            return .boolean(v == 1)
        case .int16: return .int16(try integer(Int16.self))
        case .uint16: return .uint16(try integer(UInt16.self))
        case .int32: return .int32(try integer(Int32.self))
        case .uint32: return .uint32(try integer(UInt32.self))
        case .int64: return .int64(try integer(Int64.self))
        case .uint64: return .uint64(try integer(UInt64.self))
        case .double: return .double(Double(bitPattern: try integer(UInt64.self)))
        case .string: return .string(try text(length: Int(try integer(UInt32.self))))
        case .objectPath: return .objectPath(try text(length: Int(try integer(UInt32.self))))
        case .signature:
            guard position < bytes.count else { throw .malformed("the message ends inside a signature") }
            let length = Int(bytes[position])
            position += 1
            return .signature(try text(length: length))
        case .array(let element):
            return .array(element: element, try readArray(alignment: element.alignment) { r throws(DBusError) in try r.read(element, depth: depth + 1) })
        case .dictionary(let key, let value):
            let entries = try readArray(alignment: 8) { r throws(DBusError) in
                try r.align(8)
                return DBusValue.DictionaryEntry(try r.read(key, depth: depth + 1), try r.read(value, depth: depth + 1))
            }
            return .dictionary(key: key, value: value, entries)
        case .structure(let fields):
            try align(8)
            var values: [DBusValue] = []
            for field in fields { values.append(try read(field, depth: depth + 1)) }
            return .structure(values)
        case .variant:
            guard case .signature(let signature) = try read(.signature) else { throw .malformed("a variant without a signature") }
            let types = try DBusType.parse(signature)
            guard types.count == 1 else { throw .malformed("a variant's signature '\(signature)' is not one type") }
            return .variant(try read(types[0], depth: depth + 1))
        }
    }

    private mutating func readArray<T>(alignment: Int, _ element: (inout DBusReader) throws(DBusError) -> T) throws(DBusError) -> [T] {
        let length = Int(try integer(UInt32.self))
        guard length <= Self.maximumArray else { throw .malformed("an array of \(length) bytes") }
        try align(alignment)
        let end = position + length
        guard end <= bytes.count else { throw .malformed("an array longer than the message") }
        var values: [T] = []
        while position < end { values.append(try element(&self)) }
        guard position == end else { throw .malformed("an array whose elements overrun its length") }
        return values
    }
}
