#!/usr/bin/env bash
# Regenerates scripts/release/farcast.order, the order in which the release link lays out the
# functions a VNC session runs (scripts/lib/release.sh says why). Run it after changes that move
# a lot of code on that path; a stale file is harmless (names it lists that no longer exist are
# skipped, new functions stay where the linker puts them) but touches more memory.
#   scripts/gen/link-order.sh [RECORDINGS_DIR]
# 1. builds the release farcast with a link map;
# 2. without RECORDINGS_DIR, records the benchmark's five sessions (Tight, ZRLE, Hextile, Zlib,
#    Raw) from Xvnc and x11vnc in a private network namespace (scripts/lib/bench/vnc.sh, one run);
# 3. replays each to `farcast vnc watch --until-eof --hash` under callgrind, which lists every
#    instruction that ran;
# 4. scripts/gen/link_order.py turns the addresses into function names, in first-run order.
# Needs root (network namespace) and valgrind (apt-get install valgrind; not needed by the tests,
# so scripts/setup leaves it out). About 4 minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/release.sh
command -v valgrind > /dev/null || { echo "link-order: valgrind is missing (apt-get install valgrind)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/farcast-link-order.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
say() { echo "link-order: $*" >&2; }

say "building the release farcast with a link map…"
release_build farcast -Map="$WORK/farcast.map" --no-demangle
cp "$RELEASE_BIN/farcast" "$WORK/farcast"
# valgrind cannot read the toolchain's DWARF 5; the addresses are the same without it.
objcopy --strip-debug "$WORK/farcast" "$WORK/farcast-nodebug"

RECORDINGS=${1:-}
if [ -z "$RECORDINGS" ]; then
  say "recording the five benchmark sessions (about 2 minutes)…"
  RECORDINGS="$WORK/recordings"
  mkdir -p "$RECORDINGS"
  RUNS=1 unshare -n bash -c 'ip link set lo up; exec scripts/lib/bench/vnc.sh "$0" 1 "$1"' "$WORK/farcast" "$RECORDINGS" > /dev/null
fi

trace() { # encoding port
  local e=$1 port=$2
  python3 scripts/lib/rfb_replay_server.py "$RECORDINGS/$e.rfb" "$port" > "$WORK/replay.$e.log" 2>&1 &
  local server=$!
  for _ in $(seq 200); do grep -q ready "$WORK/replay.$e.log" 2>/dev/null && break; sleep 0.05; done
  valgrind --tool=callgrind --demangle=no --dump-instr=yes --compress-pos=no --compress-strings=no \
      --callgrind-out-file="$WORK/callgrind.$e" \
      "$WORK/farcast-nodebug" vnc watch "127.0.0.1::$port" --security none --until-eof --hash --json \
      > "$WORK/watch.$e.json" 2> "$WORK/valgrind.$e.log" \
    || { say "vnc watch under callgrind failed for $e:"; tail -5 "$WORK/valgrind.$e.log" >&2; kill "$server" 2>/dev/null; return 1; }
  wait "$server" 2>/dev/null || true
}
say "tracing vnc watch under callgrind (two sessions at a time)…"
trace zrle 16301 & a=$!; trace tight 16302 & b=$!; wait $a; wait $b
trace hextile 16303 & a=$!; trace zlib 16304 & b=$!; wait $a; wait $b
trace raw 16305

python3 scripts/gen/link_order.py "$WORK/farcast-nodebug" "$WORK/farcast.map" \
    "$WORK"/callgrind.{zrle,tight,hextile,zlib,raw} > scripts/release/farcast.order
say "wrote scripts/release/farcast.order ($(wc -l < scripts/release/farcast.order) functions); relinking with it…"
release_build farcast
say "done: $RELEASE_BIN/farcast"
