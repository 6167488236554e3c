#!/usr/bin/env python3
"""Known answers for punktfunk's key maps (KeyMap.swift), built a second way from the public
tables on this machine:

    python3 scripts/vectors/make_punktfunk_keymap_vectors.py

Key codes come from the system headers — /usr/include/linux/input-event-codes.h (evdev KEY_*),
/usr/include/X11/keysymdef.h and XF86keysym.h (X11 keysyms) — and from the USB HID Usage
Tables' keyboard page (listed below by usage name). Each is joined by key *name* to Microsoft's
virtual-key list (VK_* names below), with the punktfunk host's conventions where its VK table
gives a code its own meaning (keypad Enter = VK_SEPARATOR, left/right modifier VKs, the IME
keys). Writes Tests/PunktfunkTests/Fixtures/keymap-vectors.json: every evdev code 0...255,
every HID usage 0...255 and every keysym the headers define, each with the VK or null.
"""

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Microsoft "Virtual-Key Codes" (winuser.h names).
VK = {
    "VK_BACK": 0x08, "VK_TAB": 0x09, "VK_CLEAR": 0x0C, "VK_RETURN": 0x0D, "VK_PAUSE": 0x13, "VK_CAPITAL": 0x14,
    "VK_HANGUL": 0x15, "VK_HANJA": 0x19, "VK_ESCAPE": 0x1B, "VK_CONVERT": 0x1C, "VK_NONCONVERT": 0x1D, "VK_SPACE": 0x20,
    "VK_PRIOR": 0x21, "VK_NEXT": 0x22, "VK_END": 0x23, "VK_HOME": 0x24, "VK_LEFT": 0x25, "VK_UP": 0x26, "VK_RIGHT": 0x27,
    "VK_DOWN": 0x28, "VK_SELECT": 0x29, "VK_EXECUTE": 0x2B, "VK_SNAPSHOT": 0x2C, "VK_INSERT": 0x2D, "VK_DELETE": 0x2E,
    "VK_HELP": 0x2F, "VK_LWIN": 0x5B, "VK_RWIN": 0x5C, "VK_APPS": 0x5D, "VK_SLEEP": 0x5F,
    "VK_MULTIPLY": 0x6A, "VK_ADD": 0x6B, "VK_SEPARATOR": 0x6C, "VK_SUBTRACT": 0x6D, "VK_DECIMAL": 0x6E, "VK_DIVIDE": 0x6F,
    "VK_NUMLOCK": 0x90, "VK_SCROLL": 0x91, "VK_OEM_NEC_EQUAL": 0x92,
    "VK_LSHIFT": 0xA0, "VK_RSHIFT": 0xA1, "VK_LCONTROL": 0xA2, "VK_RCONTROL": 0xA3, "VK_LMENU": 0xA4, "VK_RMENU": 0xA5,
    "VK_VOLUME_MUTE": 0xAD, "VK_VOLUME_DOWN": 0xAE, "VK_VOLUME_UP": 0xAF, "VK_MEDIA_NEXT_TRACK": 0xB0,
    "VK_MEDIA_PREV_TRACK": 0xB1, "VK_MEDIA_STOP": 0xB2, "VK_MEDIA_PLAY_PAUSE": 0xB3,
    "VK_OEM_1": 0xBA, "VK_OEM_PLUS": 0xBB, "VK_OEM_COMMA": 0xBC, "VK_OEM_MINUS": 0xBD, "VK_OEM_PERIOD": 0xBE,
    "VK_OEM_2": 0xBF, "VK_OEM_3": 0xC0, "VK_ABNT_C1": 0xC1, "VK_ABNT_C2": 0xC2, "VK_OEM_4": 0xDB, "VK_OEM_5": 0xDC,
    "VK_OEM_6": 0xDD, "VK_OEM_7": 0xDE, "VK_OEM_AX": 0xE1, "VK_OEM_102": 0xE2, "VK_DBE_HIRAGANA": 0xF2,
    "VK_DBE_SBCSCHAR": 0xF3,
}
for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789":
    VK[f"VK_{c}"] = ord(c)
for n in range(10):
    VK[f"VK_NUMPAD{n}"] = 0x60 + n
for n in range(1, 25):
    VK[f"VK_F{n}"] = 0x6F + n

# Key name (evdev style, without KEY_) -> VK name. Host conventions: KPENTER, the L/R modifiers, IME keys.
KEY_TO_VK = {
    "ESC": "VK_ESCAPE", "MINUS": "VK_OEM_MINUS", "EQUAL": "VK_OEM_PLUS", "BACKSPACE": "VK_BACK", "TAB": "VK_TAB",
    "LEFTBRACE": "VK_OEM_4", "RIGHTBRACE": "VK_OEM_6", "ENTER": "VK_RETURN", "LEFTCTRL": "VK_LCONTROL",
    "SEMICOLON": "VK_OEM_1", "APOSTROPHE": "VK_OEM_7", "GRAVE": "VK_OEM_3", "LEFTSHIFT": "VK_LSHIFT",
    "BACKSLASH": "VK_OEM_5", "COMMA": "VK_OEM_COMMA", "DOT": "VK_OEM_PERIOD", "SLASH": "VK_OEM_2",
    "RIGHTSHIFT": "VK_RSHIFT", "KPASTERISK": "VK_MULTIPLY", "LEFTALT": "VK_LMENU", "SPACE": "VK_SPACE",
    "CAPSLOCK": "VK_CAPITAL", "NUMLOCK": "VK_NUMLOCK", "SCROLLLOCK": "VK_SCROLL", "KPMINUS": "VK_SUBTRACT",
    "KPPLUS": "VK_ADD", "KPDOT": "VK_DECIMAL", "ZENKAKUHANKAKU": "VK_DBE_SBCSCHAR", "102ND": "VK_OEM_102",
    "RO": "VK_ABNT_C1", "HENKAN": "VK_CONVERT", "KATAKANAHIRAGANA": "VK_DBE_HIRAGANA", "MUHENKAN": "VK_NONCONVERT",
    "KPENTER": "VK_SEPARATOR", "RIGHTCTRL": "VK_RCONTROL", "KPSLASH": "VK_DIVIDE", "SYSRQ": "VK_SNAPSHOT",
    "RIGHTALT": "VK_RMENU", "HOME": "VK_HOME", "UP": "VK_UP", "PAGEUP": "VK_PRIOR", "LEFT": "VK_LEFT",
    "RIGHT": "VK_RIGHT", "END": "VK_END", "DOWN": "VK_DOWN", "PAGEDOWN": "VK_NEXT", "INSERT": "VK_INSERT",
    "DELETE": "VK_DELETE", "MUTE": "VK_VOLUME_MUTE", "VOLUMEDOWN": "VK_VOLUME_DOWN", "VOLUMEUP": "VK_VOLUME_UP",
    "KPEQUAL": "VK_OEM_NEC_EQUAL", "PAUSE": "VK_PAUSE", "KPCOMMA": "VK_ABNT_C2", "HANGEUL": "VK_HANGUL",
    "HANJA": "VK_HANJA", "YEN": "VK_OEM_AX", "LEFTMETA": "VK_LWIN", "RIGHTMETA": "VK_RWIN", "COMPOSE": "VK_APPS",
    "HELP": "VK_HELP", "SLEEP": "VK_SLEEP", "NEXTSONG": "VK_MEDIA_NEXT_TRACK", "PLAYPAUSE": "VK_MEDIA_PLAY_PAUSE",
    "PREVIOUSSONG": "VK_MEDIA_PREV_TRACK", "STOPCD": "VK_MEDIA_STOP",
    # Names only keysyms and HID use:
    "CLEAR": "VK_CLEAR", "SELECT": "VK_SELECT", "EXECUTE": "VK_EXECUTE", "MENU": "VK_APPS", "NONUSHASH": "VK_OEM_5",
}
for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789":
    KEY_TO_VK[c] = f"VK_{c}"
for n in range(10):
    KEY_TO_VK[f"KP{n}"] = f"VK_NUMPAD{n}"
for n in range(1, 25):
    KEY_TO_VK[f"F{n}"] = f"VK_F{n}"

# USB HID Usage Tables, Keyboard/Keypad page (0x07): usage -> key name.
HID = {0x28: "ENTER", 0x29: "ESC", 0x2A: "BACKSPACE", 0x2B: "TAB", 0x2C: "SPACE", 0x2D: "MINUS", 0x2E: "EQUAL",
       0x2F: "LEFTBRACE", 0x30: "RIGHTBRACE", 0x31: "BACKSLASH", 0x32: "NONUSHASH", 0x33: "SEMICOLON",
       0x34: "APOSTROPHE", 0x35: "GRAVE", 0x36: "COMMA", 0x37: "DOT", 0x38: "SLASH", 0x39: "CAPSLOCK",
       0x46: "SYSRQ", 0x47: "SCROLLLOCK", 0x48: "PAUSE", 0x49: "INSERT", 0x4A: "HOME", 0x4B: "PAGEUP", 0x4C: "DELETE",
       0x4D: "END", 0x4E: "PAGEDOWN", 0x4F: "RIGHT", 0x50: "LEFT", 0x51: "DOWN", 0x52: "UP", 0x53: "NUMLOCK",
       0x54: "KPSLASH", 0x55: "KPASTERISK", 0x56: "KPMINUS", 0x57: "KPPLUS", 0x58: "KPENTER", 0x62: "KP0", 0x63: "KPDOT",
       0x64: "102ND", 0x65: "COMPOSE", 0x66: "POWER", 0x67: "KPEQUAL", 0x74: "EXECUTE", 0x75: "HELP", 0x76: "MENU",
       0x77: "SELECT", 0x78: "STOP", 0x79: "AGAIN", 0x7A: "UNDO", 0x7B: "CUT", 0x7C: "COPY", 0x7D: "PASTE", 0x7E: "FIND",
       0x7F: "MUTE", 0x80: "VOLUMEUP", 0x81: "VOLUMEDOWN", 0x85: "KPCOMMA", 0x87: "RO", 0x88: "KATAKANAHIRAGANA",
       0x89: "YEN", 0x8A: "HENKAN", 0x8B: "MUHENKAN", 0x90: "HANGEUL", 0x91: "HANJA", 0x94: "ZENKAKUHANKAKU",
       0xE0: "LEFTCTRL", 0xE1: "LEFTSHIFT", 0xE2: "LEFTALT", 0xE3: "LEFTMETA", 0xE4: "RIGHTCTRL", 0xE5: "RIGHTSHIFT",
       0xE6: "RIGHTALT", 0xE7: "RIGHTMETA"}
for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ"):
    HID[0x04 + i] = c
for i, c in enumerate("1234567890"):
    HID[0x1E + i] = c
for i in range(12):
    HID[0x3A + i] = f"F{i + 1}"
    HID[0x68 + i] = f"F{i + 13}"
for i in range(9):
    HID[0x59 + i] = f"KP{i + 1}"

# X11 keysym name -> key name (US layout position), beyond letters, digits and F-keys.
XK = {"BackSpace": "BACKSPACE", "Tab": "TAB", "ISO_Left_Tab": "TAB", "Clear": "CLEAR", "Return": "ENTER",
      "Pause": "PAUSE", "Scroll_Lock": "SCROLLLOCK", "Sys_Req": "SYSRQ", "Escape": "ESC", "Delete": "DELETE",
      "Home": "HOME", "Left": "LEFT", "Up": "UP", "Right": "RIGHT", "Down": "DOWN", "Prior": "PAGEUP", "Page_Up": "PAGEUP",
      "Next": "PAGEDOWN", "Page_Down": "PAGEDOWN", "End": "END", "Select": "SELECT", "Print": "SYSRQ",
      "Execute": "EXECUTE", "Insert": "INSERT", "Menu": "MENU", "Help": "HELP", "Break": "PAUSE", "Num_Lock": "NUMLOCK",
      "KP_Space": "SPACE", "KP_Tab": "TAB", "KP_Enter": "KPENTER", "KP_Home": "HOME", "KP_Left": "LEFT", "KP_Up": "UP",
      "KP_Right": "RIGHT", "KP_Down": "DOWN", "KP_Prior": "PAGEUP", "KP_Page_Up": "PAGEUP", "KP_Next": "PAGEDOWN",
      "KP_Page_Down": "PAGEDOWN", "KP_End": "END", "KP_Begin": "CLEAR", "KP_Insert": "INSERT", "KP_Delete": "DELETE",
      "KP_Equal": "KPEQUAL", "KP_Multiply": "KPASTERISK", "KP_Add": "KPPLUS", "KP_Separator": "KPENTER",
      "KP_Subtract": "KPMINUS", "KP_Decimal": "KPDOT", "KP_Divide": "KPSLASH",
      "Shift_L": "LEFTSHIFT", "Shift_R": "RIGHTSHIFT", "Control_L": "LEFTCTRL", "Control_R": "RIGHTCTRL",
      "Caps_Lock": "CAPSLOCK", "Meta_L": "LEFTMETA", "Meta_R": "RIGHTMETA", "Alt_L": "LEFTALT", "Alt_R": "RIGHTALT",
      "Super_L": "LEFTMETA", "Super_R": "RIGHTMETA", "ISO_Level3_Shift": "RIGHTALT",
      "Kanji": "HANJA", "Muhenkan": "MUHENKAN", "Henkan_Mode": "HENKAN", "Henkan": "HENKAN",
      "Hiragana_Katakana": "KATAKANAHIRAGANA", "Zenkaku_Hankaku": "ZENKAKUHANKAKU", "Hangul": "HANGEUL",
      "Hangul_Hanja": "HANJA",
      "space": "SPACE", "exclam": "1", "quotedbl": "APOSTROPHE", "numbersign": "3", "dollar": "4", "percent": "5",
      "ampersand": "7", "apostrophe": "APOSTROPHE", "quoteright": "APOSTROPHE", "parenleft": "9", "parenright": "0",
      "asterisk": "8", "plus": "EQUAL", "comma": "COMMA", "minus": "MINUS", "period": "DOT", "slash": "SLASH",
      "colon": "SEMICOLON", "semicolon": "SEMICOLON", "less": "COMMA", "equal": "EQUAL", "greater": "DOT",
      "question": "SLASH", "at": "2", "bracketleft": "LEFTBRACE", "backslash": "BACKSLASH", "bracketright": "RIGHTBRACE",
      "asciicircum": "6", "underscore": "MINUS", "grave": "GRAVE", "quoteleft": "GRAVE", "braceleft": "LEFTBRACE",
      "bar": "BACKSLASH", "braceright": "RIGHTBRACE", "asciitilde": "GRAVE",
      "XF86AudioLowerVolume": "VOLUMEDOWN", "XF86AudioMute": "MUTE", "XF86AudioRaiseVolume": "VOLUMEUP",
      "XF86AudioPlay": "PLAYPAUSE", "XF86AudioStop": "STOPCD", "XF86AudioPrev": "PREVIOUSSONG",
      "XF86AudioNext": "NEXTSONG", "XF86Sleep": "SLEEP"}
for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
    XK[c] = c
    XK[c.lower()] = c
for d in "0123456789":
    XK[d] = d
    XK[f"KP_{d}"] = f"KP{d}"
for n in range(1, 25):
    XK[f"F{n}"] = f"F{n}"


def vk_for(key):
    name = KEY_TO_VK.get(key)
    return VK[name] if name else None


def header_values(path, prefix):
    out = {}
    for line in open(path, encoding="latin-1"):
        m = re.match(rf"#define\s+{prefix}(\w+)\s+(0x[0-9A-Fa-f]+|\d+)\b", line)
        if m:
            out.setdefault(m.group(1), int(m.group(2), 0))
    return out


def main():
    evdev_names = header_values("/usr/include/linux/input-event-codes.h", "KEY_")
    by_code = {}
    for name, code in evdev_names.items():
        if code <= 255 and name not in ("MAX", "CNT", "RESERVED"):
            by_code.setdefault(code, name)     # the first name a code gets is its main one
    evdev = [{"evdev": code, "name": by_code.get(code), "vk": vk_for(by_code.get(code))} for code in range(256)]
    hid = [{"usage": u, "name": HID.get(u), "vk": vk_for(HID.get(u))} for u in range(256)]
    keysyms = {}
    for path, prefix in (("/usr/include/X11/keysymdef.h", "XK_"), ("/usr/include/X11/XF86keysym.h", "XF86XK_")):
        for name, value in header_values(path, prefix).items():
            full = ("XF86" + name) if prefix == "XF86XK_" else name
            keysyms.setdefault(value, full)
    ks = [{"keysym": v, "name": n, "vk": vk_for(XK.get(n))} for v, n in sorted(keysyms.items())]
    doc = {"$comment": "Generated by scripts/vectors/make_punktfunk_keymap_vectors.py from input-event-codes.h, keysymdef.h, "
                       "XF86keysym.h, the USB HID keyboard page and Microsoft's VK list.",
           "evdev": evdev, "usb": hid, "keysym": ks}
    path = REPO / "Tests" / "PunktfunkTests" / "Fixtures" / "keymap-vectors.json"
    with open(path, "w") as f:
        f.write('{"$comment":' + json.dumps(doc["$comment"]) + ",\n")
        for i, key in enumerate(("evdev", "usb", "keysym")):
            f.write(json.dumps(key) + ":[\n" + ",\n".join(json.dumps(r, sort_keys=True) for r in doc[key]) + "\n]"
                    + (",\n" if i < 2 else "\n"))
        f.write("}\n")
    print(f"wrote {path.relative_to(REPO)}: {len(evdev)} evdev, {len(hid)} usb, {len(ks)} keysyms "
          f"({sum(1 for r in ks if r['vk'] is not None)} mapped)")


if __name__ == "__main__":
    main()
