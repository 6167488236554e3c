"""Test-pattern HEVC for the stand-in host, made by Debian's ffmpeg with libx265 and cached.

One IDR with in-band VPS/SPS/PPS (repeat-headers), then an infinite GOP (keyint=-1, no B frames,
no scene cuts). The elementary stream is split into Annex-B access units here.

Every picture carries its number in the sequence (0, 1, 2, ...) as a bar code across the top:
a strip BAR_ROWS(h) rows high cut into 16 cells, cell i white when bit i of the number is set;
the strip's lower half repeats it inverted, so a corrupt picture shows as a cell that is neither
black nor white, or as halves that disagree. A window capture reads the number back.
"""

import os
import subprocess
import threading

SECONDS = 12
BITS = 16


def bar_rows(h):
    """Height of the numbered strip: 1/16 of the picture, at least 16 rows, even."""
    return max(16, (h // 16) & ~1)


class Stream:
    def __init__(self, units):
        self.units = units


def split_access_units(data):
    """Annex-B HEVC -> access units (each keeps its start codes)."""
    starts = []
    i = 0
    n = len(data)
    while True:
        j = data.find(b"\x00\x00\x01", i)
        if j < 0:
            break
        s = j - 1 if j > 0 and data[j - 1] == 0 else j
        starts.append((s, j + 3))
        i = j + 3
    units = []
    current_start = None
    seen_vcl = False
    for idx, (s, payload) in enumerate(starts):
        if payload >= n:
            break
        nal_type = (data[payload] >> 1) & 0x3F
        first_slice = nal_type < 32 and payload + 2 < n and data[payload + 2] & 0x80
        boundary = False
        if nal_type < 32:
            boundary = bool(first_slice) and seen_vcl
        elif nal_type in (32, 33, 34, 35, 39) or 41 <= nal_type <= 44:
            boundary = seen_vcl
        if current_start is None:
            current_start = s
        elif boundary:
            units.append(data[current_start:s])
            current_start = s
            seen_vcl = False
        if nal_type < 32:
            seen_vcl = True
    if current_start is not None:
        units.append(data[current_start:])
    return units


class MediaLibrary:
    def __init__(self, directory, bitrate_kbps):
        self.directory = directory
        self.bitrate_kbps = bitrate_kbps
        self.cache = {}
        self.lock = threading.Lock()
        os.makedirs(directory, exist_ok=True)

    def path(self, w, h, hz, pix_fmt="yuv420p"):
        return pattern_path(self.directory, w, h, hz, self.bitrate_kbps, pix_fmt=pix_fmt)

    def stream(self, w, h, hz, pix_fmt="yuv420p"):
        with self.lock:
            key = (w, h, hz, pix_fmt)
            if key in self.cache:
                return self.cache[key]
            path = encode(self.directory, w, h, hz, self.bitrate_kbps, pix_fmt=pix_fmt)
            with open(path, "rb") as f:
                units = split_access_units(f.read())
            self.cache[key] = Stream(units)
            return self.cache[key]


def pattern_path(directory, w, h, hz, bitrate_kbps, seconds=SECONDS, pix_fmt="yuv420p"):
    # 8-bit 4:2:0 keeps its old name; other formats (offered by --bit-depth/--chroma) add theirs.
    suffix = "" if pix_fmt == "yuv420p" else "-" + pix_fmt
    return os.path.join(directory, "numbered-%dx%dx%d-%dk-%ds%s.h265" % (w, h, hz, bitrate_kbps, seconds, suffix))


def encode(directory, w, h, hz, bitrate_kbps, seconds=SECONDS, pix_fmt="yuv420p"):
    """The numbered test pattern as HEVC in `pix_fmt` (yuv420p, or yuv420p10le / yuv444p /
    yuv444p10le: Main 10, Main 4:4:4, Main 4:4:4 10), cached."""
    os.makedirs(directory, exist_ok=True)
    path = pattern_path(directory, w, h, hz, bitrate_kbps, seconds, pix_fmt)
    if os.path.exists(path) and os.path.getsize(path) > 0:
        return path
    tmp = path + ".tmp"
    rows = bar_rows(h)
    bit = "bitand(N\\,pow(2\\,floor(X*%d/W)))" % BITS
    bar = ("nullsrc=size=%dx%d:rate=%d,format=gray,"
           "geq=lum='if(lt(Y\\,%d)\\,if(%s\\,255\\,0)\\,if(%s\\,0\\,255))'" % (w, rows, hz, rows // 2, bit, bit))
    cmd = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
           "-f", "lavfi", "-i", "testsrc2=size=%dx%d:rate=%d" % (w, h, hz),
           "-f", "lavfi", "-i", bar,
           "-filter_complex", "[0:v][1:v]overlay=0:0:shortest=1",
           "-frames:v", str(seconds * hz), "-pix_fmt", pix_fmt,
           "-c:v", "libx265", "-preset", "ultrafast", "-tune", "zerolatency",
           "-x265-params", "keyint=-1:repeat-headers=1:bframes=0:scenecut=0:log-level=error",
           "-b:v", "%dk" % bitrate_kbps, "-f", "hevc", tmp]
    subprocess.run(cmd, check=True)
    os.replace(tmp, path)
    return path


if __name__ == "__main__":
    import argparse
    p = argparse.ArgumentParser(description="pre-encode stand-in host test patterns")
    p.add_argument("--media-dir", required=True)
    p.add_argument("--bitrate-kbps", type=int, default=20000)
    p.add_argument("--check", action="store_true", help="exit 1 unless every mode is already encoded")
    p.add_argument("modes", nargs="+")
    a = p.parse_args()
    if a.check:
        import sys
        missing = [m for m in a.modes if not os.path.exists(pattern_path(a.media_dir, *(int(x) for x in m.split("x")), a.bitrate_kbps))]
        sys.exit(1 if missing else 0)
    # One ffmpeg per mode at the same time: x265 with zerolatency keeps each to about one core.
    from concurrent.futures import ThreadPoolExecutor

    def one(mode):
        w, h, hz = (int(x) for x in mode.split("x"))
        return encode(a.media_dir, w, h, hz, a.bitrate_kbps)

    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        for path in pool.map(one, a.modes):
            print(path)
