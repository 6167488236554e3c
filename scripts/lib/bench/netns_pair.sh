# What the tunnel benchmarks share (sourced by tun.sh and wireguard.sh, inside `unshare -n`):
# a pair of network namespaces A and B joined by a veth 192.0.2.1/24 <-> 192.0.2.2/24, commands
# in them, and one iperf3 measurement with the CPU of the forwarders and of both iperf3 processes.
# Needs FARCAST, JSON, WORK, MTU and SECONDS_PER set; FWD holds the current forwarders' pids.
HZ=$(getconf CLK_TCK)
FWD=()

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  PIDS=()
}
trap cleanup EXIT

ip link set lo up

# new_pair: namespaces A and B (sleep holders), veth 192.0.2.1/24 <-> 192.0.2.2/24.
new_pair() {
  unshare -n sleep 3600 & A=$!
  unshare -n sleep 3600 & B=$!   # unshare execs sleep: $! is the holder in the new namespace
  PIDS+=("$A" "$B")
  for _ in $(seq 100); do
    [ "$(readlink /proc/$A/ns/net)" != "$(readlink /proc/self/ns/net)" ] && [ "$(readlink /proc/$B/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
    sleep 0.02
  done
  ip link add veth-a netns "$A" type veth peer name veth-b netns "$B"
  inA ip link set lo up; inB ip link set lo up
  inA ip addr add 192.0.2.1/24 dev veth-a; inB ip addr add 192.0.2.2/24 dev veth-b
  inA ip link set veth-a up; inB ip link set veth-b up
}
inA() { nsenter -t "$A" -n -- "$@"; }
inB() { nsenter -t "$B" -n -- "$@"; }
# Background commands call nsenter directly (not through a function, which would fork a
# subshell): nsenter execs the command, so $! is the forwarder's own pid, whose CPU is counted.

proc_jiffies() { # pids... -> utime+stime summed
  local total=0 p
  for p in "$@"; do
    if [ -r "/proc/$p/stat" ]; then
      local s; s=$(sed 's/^.*) //' "/proc/$p/stat")
      total=$((total + $(echo "$s" | awk '{print $12 + $13}')))
    fi
  done
  echo "$total"
}
machine_busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9}' /proc/stat; }

# measure NAME TARGET PROTO [STREAMS] -> appends a JSON line to $WORK/results.jsonl
# (FWD: the forwarders' pids, whose CPU is counted with both iperf3 processes')
measure() {
  local name=$1 target=$2 proto=$3 streams=${4:-1}
  local udp=()
  [ "$proto" = udp ] && udp=(-u -b 0 -l $((MTU - 28)))
  local label=$proto
  if [ "$streams" -gt 1 ]; then udp+=(-P "$streams"); label="${proto}x$streams"; fi
  nsenter -t "$B" -n -- iperf3 -s -1 -B "$target" -p 5201 > /dev/null 2>&1 & local server=$!; PIDS+=($server)
  for _ in $(seq 100); do inB ss -ltn 'sport = :5201' | grep -q 5201 && break; sleep 0.05; done
  local f0 m0
  f0=$(proc_jiffies "${FWD[@]}" "$server"); m0=$(machine_busy)
  nsenter -t "$A" -n -- iperf3 -c "$target" -p 5201 -t "$SECONDS_PER" "${udp[@]}" -J > "$WORK/iperf.json" 2>> "$WORK/iperf.err" & local client=$!
  # The client's CPU is read just before it exits: sample until it does.
  local c1=0
  while kill -0 "$client" 2>/dev/null; do
    local now; now=$(proc_jiffies "$client"); [ "$now" -gt 0 ] && c1=$now
    sleep 0.2
  done
  wait "$client" || true
  local f1 m1
  f1=$(proc_jiffies "${FWD[@]}" "$server"); m1=$(machine_busy)
  wait "$server" 2>/dev/null || true
  python3 - "$WORK/iperf.json" "$name" "$label" $((f1 - f0)) "$c1" $((m1 - m0)) "$HZ" "${#FWD[@]}" "$(proc_jiffies "${FWD[@]}")" >> "$WORK/results.jsonl" <<'PY'
import json, sys
path, name, proto, fwd_server, client, machine, hz, nfwd, _ = sys.argv[1:]
d = json.load(open(path))
end = d.get("end", {})
recv = end.get("sum_received", {})
seconds = recv.get("seconds") or 0
bps = recv.get("bits_per_second") or 0
gbit = bps * seconds / 1e9
cpu = (int(fwd_server) + int(client)) / int(hz)
out = {"name": name, "proto": proto, "gbps": round(bps / 1e9, 3), "seconds": round(seconds, 2),
       "cpu_seconds": round(cpu, 2), "cpu_s_per_gbit": round(cpu / gbit, 4) if gbit else None,
       "machine_cpu_s_per_gbit": round(int(machine) / int(hz) / gbit, 4) if gbit else None}
if proto == "udp":
    out["lost_percent"] = round(recv.get("lost_percent", 0), 2)
if "error" in d:
    out["error"] = d["error"]
print(json.dumps(out))
PY
}


# scenario NAME TARGET START [FLAGS...]: a fresh pair, START's forwarders (none: veth alone),
# a ping to TARGET until the path carries one, then each measurement of MEASURES ("PROTO:STREAMS"
# words; default TCP then UDP, one stream each), then everything stopped. LOGS: files whose tails
# explain a path that never came up.
MEASURES=${MEASURES:-"tcp:1 udp:1"}
scenario() {
  local name=$1 target=$2 start=$3; shift 3
  new_pair
  FWD=()
  [ "$start" != none ] && "$start" "$@"
  local ready=0
  for _ in $(seq 100); do inA ping -c 1 -W 1 "$target" >/dev/null 2>&1 && { ready=1; break; }; sleep 0.1; done
  if [ "$ready" != 1 ]; then
    say "  $name: the tunnel never carried a ping; skipping ($(tail -q -n 2 ${LOGS:-/dev/null} 2>/dev/null | tr '\n' ' '))"
    echo "{\"name\": \"$name\", \"error\": \"tunnel did not come up\"}" >> "$WORK/results.jsonl"
  else
    local m proto streams
    for m in $MEASURES; do
      proto=${m%%:*} streams=${m##*:}
      say "  $name: ${proto^^}$([ "$streams" -gt 1 ] && echo ", $streams streams" || true)…"
      measure "$name" "$target" "$proto" "$streams"
    done
  fi
  for p in "${FWD[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.5
  cleanup
}
