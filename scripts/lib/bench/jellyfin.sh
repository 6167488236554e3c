#!/usr/bin/env bash
# Listing a large Jellyfin library: farcast (the paging sequence, `farcast jellyfin ls --json`)
# beside jellyfin-apiclient-python (the peer, paging with StartIndex/Limit), against one
# stand-in server on 127.0.0.1 in the same run. Each client is a whole process, end to end
# (sign-in included), timed with GNU time for wall time and peak RSS; the library is listed at
# two sizes to show whether memory stays flat. The stand-in caches its listing answers (after a
# warm-up pass by each client) so that what is measured is the client, not the server.
# Called by scripts/bench; do not run directly.
set -euo pipefail
FARCAST=$1 JSON=$2 WORK=$3 STANDIN=$4
SIZES=${SIZES:-"2000 20000"}
PAGE=${PAGE:-500}
RUNS=${RUNS:-3}
PY=.venv-jellyfin/bin/python
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench jellyfin: GNU time is missing (apt-get install time; scripts/setup installs it)" >&2; exit 1; }
PORT=18096
RESULTS="$WORK/results.tsv"
: > "$RESULTS"
for SIZE in $SIZES; do
  DATA="$WORK/data-$SIZE"
  "$STANDIN" --port $PORT --data "$DATA" --items $((SIZE - 3)) --cache-listings > "$WORK/standin-$SIZE.log" 2>&1 &
  SERVER=$!
  trap 'kill $SERVER 2>/dev/null || true' EXIT
  for _ in $(seq 1 600); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.2; done
  URL=http://127.0.0.1:$PORT
  PW="$DATA/password"
  export XDG_STATE_HOME="$WORK/state-$SIZE" XDG_CACHE_HOME="$WORK/cache-$SIZE"
  "$FARCAST" jellyfin login "$URL" --user demo --password-file "$PW" --quiet > /dev/null
  ours() { "$TIME" -f "%e %M" -o "$WORK/time" "$FARCAST" jellyfin ls --type movie --limit 0 --page-size "$PAGE" --json > "$WORK/ours.json"; }
  peer() { "$TIME" -f "%e %M" -o "$WORK/time" "$PY" scripts/lib/jellyfin_apiclient_check.py list "$URL" demo "$(cat "$PW")" "$PAGE" > "$WORK/peer.json"; }
  ours; peer   # warm-up: fills the stand-in's listing cache for both request shapes
  for run in $(seq 1 "$RUNS"); do
    ours
    COUNT=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["items"]))' "$WORK/ours.json")
    printf 'ours\t%s\t%s\t%s\n' "$SIZE" "$COUNT" "$(cat "$WORK/time")" >> "$RESULTS"
    peer
    COUNT=$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["items"])' "$WORK/peer.json")
    printf 'peer\t%s\t%s\t%s\n' "$SIZE" "$COUNT" "$(cat "$WORK/time")" >> "$RESULTS"
  done
  kill $SERVER; wait $SERVER 2>/dev/null || true
done
"$PY" - "$RESULTS" "$JSON" "$PAGE" <<'PY'
import json, statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
as_json, page = sys.argv[2] == "1", int(sys.argv[3])
out = {"page_size": page, "sizes": {}}
for who, size, count, seconds, rss in rows:
    entry = out["sizes"].setdefault(size, {}).setdefault(who, {"items": int(count), "seconds": [], "peak_rss_kib": []})
    entry["seconds"].append(float(seconds)); entry["peak_rss_kib"].append(int(rss))
for size, pair in out["sizes"].items():
    for who, e in pair.items():
        e["median_seconds"] = statistics.median(e["seconds"])
        e["items_per_second"] = e["items"] / e["median_seconds"]
        e["peak_rss_mib"] = max(e["peak_rss_kib"]) / 1024
    if "ours" in pair and "peer" in pair:
        pair["speed_ratio"] = pair["ours"]["items_per_second"] / pair["peer"]["items_per_second"]
sizes = sorted(out["sizes"], key=int)
if len(sizes) > 1:
    small, large = out["sizes"][sizes[0]], out["sizes"][sizes[-1]]
    out["memory_growth_mib"] = {who: large[who]["peak_rss_mib"] - small[who]["peak_rss_mib"] for who in ("ours", "peer")}
if as_json:
    print(json.dumps(out, sort_keys=True))
else:
    print(f"Jellyfin listing, whole process incl. sign-in, page size {page} (median of runs; stand-in on 127.0.0.1 with cached listings)")
    print(f"{'items':>7}  {'client':<30} {'seconds':>8} {'items/s':>9} {'peak RSS':>9}")
    for size in sizes:
        for who, name in (("ours", "farcast jellyfin ls --json"), ("peer", "jellyfin-apiclient-python 1.20.2")):
            e = out["sizes"][size][who]
            print(f"{e['items']:>7}  {name:<30} {e['median_seconds']:>8.2f} {e['items_per_second']:>9.0f} {e['peak_rss_mib']:>6.1f} MiB")
        print(f"{'':>7}  farcast / peer items per second: {out['sizes'][size]['speed_ratio']:.2f}x")
    if "memory_growth_mib" in out:
        g = out["memory_growth_mib"]
        print(f"peak RSS growth from {sizes[0]} to {sizes[-1]} items: farcast {g['ours']:+.1f} MiB, peer {g['peer']:+.1f} MiB")
PY
