#!/usr/bin/env python3
"""Pulls the shared codecs' input out of a Farcast RFB capture, for scripts/bench vnc.

Usage: rfb_codec_streams.py CAPTURE OUT

Walks the server's messages in CAPTURE (recorded with --security none) and writes to OUT, in
stream order, every piece of data a client hands to a codec library rather than decoding
itself: the zlib data of ZRLE, Zlib and Tight rectangles (Tight's four streams kept apart,
with its stream resets) and Tight's JPEG images. scripts/lib/bench/rfb_codec_floor.c then
times ISA-L, zlib and libjpeg-turbo on exactly that input.

Each record of OUT: kind (u8: 0 zlib data, 1 stream reset, 2 JPEG image), stream (u8: the
zlib stream, 0 for ZRLE and Zlib, 0-3 for Tight), length (u32, little-endian), the bytes.
Exits 1 with a one-line message on a capture it cannot walk.
"""
import json
import struct
import sys


class Capture:
    def __init__(self, data):
        self.data, self.at = data, 0

    def take(self, n):
        if self.at + n > len(self.data):
            raise EOFError
        piece = self.data[self.at:self.at + n]
        self.at += n
        return piece

    def u8(self):
        return self.take(1)[0]

    def u16(self):
        return struct.unpack(">H", self.take(2))[0]

    def u32(self):
        return struct.unpack(">I", self.take(4))[0]

    def s32(self):
        return struct.unpack(">i", self.take(4))[0]

    def compact(self):
        b0 = self.u8()
        n = b0 & 0x7F
        if b0 & 0x80:
            b1 = self.u8()
            n |= (b1 & 0x7F) << 7
            if b1 & 0x80:
                n |= self.u8() << 14
        return n


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: rfb_codec_streams.py CAPTURE OUT")
    raw = open(sys.argv[1], "rb").read()
    magic = b"FARCAST-RFB-CAPTURE 1\n"
    if not raw.startswith(magic):
        sys.exit(f"{sys.argv[1]}: not a Farcast RFB capture")
    meta_end = raw.index(b"\n", len(magic))
    meta = json.loads(raw[len(magic):meta_end])
    pf = bytes.fromhex(meta["pixel_format"])
    bpp, depth, true_colour = pf[0], pf[1], pf[3]
    maxes = struct.unpack(">HHH", pf[4:10])
    bytes_pp = bpp // 8
    # Tight's TPIXEL and ZRLE's CPIXEL are 3 bytes for 32-bit true colour that fits 24 bits.
    tpixel = 3 if bpp == 32 and depth <= 24 and true_colour and maxes == (255, 255, 255) else bytes_pp
    c = Capture(raw[meta_end + 1:])
    out = open(sys.argv[2], "wb")

    def emit(kind, stream, data):
        out.write(struct.pack("<BBI", kind, stream, len(data)))
        out.write(data)

    if c.take(12) != b"RFB 003.008\n":
        sys.exit("only RFB 3.8 captures are supported")
    types = c.take(c.u8())
    if 1 not in types:
        sys.exit("the capture was not recorded with --security none")
    if c.u32() != 0:
        sys.exit("the capture's security result is a failure")
    c.take(20)  # width, height, pixel format
    c.take(c.u32())  # desktop name

    def tight(w, h):
        control = c.u8()
        for stream in range(4):
            if control & (1 << stream):
                emit(1, stream, b"")
        kind = control >> 4
        if kind == 8:
            c.take(tpixel)
            return
        if kind == 9:
            emit(2, 0, c.take(c.compact()))
            return
        if kind > 9:
            raise ValueError(f"Tight control byte 0x{control:02x}")
        stream, size = kind & 3, w * h * tpixel
        if kind & 4:
            filter_id = c.u8()
            if filter_id == 1:
                colours = c.u8() + 1
                c.take(colours * tpixel)
                size = (w + 7) // 8 * h if colours == 2 else w * h
            elif filter_id not in (0, 2):
                raise ValueError(f"Tight filter {filter_id}")
        if size < 12:
            c.take(size)
        else:
            emit(0, stream, c.take(c.compact()))

    try:
        while c.at < len(c.data):
            kind = c.u8()
            if kind == 0:  # FramebufferUpdate
                c.take(1)
                for _ in range(c.u16()):
                    x, y, w, h = struct.unpack(">HHHH", c.take(8))
                    encoding = c.s32()
                    if encoding == -224:  # LastRect
                        break
                    if encoding == 0:
                        c.take(w * h * bytes_pp)
                    elif encoding == 1:
                        c.take(4)
                    elif encoding in (6, 16):  # Zlib, ZRLE
                        emit(0, 0, c.take(c.u32()))
                    elif encoding == 7:
                        tight(w, h)
                    elif encoding == -239:  # cursor
                        c.take(w * h * bytes_pp + (w + 7) // 8 * h)
                    elif encoding == -240:  # X cursor
                        if w * h:
                            c.take(6 + 2 * ((w + 7) // 8 * h))
                    elif encoding == -308:  # ExtendedDesktopSize
                        screens = c.u8()
                        c.take(3 + 16 * screens)
                    elif encoding == -307:  # DesktopName
                        c.take(c.u32())
                    elif encoding in (-223, -312, -313):
                        pass
                    else:
                        raise ValueError(f"encoding {encoding}, which this walker does not know")
            elif kind == 1:  # SetColourMapEntries
                c.take(3)
                c.take(6 * c.u16())
            elif kind == 2:  # Bell
                pass
            elif kind == 3:  # ServerCutText (negative length: extended clipboard)
                c.take(3)
                c.take(abs(c.s32()))
            elif kind == 150:  # EndOfContinuousUpdates
                pass
            elif kind == 248:  # ServerFence
                c.take(7)
                c.take(c.u8())
            else:
                raise ValueError(f"server message type {kind}")
    except (EOFError, ValueError) as problem:
        detail = "the capture ends inside a message" if isinstance(problem, EOFError) else str(problem)
        sys.exit(f"rfb_codec_streams: {sys.argv[1]} at byte {c.at}: {detail}")


if __name__ == "__main__":
    main()
