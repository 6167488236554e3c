/// A key as the viewer reports it: a named key (an X11 keysym, the vocabulary every remote
/// protocol we speak can map from) or the character the local layout produced.
public enum ViewerKey: Sendable, Equatable, Hashable {
    case keysym(UInt32)
    case character(Unicode.Scalar)
}

/// Maps SDL key events to `ViewerKey`s. SDL keycodes are Unicode code points for keys that type
/// a character and `1 << 30 | scancode` for the rest; a handful of ASCII control codes (Return,
/// Escape, BackSpace, Tab, Delete) are keys without text. Pure: the window code and the tests
/// share it.
public enum KeyMapping {
    static let scancodeMask: Int32 = 1 << 30

    /// X11 keysyms of the keys that type no character, by SDL scancode (USB HID usage).
    static let namedByScancode: [Int32: UInt32] = [
        57: 0xFFE5,                                                         // Caps_Lock
        58: 0xFFBE, 59: 0xFFBF, 60: 0xFFC0, 61: 0xFFC1, 62: 0xFFC2, 63: 0xFFC3,   // F1–F6
        64: 0xFFC4, 65: 0xFFC5, 66: 0xFFC6, 67: 0xFFC7, 68: 0xFFC8, 69: 0xFFC9,   // F7–F12
        104: 0xFFCA, 105: 0xFFCB, 106: 0xFFCC, 107: 0xFFCD, 108: 0xFFCE, 109: 0xFFCF, // F13–F18
        110: 0xFFD0, 111: 0xFFD1, 112: 0xFFD2, 113: 0xFFD3, 114: 0xFFD4, 115: 0xFFD5, // F19–F24
        70: 0xFF61, 71: 0xFF14, 72: 0xFF13,                                 // Print, Scroll_Lock, Pause
        73: 0xFF63, 74: 0xFF50, 75: 0xFF55, 77: 0xFF57, 78: 0xFF56,          // Insert, Home, Prior, End, Next
        79: 0xFF53, 80: 0xFF51, 81: 0xFF54, 82: 0xFF52,                      // Right, Left, Down, Up
        83: 0xFF7F,                                                         // Num_Lock
        84: 0xFFAF, 85: 0xFFAA, 86: 0xFFAD, 87: 0xFFAB, 88: 0xFF8D,          // KP_Divide, KP_Multiply, KP_Subtract, KP_Add, KP_Enter
        103: 0xFFBD, 101: 0xFF67, 117: 0xFF6A, 119: 0xFF60, 122: 0xFF65,     // KP_Equal, Menu, Help, Select, Undo
        224: 0xFFE3, 225: 0xFFE1, 226: 0xFFE9, 227: 0xFFEB,                  // Control_L, Shift_L, Alt_L, Super_L
        228: 0xFFE4, 229: 0xFFE2, 230: 0xFFEA, 231: 0xFFEC,                  // Control_R, Shift_R, Alt_R, Super_R
        257: 0xFF7E,                                                        // Mode_switch
    ]

    /// Keypad digits and the decimal point: with Num Lock the digit keysyms, else navigation.
    static let keypad: [Int32: (numLock: UInt32, navigation: UInt32)] = [
        89: (0xFFB1, 0xFF9C), 90: (0xFFB2, 0xFF99), 91: (0xFFB3, 0xFF9B), 92: (0xFFB4, 0xFF96),
        93: (0xFFB5, 0xFF9D), 94: (0xFFB6, 0xFF98), 95: (0xFFB7, 0xFF95), 96: (0xFFB8, 0xFF97),
        97: (0xFFB9, 0xFF9A), 98: (0xFFB0, 0xFF9E), 99: (0xFFAE, 0xFF9F),
    ]

    /// SDL's keycode for AltGr on X11 layouts that have one (XK_ISO_Level3_Shift arrives as
    /// SDLK_MODE); sent as ISO_Level3_Shift so the server's layout picks the third level.
    static let modeKeycode: Int32 = scancodeMask | 257

    /// The named key for an SDL key event, or nil when the key types a character (then its
    /// text — or, with Ctrl or Alt held, its keycode — says which).
    public static func namedKey(keycode: Int32, scancode: Int32, numLock: Bool) -> UInt32? {
        switch keycode {
        case 8: return 0xFF08          // BackSpace
        case 9: return 0xFF09          // Tab
        case 13: return 0xFF0D         // Return
        case 27: return 0xFF1B         // Escape
        case 127: return 0xFFFF        // Delete
        default: break
        }
        if let pad = keypad[scancode] { return numLock ? pad.numLock : pad.navigation }
        if keycode == modeKeycode && scancode == 230 { return 0xFE03 }
        if keycode & scancodeMask != 0 {
            return namedByScancode[keycode & ~scancodeMask] ?? namedByScancode[scancode]
        }
        // A layout may put a non-character key where a character key usually is, and vice versa:
        // what the keycode says wins; the scancode table only covers keys without characters.
        if keycode == 0 { return namedByScancode[scancode] }
        return nil
    }

    /// The character a key types when Ctrl or Alt (not AltGr) is held and no text arrives:
    /// SDL's keycode is the unshifted character of the local layout.
    public static func character(keycode: Int32) -> Unicode.Scalar? {
        guard keycode > 31, keycode & scancodeMask == 0, keycode != 127 else { return nil }
        return Unicode.Scalar(UInt32(keycode))
    }

    /// True for modifier keysyms (Shift, Control, Alt, Super, Meta, AltGr, Mode_switch).
    public static func isModifier(_ keysym: UInt32) -> Bool {
        (0xFFE1...0xFFEE).contains(keysym) || keysym == 0xFE03 || keysym == 0xFF7E
    }
}
