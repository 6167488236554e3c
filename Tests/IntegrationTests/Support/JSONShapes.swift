import Foundation
import Testing

/// The one JSON shape of a list (docs/cli.md): an object whose `items` array holds the entries.
/// Fails the test — naming what came instead — when the output is an array or lacks `items`.
func jsonItems(_ stdout: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
    let value = try JSONSerialization.jsonObject(with: Data(stdout.utf8))
    guard let object = value as? [String: Any] else {
        Issue.record("a list must be an object with an items array, not: \(stdout.prefix(200))", sourceLocation: sourceLocation)
        return []
    }
    guard let items = object["items"] as? [[String: Any]] else {
        Issue.record("the list object has no items array: \(stdout.prefix(200))", sourceLocation: sourceLocation)
        return []
    }
    return items
}

/// `{"items": [...]}` for Decodable rows.
struct JSONItems<Item: Decodable>: Decodable {
    var items: [Item]
}
