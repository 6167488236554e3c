#!/usr/bin/env bash
# Real encoder output for the punktfunk access-unit and decoder tests: six 128x72 frames of ffmpeg's
# test pattern in 8-bit 4:2:0 (what the host streams), a keyframe every third, as HEVC (libx265, closed GOPs so keyframes are IDRs, parameter sets repeated in band as the host
# sends them), H.264 (libx264) and AV1 (libaom, OBU stream), plus what ffprobe says about each
# access unit (size and keyframe flag) and ffmpeg's MD5 of each decoded picture (its planes packed,
# Y then U then V) as the independent answers. Two more HEVC files carry what a host sends when a
# client offers it: 10-bit 4:2:0 (Main 10) and 8-bit 4:4:4 (Main 4:4:4). Needs Debian's ffmpeg (only to
# regenerate; the tests read the committed files).
#   scripts/vectors/make_punktfunk_media_fixtures.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=Tests/PunktfunkTests/Fixtures/media
mkdir -p "$OUT"
SRC=(-hide_banner -loglevel error -f lavfi -i testsrc=size=128x72:rate=30 -frames:v 6 -pix_fmt yuv420p -fflags +bitexact -flags:v +bitexact)
ffmpeg -y "${SRC[@]}" -c:v libx265 \
  -x265-params keyint=3:min-keyint=3:scenecut=0:open-gop=0:repeat-headers=1:aud=1:bframes=0:log-level=error -f hevc "$OUT/testsrc.hevc"
HEVC_PARAMS=keyint=3:min-keyint=3:scenecut=0:open-gop=0:repeat-headers=1:aud=1:bframes=0:log-level=error
ffmpeg -y "${SRC[@]/yuv420p/yuv420p10le}" -c:v libx265 -x265-params "$HEVC_PARAMS" -f hevc "$OUT/testsrc-main10.hevc"
ffmpeg -y "${SRC[@]/yuv420p/yuv444p}" -c:v libx265 -x265-params "$HEVC_PARAMS" -f hevc "$OUT/testsrc-444.hevc"
ffmpeg -y "${SRC[@]}" -c:v libx264 -x264-params keyint=3:min-keyint=3:scenecut=0:aud=1:bframes=0 -f h264 "$OUT/testsrc.h264"
ffmpeg -y "${SRC[@]}" -c:v libaom-av1 -g 3 -keyint_min 3 -cpu-used 8 -f obu "$OUT/testsrc.obu"
python3 - "$OUT" <<'PY'
import json, subprocess, sys
out = sys.argv[1]
result = {"$comment": "ffprobe's view of each access unit (packet) of the files made by scripts/vectors/make_punktfunk_media_fixtures.sh"}
decoded = {"$comment": "ffmpeg's MD5 of each decoded picture (planes packed: Y, U, V) of the files made by scripts/vectors/make_punktfunk_media_fixtures.sh"}
for name in ("testsrc.hevc", "testsrc.h264", "testsrc.obu", "testsrc-main10.hevc", "testsrc-444.hevc"):
    csv = subprocess.run(["ffprobe", "-hide_banner", "-loglevel", "error", "-show_packets", "-show_entries", "packet=size,flags",
                          "-of", "csv", f"{out}/{name}"], check=True, capture_output=True, text=True).stdout
    rows = [line.split(",") for line in csv.split("\n") if line.startswith("packet")]
    result[name] = [{"size": int(r[1]), "keyframe": r[2].startswith("K")} for r in rows]
    md5 = subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-i", f"{out}/{name}", "-f", "framemd5", "-"],
                         check=True, capture_output=True, text=True).stdout
    decoded[name] = [line.split(",")[-1].strip() for line in md5.split("\n") if line and not line.startswith("#")]
open(f"{out}/ffprobe.json", "w").write(json.dumps(result, indent=1, sort_keys=True) + "\n")
open(f"{out}/framemd5.json", "w").write(json.dumps(decoded, indent=1, sort_keys=True) + "\n")
PY
ls -l "$OUT"
