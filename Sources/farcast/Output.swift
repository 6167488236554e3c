import Foundation

/// Prints a value as one line of JSON with snake_case keys, sorted for stable output.
func printJSON<T: Encodable>(_ value: T) throws {
    print(try jsonString(value))
}

/// A report is a typed `Encodable` (docs/cli.md), never a dictionary: this overload turns such a
/// call into a compile error.
@available(*, unavailable, message: "print a typed Encodable report, not a dictionary")
func printJSON<K, V>(_ value: [K: V]) throws {}


/// Prints a list the one way every command does (docs/cli.md): an object whose `items` array
/// holds the entries, so a listing can gain fields (a total, a cursor) without changing shape.
func printJSONList<T: Encodable>(_ items: [T]) throws {
    try printJSON(JSONList(items: items))
}

struct JSONList<Item: Encodable>: Encodable {
    var items: [Item]
}

func jsonString<T: Encodable>(_ value: T, pretty: Bool = false) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
    encoder.keyEncodingStrategy = .convertToSnakeCase
    // Times as ISO 8601 in UTC with milliseconds (docs/cli.md).
    encoder.dateEncodingStrategy = .custom { date, encoder in
        var container = encoder.singleValueContainer()
        try container.encode(date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted)))
    }
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}

/// A JSON value for reports whose fields vary by command.
enum JSONValue: Encodable, Sendable, ExpressibleByStringLiteral, ExpressibleByBooleanLiteral {
    case string(String)
    case number(Double)
    case bool(Bool)
    case array([JSONValue])
    case object([String: JSONValue])

    init(stringLiteral value: String) { self = .string(value) }
    init(booleanLiteral value: Bool) { self = .bool(value) }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let s): try container.encode(s)
        case .number(let n):
            if n == n.rounded(), abs(n) < 1e15 { try container.encode(Int64(n)) } else { try container.encode(n) }
        case .bool(let b): try container.encode(b)
        case .array(let a): try container.encode(a)
        case .object(let o): try container.encode(o)
        }
    }
}
