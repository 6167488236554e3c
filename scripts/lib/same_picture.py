#!/usr/bin/env python3
"""Compares two pictures pixel for pixel, each a PNG (8-bit RGB or RGBA, as farcast writes them)
or an X window dump (xwd, 24/32-bit TrueColor, as `xwd -root` or `xwd -id` writes them).

    same_picture.py A B [--label TEXT]

Prints one line saying whether they are identical and exits 0 if they are, 1 if not.
Used by scripts/demo: a screenshot or a viewer window against the X server's own framebuffer.
"""
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, width, height, channels = 8, b"", 0, 0, 3
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            if depth != 8 or colour not in (2, 6):
                raise ValueError(f"{path}: only 8-bit RGB and RGBA PNGs are compared")
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        previous = line
        rows.append(bytes(line) if channels == 3 else bytes(b for i, b in enumerate(line) if i % 4 != 3))
    return width, height, b"".join(rows)


def read_xwd(path):
    data = open(path, "rb").read()
    header = struct.unpack(">25I", data[:100])
    header_size, width, height, byte_order, bits_per_pixel, bytes_per_line, ncolors = (
        header[0], header[4], header[5], header[7], header[11], header[12], header[19])
    if bits_per_pixel != 32:
        raise ValueError(f"{path}: only 32-bit pixels are compared (this dump has {bits_per_pixel})")
    offset = header_size + ncolors * 12
    out = bytearray()
    for y in range(height):
        row = data[offset + y * bytes_per_line:offset + y * bytes_per_line + width * 4]
        for x in range(width):
            b = row[x * 4:x * 4 + 4]
            out += bytes((b[2], b[1], b[0])) if byte_order == 0 else bytes((b[1], b[2], b[3]))
    return width, height, bytes(out)


def read(path):
    with open(path, "rb") as f:
        magic = f.read(8)
    return read_png(path) if magic == b"\x89PNG\r\n\x1a\n" else read_xwd(path)


def main():
    args = sys.argv[1:]
    label = "pictures"
    if "--label" in args:
        i = args.index("--label")
        label = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        sys.exit(__doc__)
    a, b = read(args[0]), read(args[1])
    if a == b:
        print(f"   {label}: {a[0]}x{a[1]} and {b[0]}x{b[1]}, identical pixel for pixel")
        return 0
    if a[:2] != b[:2]:
        print(f"   {label}: DIFFERENT sizes, {a[0]}x{a[1]} and {b[0]}x{b[1]}")
        return 1
    differing = sum(1 for i in range(0, len(a[2]), 3) if a[2][i:i + 3] != b[2][i:i + 3])
    print(f"   {label}: {a[0]}x{a[1]}, DIFFERENT in {differing} pixels")
    return 1


if __name__ == "__main__":
    sys.exit(main())
