#!/usr/bin/env bash
# What a Sendspin player costs to run: CPU per hour of 48 kHz/16-bit stereo FLAC playback by
# farcast's player (from aiosendspin's `sendspin serve`) beside Debian's snapclient playing the
# same PCM as FLAC from snapserver, in one run on this machine (inside a private network
# namespace, both on loopback). Both play into nothing that costs: farcast's software DAC
# (--output null), snapclient's file player writing to /dev/null. Each client's user+system CPU
# comes from wait4(2) (scripts/lib/bench/cpu_time.py); the servers' is not counted.
#
# Per hour of playback = start-up once + an hour at the steady rate. The steady rate is each
# whole process's CPU (all its threads, /proc/PID/stat) over a window from WARMUP s after the
# start to 2 s before the end; start-up is the whole run's CPU minus the steady rate times the
# run. (Scaling a short run's whole CPU to an hour counts start-up — loading, the handshake — once
# a minute; that figure is printed too, as `*_run_scaled_s_per_hour`.)
# Called by scripts/bench; do not run directly.
set -euo pipefail
SECONDS_TO_RUN=${SECONDS_TO_RUN:-60}
WARMUP=${WARMUP:-10}
FARCAST=$1 JSON=$2 WORK=$3
[ "$SECONDS_TO_RUN" -ge $((WARMUP + 12)) ] || { echo "sendspin-cpu: --seconds must be at least $((WARMUP + 12)) (a ${WARMUP} s warm-up, then the steady window)" >&2; exit 2; }
ip link set lo up
# The same PCM for both: pink noise (FFmpeg's generator, fixed seed) under a 440 Hz tone, so the
# FLAC frames carry real work, generated in real time.
SOURCE="anoisesrc=color=pink:sample_rate=48000:amplitude=0.2:seed=7,pan=stereo|c0=c0|c1=c0"
.venv/bin/sendspin serve --source-format lavfi "$SOURCE" --port 8927 --name bench > "$WORK/sendspin-serve.log" 2>&1 &
SENDSPIN_SERVER=$!
mkdir -p "$WORK/snapdata"
cat > "$WORK/snapserver.conf" <<EOF
[server]
datadir = $WORK/snapdata
[http]
enabled = false
[tcp]
enabled = false
[stream]
source = pipe://$WORK/snapfifo?name=bench&sampleformat=48000:16:2&codec=flac
bind_to_address = 127.0.0.1
port = 1704
[logging]
sink = stderr
EOF
snapserver -c "$WORK/snapserver.conf" > "$WORK/snapserver.log" 2>&1 &
SNAPSERVER=$!
trap 'kill $SENDSPIN_SERVER $SNAPSERVER ${FEED:-} 2>/dev/null; wait 2>/dev/null || true' EXIT
until [ -p "$WORK/snapfifo" ]; do sleep 0.1; done
ffmpeg -nostdin -loglevel error -re -f lavfi -i "$SOURCE" -f s16le -ar 48000 -ac 2 -y "$WORK/snapfifo" &
FEED=$!
until (exec 3<>/dev/tcp/127.0.0.1/8927) 2>/dev/null; do sleep 0.2; done
until (exec 3<>/dev/tcp/127.0.0.1/1704) 2>/dev/null; do sleep 0.2; done

.venv/bin/python scripts/lib/bench/cpu_time.py "$WORK/farcast.cpu" env XDG_STATE_HOME="$WORK/state" \
  "$FARCAST" sendspin play ws://127.0.0.1:8927/sendspin --name farcast-cpu --codec flac --output null --no-mpris \
  --duration "$SECONDS_TO_RUN" --stats-json "$WORK/farcast.json" --quiet > /dev/null &
OURS=$!
.venv/bin/python scripts/lib/bench/cpu_time.py "$WORK/snapclient.cpu" timeout -s INT "$SECONDS_TO_RUN" \
  snapclient -h 127.0.0.1 -p 1704 --player file:filename=null --logsink "file:$WORK/snapclient.log" --hostID snapclient-cpu > /dev/null 2>&1 &
THEIRS=$!

# The steady window: each client's whole-process CPU ticks at its start and end.
started=$(date +%s.%N)
pid_of() {  # pid_of PATTERN EXE: the process whose command line has PATTERN and whose binary is EXE
  local p
  for p in $(pgrep -f -- "$1"); do
    [ "$(readlink -f "/proc/$p/exe" 2>/dev/null)" = "$2" ] && { echo "$p"; return; }
  done
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
sleep "$WARMUP"
OURS_PID=$(pid_of "--name farcast-cpu" "$(readlink -f "$FARCAST")")
THEIRS_PID=$(pid_of "--hostID snapclient-cpu" "$(readlink -f "$(command -v snapclient)")")
[ -n "$OURS_PID" ] && [ -n "$THEIRS_PID" ] || { echo "sendspin-cpu: a client is not running after ${WARMUP} s (farcast: ${OURS_PID:-gone}, snapclient: ${THEIRS_PID:-gone}); see $WORK" >&2; exit 1; }
window_start=$(date +%s.%N); ours_a=$(ticks "$OURS_PID"); theirs_a=$(ticks "$THEIRS_PID")
sleep "$(awk -v s="$started" -v n="$SECONDS_TO_RUN" -v now="$(date +%s.%N)" 'BEGIN { d = s + n - 2 - now; print (d > 0 ? d : 0) }')"
window_end=$(date +%s.%N); ours_b=$(ticks "$OURS_PID"); theirs_b=$(ticks "$THEIRS_PID")
echo "$(awk -v a="$window_start" -v b="$window_end" 'BEGIN { print b - a }') $((ours_b - ours_a)) $((theirs_b - theirs_a)) $(getconf CLK_TCK)" > "$WORK/steady"
wait $OURS
wait $THEIRS || true      # timeout's SIGINT ends snapclient: a non-zero status is expected

.venv/bin/python - "$WORK/farcast.cpu" "$WORK/snapclient.cpu" "$WORK/farcast.json" "$JSON" "$SECONDS_TO_RUN" "$WORK/steady" <<'PY'
import json, sys
def cost(path):
    user, system, *_ = open(path).read().split()
    return float(user) + float(system)
ours, theirs = cost(sys.argv[1]), cost(sys.argv[2])
stats = json.load(open(sys.argv[3])); seconds = float(sys.argv[5])
window, ours_ticks, theirs_ticks, hz = open(sys.argv[6]).read().split()
window, hz = float(window), float(hz)
ours_rate, theirs_rate = int(ours_ticks) / hz / window, int(theirs_ticks) / hz / window   # CPU s per s
ours_startup, theirs_startup = max(0.0, ours - ours_rate * seconds), max(0.0, theirs - theirs_rate * seconds)
ours_hour, theirs_hour = ours_startup + 3600 * ours_rate, theirs_startup + 3600 * theirs_rate
row = {
    "seconds": seconds,
    "steady_window_s": window,
    "farcast_cpu_s_per_hour": ours_hour,
    "snapclient_cpu_s_per_hour": theirs_hour,
    "ratio": ours_hour / theirs_hour if theirs_hour > 0 else None,
    "farcast_steady_cpu_ms_per_s": ours_rate * 1000,
    "snapclient_steady_cpu_ms_per_s": theirs_rate * 1000,
    "farcast_startup_cpu_s": ours_startup,
    "snapclient_startup_cpu_s": theirs_startup,
    "farcast_run_scaled_s_per_hour": ours * 3600 / seconds,
    "snapclient_run_scaled_s_per_hour": theirs * 3600 / seconds,
    "run_scaled_ratio": ours / theirs if theirs > 0 else None,
    "farcast_codec": stats.get("codec"),
    "farcast_seconds_played": stats.get("seconds_played"),
    "farcast_chunks_late": stats.get("chunks_late"),
}
if sys.argv[4] == "1":
    print(json.dumps(row))
else:
    print(f"48 kHz/16-bit stereo FLAC, {seconds:.0f} s side by side on loopback; steady rate over {window:.0f} s after the warm-up")
    print(f"{'client':<44}{'CPU s/hour':>12}{'steady ms/s':>13}{'start-up s':>12}{'run scaled':>14}")
    for name, key in (("farcast sendspin play (aiosendspin server)", "farcast"), ("snapclient 0.26 (snapserver)", "snapclient")):
        print(f"{name:<44}{row[key + '_cpu_s_per_hour']:>12.1f}{row[key + '_steady_cpu_ms_per_s']:>13.2f}{row[key + '_startup_cpu_s']:>12.3f}{row[key + '_run_scaled_s_per_hour']:>14.1f}")
    print(f"ratio farcast / snapclient per hour of playback: {row['ratio']:.2f}x (goal ≤ 0.8x; the run scaled to an hour: {row['run_scaled_ratio']:.2f}x);"
          f"  farcast played {row['farcast_seconds_played']:.1f} s of {row['farcast_codec']}, {row['farcast_chunks_late']} late chunks")
PY
