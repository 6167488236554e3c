#!/usr/bin/env bash
# Clock-sync accuracy of farcast's Sendspin player beside aiosendspin's reference client, in one
# run against one `sendspin serve` on loopback (inside a private network namespace). Both ends
# read CLOCK_MONOTONIC_RAW on this host, so the true server-client offset is zero and every
# microsecond of measured offset is error. Called by scripts/bench; do not run directly.
set -euo pipefail
SECONDS_TO_RUN=${SECONDS_TO_RUN:-40}
FARCAST=$1 JSON=$2 WORK=$3
ip link set lo up
.venv/bin/sendspin serve --source-format lavfi "sine=frequency=440:sample_rate=48000" --port 8927 --name bench \
  > "$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; wait 2>/dev/null || true' EXIT
until (exec 3<>/dev/tcp/127.0.0.1/8927) 2>/dev/null; do sleep 0.2; done
URL=ws://127.0.0.1:8927/sendspin
# Two farcast players (separate identities) with traces, for the multi-room comparison, and
# two aiosendspin reference clients in one process.
XDG_STATE_HOME="$WORK/state" "$FARCAST" sendspin play "$URL" --name farcast-bench --duration "$SECONDS_TO_RUN" \
  --stats-json "$WORK/ours.json" --trace "$WORK/ours-1.trace" --quiet > /dev/null &
OURS=$!
XDG_STATE_HOME="$WORK/state-2" "$FARCAST" sendspin play "$URL" --name farcast-bench-2 --duration "$SECONDS_TO_RUN" \
  --stats-json "$WORK/ours-2.json" --trace "$WORK/ours-2.trace" --quiet > /dev/null &
OURS2=$!
.venv/bin/python scripts/lib/bench/sendspin_reference_client.py "$URL" "$SECONDS_TO_RUN" 2 > "$WORK/reference.json" &
REFERENCE=$!
wait $OURS $OURS2 $REFERENCE
.venv/bin/python - "$WORK/ours.json" "$WORK/reference.json" "$JSON" "$SECONDS_TO_RUN" "$WORK/ours-1.trace" "$WORK/ours-2.trace" <<'PY'
import json, statistics, sys
ours = json.load(open(sys.argv[1])); ref = json.load(open(sys.argv[2])); as_json = sys.argv[3] == "1"

def played(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if r["outcome"] == "played" and r["first_sample_out_us"] is not None:
            out[r["server_timestamp_us"]] = r["first_sample_out_us"]
    return out

# Inter-player error of the two farcast players: for every chunk both played, when its first
# sample actually left each player's DAC (same host clock), after the first 10 s of stream.
a, b = played(sys.argv[5]), played(sys.argv[6])
common = sorted(set(a) & set(b))
if common:
    common = [t for t in common if t - common[0] >= 10_000_000]
gaps = [abs(a[t] - b[t]) for t in common]
row = {
    "ours_offset_error_us": ours.get("offset_absolute_mean_us"),
    "ours_offset_stddev_us": ours.get("offset_stddev_us"),
    "reference_offset_error_us": ref.get("offset_absolute_mean_us"),
    "reference_offset_stddev_us": ref.get("offset_stddev_us"),
    "ours_offset_mean_us": ours.get("offset_mean_us"),
    "reference_offset_mean_us": ref.get("offset_mean_us"),
    "ours_max_output_error_us": ours.get("max_output_error_us"),
    "ours_chunks_late": ours.get("chunks_late"),
    "seconds": float(sys.argv[4]),
    "samples": [ours.get("offset_samples"), ref.get("offset_samples")],
    "ours_interplayer_error_us": statistics.fmean(gaps) if gaps else None,
    "ours_interplayer_max_us": max(gaps) if gaps else None,
    "ours_interplayer_chunks": len(gaps),
    "reference_interplayer_error_us": ref.get("interplayer_error_us"),
    "reference_interplayer_max_us": ref.get("interplayer_max_us"),
    "reference_interplayer_samples": ref.get("interplayer_samples"),
}
if as_json:
    print(json.dumps(row))
else:
    f = lambda v: "n/a" if v is None else f"{v:8.1f}"
    print(f"Sendspin clock sync on loopback, {row['seconds']:.0f} s, offsets sampled once a second after 10 s (true offset 0)")
    print(f"{'client':<36}{'|offset| mean µs':>18}{'offset stddev µs':>18}{'offset mean µs':>16}")
    print(f"{'farcast':<36}{f(row['ours_offset_error_us']):>18}{f(row['ours_offset_stddev_us']):>18}{f(row['ours_offset_mean_us']):>16}")
    print(f"{'aiosendspin 10.2.1 reference client':<36}{f(row['reference_offset_error_us']):>18}{f(row['reference_offset_stddev_us']):>18}{f(row['reference_offset_mean_us']):>16}")
    e, r = row["ours_offset_error_us"], row["reference_offset_error_us"]
    if e is not None and r is not None and e > 0:
        print(f"error ratio (reference / farcast): {r / e:.2f}x;  farcast max output error {row['ours_max_output_error_us']:.1f} µs, late chunks {row['ours_chunks_late']}")
    print()
    print("Multi-room: two players on one server, how far apart they play the same audio")
    print(f"{'pair':<36}{'mean µs':>10}{'max µs':>10}  measured")
    print(f"{'two farcast players':<36}{f(row['ours_interplayer_error_us']):>10}{f(row['ours_interplayer_max_us']):>10}  first sample of {row['ours_interplayer_chunks']} chunks as it left each DAC")
    print(f"{'two aiosendspin reference clients':<36}{f(row['reference_interplayer_error_us']):>10}{f(row['reference_interplayer_max_us']):>10}  their scheduled play times for one instant, {row['reference_interplayer_samples']} samples (no output device)")
PY
