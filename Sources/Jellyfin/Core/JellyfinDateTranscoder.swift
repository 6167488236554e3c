public import Foundation
public import OpenAPIRuntime

/// Reads every date form Jellyfin servers send and writes the one they write.
///
/// Accepts `YYYY-MM-DDTHH:MM:SS` with no fraction or a fraction of any length (Jellyfin writes 7
/// digits, .NET clients 3, some fields none), then `Z`, `±HH:MM`, `±HHMM` or nothing (read as
/// UTC). Encodes UTC with 7 fraction digits, as the server does. Parsing by hand keeps it free of
/// shared formatters (thread-safe, no locks) and fast on pages of thousands of items.
public struct JellyfinDateTranscoder: DateTranscoder {
    public init() {}

    public func encode(_ date: Date) throws -> String { Self.format(date) }

    public func decode(_ string: String) throws -> Date {
        guard let date = Self.parse(string) else {
            throw JellyfinDateError(text: string)
        }
        return date
    }

    /// Parses one timestamp, or nil when it is not one of the accepted forms.
    public static func parse(_ string: String) -> Date? {
        var text = string
        return text.withUTF8 { parse(utf8: $0) }
    }

    static func parse(utf8 b: UnsafeBufferPointer<UInt8>) -> Date? {
        var i = 0
        func digits(_ count: Int) -> Int? {
            guard i + count <= b.count else { return nil }
            var value = 0
            for k in 0..<count {
                let c = b[i + k]
                guard c >= 0x30, c <= 0x39 else { return nil }
                value = value * 10 + Int(c - 0x30)
            }
            i += count
            return value
        }
        func expect(_ c: UInt8) -> Bool {
            guard i < b.count, b[i] == c else { return false }
            i += 1
            return true
        }
        guard let year = digits(4), expect(0x2D), let month = digits(2), expect(0x2D), let day = digits(2),
              i < b.count, b[i] == 0x54 || b[i] == 0x74 || b[i] == 0x20 else { return nil }
        i += 1
        guard let hour = digits(2), expect(0x3A), let minute = digits(2), expect(0x3A), let second = digits(2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var fraction = 0.0
        if i < b.count, b[i] == 0x2E || b[i] == 0x2C {
            i += 1
            var scale = 0.1
            let start = i
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                if i - start < 9 { fraction += Double(b[i] - 0x30) * scale; scale /= 10 }
                i += 1
            }
            guard i > start else { return nil }
        }
        var offsetSeconds = 0
        if i < b.count {
            switch b[i] {
            case 0x5A, 0x7A:
                i += 1
            case 0x2B, 0x2D:
                let sign = b[i] == 0x2D ? -1 : 1
                i += 1
                guard let oh = digits(2) else { return nil }
                _ = expect(0x3A)
                guard let om = digits(2), oh < 24, om < 60 else { return nil }
                offsetSeconds = sign * (oh * 3600 + om * 60)
            default:
                return nil
            }
        }
        guard i == b.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = Double(days * 86_400 + hour * 3600 + minute * 60 + second - offsetSeconds) + fraction
        return Date(timeIntervalSince1970: seconds)
    }

    /// `2024-11-21T21:04:49.1234567Z`.
    public static func format(_ date: Date) -> String {
        let total = date.timeIntervalSince1970
        var seconds = Int(total.rounded(.down))
        var ticks = Int(((total - Double(seconds)) * 10_000_000).rounded())
        if ticks >= 10_000_000 { seconds += 1; ticks -= 10_000_000 }
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civilFromDays(days)
        func pad(_ value: Int, _ width: Int) -> String {
            let s = String(value)
            return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondOfDay / 3600, 2)):\(pad(secondOfDay / 60 % 60, 2)):\(pad(secondOfDay % 60, 2)).\(pad(ticks, 7))Z"
    }

    // Howard Hinnant's days-from-civil and its inverse (proleptic Gregorian, day 0 = 1970-01-01).
    /// Days since 1970-01-01 of a proleptic Gregorian date.
    public static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civilFromDays(_ days: Int) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

/// A date field that is none of the forms Jellyfin servers write.
public struct JellyfinDateError: Error, CustomStringConvertible, Equatable {
    public var text: String
    public var description: String {
        "the server sent a date Farcast cannot read: \"\(text.prefix(40))\" (expected ISO 8601, e.g. 2024-11-21T21:04:49.0000000Z)"
    }
}
