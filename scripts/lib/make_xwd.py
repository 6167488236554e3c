#!/usr/bin/env python3
"""Writes a deterministic test picture as an XWD file (TrueColor, 32 bpp) for `xwud -in`.

Usage: make_xwd.py OUT WIDTH HEIGHT SEED [KIND]
KIND: mixed (gradients, noise, text-like stripes, solid blocks; default) or photo (smooth
gradients with mild noise, the content Tight sends as JPEG).
"""
import random
import struct
import sys

out, width, height, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
kind = sys.argv[5] if len(sys.argv) > 5 else "mixed"
rng = random.Random(seed)
name = b"farcast-test\0"
header = [100 + len(name), 7, 2, 24, width, height, 0, 1, 32, 1, 32, 32, width * 4, 4,
          0xFF0000, 0xFF00, 0xFF, 8, 256, 0, width, height, 0, 0, 0]
pixels = bytearray()
for y in range(height):
    for x in range(width):
        if kind == "photo":
            r = (x * 255 // max(width - 1, 1) + rng.randrange(-6, 7)) % 256
            g = (y * 255 // max(height - 1, 1) + rng.randrange(-6, 7)) % 256
            b = ((x + y + seed * 17) * 2 + rng.randrange(-6, 7)) % 256
        else:
            zone = x * 4 // width
            if zone == 0:
                r, g, b = (x * 7 + seed * 13) & 255, (y * 5) & 255, 0x40
            elif zone == 1:
                r, g, b = rng.randrange(256), rng.randrange(256), rng.randrange(256)
            elif zone == 2:
                on = (x // 3 + y // 5 + seed) % 4 == 0
                r, g, b = (0, 0, 0) if on else (255, 255, 255)
            else:
                r, g, b = ((70, 130, 180) if (x // 8 + seed) % 2 == 0 else (128 + (y // 9) % 3 * 16,) * 3)
        pixels += bytes((0, r, g, b))
with open(out, "wb") as f:
    f.write(struct.pack(">25I", *header) + name + bytes(pixels))
