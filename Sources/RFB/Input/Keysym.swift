/// X11 keysyms: what RFB KeyEvents carry.
///
/// Text maps character by character: Latin-1 to itself, other characters to their legacy
/// keysym where X11 defines one (servers know those best), and everything else to the Unicode
/// range 0x01000000 + code point. Key names follow X11 ("Return", "Page_Up", "F12") with the
/// short aliases people type ("ctrl", "alt", "enter", "pgdn").
public enum Keysym {
    public static let returnKey: UInt32 = 0xFF0D
    public static let tab: UInt32 = 0xFF09
    public static let backSpace: UInt32 = 0xFF08
    public static let escape: UInt32 = 0xFF1B
    public static let delete: UInt32 = 0xFFFF
    public static let shiftLeft: UInt32 = 0xFFE1

    private static let tables: (names: [String: UInt32], lowercased: [String: UInt32], unicode: [UInt32: UInt32]) = {
        var names: [String: UInt32] = [:], lowercased: [String: UInt32] = [:], unicode: [UInt32: UInt32] = [:]
        for line in KeysymTable.names.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let value = UInt32(parts[1], radix: 16) else { continue }
            names[String(parts[0])] = value
            let lower = parts[0].lowercased()
            if lowercased[lower] == nil { lowercased[lower] = value }     // the first definition wins
        }
        for line in KeysymTable.legacyUnicode.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let code = UInt32(parts[0], radix: 16), let value = UInt32(parts[1], radix: 16) else { continue }
            unicode[code] = value
        }
        return (names, lowercased, unicode)
    }()

    /// Short names people type for keys, lowercase.
    static let aliases: [String: UInt32] = [
        "ctrl": 0xFFE3, "control": 0xFFE3, "lctrl": 0xFFE3, "rctrl": 0xFFE4,
        "alt": 0xFFE9, "lalt": 0xFFE9, "ralt": 0xFFEA, "altgr": 0xFE03,
        "shift": 0xFFE1, "lshift": 0xFFE1, "rshift": 0xFFE2,
        "super": 0xFFEB, "win": 0xFFEB, "windows": 0xFFEB, "cmd": 0xFFEB, "command": 0xFFEB, "rsuper": 0xFFEC,
        "meta": 0xFFE7, "rmeta": 0xFFE8,
        "enter": 0xFF0D, "return": 0xFF0D, "esc": 0xFF1B, "escape": 0xFF1B, "tab": 0xFF09, "space": 0x20,
        "bs": 0xFF08, "backspace": 0xFF08, "del": 0xFFFF, "delete": 0xFFFF, "ins": 0xFF63, "insert": 0xFF63,
        "home": 0xFF50, "end": 0xFF57, "pgup": 0xFF55, "pageup": 0xFF55, "prior": 0xFF55,
        "pgdn": 0xFF56, "pagedown": 0xFF56, "next": 0xFF56,
        "up": 0xFF52, "down": 0xFF54, "left": 0xFF51, "right": 0xFF53,
        "menu": 0xFF67, "print": 0xFF61, "printscreen": 0xFF61, "pause": 0xFF13, "capslock": 0xFFE5,
        "numlock": 0xFF7F, "scrolllock": 0xFF14, "plus": 0x2B, "minus": 0x2D,
    ]

    /// The keysym that types `scalar`.
    public static func forCharacter(_ scalar: Unicode.Scalar) -> UInt32 {
        let code = scalar.value
        switch code {
        case 0x0A, 0x0D: return returnKey
        case 0x09: return tab
        case 0x08: return backSpace
        case 0x1B: return escape
        case 0x7F: return delete
        case 0x20...0x7E, 0xA0...0xFF: return code
        default: return tables.unicode[code] ?? (0x0100_0000 | code)
        }
    }

    /// The keysyms that type `text`, one per Unicode scalar ("\r\n" is one Return).
    public static func forText(_ text: String) -> [UInt32] {
        var out: [UInt32] = []
        var previous: Unicode.Scalar?
        for scalar in text.unicodeScalars {
            defer { previous = scalar }
            if scalar == "\n" && previous == "\r" { continue }
            out.append(forCharacter(scalar))
        }
        return out
    }

    /// A key by name: an X11 keysym name (exact, then ignoring case), an alias such as "ctrl"
    /// or "pgdn", F1–F35, "0x…" for a raw keysym, or a single character.
    public static func named(_ name: String) -> UInt32? {
        if let exact = tables.names[name] { return exact }
        let lower = name.lowercased()
        if let alias = aliases[lower] { return alias }
        if lower.hasPrefix("f"), let n = Int(lower.dropFirst()), (1...35).contains(n) { return 0xFFBE + UInt32(n - 1) }
        if lower.hasPrefix("0x"), let raw = UInt32(lower.dropFirst(2), radix: 16) { return raw }
        if name.unicodeScalars.count == 1, let scalar = name.unicodeScalars.first { return forCharacter(scalar) }
        return tables.lowercased[lower]
    }

    public struct UnknownKey: Error, Equatable, CustomStringConvertible {
        public var name: String
        public var description: String {
            "unknown key '\(name)': use an X11 keysym name (Return, Page_Up, F5), an alias (ctrl, alt, shift, super, enter, esc, del, pgdn) or one character"
        }
    }

    /// Parses a combination such as "ctrl+alt+Delete" or "shift+F10" into the keys to hold, in
    /// pressing order. A literal "+" is written "plus".
    public static func combination(_ text: String) throws(UnknownKey) -> [UInt32] {
        let parts = text.split(separator: "+", omittingEmptySubsequences: false).map(String.init)
        guard !parts.isEmpty, !parts.contains(where: \.isEmpty) else { throw UnknownKey(name: text) }
        var keys: [UInt32] = []
        for part in parts {
            guard let key = named(part) else { throw UnknownKey(name: part) }
            keys.append(key)
        }
        return keys
    }
}
