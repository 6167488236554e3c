#!/usr/bin/env bash
# RFB decode speed of farcast beside libvncclient (Debian's libvncserver 0.9.14), measured on the
# same recordings in one run. Called by scripts/bench; do not run directly.
#   1. Xvnc (and x11vnc on Xvfb, for Zlib, which Xvnc does not serve) at 1920x1080 on 127.0.0.1
#   2. per encoding, a deterministic workload (scrolling text, moving photos, solid fills, a mixed
#      desktop; 3 s each at 20 fps) is drawn while `farcast vnc record` records the stream
#   3. the headline, end to end: each capture served over loopback TCP to a whole client process
#      (farcast vnc watch; libvncclient in scripts/lib/bench/libvncclient_replay.c --feed tcp),
#      RUNS runs each, CPU (to the microsecond) and peak RSS from wait4 (scripts/lib/bench/cpu_time.py)
#   4. the breakdown: each capture decoded from memory by both clients: 1 warm-up + RUNS timed
#      runs, median
#   5. the shared codecs alone: the zlib data and JPEG images of the Tight, ZRLE and Zlib
#      captures (scripts/lib/bench/rfb_codec_streams.py) through ISA-L, zlib and libjpeg-turbo
#      (scripts/lib/bench/rfb_codec_floor.c), and the ceiling that leaves: libvncclient's end-to-end
#      CPU over farcast's codec time, the ratio farcast would reach if everything else it does
#      (parsing, pixels, the socket and the kernel's receive path) cost nothing
set -euo pipefail
FARCAST=$1 JSON=$2 WORK=$3 RUNS=${RUNS:-9} PHASE_SECONDS=${PHASE_SECONDS:-3}
say() { [ "$JSON" = 1 ] || echo "$*" >&2; }

gcc -O2 -o "$WORK/rfb_workload" scripts/lib/bench/rfb_workload.c -lX11 -lm
gcc -O2 -o "$WORK/libvncclient_replay" scripts/lib/bench/libvncclient_replay.c $(pkg-config --cflags --libs libvncclient) -lcrypto
gcc -O2 -o "$WORK/rfb_codec_floor" scripts/lib/bench/rfb_codec_floor.c -lisal -lz -lturbojpeg

free_display() { local n=$1; while [ -e "/tmp/.X$n-lock" ]; do n=$((n + 1)); done; echo "$n"; }
wait_port() { for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done; echo "port $1 never opened" >&2; return 1; }
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

XVNC_DISPLAY=$(free_display 70)
Xvnc ":$XVNC_DISPLAY" -rfbport $((5900 + XVNC_DISPLAY)) -localhost -interface 127.0.0.1 -SecurityTypes None \
     -geometry 1920x1080 -depth 24 -nolisten tcp > "$WORK/xvnc.log" 2>&1 &
PIDS+=($!)
XVFB_DISPLAY=$(free_display $((XVNC_DISPLAY + 1)))
Xvfb ":$XVFB_DISPLAY" -screen 0 1920x1080x24 -nolisten tcp > "$WORK/xvfb.log" 2>&1 &
PIDS+=($!)
sleep 1
X11VNC_PORT=$((5900 + XVFB_DISPLAY))
x11vnc -display ":$XVFB_DISPLAY" -rfbport "$X11VNC_PORT" -localhost -nopw -forever -shared -noxdamage > "$WORK/x11vnc.log" 2>&1 &
PIDS+=($!)
wait_port $((5900 + XVNC_DISPLAY)); wait_port "$X11VNC_PORT"

record() { # name display port encoding [quality]
  local name=$1 display=$2 port=$3 encoding=$4 quality=${5:-}
  local total=$((PHASE_SECONDS * 4 + 2))
  say "recording $name ($encoding, $total s of text, photos, fills, mixed)…"
  "$FARCAST" vnc record "127.0.0.1::$port" --security none -o "$WORK/$name.rfb" --duration "$total" \
      --encoding "$encoding" ${quality:+--quality "$quality"} --quiet > /dev/null &
  local recorder=$!
  sleep 1
  for kind in text photo fill mixed; do DISPLAY=":$display" "$WORK/rfb_workload" "$kind" "$PHASE_SECONDS" 20; done
  wait "$recorder"
}

ENCODINGS=(tight zrle hextile zlib raw)
for e in "${ENCODINGS[@]}"; do
  case "$e" in
    zlib) record "$e" "$XVFB_DISPLAY" "$X11VNC_PORT" zlib ;;
    tight) record "$e" "$XVNC_DISPLAY" $((5900 + XVNC_DISPLAY)) tight 6 ;;
    *) record "$e" "$XVNC_DISPLAY" $((5900 + XVNC_DISPLAY)) "$e" ;;
  esac
done
cleanup
PIDS=()

for e in "${ENCODINGS[@]}"; do
  say "decoding $e: farcast, then libvncclient ($RUNS runs each after a warm-up)…"
  "$FARCAST" vnc replay "$WORK/$e.rfb" --runs "$RUNS" --json > "$WORK/$e.ours.json"
  "$WORK/libvncclient_replay" "$WORK/$e.rfb" --runs "$RUNS" > "$WORK/$e.theirs.json"
done

# End to end, what a user pays: each capture served over loopback TCP by the replay server to
# a whole client process — `farcast vnc watch --until-eof --hash` and libvncclient in the same
# harness connected over TCP (it reads only the capture's first MiB, for the pixel format and
# the security type) — timed from outside (scripts/lib/bench/cpu_time.py): user + sys CPU and
# peak RSS from wait4, peak RssAnon sampled from /proc.
# With two or more CPUs the replay server runs on the first and the client on the second, so
# the scheduler never puts them on one core for part of a run (that moved a client's CPU time
# by ±15 % between runs); both clients are placed the same way.
PORT=16100
SERVER_CPU=() CLIENT_CPU=()
if [ "$(nproc)" -ge 2 ]; then SERVER_CPU=(taskset -c 0) CLIENT_CPU=(taskset -c 1); fi
end_to_end() { # encoding who
  local e=$1 who=$2
  PORT=$((PORT + 1))
  "${SERVER_CPU[@]}" python3 scripts/lib/rfb_replay_server.py "$WORK/$e.rfb" "$PORT" > "$WORK/replay.log" 2>&1 &
  local server=$!
  for _ in $(seq 200); do grep -q ready "$WORK/replay.log" 2>/dev/null && break; sleep 0.05; done
  if [ "$who" = ours ]; then
    "${CLIENT_CPU[@]}" python3 scripts/lib/bench/cpu_time.py "$WORK/time" "$FARCAST" vnc watch "127.0.0.1::$PORT" --security none --until-eof --hash --json \
      > "$WORK/$e.ours.e2e.json"
  else
    "${CLIENT_CPU[@]}" python3 scripts/lib/bench/cpu_time.py "$WORK/time" "$WORK/libvncclient_replay" "$WORK/$e.rfb" --feed "tcp:$PORT" > "$WORK/$e.theirs.e2e.json"
  fi
  wait "$server" 2>/dev/null || true
  cat "$WORK/time" >> "$WORK/$e.$who.e2e.times"
}
for e in "${ENCODINGS[@]}"; do
  say "end to end over loopback TCP, $e: farcast vnc watch, then libvncclient ($RUNS runs each)…"
  # This run's samples only (a reused WORKDIR must not mix in an earlier binary's).
  : > "$WORK/$e.ours.e2e.times"
  : > "$WORK/$e.theirs.e2e.times"
  for _ in $(seq "$RUNS"); do end_to_end "$e" ours; end_to_end "$e" theirs; done
done

CODEC_ENCODINGS=(tight zrle zlib)
for e in "${CODEC_ENCODINGS[@]}"; do
  say "the shared codecs alone on the $e capture: ISA-L, zlib, libjpeg-turbo ($RUNS runs)…"
  python3 scripts/lib/bench/rfb_codec_streams.py "$WORK/$e.rfb" "$WORK/$e.streams"
  "$WORK/rfb_codec_floor" "$WORK/$e.streams" "$RUNS" > "$WORK/$e.codec.json"
  rm -f "$WORK/$e.streams"
done

python3 - "$WORK" "$JSON" "${ENCODINGS[@]}" <<'PY'
import json, os, statistics, sys
work, as_json, encodings = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]

def e2e(e, who):
    runs = [l.split() for l in open(f"{work}/{e}.{who}.e2e.times") if l.strip()]
    cpu = statistics.median(float(r[0]) + float(r[1]) for r in runs)
    rss = max(int(r[2]) for r in runs) / 1024
    anon = max(int(r[3]) for r in runs) / 1024
    return cpu, rss, anon, json.load(open(f"{work}/{e}.{who}.e2e.json"))["sha256"]

headline = []
for e in encodings:
    ours_cpu, ours_rss, ours_anon, ours_hash = e2e(e, "ours")
    their_cpu, their_rss, their_anon, their_hash = e2e(e, "theirs")
    headline.append({"encoding": e, "ours_cpu_s": round(ours_cpu, 3), "libvncclient_cpu_s": round(their_cpu, 3),
                     "speed_ratio": round(their_cpu / ours_cpu, 2) if ours_cpu else None,
                     "ours_peak_rss_mib": round(ours_rss, 1), "libvncclient_peak_rss_mib": round(their_rss, 1),
                     "rss_ratio": round(ours_rss / their_rss, 2) if their_rss else None,
                     "ours_peak_anon_mib": round(ours_anon, 1), "libvncclient_peak_anon_mib": round(their_anon, 1),
                     "anon_ratio": round(ours_anon / their_anon, 2) if their_anon else None, "hash_match": ours_hash == their_hash})
rows = []
for e in encodings:
    ours = json.load(open(f"{work}/{e}.ours.json"))
    theirs = json.load(open(f"{work}/{e}.theirs.json"))
    rows.append({
        "encoding": e,
        "ours_mpx_s": round(ours["mpx_per_s"], 1),
        "libvncclient_mpx_s": round(theirs["mpx_per_s"], 1),
        "ratio": round(ours["mpx_per_s"] / theirs["mpx_per_s"], 2) if theirs["mpx_per_s"] else None,
        "peak_rss_bytes": ours["peak_rss_bytes"],
        "libvncclient_peak_rss_bytes": theirs.get("peak_rss_bytes"),
        "hash_match": ours["sha256"] == theirs["sha256"],
        "pixels": ours["pixels"],
        "capture_bytes": os.path.getsize(f"{work}/{e}.rfb"),
        "ours_median_cpu_s": ours["median_cpu_seconds"],
        "libvncclient_median_cpu_s": theirs["median_cpu_seconds"],
    })
# The shared codecs alone, and the end-to-end ratio they leave room for.
codecs = []
by_encoding = {r["encoding"]: r for r in headline}
for e in encodings:
    path = f"{work}/{e}.codec.json"
    if not os.path.exists(path):
        continue
    c = json.load(open(path))
    ours_codec = c["isal_s"] + c["jpeg_s"]
    their_codec = c["zlib_s"] + c["jpeg_s"]
    h = by_encoding[e]
    codecs.append({"encoding": e, "isal_inflate_s": c["isal_s"], "zlib_inflate_s": c["zlib_s"], "jpeg_s": c["jpeg_s"],
                   "ours_rest_s": round(h["ours_cpu_s"] - ours_codec, 3),
                   "libvncclient_rest_s": round(h["libvncclient_cpu_s"] - their_codec, 3),
                   "ceiling_ratio": round(h["libvncclient_cpu_s"] / ours_codec, 2) if ours_codec else None,
                   "inflated_bytes": c["inflated_bytes"], "zlib_chunks": c["zlib_chunks"], "jpeg_images": c["jpeg_images"]})
if as_json:
    print(json.dumps({"end_to_end": headline, "from_memory": rows, "shared_codecs": codecs}))
else:
    print("RFB end to end: each recording served over loopback TCP to a whole client process; CPU = user + sys (median), RSS = peak;")
    print("anon = peak RssAnon (what the process allocated, without the code it maps from its executable and libraries)")
    print(f"{'encoding':<9}{'farcast CPU s':>14}{'libvncclient CPU s':>20}{'speed ratio':>13}{'farcast RSS MiB':>17}{'libvncclient RSS MiB':>22}"
          f"{'farcast anon':>14}{'libvncclient anon':>19}{'same pixels':>13}")
    for r in headline:
        print(f"{r['encoding']:<9}{r['ours_cpu_s']:>14.2f}{r['libvncclient_cpu_s']:>20.2f}{r['speed_ratio']:>13.2f}"
              f"{r['ours_peak_rss_mib']:>17.1f}{r['libvncclient_peak_rss_mib']:>22.1f}"
              f"{r['ours_peak_anon_mib']:>14.1f}{r['libvncclient_peak_anon_mib']:>19.1f}{'yes' if r['hash_match'] else 'NO':>13}")
    print()
    print(f"Breakdown — RFB decode from memory (no socket), median of the timed runs after a warm-up")
    print(f"{'encoding':<9}{'capture MB':>11}{'Mpx':>8}{'farcast Mpx/s':>15}{'libvncclient Mpx/s':>20}{'ratio':>7}{'farcast RSS MiB':>17}{'same pixels':>13}")
    for r in rows:
        print(f"{r['encoding']:<9}{r['capture_bytes']/1e6:>11.1f}{r['pixels']/1e6:>8.1f}{r['ours_mpx_s']:>15.1f}{r['libvncclient_mpx_s']:>20.1f}"
              f"{r['ratio']:>7.2f}{r['peak_rss_bytes']/1048576:>17.0f}{'yes' if r['hash_match'] else 'NO':>13}")
    print()
    print("The shared codecs alone (CPU s, median): the zlib data through ISA-L (farcast) and zlib (libvncclient), the JPEG images")
    print("through libjpeg-turbo (both); rest = end-to-end CPU minus the client's codec time (parsing, pixels, socket, kernel);")
    print("ceiling = libvncclient's end-to-end CPU / farcast's codec time: the ratio if farcast's rest cost nothing")
    print(f"{'encoding':<9}{'ISA-L':>8}{'zlib':>8}{'JPEG':>8}{'farcast rest':>14}{'libvncclient rest':>19}{'ceiling':>9}")
    for r in codecs:
        print(f"{r['encoding']:<9}{r['isal_inflate_s']:>8.3f}{r['zlib_inflate_s']:>8.3f}{r['jpeg_s']:>8.3f}{r['ours_rest_s']:>14.3f}"
              f"{r['libvncclient_rest_s']:>19.3f}{r['ceiling_ratio']:>9.2f}")
PY
