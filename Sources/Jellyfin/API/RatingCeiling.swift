public import Foundation

/// A parental ceiling: items rated above it are not shown or played. Ratings are compared by
/// the youngest age they admit: the US film and TV ratings by name (`G`, `PG`, `PG-13`, `R`,
/// `NC-17`, `TV-Y` … `TV-MA`), others by the age they carry (`FSK-12`, `DE-16`, `15`, `12+`).
/// An unrated item, or a rating nothing here names, is shown.
///
/// This is the client's own filter, for a shared screen; a server's parental control (the
/// user's "maximum allowed parental rating") is what an administrator enforces.
public struct RatingCeiling: Sendable, Hashable, CustomStringConvertible {
    /// As the user gave it.
    public let text: String
    /// The oldest age an allowed item may ask for.
    public let age: Int

    /// A rating (`PG-13`) or an age (`12`); nil when it is neither.
    public init?(_ text: String) {
        let text = text.trimmingCharacters(in: .whitespaces)
        guard let age = Self.age(of: text) else { return nil }
        (self.text, self.age) = (text, age)
    }

    public var description: String { text }

    /// What `maxOfficialRating` tells the server: the US rating for this age.
    public var serverRating: String {
        if Self.ages[text.uppercased()] != nil { return text.uppercased() }
        return Self.usByAge.last { $0.age <= age }?.rating ?? "G"
    }

    /// Whether an item rated `rating` may be shown.
    public func allows(_ rating: String?) -> Bool {
        guard let rating, let needed = Self.age(of: rating) else { return true }
        return needed <= age
    }

    /// The age a rating admits from; nil for a rating nothing here names.
    public static func age(of rating: String) -> Int? {
        let text = rating.trimmingCharacters(in: .whitespaces).uppercased()
        if let age = ages[text] { return age }
        // "FSK-12", "DE-16", "UK:15", "12+", "16": the number is the age.
        let digits = text.reversed().drop { !$0.isNumber }.prefix { $0.isNumber }
        guard !digits.isEmpty, digits.count <= 2, let age = Int(String(digits.reversed())), age <= 21 else { return nil }
        let rest = text.filter { !$0.isNumber }
        return rest.count <= 6 ? age : nil
    }

    private static let usByAge: [(rating: String, age: Int)] = [("G", 0), ("TV-Y7", 7), ("PG", 10), ("PG-13", 13), ("TV-14", 14), ("R", 17), ("NC-17", 18)]

    private static let ages: [String: Int] = [
        "G": 0, "TV-Y": 0, "TV-G": 0, "E": 0, "APPROVED": 0, "TV-Y7": 7, "TV-Y7-FV": 7, "PG": 10, "TV-PG": 10, "PG-13": 13,
        "TV-14": 14, "R": 17, "TV-MA": 17, "NC-17": 18, "X": 18, "XXX": 18, "AO": 18, "NR": 0, "UNRATED": 0,
    ]
}
