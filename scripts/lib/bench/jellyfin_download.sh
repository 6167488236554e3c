#!/usr/bin/env bash
# Jellyfin downloads and the start of playback, against one stand-in server on 127.0.0.1 in the
# same run:
#   - a film of SIZE_MB (2000 by default) downloaded by `farcast jellyfin download` beside curl
#     fetching the same /Items/{id}/Download URL (the floor: one GET written to a file), each a
#     whole process timed with GNU time (wall, user and system CPU);
#   - the start of playback: from spawning `farcast jellyfin play … --start 0` (sign-in state
#     read, the item found, mpv's decoders listed, PlaybackInfo, mpv started paused over IPC) to
#     the moment its mpv has the first frame ready, beside the same moment for mpv opening the
#     same direct-play URL by itself (the floor). Both moments are mpv's first playback-restart,
#     told by first_frame.lua inside mpv to first_frame.py, which started the clock just before
#     spawning the command; what follows (farcast's reports, mpv's shutdown) is not counted. All
#     headless (vo=null, ao=null, one frame).
# The files are written to tmpfs (DL_DIR, /dev/shm by default): written to this machine's disk,
# the page cache's writeback of the run before moved either side by ±50 % from run to run. The
# two sides take turns going first.
# Called by scripts/bench; do not run directly.
set -euo pipefail
FARCAST=$1 JSON=$2 WORK=$3 STANDIN=$4
SIZE_MB=${SIZE_MB:-2000}
RUNS=${RUNS:-5}
DL_DIR=${DL_DIR:-/dev/shm/farcast-bench-download}
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench jellyfin-download: GNU time is missing (apt-get install time; scripts/setup installs it)" >&2; exit 1; }
command -v mpv > /dev/null || { echo "bench jellyfin-download: mpv is missing (apt-get install mpv; scripts/setup installs it)" >&2; exit 1; }
PORT=18097
# The film is made once and kept between runs (making 2 GB takes a minute).
DATA=${JELLYFIN_BENCH_DATA:-/tmp/farcast-bench-jellyfin-data}
"$STANDIN" --port $PORT --data "$DATA" --large-file-mb "$SIZE_MB" > "$WORK/standin.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 1800); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; kill -0 $SERVER 2>/dev/null || { cat "$WORK/standin.log" >&2; exit 1; }; sleep 0.2; done
URL=http://127.0.0.1:$PORT
export XDG_STATE_HOME="$WORK/state" XDG_CACHE_HOME="$WORK/cache" XDG_CONFIG_HOME="$WORK/config" XDG_DATA_HOME="$WORK/data"
"$FARCAST" jellyfin login "$URL" --user demo --password-file "$DATA/password" --quiet > /dev/null
ID=$("$FARCAST" jellyfin ls Movies --json | python3 -c 'import json,sys; print(next(i["id"] for i in json.load(sys.stdin)["items"] if i["name"] == "Large File"))')
TOKEN=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["servers"][0]["users"][0]["token"])' "$XDG_STATE_HOME/farcast/jellyfin/servers.json")
BYTES=$(stat -c %s "$DATA/media/large-${SIZE_MB}mb.mkv")
RESULTS="$WORK/results.tsv" FRAMES="$WORK/frames.tsv"
: > "$RESULTS"
timed() { local who=$1; shift; "$TIME" -f "%e %U %S" -o "$WORK/time" "$@" > "$WORK/$who.out" 2> "$WORK/$who.err" || { cat "$WORK/$who.err" >&2; exit 1; }; printf '%s\t%s\n' "$who" "$(cat "$WORK/time")" >> "$RESULTS"; }
ours_download() {
  rm -rf "$DL_DIR/dl"
  timed farcast_download "$FARCAST" jellyfin download "Large File" -o "$DL_DIR/dl" --reserve 0
  cmp -s "$DL_DIR/dl/Large File (2026).mkv" "$DATA/media/large-${SIZE_MB}mb.mkv" || { echo "bench: farcast's download differs from the file" >&2; exit 1; }
  rm -rf "$DL_DIR/dl"
}
curl_download() {
  rm -f "$DL_DIR/curl.mkv"
  timed curl_download curl -sS -f -o "$DL_DIR/curl.mkv" -H "Authorization: MediaBrowser Client=\"curl\", Device=\"bench\", DeviceId=\"bench\", Version=\"1\", Token=\"$TOKEN\"" "$URL/Items/$ID/Download"
  rm -f "$DL_DIR/curl.mkv"
}
first_frame() { local who=$1; shift; printf '%s\t%s\n' "$who" "$(python3 scripts/lib/bench/first_frame.py "$@")" >> "$FRAMES"; }
ours_play() {
  first_frame farcast_play "$FARCAST" jellyfin play "Large File" --start 0 --no-next --mpv-option vo=null --mpv-option ao=null \
    --mpv-option frames=1 --mpv-option 'script={script}' --mpv-option 'script-opts=first_frame-fifo={fifo}'
}
mpv_play() {
  first_frame mpv_play mpv --vo=null --ao=null --frames=1 --really-quiet '--script={script}' '--script-opts=first_frame-fifo={fifo}' \
    "$URL/Videos/$ID/stream?static=true&mediaSourceId=$ID&ApiKey=$TOKEN"
}
mkdir -p "$DL_DIR"
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$DL_DIR"' EXIT
ours_play; mpv_play; : > "$FRAMES"   # warm-up: mpv's decoder lists, the file in the page cache
for run in $(seq 1 "$RUNS"); do
  if [ $((run % 2)) = 1 ]; then ours_download; curl_download; ours_play; mpv_play
  else curl_download; ours_download; mpv_play; ours_play; fi
done
python3 - "$RESULTS" "$FRAMES" "$JSON" "$BYTES" "$RUNS" <<'PY'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()] + [l.split() for l in open(sys.argv[2]) if l.strip()]
as_json, size, runs = sys.argv[3] == "1", int(sys.argv[4]), int(sys.argv[5])
by = {}
for who, first, *rest in rows:
    # Downloads: wall, user, system (s). First frames: to the frame, to the exit (ms).
    by.setdefault(who, []).append((float(first), float(rest[0]) + float(rest[1])) if len(rest) == 2 else (float(first), float(rest[0])))
med = {who: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for who, v in by.items()}
out = {
    "bytes": size, "runs": runs,
    "farcast_mbps": size * 8 / 1e6 / med["farcast_download"][0],
    "curl_mbps": size * 8 / 1e6 / med["curl_download"][0],
    "farcast_download_cpu_s": med["farcast_download"][1],
    "curl_download_cpu_s": med["curl_download"][1],
    "first_frame_ms": med["farcast_play"][0],
    "mpv_direct_first_frame_ms": med["mpv_play"][0],
    "farcast_play_exit_ms": med["farcast_play"][1],
    "mpv_direct_exit_ms": med["mpv_play"][1],
}
out["throughput_ratio"] = out["farcast_mbps"] / out["curl_mbps"]
out["negotiation_ms"] = out["first_frame_ms"] - out["mpv_direct_first_frame_ms"]
if as_json:
    print(json.dumps(out, sort_keys=True))
else:
    print(f"Jellyfin download of {size / 1e6:.0f} MB and start of playback, stand-in on 127.0.0.1, whole processes (median of {runs} runs)")
    print(f"  download  farcast jellyfin download  {out['farcast_mbps']:8.0f} Mbit/s  CPU {out['farcast_download_cpu_s']:.2f} s")
    print(f"            curl (the same URL)        {out['curl_mbps']:8.0f} Mbit/s  CPU {out['curl_download_cpu_s']:.2f} s")
    print(f"            farcast / curl throughput: {out['throughput_ratio']:.2f}x")
    print(f"  play      farcast jellyfin play → mpv's first frame ready    {out['first_frame_ms']:6.0f} ms  (to farcast's exit {out['farcast_play_exit_ms']:.0f} ms)")
    print(f"            mpv opening the URL by itself (the floor)        {out['mpv_direct_first_frame_ms']:6.0f} ms  (to mpv's exit {out['mpv_direct_exit_ms']:.0f} ms)")
    print(f"            what farcast's negotiation adds to the floor: {out['negotiation_ms']:.0f} ms")
PY
