/// XT (set 1) scancodes for QEMU extended key events, by keysym, in the RFB encoding: one-byte
/// codes as they are, 0xE0-prefixed ones as 0x80 | second byte (Right: E0 4D → 0xCD), Print as
/// 0x54 and Pause as 0xC6. Only keys whose position does not depend on the keyboard layout are
/// listed; anything else travels as a plain keysym.
public enum XTScancode {
    static let table: [UInt32: UInt32] = [
        0xFF1B: 0x01,                                   // Escape
        0xFF08: 0x0E, 0xFF09: 0x0F, 0xFF0D: 0x1C,       // BackSpace, Tab, Return
        0xFFE3: 0x1D, 0xFFE4: 0x9D,                   // Control_L, Control_R
        0xFFE1: 0x2A, 0xFFE2: 0x36,                     // Shift_L, Shift_R
        0xFFE9: 0x38, 0xFFEA: 0xB8, 0xFE03: 0xB8,   // Alt_L, Alt_R, ISO_Level3_Shift
        0xFFE7: 0xDB, 0xFFE8: 0xDC,                 // Meta_L, Meta_R
        0xFFEB: 0xDB, 0xFFEC: 0xDC, 0xFF67: 0xDD, // Super_L, Super_R, Menu
        0x20: 0x39, 0xFFE5: 0x3A,                       // space, Caps_Lock
        0xFFBE: 0x3B, 0xFFBF: 0x3C, 0xFFC0: 0x3D, 0xFFC1: 0x3E, 0xFFC2: 0x3F, 0xFFC3: 0x40,   // F1–F6
        0xFFC4: 0x41, 0xFFC5: 0x42, 0xFFC6: 0x43, 0xFFC7: 0x44, 0xFFC8: 0x57, 0xFFC9: 0x58,   // F7–F12
        0xFF7F: 0x45, 0xFF14: 0x46, 0xFF13: 0xC6, 0xFF61: 0x54,                              // Num/Scroll Lock, Pause, Print
        0xFF50: 0xC7, 0xFF52: 0xC8, 0xFF55: 0xC9,  // Home, Up, Page_Up
        0xFF51: 0xCB, 0xFF53: 0xCD,                  // Left, Right
        0xFF57: 0xCF, 0xFF54: 0xD0, 0xFF56: 0xD1,  // End, Down, Page_Down
        0xFF63: 0xD2, 0xFFFF: 0xD3,                  // Insert, Delete
    ]

    /// The scancode of a layout-independent key, or nil.
    public static func forKeysym(_ keysym: UInt32) -> UInt32? { table[keysym] }
    /// XT scancodes by USB HID keyboard usage (what SDL and most toolkits call the scancode):
    /// the physical key, whatever the layout. Same RFB encoding as `table`.
    static let usbTable: [UInt16: UInt32] = [
        4: 0x1E, 5: 0x30, 6: 0x2E, 7: 0x20, 8: 0x12, 9: 0x21, 10: 0x22, 11: 0x23, 12: 0x17, 13: 0x24,   // a–j
        14: 0x25, 15: 0x26, 16: 0x32, 17: 0x31, 18: 0x18, 19: 0x19, 20: 0x10, 21: 0x13, 22: 0x1F,       // k–s
        23: 0x14, 24: 0x16, 25: 0x2F, 26: 0x11, 27: 0x2D, 28: 0x15, 29: 0x2C,                           // t–z
        30: 0x02, 31: 0x03, 32: 0x04, 33: 0x05, 34: 0x06, 35: 0x07, 36: 0x08, 37: 0x09, 38: 0x0A, 39: 0x0B, // 1–0
        40: 0x1C, 41: 0x01, 42: 0x0E, 43: 0x0F, 44: 0x39,                                               // Return, Escape, BackSpace, Tab, space
        45: 0x0C, 46: 0x0D, 47: 0x1A, 48: 0x1B, 49: 0x2B, 50: 0x2B, 51: 0x27, 52: 0x28, 53: 0x29,       // - = [ ] \ # ; ' `
        54: 0x33, 55: 0x34, 56: 0x35, 57: 0x3A,                                                         // , . / Caps_Lock
        58: 0x3B, 59: 0x3C, 60: 0x3D, 61: 0x3E, 62: 0x3F, 63: 0x40, 64: 0x41, 65: 0x42, 66: 0x43, 67: 0x44, // F1–F10
        68: 0x57, 69: 0x58, 70: 0x54, 71: 0x46, 72: 0xC6,                                               // F11, F12, Print, Scroll_Lock, Pause
        73: 0xD2, 74: 0xC7, 75: 0xC9, 76: 0xD3, 77: 0xCF, 78: 0xD1,                                     // Insert, Home, Prior, Delete, End, Next
        79: 0xCD, 80: 0xCB, 81: 0xD0, 82: 0xC8, 83: 0x45,                                               // Right, Left, Down, Up, Num_Lock
        84: 0xB5, 85: 0x37, 86: 0x4A, 87: 0x4E, 88: 0x9C,                                               // KP / * - + Enter
        89: 0x4F, 90: 0x50, 91: 0x51, 92: 0x4B, 93: 0x4C, 94: 0x4D, 95: 0x47, 96: 0x48, 97: 0x49,       // KP 1–9
        98: 0x52, 99: 0x53, 100: 0x56, 101: 0xDD,                                                       // KP 0, KP ., <> (ISO), Menu
        224: 0x1D, 225: 0x2A, 226: 0x38, 227: 0xDB, 228: 0x9D, 229: 0x36, 230: 0xB8, 231: 0xDC,         // Ctrl, Shift, Alt, Super (left, right)
    ]

    /// The scancode of the physical key with this USB HID usage, or nil.
    public static func forUSBUsage(_ usage: UInt16) -> UInt32? { usbTable[usage] }
}
