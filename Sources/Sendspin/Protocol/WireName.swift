/// A name the wire spells as a string, with the names this client knows as cases and one
/// catch-all for names it does not know (a peer's unknown name is data, not an error). Equality,
/// hashing, coding and printing go by the wire string, so `.other("sn")` never differs from the
/// case it spells.
public protocol SendspinWireName: RawRepresentable, Hashable, Codable, Sendable, ExpressibleByStringLiteral,
    CustomStringConvertible, CustomDebugStringConvertible where RawValue == String, StringLiteralType == String {
    /// Every string is a name: a known one becomes its case, any other the catch-all.
    init(rawValue: String)
}

extension SendspinWireName {
    public init(stringLiteral value: String) { self.init(rawValue: value) }

    public init(from decoder: any Decoder) throws {
        self.init(rawValue: try decoder.singleValueContainer().decode(String.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.rawValue == rhs.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// The wire string, so logs read as they did when these were strings.
    public var description: String { rawValue }
    public var debugDescription: String { rawValue.debugDescription }
}
