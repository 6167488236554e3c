#!/usr/bin/env bash
# What a Sendspin player costs to run: CPU per hour of 48 kHz/16-bit stereo FLAC playback by
# farcast's player (from aiosendspin's `sendspin serve`) beside Debian's snapclient playing the
# same PCM as FLAC from snapserver, in one run on this machine (inside a private network
# namespace, both on loopback). Both play into nothing that costs: farcast's software DAC
# (--output null), snapclient's file player writing to /dev/null. Each client's user+system CPU
# comes from wait4(2) (scripts/lib/bench/cpu_time.py); the servers' is not counted.
# Called by scripts/bench; do not run directly.
set -euo pipefail
SECONDS_TO_RUN=${SECONDS_TO_RUN:-60}
FARCAST=$1 JSON=$2 WORK=$3
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
wait $OURS
wait $THEIRS || true      # timeout's SIGINT ends snapclient: a non-zero status is expected

.venv/bin/python - "$WORK/farcast.cpu" "$WORK/snapclient.cpu" "$WORK/farcast.json" "$JSON" "$SECONDS_TO_RUN" <<'PY'
import json, sys
def cost(path):
    user, system, *_ = open(path).read().split()
    return float(user) + float(system)
ours, theirs = cost(sys.argv[1]), cost(sys.argv[2])
stats = json.load(open(sys.argv[3])); seconds = float(sys.argv[5])
row = {
    "seconds": seconds,
    "farcast_cpu_s_per_hour": ours * 3600 / seconds,
    "snapclient_cpu_s_per_hour": theirs * 3600 / seconds,
    "ratio": ours / theirs if theirs > 0 else None,
    "farcast_codec": stats.get("codec"),
    "farcast_seconds_played": stats.get("seconds_played"),
    "farcast_chunks_late": stats.get("chunks_late"),
}
if sys.argv[4] == "1":
    print(json.dumps(row))
else:
    print(f"48 kHz/16-bit stereo FLAC, {seconds:.0f} s side by side on loopback, CPU seconds per hour of playback")
    print(f"{'client':<44}{'CPU s/hour':>12}")
    print(f"{'farcast sendspin play (aiosendspin server)':<44}{row['farcast_cpu_s_per_hour']:>12.1f}")
    print(f"{'snapclient 0.26 (snapserver)':<44}{row['snapclient_cpu_s_per_hour']:>12.1f}")
    print(f"ratio farcast / snapclient: {row['ratio']:.2f}x (goal ≤ 0.8x);  farcast played {row['farcast_seconds_played']:.1f} s of {row['farcast_codec']}, {row['farcast_chunks_late']} late chunks")
PY
