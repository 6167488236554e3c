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
XDG_STATE_HOME="$WORK/state" "$FARCAST" sendspin play "$URL" --name farcast-bench --duration "$SECONDS_TO_RUN" \
  --stats-json "$WORK/ours.json" --quiet > /dev/null &
OURS=$!
.venv/bin/python scripts/lib/bench/sendspin_reference_client.py "$URL" "$SECONDS_TO_RUN" > "$WORK/reference.json" &
REFERENCE=$!
wait $OURS $REFERENCE
.venv/bin/python - "$WORK/ours.json" "$WORK/reference.json" "$JSON" "$SECONDS_TO_RUN" <<'PY'
import json, sys
ours = json.load(open(sys.argv[1])); ref = json.load(open(sys.argv[2])); as_json = sys.argv[3] == "1"
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
PY
