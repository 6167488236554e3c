#!/usr/bin/env bash
# punktfunk/1 data plane: Gbit/s of sealed video datagrams one core takes through open + replay
# check + reassembly + FEC repair, at 0, 1 and 5 % random loss, beside reed-solomon-leopard's own
# decode rate on the same FEC blocks, in one run. Called by scripts/bench; do not run directly.
set -euo pipefail
BENCH=$1 JSON=$2 WORK=$3 MIN_SECONDS=${MIN_SECONDS:-3}
say() { [ "$JSON" = 1 ] || echo "$*" >&2; }
say "replaying a 1080p60 + 4K60 stream (AES-128-GCM, 1408-byte shards, K=200, 20 % FEC) through the receiver…"
"$BENCH" --loss 0,1,5 --min-seconds "$MIN_SECONDS" --blocks-dir "$WORK" > "$WORK/ours.json"
say "decoding the same FEC blocks with reed-solomon-leopard 0.2.1…"
shopt -s nullglob
BLOCKS=("$WORK"/blocks-*.bin)
.venv-punktfunk/bin/python scripts/lib/bench/punktfunk_oracle.py "$MIN_SECONDS" "${BLOCKS[@]}" > "$WORK/oracle.json"
python3 - "$WORK" "$JSON" <<'PY'
import json, sys
work, as_json = sys.argv[1], sys.argv[2] == "1"
ours = [json.loads(l) for l in open(f"{work}/ours.json") if l.strip()]
oracle = {r["loss_pct"]: r for r in (json.loads(l) for l in open(f"{work}/oracle.json") if l.strip())}
rows = []
for r in ours:
    o = oracle.get(r["loss_pct"])
    rows.append({
        "loss_pct": r["loss_pct"],
        "gbps_per_core": r["gbps_per_core"],
        "wall_gbps": r["wall_gbps"],
        "fec_decode_gbps": r["fec_decode_gbps"] if r["blocks_decoded"] else None,
        "oracle_decode_gbps": o["oracle_decode_gbps"] if o else None,
        "blocks_decoded": r["blocks_decoded"],
        "fec_recovered_shards": r["fec_recovered_shards"],
        "frames_completed": r["frames_completed"],
        "frames_lost": r["frames_lost"],
        "access_units": r["access_units"],
        "datagrams": r["datagrams"],
        "wire_bytes": r["wire_bytes"],
        "passes": r["passes"],
    })
if as_json:
    print(json.dumps(rows))
else:
    print("punktfunk/1 data plane, one core: sealed datagrams -> access units (Gbit/s of wire datagrams, thread CPU time)")
    print(f"{'loss %':>7}{'Gbit/s/core':>13}{'wall Gbit/s':>13}{'frames ok/lost':>16}{'blocks repaired':>17}{'our FEC Gbit/s':>16}{'oracle FEC Gbit/s':>19}{'ratio':>7}")
    for r in rows:
        f, o = r["fec_decode_gbps"], r["oracle_decode_gbps"]
        ratio = f"{f / o:.2f}" if f and o else "-"
        print(f"{r['loss_pct']:>7.0f}{r['gbps_per_core']:>13.2f}{r['wall_gbps']:>13.2f}{str(r['frames_completed']) + '/' + str(r['frames_lost']):>16}"
              f"{r['blocks_decoded']:>17}{(f'{f:.2f}' if f else '-'):>16}{(f'{o:.2f}' if o else '-'):>19}{ratio:>7}")
    print("FEC Gbit/s = data bytes of the repaired blocks per second of decode, ours and reed-solomon-leopard's, on the same blocks.")
PY
