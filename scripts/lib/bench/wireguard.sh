#!/usr/bin/env bash
# WireGuard throughput: iperf3 TCP (1 and 4 streams) and UDP between two network namespaces
# joined by a veth pair, through WireGuard at both ends, all in one run. Called by scripts/bench
# inside `unshare -n`; do not run directly.
#   wireguard-go    Debian's wireguard-go at both ends, configured with wg (the peer to beat)
#   farcast         `farcast wg up` at both ends
#   farcast+go      farcast at one end, wireguard-go at the other (interoperability, not a goal)
#   farcast-plain   `farcast wg up --no-offload` at both ends: one packet per system call (what
#                   the batched, offloaded data path gains)
#   farcast-2q      `farcast wg up --queues 2` at both ends: two TUN queues, sealing on two threads
# Inner MTU 1420 over a 1500-byte veth, as wg-quick sets it. For each run: Gbit/s received, and
# CPU seconds per Gbit moved, counting both WireGuard processes and both iperf3 processes.
set -euo pipefail
FARCAST=$1 JSON=$2 WORK=$3
SECONDS_PER=${SECONDS_PER:-10}
MTU=1420
say() { [ "$JSON" = 1 ] || echo "$*" >&2; }
MEASURES="tcp:1 tcp:4 udp:1"
source "$(dirname "$0")/netns_pair.sh"
ip link set lo up

umask 077
for side in a b; do
  wg genkey > "$WORK/$side.key"
  wg pubkey < "$WORK/$side.key" > "$WORK/$side.pub"
done
# Interface names carry this run's pid: UAPI sockets in /var/run/wireguard are shared by every
# namespace.
IF_A=fbwa$$ IF_B=fbwb$$

# wg-quick file for SIDE (a: 10.91.0.1, b: 10.91.0.2) talking to the other side.
write_config() { # side
  local side=$1 other address peer_address endpoint
  if [ "$side" = a ]; then other=b address=10.91.0.1 peer_address=10.91.0.2 endpoint=192.0.2.2
  else other=a address=10.91.0.2 peer_address=10.91.0.1 endpoint=192.0.2.1; fi
  cat > "$WORK/$side.conf" <<CONF
[Interface]
PrivateKey = $(cat "$WORK/$side.key")
Address = $address/24
ListenPort = 51820
MTU = $MTU

[Peer]
PublicKey = $(cat "$WORK/$other.pub")
AllowedIPs = $peer_address/32
Endpoint = $endpoint:51820
CONF
}
write_config a; write_config b

farcast_side() { # side ns-pid ifname [extra options]
  nsenter -t "$2" -n -- "$FARCAST" wg up "$WORK/$1.conf" --name "$3" --quiet "${@:4}" > "$WORK/$1.out" 2> "$WORK/$1.err" & FWD+=($!); PIDS+=($!)
}
go_side() { # side ns-pid ifname
  local side=$1 pid=$2 name=$3 address other endpoint
  if [ "$side" = a ]; then address=10.91.0.1 other=b endpoint=192.0.2.2; else address=10.91.0.2 other=a endpoint=192.0.2.1; fi
  WG_I_PREFER_BUGGY_USERSPACE_TO_POLISHED_KMOD=1 nsenter -t "$pid" -n -- wireguard-go -f "$name" > "$WORK/$side.go.log" 2>&1 & FWD+=($!); PIDS+=($!)
  for _ in $(seq 100); do [ -S "/var/run/wireguard/$name.sock" ] && break; sleep 0.05; done
  wg set "$name" private-key "$WORK/$side.key" listen-port 51820 \
    peer "$(cat "$WORK/$other.pub")" allowed-ips "$( [ "$side" = a ] && echo 10.91.0.2/32 || echo 10.91.0.1/32 )" endpoint "$endpoint:51820"
  nsenter -t "$pid" -n -- ip addr add "$address/24" dev "$name"
  nsenter -t "$pid" -n -- ip link set "$name" mtu "$MTU" up
}
start_go() { go_side a "$A" "$IF_A"; go_side b "$B" "$IF_B"; }
start_farcast() { farcast_side a "$A" "$IF_A"; farcast_side b "$B" "$IF_B"; }
start_mixed() { farcast_side a "$A" "$IF_A"; go_side b "$B" "$IF_B"; }
start_plain() { farcast_side a "$A" "$IF_A" --no-offload; farcast_side b "$B" "$IF_B" --no-offload; }
start_queues() { farcast_side a "$A" "$IF_A" --queues 2; farcast_side b "$B" "$IF_B" --queues 2; }

LOGS="$WORK/a.err $WORK/b.err $WORK/a.go.log $WORK/b.go.log"

: > "$WORK/results.jsonl"
say "WireGuard throughput, ${SECONDS_PER} s per run, inner MTU $MTU; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
scenario wireguard-go 10.91.0.2 start_go
scenario farcast 10.91.0.2 start_farcast
scenario "farcast+go" 10.91.0.2 start_mixed
scenario farcast-plain 10.91.0.2 start_plain
scenario farcast-2q 10.91.0.2 start_queues

python3 - "$WORK/results.jsonl" "$JSON" "$SECONDS_PER" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import json, sys
path, as_json, seconds, load = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if l.strip()]
def get(name, proto, field="gbps"):
    for r in rows:
        if r.get("name") == name and r.get("proto") == proto:
            return r.get(field) or 0
    return 0
summary = {"benchmark": "wireguard", "seconds_per_run": int(seconds), "load_after": load, "results": rows,
           "farcast_tcp_gbps": get("farcast", "tcp"), "wireguard_go_tcp_gbps": get("wireguard-go", "tcp"),
           "farcast_tcp4_gbps": get("farcast", "tcpx4"), "wireguard_go_tcp4_gbps": get("wireguard-go", "tcpx4"),
           "farcast_udp_gbps": get("farcast", "udp"), "wireguard_go_udp_gbps": get("wireguard-go", "udp"),
           "farcast_tcp_cpu_s_per_gbit": get("farcast", "tcp", "cpu_s_per_gbit"),
           "wireguard_go_tcp_cpu_s_per_gbit": get("wireguard-go", "tcp", "cpu_s_per_gbit")}
go = summary["wireguard_go_tcp_gbps"]
summary["tcp_ratio"] = round(summary["farcast_tcp_gbps"] / go, 2) if go else None
summary["goal"] = {"tcp_ratio": 1.0, "stretch": 1.5}
if as_json == "1":
    print(json.dumps(summary))
else:
    print(f"{'path':16} {'proto':6} {'Gbit/s':>8} {'CPU s/Gbit':>11} {'machine':>8} {'loss %':>7}")
    for r in rows:
        if "error" in r and "gbps" not in r:
            print(f"{r['name']:16} {'':6} {'failed':>8}  {r['error']}")
            continue
        print(f"{r['name']:16} {r['proto']:6} {r['gbps']:8.2f} {r['cpu_s_per_gbit'] or 0:11.3f} {r['machine_cpu_s_per_gbit'] or 0:8.3f} {str(r.get('lost_percent', '')):>7}")
    print()
    print(f"farcast / wireguard-go, one TCP stream: {summary['tcp_ratio']} (goal >= 1.0, stretch 1.5; load after: {load})")
PY
