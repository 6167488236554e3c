import Foundation

/// Prints a value as one line of JSON with snake_case keys, sorted for stable output.
func printJSON<T: Encodable>(_ value: T) throws {
    print(try jsonString(value))
}

func jsonString<T: Encodable>(_ value: T, pretty: Bool = false) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = pretty ? [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted] : [.sortedKeys, .withoutEscapingSlashes]
    encoder.keyEncodingStrategy = .convertToSnakeCase
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}
